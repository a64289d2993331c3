"""The scenario's schema: pydantic models of the simulated world, and nothing else.

Each model checks what it can see on its own (ranges, units, which keys go
together); checks that need the whole scenario or a registry's verdict on a
named component live in :mod:`netfl.config.checks`. Unknown keys are errors:
a typo must never silently fall back to a default. All quantities are
converted to SI base units here (seconds, joules, watts, bit/s), so nothing
downstream parses units.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BeforeValidator, ConfigDict, Field, field_validator, model_validator

from netfl.component_spec import PolicySpec, WithParams
from netfl.distributions import Distribution, parse_distribution
from netfl.numbers import ANY_SIZE, Float32, NoBooleanNumbers
from netfl.problems import one_of
from netfl.registry import registered
from netfl.registry.datasets import DATASET_NAMES
from netfl.registry.media import MAX_SPECTRAL_EFFICIENCY, MEDIUM_KINDS
from netfl.registry.models import MODEL_NAMES
from netfl.registry.partitions import PARTITION_KINDS, QUANTITY_SKEW_KINDS, SAMPLED_KINDS
from netfl.units import (
    BitsPerSecond,
    Bytes,
    Fraction,
    Hertz,
    Joules,
    Seconds,
    Watts,
    bare_number,
    parse_quantity,
    parse_rounds,
)
from netfl.user_code import is_user_reference, python_only_problem

#: QSGD's levels at most: float32 resolves |v_i| / ||v|| to 24 bits.
MAX_QSGD_LEVELS = 2**24
#: Over-commitment at most (10000%: a round asks 101 times its participants).
MAX_OVER_COMMIT = 100.0


def _dist(unit_kind: str):
    return BeforeValidator(lambda v: parse_distribution(v, unit_kind))


FlopsDistribution = Annotated[Distribution, _dist("flops")]
RateDistribution = Annotated[Distribution, _dist("rate")]
FractionDistribution = Annotated[Distribution, _dist("fraction")]
DistanceDistribution = Annotated[Distribution, _dist("distance")]


class Strict(NoBooleanNumbers):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


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


class ExclusiveGroupSpec(Strict):
    """Clients (0-based device indices, in device order) that alone hold some labels; shared iid among them."""

    clients: list[Annotated[int, Field(ge=0)]] = Field(min_length=1, description="device indices, e.g. [27, 28, 29]")
    labels: list[Annotated[int, Field(ge=0)]] = Field(min_length=1, description="labels they alone hold, e.g. [8, 9]")


class QuantitySkewSpec(Strict):
    """A fraction of the clients (drawn with the partition's generator) hold a given share of the samples."""

    clients: Fraction = Field(gt=0, lt=1, description="fraction of the clients that are heavy, e.g. 10%")
    share: Fraction = Field(gt=0, lt=1, description="fraction of the samples they hold together, e.g. 52.6%")


class PartitionSpec(Strict):
    """How the training samples are split among the devices (netfl.learn.data.partition.partition_indices).

    ``exclusive: [{clients: [27, 28, 29], labels: [8, 9]}]``: those clients alone hold those labels
    (shared iid among them); every other client gets its share of the remaining labels by ``kind``.
    ``quantity_skew: {clients: 10%, share: 52.6%}``: that fraction of the clients holds that share of
    the samples (kinds iid and classes).
    """

    kind: Annotated[str, BeforeValidator(registered(PARTITION_KINDS))] = Field(
        "iid",
        description="iid (dealt out evenly), dirichlet (label skew by alpha), classes (classes_per_client labels "
        "each), by_label (one label each) or natural (each device one real client of the data)",
    )
    alpha: float | None = Field(None, gt=0, description="Dirichlet concentration (dirichlet)")
    classes_per_client: int | None = Field(None, gt=0, description="labels per client (classes)")
    exclusive: list[ExclusiveGroupSpec] | None = Field(
        None,
        min_length=1,
        description="groups of clients that alone hold some labels; the other clients "
        "split the remaining labels by kind",
    )
    quantity_skew: QuantitySkewSpec | None = Field(
        None, description="a fraction of the clients holds a share of the samples (kinds iid, classes)"
    )
    pick: Literal["random", "first", "largest"] = Field(
        "random",
        description="natural: which clients the devices take when the data names more clients than there are "
        "devices (random: a seeded draw; first: in id order; largest: most samples)",
    )
    samples_per_client: int | None = Field(
        None,
        gt=0,
        description="each client draws this many samples (its label mix by kind: iid, dirichlet, "
        "classes); shared between clients when clients x samples exceed the data set",
    )

    @model_validator(mode="after")
    def _params_match_kind(self):
        if self.kind == "natural":
            others = [
                k
                for k in ("alpha", "classes_per_client", "exclusive", "quantity_skew", "samples_per_client")
                if getattr(self, k) is not None
            ]
            if others:
                raise ValueError(
                    f"kind natural keeps each real client's samples as they are: remove {', '.join(others)}"
                )
        elif "pick" in self.model_fields_set:
            raise ValueError("pick chooses clients of a natural partition (kind: natural)")
        if self.kind == "dirichlet" and self.alpha is None:
            raise ValueError("kind dirichlet needs alpha (e.g. alpha: 0.1)")
        if self.kind == "classes" and self.classes_per_client is None:
            raise ValueError("kind classes needs classes_per_client (e.g. classes_per_client: 2)")
        seen_clients: dict[int, int] = {}
        seen_labels: dict[int, int] = {}
        for g, group in enumerate(self.exclusive or []):
            for field, values, seen in (
                ("clients", group.clients, seen_clients),
                ("labels", group.labels, seen_labels),
            ):
                for v in values:
                    if v in seen:
                        where = "given twice in this group" if seen[v] == g else f"also given in exclusive[{seen[v]}]"
                        raise ValueError(
                            f"exclusive[{g}].{field}: {field[:-1]} {v} is {where}; "
                            f"each {field[:-1]} belongs to at most one group"
                        )
                    seen[v] = g
        if self.quantity_skew is not None:
            if self.kind not in QUANTITY_SKEW_KINDS:
                raise ValueError(f"quantity_skew works with kind {one_of(QUANTITY_SKEW_KINDS)}, not {self.kind!r}")
            if self.exclusive:
                raise ValueError("quantity_skew cannot be combined with exclusive: give one of them")
        if self.samples_per_client is not None:
            if self.kind not in SAMPLED_KINDS:
                raise ValueError(f"samples_per_client works with kind {one_of(SAMPLED_KINDS)}, not {self.kind!r}")
            if self.exclusive or self.quantity_skew is not None:
                raise ValueError(
                    "samples_per_client draws every client's data alike: it cannot be combined with "
                    "exclusive or quantity_skew"
                )
        return self


class DatasetSpec(Strict):
    """A built-in data set (``name``) or one of the user's (``path``): arrays in a ``.npz`` or ``.pt`` file, a
    folder in LEAF's JSON layout, or ``file.py:function`` returning arrays (see :mod:`netfl.learn.data.user_data`).
    From Python, ``loader`` takes the function itself, or a mapping of arrays."""

    name: Annotated[str, BeforeValidator(registered(DATASET_NAMES, own="path"))] | None = Field(
        None, description="a built-in data set; give name or path"
    )
    path: str | None = Field(
        None,
        description="your data: a .npz or .pt file (x, y, optional client, x_test, y_test, num_classes), a LEAF "
        "folder (train/ and test/ of JSON) or JSON file, or file.py:function returning those arrays; relative "
        "to the topology file",
    )
    args: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of a file.py:function loader")
    loader: Any = Field(None, exclude=True, description="from Python: a function returning the arrays, or them")
    input_shape: list[Annotated[int, Field(gt=0)]] | None = Field(
        None, min_length=1, description="reshape each sample to this shape, e.g. [1, 28, 28] for LEAF's FEMNIST"
    )
    targets: Literal["sample", "every_token"] = Field(
        "sample",
        description="LEAF character data (Shakespeare): sample labels each sample with the next character (LEAF's "
        "y); every_token labels every position with the character after it, for models with per-token outputs",
    )
    data_dir: Path | None = Field(
        None,
        description="the folder holding a built-in data set's files, relative to the topology file; --data-dir "
        "replaces it",
    )
    test_fraction: float = Field(
        0.2, gt=0, lt=1, description="held-out share when the data has no test split of its own (digits, blobs3)"
    )
    max_train_samples: int | None = Field(
        None, gt=0, description="train on a seeded random subset of this many samples (CPU-scale studies)"
    )
    partition: PartitionSpec = Field(
        PartitionSpec(), description="how the training samples are split among the devices (its table)"
    )

    @model_validator(mode="after")
    def _one_source(self):
        given = [k for k, v in (("name", self.name), ("path", self.path), ("loader", self.loader)) if v is not None]
        if len(given) != 1:
            raise ValueError(
                "give the data set's name (a built-in: " + one_of(DATASET_NAMES) + ") or the path of your own "
                "(data.npz, data.pt, a LEAF folder, or loader.py:function)"
                + (f", not both {' and '.join(given)}" if given else "")
            )
        if self.path is not None and python_only_problem(self.path, "data set"):
            raise ValueError(python_only_problem(self.path, "data set"))
        if self.args and self.path is None and self.loader is None:
            raise ValueError("args are the keyword arguments of a file.py:function loader; a built-in takes none")
        if self.name is not None and (self.input_shape is not None or self.targets != "sample"):
            raise ValueError("input_shape and targets apply to a data set of your own (path)")
        if self.data_dir is not None and self.name is None:
            raise ValueError("data_dir is where a built-in data set's files are; give your own data set's path")
        return self

    @property
    def label(self) -> str:
        """How messages and listings name the data set."""
        if self.name is not None:
            return self.name
        if self.path is not None:
            return self.path
        return getattr(self.loader, "__name__", "data given in Python")

    @property
    def builtin(self) -> bool:
        return self.name is not None


class ModelSpec(Strict):
    """A built-in model (``name``) or the user's own ``torch.nn.Module`` (``path: file.py:Name``, a class or a
    factory function, called with ``args``). From Python, ``factory`` takes the class or function itself."""

    name: Annotated[str, BeforeValidator(registered(MODEL_NAMES, own="path"))] | None = Field(
        None, description="a built-in model; give name or path"
    )
    hidden: list[Annotated[int, Field(gt=0)]] = Field([200], description="hidden layer sizes of the built-in mlp")
    path: str | None = Field(
        None, description="your model: file.py:Name, a torch.nn.Module class or a function returning one"
    )
    args: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of your class or function")
    factory: Any = Field(None, exclude=True, description="from Python: the class or function itself")
    flops_per_sample: float | None = Field(
        None,
        gt=0,
        description="training FLOPs (forward and backward) per sample, instead of 3 x the forward "
        "FLOPs counted on the module",
    )
    buffers: Literal["average", "local"] = Field(
        "average",
        description="buffers such as BatchNorm's running statistics: average (they travel with the model and "
        "the server takes the sample-weighted mean of those the updates carry) or local (each device keeps "
        "its own, as in FedBN; nothing travels)",
    )

    @model_validator(mode="before")
    @classmethod
    def _class_given(cls, data: Any):
        if callable(data) and not isinstance(data, (str, dict)):  # model: Net, from Python
            return {"factory": data}
        return data

    @model_validator(mode="after")
    def _one_source(self):
        given = [k for k, v in (("name", self.name), ("path", self.path), ("factory", self.factory)) if v is not None]
        if len(given) != 1:
            raise ValueError(
                "give the model's name (a built-in: " + one_of(MODEL_NAMES) + ") or the path of your own "
                "(my_models.py:Net)" + (f", not both {' and '.join(given)}" if given else "")
            )
        if self.path is not None and python_only_problem(self.path, "model"):  # code given in Python, recorded
            raise ValueError(python_only_problem(self.path, "model"))
        if self.path is not None and not is_user_reference(self.path):
            raise ValueError(f"path {self.path!r} must read file.py:Name (a class or function in a Python file)")
        if self.name is None and "hidden" in self.model_fields_set:
            raise ValueError("hidden sizes the built-in mlp; pass your model's own arguments in args")
        if self.name is not None and self.args:
            raise ValueError(f"args are your model's keyword arguments; the built-in {self.name} takes hidden")
        if self.factory is not None and not callable(self.factory):
            raise ValueError("factory must be a torch.nn.Module class or a function returning a module")
        return self

    @property
    def label(self) -> str:
        """How messages and listings name the model: ``lenet5``, ``my_models.py:Net(width=64)``."""
        if self.name is not None:
            return self.name
        base = self.path or getattr(self.factory, "__qualname__", "a model given in Python")
        return base + (f"({', '.join(f'{k}={v!r}' for k, v in self.args.items())})" if self.args else "")

    @property
    def builtin(self) -> bool:
        return self.name is not None


class LocalSpec(Strict):
    """Local training: ``steps`` minibatch SGD steps, or ``epochs`` passes over the client's data."""

    steps: int | None = Field(None, gt=0, description="minibatch SGD steps of each local training; steps or epochs")
    epochs: float | None = Field(
        None, gt=0, description="passes over the device's own samples instead of steps (0.5: half of them)"
    )
    batch_size: int = Field(16, gt=0, description="samples per minibatch")
    lr: Float32 = Field(0.05, gt=0, description="the client's learning rate (its SGD step size)")
    weight_decay: Float32 = Field(0.0, ge=0, description="L2 weight decay of the client's SGD steps")
    lr_schedule: Literal["constant", "inverse_round"] = Field(
        "constant", description="client lr per round t: constant, or lr / (t + 1) (MIFA's reference)"
    )

    @model_validator(mode="after")
    def _steps_or_epochs(self):
        if (self.steps is None) == (self.epochs is None):
            raise ValueError("give exactly one of steps or epochs")
        return self


class TaskSpec(Strict):
    dataset: DatasetSpec = Field(description="the data set and how it is split among the devices (its table)")
    model: ModelSpec = Field(description="the model trained: a built-in one or your own (its table)")
    local: LocalSpec = Field(LocalSpec(steps=5), description="each device's local training (its table)")


class ComputeSpec(Strict):
    flops_per_s: FlopsDistribution = Field(description="sustained training speed, FLOP/s")

    @field_validator("flops_per_s")
    @classmethod
    def _positive(cls, d: Distribution):
        return _positive_distribution(d)


class PowerSpec(Strict):
    """Electrical power drawn in each activity (on top of idle while busy).

    Defaults: 2 W while training (a phone SoC under sustained load), 0.2 W
    while transmitting (LTE uplink at most about 0.2 W), 50 mW idle.
    """

    compute: Watts = Field(2.0, ge=0, description="drawn while training, on top of idle")
    transmit: Watts = Field(0.2, ge=0, description="drawn while uploading, on top of idle; half of it while receiving")
    idle: Watts = Field(0.05, ge=0, description="drawn at all times")


class BatterySpec(Strict):
    """A battery; a device without one is mains powered and never empties.

    Default capacity 55 kJ: a 4000 mAh x 3.85 V phone battery.
    """

    capacity: Joules = Field(55e3, gt=0, description="energy when full; 55 kJ is a 4000 mAh x 3.85 V phone battery")
    initial: FractionDistribution = Field(
        Distribution("constant", (1.0,)), description="initial charge, fraction of capacity"
    )
    min_level: Fraction = Field(0.0, ge=0, le=1, description="at or below this fraction the device does not take part")
    charging: PolicySpec | None = Field(None, description="when the charger is plugged in: a continuous-time policy")
    charge_power: Watts = Field(10.0, gt=0, description="charger power; 10 W is a 5 V x 2 A USB charger")

    @field_validator("initial")
    @classmethod
    def _in_unit_interval(cls, d: Distribution):
        low = d.support_min
        high = max(d.params) if d.kind in ("constant", "uniform", "choice") else float("inf")
        if d.kind in ("normal", "lognormal") or low < 0 or high > 1:
            raise ValueError("initial must stay within [0, 1] (a constant, uniform or choice)")
        return d


class ChannelSpec(Strict):
    """A wireless uplink from the device to its access point (see netfl/sim/channel.py).

    Defaults: 0.2 W (23 dBm) transmit power, the maximum of an LTE handset;
    noise figure 7 dB; path loss 128.1 + 37.6 log10(d km) dB (3GPP TR 36.814).
    """

    kind: Literal["awgn", "rayleigh", "rician"] = Field(
        "rayleigh", description="the fading: none (awgn), Rayleigh, or Rician (with rician_k)"
    )
    distance_m: DistanceDistribution = Field(description="metres to the access point")
    tx_power: Watts = Field(0.2, gt=0, description="radiated power")
    shadowing_db: float = Field(0.0, ge=0, description="std of log-normal shadowing, drawn once per device")
    rician_k: float | None = Field(None, ge=0, description="Rician K factor (kind rician)")
    coherence: Seconds = Field(
        0.1, ge=1e-6, description="block-fading coherence time, at least 1 us (the channel is drawn once per block)"
    )
    noise_figure_db: float = Field(
        7.0, ge=0, description="noise figure in dB, on top of thermal noise of -174 dBm/Hz (3GPP TR 36.814: 7 dB)"
    )
    rate: BitsPerSecond | None = Field(
        None, gt=0, description="fixed transmission rate (outage => retransmit); adaptive Shannon rate if omitted"
    )
    packet_size: Bytes = Field(
        1500, gt=0, description="with a fixed rate: bytes per packet; a packet begun in an outage is sent again"
    )
    max_spectral_efficiency: float = Field(
        MAX_SPECTRAL_EFFICIENCY,
        gt=0,
        description="bit/s/Hz an adaptive rate reaches at most (the radio's top "
        "modulation and coding; 5.5547 is LTE's 64-QAM CQI 15, 7.4063 its 256-QAM; .inf: Shannon uncapped)",
    )

    @field_validator("distance_m")
    @classmethod
    def _positive(cls, d: Distribution):
        return _positive_distribution(d)

    @model_validator(mode="after")
    def _k_for_rician(self):
        if self.kind == "rician" and self.rician_k is None:
            raise ValueError("kind rician needs rician_k (e.g. rician_k: 3)")
        if self.kind != "rician" and self.rician_k is not None:
            raise ValueError(f"rician_k applies to kind rician only (kind is {self.kind})")
        return self


class LinkSpec(Strict):
    """The device's link: straight to the server (``uplink``/``downlink``), or to a node of ``network``."""

    to: str | None = Field(None, description="an access point or relay of network.nodes; the server if omitted")
    uplink: RateDistribution | None = Field(None, description="bit/s of a fixed-rate (wired-like) link")
    downlink: RateDistribution | None = Field(None, description="bit/s; same as uplink if omitted")
    latency: Seconds = Field(0.0, ge=0, description="one-way, per transfer")
    channel: ChannelSpec | None = Field(
        None, description="a wireless channel to the access point `to`, instead of uplink (its table)"
    )

    @field_validator("uplink", "downlink")
    @classmethod
    def _positive(cls, d: Distribution | None):
        return None if d is None else _positive_distribution(d)

    @model_validator(mode="after")
    def _rate_or_channel(self):
        if self.uplink is None and self.channel is None:
            raise ValueError("give uplink (a fixed rate) or channel (a wireless link to an access point)")
        if self.uplink is not None and self.channel is not None:
            raise ValueError("give either uplink or channel, not both")
        if self.channel is not None and self.to is None:
            raise ValueError("a wireless channel needs `to: <access point>` (a node of network.nodes)")
        return self


def _usage_preset(value: Any) -> Any:
    if isinstance(value, str):
        from netfl.policies.usage import PRESETS

        if value not in PRESETS:
            raise ValueError(
                f"unknown usage preset {value!r}; presets: {one_of(list(PRESETS))}, or a mapping of sessions and power"
            )
        return PRESETS[value]
    return value


class UsageSpec(Strict):
    """A device's own use (screen on, apps): sessions that draw their own power (netfl/policies/usage.py).

    ``usage: phone`` is the preset of a typical smartphone day; a mapping names the sessions (a continuous-time
    policy) and their power.
    """

    sessions: PolicySpec = Field(description="when the device is in use: a continuous-time policy (e.g. diurnal)")
    power: Watts = Field(gt=0, le=1e6, description="drawn while in use, on top of the idle draw")
    train_while_in_use: bool = Field(
        False,
        description="false: a device in use is not idle, so it is not asked to train and its work stops when a "
        "session begins (production FL trains on idle devices); true: use only draws power",
    )


class DeviceGroupSpec(Strict):
    group: str = Field(
        pattern=r"^[A-Za-z0-9_.-]+$", description="the group's name (letters, digits, _ . -); results are per group"
    )
    count: int = Field(gt=0, description="devices in the group")
    compute: ComputeSpec = Field(description="how fast the devices train (its table)")
    power: PowerSpec = Field(PowerSpec(), description="power drawn in each activity (its table)")
    battery: BatterySpec | None = Field(None, description="a battery (its table); mains powered if omitted")
    availability: PolicySpec = Field(
        PolicySpec(policy="always"),
        description="when a device is online: an availability policy and its parameters (netfl policies lists them)",
    )
    usage: Annotated[UsageSpec | None, BeforeValidator(_usage_preset)] = Field(
        None, description="the device's own use, drawing power (usage: phone, or sessions and power)"
    )
    link: LinkSpec = Field(description="the link to the server or to a node of network (its table)")


class AlgorithmSpec(WithParams):
    """``name`` picks the algorithm (``netfl algorithms`` lists them)."""

    name: str


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


class RoundSpec(Strict):
    participants: int | None = Field(None, gt=0, description="clients asked per round; all available if omitted")
    deadline: Seconds = Field(float("inf"), gt=0, description="aggregate what arrived by then")
    idle_wait: Seconds = Field(10.0, gt=0, description="wait before retrying when nobody is available")
    interval: Seconds = Field(0.0, ge=0, description="minimum time from one round's start to the next (pace steering)")
    over_commit: Fraction = Field(
        0.0,
        ge=0,
        le=MAX_OVER_COMMIT,
        description="ask ceil((1 + over_commit) x participants) devices and close "
        "the round at the first participants updates; the "
        "stragglers are stopped (30% is production FL's 130%); at most 10000%",
    )
    partial_work: bool = Field(
        False,
        description="a device that would miss the deadline trains only the local steps it can finish in "
        "time and uploads them (FedNova's partial work)",
    )
    partial_margin: Fraction = Field(
        0.0,
        ge=0,
        description="partial work plans each upload to take this much longer than its estimate (100%: twice as "
        "long), for a shared uplink on which the devices that planned to the deadline all send at once",
    )
    cloud_every: int = Field(
        1,
        gt=0,
        description="with edge nodes: the cloud averages the edge models every this many rounds (HierFAVG's kappa2)",
    )

    @property
    def asked(self) -> int | None:
        """How many devices a round asks: ``participants``, over-committed by ``over_commit`` (None: all available).

        Rounded to 9 decimals before the ceiling, so that 10% of 10 asks 11, not ceil(11.000000000000002) = 12.
        """
        if self.participants is None or not self.over_commit:
            return self.participants
        return math.ceil(round((1 + self.over_commit) * self.participants, 9))


class AsyncSpec(Strict):
    """Anarchic / asynchronous arrivals: workers train whenever they are available."""

    buffer: int = Field(10, gt=0, description="m: the server aggregates whenever m updates have arrived")
    local_steps: Annotated[Distribution, _dist("count")] | None = Field(
        None,
        description="K of each job, drawn per job: {uniform: [1, 10]} is U{1..10}; a lognormal is rounded "
        "(at least 1); task.local otherwise",
    )

    @field_validator("local_steps")
    @classmethod
    def _at_least_one_step(cls, d: Distribution | None):
        if d is not None and d.kind != "lognormal" and (d.kind == "normal" or d.support_min < 1):
            raise ValueError(
                f"every job needs at least one local step; {d.describe()} can draw less than 1 "
                "(use e.g. {uniform: [1, 10]})"
            )
        return d

    pause: Seconds = Field(0.0, ge=0, description="mean of an exponential pause before a worker pulls again")


class ServerSpec(Strict):
    algorithm: AlgorithmSpec = Field(
        AlgorithmSpec(name="fedavg"),
        description="the FL algorithm and its parameters, {name: fedau, ...} (netfl algorithms lists them)",
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
    on_divergence: Literal["stop", "skip_update"] = Field(
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


class MediumSpec(Strict):
    """How the devices attached to a node share its uplink (see netfl/sim/medium.py)."""

    kind: Annotated[str, BeforeValidator(registered(MEDIUM_KINDS))] = Field(
        "dedicated",
        description="dedicated (each sender the whole band), fdma (the band shared equally among those sending), "
        "tdma (one sender at a time) or slotted_aloha (random access; collisions lose packets)",
    )
    bandwidth: Hertz = Field(10e6, gt=0, description="uplink bandwidth of the access point")
    rate: BitsPerSecond | None = Field(None, gt=0, description="slotted_aloha: rate of every packet")
    q: float = Field(0.1, gt=0, le=1, description="slotted_aloha: per-slot transmit probability of a backlogged device")
    packet_size: Bytes = Field(1500, gt=0, description="slotted_aloha: bytes per packet (one packet per slot)")
    backoff: Literal["none", "binary_exponential"] = Field(
        "none",
        description="slotted_aloha: binary_exponential halves a device's q after each collision (down to "
        "q/1024) and resets it after a success",
    )
    max_attempts: int | None = Field(
        None,
        gt=0,
        description="slotted_aloha: a packet dropped after this many "
        "transmissions fails the upload; unlimited if omitted",
    )

    @model_validator(mode="after")
    def _aloha_only(self):
        if self.kind == "slotted_aloha" and self.rate is None:
            raise ValueError("slotted_aloha needs rate (the packet rate, e.g. rate: 1Mbps)")
        aloha = {"rate", "q", "packet_size", "backoff", "max_attempts"} & self.model_fields_set
        if self.kind != "slotted_aloha" and aloha:
            raise ValueError(
                f"{', '.join(sorted(aloha))} appl{'ies' if len(aloha) == 1 else 'y'} to kind "
                f"slotted_aloha only (kind is {self.kind})"
            )
        return self


class RamSpec(Strict):
    """The Random Access Model relay: one update passes per round."""

    mode: Literal["abstract", "first"] = Field(
        "abstract", description="abstract: one user drawn by rho passes; first: the first update to arrive passes"
    )
    rho: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] | Literal["channel_quality", "uniform"] = Field(
        "uniform",
        description="abstract: each user's probability of being drawn, a list, uniform, or channel_quality "
        "(proportional to mean SNR)",
    )
    draw: Literal["all", "arrived"] = Field(
        "all",
        description="abstract: draw user i ~ rho among all users, nothing passing if i's update is missing "
        "(all: the paper's erasure), or among the users whose update arrived (arrived)",
    )

    @model_validator(mode="after")
    def _draw_when_abstract(self):
        if self.mode != "abstract" and "draw" in self.model_fields_set:
            raise ValueError(f"draw applies to mode abstract only (mode {self.mode} passes the first arrival)")
        return self


class NodeSpec(Strict):
    kind: Literal["access_point", "relay", "edge"] = Field(
        description="access_point (devices attach to it), relay (passes updates on; one per round with ram) or "
        "edge (an edge server that aggregates for the devices behind it)"
    )
    medium: MediumSpec = Field(MediumSpec(), description="how the attached devices share its uplink (its table)")
    downlink: BitsPerSecond | None = Field(None, gt=0, description="broadcast rate to the attached devices")
    ram: RamSpec | None = Field(None, description="relays only: pass one update per round (RAM)")
    availability: PolicySpec | None = Field(
        None, description="edges only: when the edge server is up (any availability policy); always if omitted"
    )

    @model_validator(mode="after")
    def _ram_on_relays(self):
        if self.ram is not None and self.kind != "relay":
            raise ValueError("ram belongs to a node of kind relay")
        if self.availability is not None and self.kind != "edge":
            raise ValueError("availability belongs to a node of kind edge (an edge server that may go down)")
        return self


class WiredLinkSpec(Strict):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    source: str = Field(alias="from", description="a node of network.nodes")
    to: str = Field(description="a node of network.nodes, or server")
    rate: BitsPerSecond = Field(gt=0, description="the link's rate")
    latency: Seconds = Field(0.0, ge=0, description="one-way, per transfer")


class NetworkSpec(Strict):
    """Access points, relays and the wired links between them and the server (node ``server``)."""

    nodes: dict[str, NodeSpec] = Field({}, description="access points, relays and edge servers by name (its table)")
    links: list[WiredLinkSpec] = Field([], description="wired links between the nodes and server (its table)")


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


class Seeds(NamedTuple):
    world: int
    training: int


class Scenario(Strict):
    name: str = Field(
        pattern=r"^[A-Za-z0-9_.-]+$", description="the scenario's name (letters, digits, _ . -): results/<name>"
    )
    seed: int = Field(
        0,
        ge=0,
        json_schema_extra=ANY_SIZE,
        description="seeds every random draw (world_seed and training_seed when not given)",
    )
    world_seed: int | None = Field(
        None,
        ge=0,
        json_schema_extra=ANY_SIZE,
        description="the world's draws: devices, availability, channels, media, relays, asynchronous workers",
    )
    training_seed: int | None = Field(
        None,
        ge=0,
        json_schema_extra=ANY_SIZE,
        description="the learning's draws: data split, test split, initial model, minibatches, client selection",
    )
    stop: StopSpec = Field(description="when the run ends")
    tasks: list[TaskSpec] = Field(
        min_length=1, description="what is learnt: task, or tasks, a list of them (several models at once)"
    )
    devices: list[DeviceGroupSpec] = Field(min_length=1, description="the device groups")
    network: NetworkSpec = Field(
        NetworkSpec(), description="access points, relays, edges and wired links; without: each device to the server"
    )
    server: ServerSpec = Field(ServerSpec(), description="the algorithm and how rounds or arrivals are aggregated")
    eval: EvalSpec = Field(EvalSpec(), description="when and on how much of the test set the model is evaluated")
    engine: EngineSpec = Field(EngineSpec(), description="how the engine holds the devices")
    events: EventsSpec = Field(EventsSpec(), description="what the event log records")
    output: OutputSpec = Field(OutputSpec(), description="where the results go")
    tracking: TrackingSpec = Field(
        TrackingSpec(),
        description="log the run to TensorBoard and/or MLflow too: {tensorboard: DIR, mlflow: URI} "
        "(not part of the world: a run folder's scenario.yaml leaves it out)",
    )
    source: Path | None = Field(None, exclude=True, description="the file this came from (set by load_scenario)")

    @model_validator(mode="before")
    @classmethod
    def _task_or_tasks(cls, data: Any):
        if isinstance(data, dict) and "task" in data:
            if "tasks" in data:
                raise ValueError("give either task or tasks, not both")
            data = {**data, "tasks": [data["task"]]}
            del data["task"]
        return data

    @field_validator("devices")
    @classmethod
    def _unique_groups(cls, devices: list[DeviceGroupSpec]):  # a field validator, so the error names `devices`
        names = [g.group for g in devices]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"device group names must be unique; repeated: {', '.join(dupes)}")
        return devices

    @property
    def seeds(self) -> Seeds:
        """The seeds in effect: ``seed`` for both, unless world_seed or training_seed says otherwise."""
        return Seeds(
            self.seed if self.world_seed is None else self.world_seed,
            self.seed if self.training_seed is None else self.training_seed,
        )

    @property
    def num_devices(self) -> int:
        return sum(g.count for g in self.devices)

    @property
    def task(self) -> TaskSpec:
        return self.tasks[0]

    @property
    def names_users_code(self) -> bool:
        """Whether some task's model or data set is the user's own (so that torch must build and measure it)."""
        return any(not (t.model.builtin and t.dataset.builtin) for t in self.tasks)


def _positive_distribution(d: Distribution) -> Distribution:
    if not d.always_positive:
        raise ValueError(f"must be > 0 for every device; {d.describe()} can be <= 0")
    return d
