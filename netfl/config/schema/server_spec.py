"""The server (``server``): the algorithm, a server optimiser, compression, and how rounds or asynchronous
arrivals are aggregated (``round`` and ``async``: the engine's parameters, declared in
:mod:`netfl.registry.server_params`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from netfl.component_spec import WithParams
from netfl.numbers import Strict
from netfl.registry.choices import OnDivergence
from netfl.registry.server_params import AsyncSpec, RoundSpec
from netfl.units import Fraction
from netfl.user_code import is_user_reference, python_only_problem

__all__ = [
    "MAX_QSGD_LEVELS",
    "AlgorithmSpec",
    "CompressionSpec",
    "CompressorSpec",
    "QsgdSpec",
    "ServerOptimizerSpec",
    "ServerSpec",
]

#: A Python import path: module.submodule.Name
_IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")

#: QSGD's levels at most: float32 resolves |v_i| / ||v|| to 24 bits.
MAX_QSGD_LEVELS = 2**24


class AlgorithmSpec(WithParams):
    """``name`` picks a built-in algorithm (``netfl algorithms`` lists them), ``path`` one of your own
    (``my_fl.py:TrimmedMean``, a :class:`netfl.algorithms.Strategy` subclass; relative to the topology file); the
    other keys are its parameters (its ``Params``). From Python, ``factory`` takes the class itself. ``flower``
    names a Flower strategy as it is (``my_strategy.py:MyStrategy`` or ``flwr.serverapp.strategy.FedAdam``; the
    ``flower`` extra), the other keys its keyword arguments."""

    name: str | None = None
    path: str | None = None
    factory: Any = Field(None, exclude=True)
    flower: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _class_given(cls, data: Any):
        if isinstance(data, type):  # algorithm: TrimmedMean, from Python
            return {"factory": data}
        return data

    @model_validator(mode="after")
    def _one_source(self):
        given = [k for k in ("name", "path", "factory", "flower") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "give the algorithm's name (a built-in: netfl algorithms lists them), the path of your own "
                "(my_fl.py:TrimmedMean) or a Flower strategy (flower: flwr.serverapp.strategy.FedAdam)"
                + (f", not both {' and '.join(given)}" if given else "")
            )
        if self.flower is not None and python_only_problem(self.flower, "Flower strategy"):
            raise ValueError(python_only_problem(self.flower, "Flower strategy"))
        if self.flower is not None and not (is_user_reference(self.flower) or _IMPORT_PATH.fullmatch(self.flower)):
            raise ValueError(
                f"flower {self.flower!r} must read file.py:ClassName (a Flower strategy in a Python file) or an "
                "import path such as flwr.serverapp.strategy.FedAdam"
            )
        if self.path is not None and python_only_problem(self.path, "algorithm"):
            raise ValueError(python_only_problem(self.path, "algorithm"))
        if self.path is not None and not is_user_reference(self.path):
            raise ValueError(f"path {self.path!r} must read file.py:ClassName (a Strategy subclass in a Python file)")
        return self

    @property
    def label(self) -> str:
        """How summaries, titles and messages name the algorithm: ``fedau``, ``my_fl.py:TrimmedMean``."""
        if self.name is not None:
            return self.name
        if self.path is not None:
            file, name = self.path.rsplit(":", 1)
            return f"{Path(file).name}:{name}"
        if self.flower is not None:
            if is_user_reference(self.flower):
                file, name = self.flower.rsplit(":", 1)
                return f"flower:{Path(file).name}:{name}"
            return f"flower:{self.flower}"
        return getattr(self.factory, "__qualname__", "an algorithm given in Python")

    @property
    def builtin(self) -> bool:
        return self.name is not None


class ServerOptimizerSpec(WithParams):
    """``name`` picks the server optimiser (:mod:`netfl.registry.server_optimizers`); the other keys are its
    parameters."""

    name: str


class QsgdSpec(Strict):
    """QSGD's stochastic quantisation (Alistarh et al.)."""

    levels: int = Field(
        gt=0,
        le=MAX_QSGD_LEVELS,
        description="s: quantisation levels of |v_i| / ||v|| (the paper's s), at most 2^24: float32 resolves "
        "|v_i| / ||v|| to 24 bits, so more levels quantise no finer (and would send more bits than float32 itself)",
    )
    bucket: int | None = Field(
        None,
        gt=0,
        description="coordinates per norm (the paper's buckets); omitted, or more than the vector holds: one norm "
        "for the whole vector",
    )


