"""How a run goes, beside the world it simulates: when it evaluates (``eval``; when it stops, ``stop``, and how
often it evaluates are the engine's, declared in :mod:`netfl.registry.run_params`), how the engine holds the
devices (``engine``), what the event log records (``events``), where the results go (``output``) and which
experiment trackers it also logs to (``tracking``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from netfl.numbers import Strict
from netfl.registry.run_params import EVERY_ROUND, EveryValue

__all__ = [
    "IDLE_EVENTS_BELOW",
    "MLFLOW_SCHEMES",
    "EngineSpec",
    "EvalSpec",
    "EventsSpec",
    "OutputSpec",
    "TrackingSpec",
]


class EvalSpec(Strict):
    every: EveryValue = Field(
        EVERY_ROUND,
        description="rounds between evaluations ('10 rounds'), or simulated time ('5min'): a time grid "
        "gives the curves of different runs the same time points",
    )
    max_test_samples: int | None = Field(None, gt=0, description="evaluate on the first N test samples only")


class EngineSpec(Strict):
    """How the engine holds the devices (netfl/config/engine_form.py says which form a scenario gets and why)."""

    devices: Literal["auto", "arrays", "actors", "lazy", "eager"] = Field(
        "auto",
        description="auto: idle devices as rows of arrays and a device an actor only while it works, unless a "
        "feature needs every device an actor; arrays / actors: insist on one (lazy / eager: earlier names)",
    )


#: Below this many devices the event log holds idle devices' events unless told otherwise.
IDLE_EVENTS_BELOW = 10_000


class EventsSpec(Strict):
    """What the event log holds besides the work (rounds, jobs, transfers), which it always holds."""

    idle_devices: bool | None = Field(
        None,
        description="log idle devices' changes too (online/offline, battery marks, chargers, use); "
        f"default: yes below {IDLE_EVENTS_BELOW:,} devices unless engine.devices is arrays",
    )


class OutputSpec(Strict):
    dir: Path | None = Field(
        None,
        description="the run's results folder, relative to the working directory (default results/<name>); --out "
        "replaces it",
    )


#: The MLflow tracking URIs netfl logs to (netfl.results.tracking_mlflow).
MLFLOW_SCHEMES = ("sqlite", "file", "http", "https")


class TrackingSpec(Strict):
    """Where a run is also logged for experiment trackers (netfl.results.tracking): off unless given. Not part of
    the simulated world, so a run folder's scenario.yaml leaves it out."""

    tensorboard: str | None = Field(
        None,
        min_length=1,
        description="a folder for TensorBoard event files (relative to the topology file); a run logs into a "
        "subfolder named like its results folder (a sweep's: case/seed<k>)",
    )
    mlflow: str | None = Field(
        None,
        min_length=1,
        description="an MLflow tracking URI: sqlite:///runs.db, a folder (MLflow's file store) or file:///..., "
        "relative to the topology file; or a server's http(s):// address",
    )

    @field_validator("mlflow")
    @classmethod
    def _mlflow_uri(cls, uri: str | None) -> str | None:
        scheme = uri.partition(":")[0] if uri is not None and re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", uri) else None
        if scheme is not None and scheme.lower() not in MLFLOW_SCHEMES:
            raise ValueError(
                f"{uri!r}: netfl logs to {', '.join(s + ':' for s in MLFLOW_SCHEMES)} URIs or a folder "
                "(e.g. sqlite:///mlflow.db or mlruns)"
            )
        return uri
