"""How a run goes, beside the world it simulates: when it stops (``stop``) and evaluates (``eval``), how the
engine holds the devices (``engine``), what the event log records (``events``), where the results go
(``output``) and which experiment trackers it also logs to (``tracking``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from netfl.numbers import Strict
from netfl.units import Fraction, Seconds, bare_number, parse_quantity, parse_rounds

__all__ = [
    "EVERY_SPELLINGS",
    "IDLE_EVENTS_BELOW",
    "MLFLOW_SCHEMES",
    "EngineSpec",
    "EvalSpec",
    "EventsSpec",
    "Every",
    "OutputSpec",
    "StopSpec",
    "TrackingSpec",
]


class StopSpec(Strict):
    """Stop at whichever limit comes first."""

    sim_time: Seconds | None = Field(None, gt=0, description="simulated seconds")
    rounds: int | None = Field(None, gt=0, description="server rounds (aggregations)")
    accuracy: Fraction | None = Field(
        None,
        gt=0,
        le=1,
        description="stop at the first evaluation reaching this test accuracy (needs sim_time or rounds too)",
    )

    @model_validator(mode="after")
    def _one_limit(self):
        if self.sim_time is None and self.rounds is None:
            raise ValueError("give sim_time, rounds, or both (also with accuracy: it may never be reached)")
        return self


@dataclass(frozen=True)
class Every:
    """How often the model is evaluated: every ``rounds`` rounds, or every ``seconds`` of simulated time (a grid
    shared by every run of a study, whatever their round lengths)."""

    rounds: int | None = None
    seconds: float | None = None

    def as_scenario_value(self) -> str:
        return f"{self.rounds} rounds" if self.rounds is not None else f"{self.seconds!r}s"


EVERY_SPELLINGS = "a number of rounds with the word ('10 rounds') or a simulated time ('5min', '30s')"


def _every(value: object) -> Every:
    if isinstance(value, Every):
        return value
    number = bare_number(value)
    if number is not None:
        spelled = f"'{number:g} rounds' or '{number:g}s'" if number.is_integer() else f"'{number:g}s'"
        raise ValueError(f"{value!r} without a unit could mean rounds or seconds: write {spelled} ({EVERY_SPELLINGS})")
    rounds = parse_rounds(value)
    if rounds is not None:
        if rounds <= 0:
            raise ValueError(f"must be > 0 rounds (got {value!r})")
        return Every(rounds=rounds)
    if isinstance(value, str):
        try:
            seconds = parse_quantity(value, "time")
        except ValueError:
            raise ValueError(f"{value!r}: write {EVERY_SPELLINGS}") from None
        if not seconds > 0:
            raise ValueError(f"must be a positive time (got {value!r})")
        return Every(seconds=seconds)
    raise ValueError(f"{value!r}: write {EVERY_SPELLINGS}")


class EvalSpec(Strict):
    every: Annotated[Every, BeforeValidator(_every)] = Field(
        Every(rounds=1),
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