class CompressorSpec(Strict):
    """One direction's compression: ``{topk: 1%, error_feedback: true}`` or ``{qsgd: {levels: 16}}``."""

    topk: Fraction | None = Field(None, gt=0, le=1, description="keep this fraction of the coordinates (top-k)")
    qsgd: QsgdSpec | None = Field(None, description="QSGD's stochastic quantisation instead of topk (its table)")
    error_feedback: bool = Field(
        False, description="add what earlier compressions left out before compressing (the device's memory e)"
    )

    @model_validator(mode="after")
    def _one_compressor(self):
        if (self.topk is None) == (self.qsgd is None):
            raise ValueError("give one compressor: topk (a fraction, e.g. topk: 1%) or qsgd (e.g. qsgd: {levels: 16})")
        return self

    @property
    def kind(self) -> str:
        return "topk" if self.topk is not None else "qsgd"


class CompressionSpec(Strict):
    """What is compressed on the air: the update on the uplink, the model on the downlink."""

    uplink: CompressorSpec | None = Field(None, description="the update a device sends, decompressed by the server")
    downlink: CompressorSpec | None = Field(
        None, description="the model the server broadcasts (qsgd), quantised once per model version"
    )

    @model_validator(mode="after")
    def _downlink_quantises(self):
        down = self.downlink
        if down is not None and down.topk is not None:
            raise ValueError(
                "downlink.topk: top-k of a model keeps k of its weights; sending only the model's change needs "
                "every device to have heard every earlier broadcast, which devices that come and go have not: "
                "use downlink: {qsgd: {levels: s}}"
            )
        if down is not None and down.error_feedback:
            raise ValueError(
                "downlink.error_feedback: the model is quantised once per version for every device (a broadcast) "
                "and unbiased; there is no per-device memory on the downlink"
            )
        if self.uplink is None and self.downlink is None:
            raise ValueError("give uplink, downlink or both")
        return self


class ServerSpec(Strict):
    algorithm: AlgorithmSpec = Field(
        AlgorithmSpec(name="fedavg"),
        description="the FL algorithm and its parameters: a built-in, {name: fedau, ...} (netfl algorithms lists "
        "them), your own, {path: my_fl.py:TrimmedMean, ...} (a netfl.algorithms.Strategy subclass), or a Flower "
        "strategy as it is, {flower: flwr.serverapp.strategy.FedAdam, eta: 0.05}",
    )
    optimizer: ServerOptimizerSpec | None = Field(
        None, description="a server optimiser on the algorithm's aggregated update (sgd, momentum, adagrad, adam, yogi)"
    )
    compression: CompressionSpec | None = Field(
        None, description="update compression on the uplink (topk, qsgd) and model quantisation on the downlink"
    )
    mode: Literal["sync", "async"] = Field(
        "sync",
        description="sync: rounds of selected participants (round); async: workers train whenever available and "
        "the server aggregates as their updates arrive (async)",
    )
    round: RoundSpec = Field(RoundSpec(), description="a synchronous round: who is asked, and how long it waits")
    async_: AsyncSpec = Field(AsyncSpec(), alias="async", description="the asynchronous mode's buffer and workers")
    on_divergence: OnDivergence = Field(
        "stop",
        description="a NaN or inf in a client's update or loss: stop the run (stopped_by: diverged), or "
        "skip_update: drop that update, count it (updates_skipped) and go on; a global model "
        "that is not finite always stops the run",
    )
    on_loss_explosion: Literal["warn", "stop"] = Field(
        "warn",
        description="a test loss that stays finite but explodes (10x the initial loss or more, with accuracy at "
        "chance; see netfl/loss_watch.py): warn and record it (loss_explosion in summary.json), or also stop "
        "the run there (stopped_by: diverged)",
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
