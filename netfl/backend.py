"""The narrow interface between the engine and the learner.

The engine decides *when* things happen; the learner decides *what* the
models become and -- through its strategy -- *what the server asks*. Each
round the engine hands over the eligible clients and receives a
:class:`RoundPlan`: a list of :class:`Work` items, each a job id with the
bytes to download, the FLOPs to compute and the bytes to upload. The engine
times them with physics and reports which job ids arrived; it never sees a
tensor. So batching many jobs together (lazy, vmapped training) and
training several models at once are the learner's business alone.

Hierarchical FL (edge servers): devices' updates are aggregated by their
edge every round (:meth:`TrainingBackend.aggregate`), and every few rounds
the edge models by the cloud (:meth:`TrainingBackend.aggregate_cloud`); the
engine times the tiers' transfers.

Partial work: a device that cannot finish a job's local steps before the
round's deadline trains only those it can and says so with
:meth:`TrainingBackend.cut` as it starts training; jobs are lazy, so the
learner trains the job's first steps when its update is needed.

A plan may be a *probe*: small reports asked of clients before the server
decides who trains what (MMFL's optimal sampling needs every client's update
norm). The engine runs the probe work like any other, then asks
:meth:`TrainingBackend.plan_after_probe` for the round's real work.

Training can blow up (a learning rate far too large): when the learner meets
a NaN or an infinity it cannot drop, any backend call raises
:class:`Diverged`, and the engine stops the run there (``stopped_by:
diverged``) instead of simulating hours of a meaningless model.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

#: Bytes of one number in a report or a control message (float32 on the wire).
BYTES_PER_VALUE = 4


@dataclass(frozen=True)
class Work:
    """One client's share of a round, as the engine times it.

    The device downloads ``download_bytes`` (skipped when 0), computes
    ``flops`` (skipped when 0) and uploads ``upload_bytes``; ``job`` is what
    the engine reports back when the upload arrives. ``task``: the model the
    job trains when several train at once (None with one model, or for a
    probe); it and ``note`` (``probe``) go into the event log; ``report``:
    the upload is a small report, not a model update; ``steps``: the local steps the FLOPs are made of, equal
    ones (0: the work cannot be cut into steps), so that a device can train fewer of them at a deadline
    (partial work; :meth:`TrainingBackend.cut`).
    """

    client: int
    job: int
    download_bytes: float
    flops: float
    upload_bytes: float
    note: str = ""
    report: bool = False
    task: int | None = None
    steps: int = 0


@dataclass(frozen=True)
class RoundPlan:
    """The work of one round; ``probe``: the work yields reports, and the real work comes after them."""

    work: tuple[Work, ...] = ()
    probe: bool = False


#: Where an aggregation's metrics (a strategy's, beside the next model) belong: the first columns of the run's
#: algorithm.csv, which no metric may be named.
AGGREGATION_PLACE = ("sim_time_s", "round", "task", "edge")


@dataclass(frozen=True)
class RoundContext:
    """What the server knew when it aggregated a round."""

    round_index: int
    sim_time_s: float
    available: Sequence[int]  # clients eligible at the round's start (ascending; a numpy array from the engine)
    selected: tuple[int, ...]  # clients asked to train
    delivered: tuple[int, ...]  # job ids whose update reached the server in time


class DeviceStates:
    """What the server can observe of the devices eligible at a round's start, one entry per device of
    ``available`` (the same order), for selection rules that look at the devices (battery- or availability-aware,
    Oort-like): read from the engine on first access, so a rule that reads nothing costs nothing.

    ``battery``: the charge as a fraction of capacity (NaN on mains power); ``charging``: plugged in and charging;
    ``uplink_bps``: the nominal rate of the device's own uplink (what its link would carry alone, without fading or
    contention); ``tasks_started`` and ``updates_delivered``: its jobs so far; ``last_selected_s``: the simulated time
    the server last asked it to work (NaN: never), so ``sim_time_s - last_selected_s`` is the time since its last
    participation. Each is a read-only numpy array.
    """

    FIELDS = ("battery", "charging", "uplink_bps", "tasks_started", "updates_delivered", "last_selected_s")

    def __init__(
        self, available: Sequence[int], sim_time_s: float, read: Callable[[np.ndarray], dict[str, np.ndarray]]
    ):
        """``read(indices)``: the engine's answer, a mapping of :attr:`FIELDS` to arrays aligned with ``indices``."""
        self.available = np.asarray(available, dtype=np.int64)
        self.sim_time_s = float(sim_time_s)
        self._read, self._values = read, None

    def __len__(self) -> int:
        return len(self.available)

    def _field(self, name: str) -> np.ndarray:
        if self._values is None:
            values = self._read(self.available)
            for array in values.values():
                array.setflags(write=False)
            self._values = values
        return self._values[name]

    @property
    def battery(self) -> np.ndarray:
        return self._field("battery")

    @property
    def charging(self) -> np.ndarray:
        return self._field("charging")

    @property
    def uplink_bps(self) -> np.ndarray:
        return self._field("uplink_bps")

    @property
    def tasks_started(self) -> np.ndarray:
        return self._field("tasks_started")

    @property
    def updates_delivered(self) -> np.ndarray:
        return self._field("updates_delivered")

    @property
    def last_selected_s(self) -> np.ndarray:
        return self._field("last_selected_s")


@dataclass(frozen=True)
class CloudContext:
    """A cloud aggregation of hierarchical FL: the edges (by index) whose models reached the cloud."""

    round_index: int
    sim_time_s: float
    edges: tuple[int, ...]


@dataclass(frozen=True)
class Evaluation:
    """Test results of the global model; with several models, their mean and each model's own in ``tasks``."""

    accuracy: float
    loss: float
    per_class_accuracy: tuple[float, ...] = ()
    tasks: tuple[Evaluation, ...] = ()


@dataclass(frozen=True)
class Divergence:
    """Where training produced a NaN or an infinity, or a loss that exploded.

    ``where``: ``update`` (a client's update), ``loss`` (a client's loss of the global model, reported to a
    probe), ``global_model`` (the aggregate of finite updates), ``evaluation`` (the global model's test
    loss) or ``loss_explosion`` (a finite test loss that exploded, :mod:`netfl.loss_watch`);
    ``round_index``: the round it happened in (of the aggregation that made the model, for ``evaluation``
    and ``loss_explosion``; None for the initial model); ``clients``: the clients whose updates or reports
    were not finite, or whose updates made the global model.
    """

    where: str
    round_index: int | None
    clients: tuple[int, ...]

    def describe(self) -> str:
        who = ", ".join(map(str, self.clients[:8])) + (", ..." if len(self.clients) > 8 else "")
        what = {
            "update": f"the update of client(s) {who} is not finite (NaN or inf)",
            "loss": f"the loss of client(s) {who} is not finite (NaN or inf)",
            "global_model": f"the global model aggregated from client(s) {who or 'none'} is not finite",
            "evaluation": "the global model's test loss is not finite",
            "loss_explosion": "the global model's test loss exploded (finite, but an order of magnitude above the "
            "initial loss, with accuracy at chance)",
        }[self.where]
        if self.where == "evaluation" and self.round_index is None:  # before any round: the model as built
            return "the initial model's test loss is not finite: the model's output is NaN or inf before any training"
        return what if self.round_index is None else f"round {self.round_index}: {what}"


class Diverged(Exception):
    """Raised by a backend call when training produced a non-finite value it may not drop; the engine stops."""

    def __init__(self, divergence: Divergence):
        super().__init__(divergence.describe())
        self.divergence = divergence


def sample_uniform(available: Sequence[int], participants: int | None, rng: np.random.Generator) -> list[int]:
    """``participants`` of the ``available`` clients uniformly without replacement (all if None), in order."""
    k = len(available) if participants is None else min(participants, len(available))
    if not k:
        return []
    return [int(available[i]) for i in np.sort(rng.choice(len(available), size=k, replace=False))]


class TrainingBackend(Protocol):
    def plan_round(self, round_index: int, available: Sequence[int], devices: DeviceStates | None = None) -> RoundPlan:
        """The work of a synchronous round, given the clients eligible at its start (sorted) and what the server
        can observe of them (None: nothing, as in a test without an engine)."""

    def plan_after_probe(self, round_index: int, reported: Sequence[int]) -> RoundPlan:
        """The round's work once the probe jobs ``reported`` have arrived (the others were lost)."""

    def submit(self, client: int, round_index: int, steps: int | None = None) -> Work:
        """A job a client starts on its own (asynchronous workers): ``steps`` local steps, or the task's."""

    def cancel(self, job: int) -> None:
        """The job's upload never reached the server (dropout, deadline, relay)."""

    def cut(self, job: int, steps: int) -> None:
        """The job trains only its first ``steps`` local steps (partial work: what fits before the deadline);
        said before its update is needed."""

    def aggregate(self, context: RoundContext) -> int:
        """Combine the delivered jobs' updates into the next global model(s); return how many were applied. With
        edges (hierarchical FL), each edge combines its own devices' updates into its edge model."""

    def aggregate_cloud(self, context: CloudContext) -> int:
        """Hierarchical FL: average the models of ``context.edges`` into the global model and send it back to
        them; return how many edge models were averaged."""

    def evaluate(self) -> Evaluation:
        """Test the current global model(s)."""


#: The questions the engine asks a backend, in the protocol's order: every public method of TrainingBackend.
BACKEND_METHODS: tuple[str, ...] = tuple(
    name for name, value in vars(TrainingBackend).items() if callable(value) and not name.startswith("_")
)


class BackendWrapper:
    """A backend standing in front of another (``self.backend``): each method of :class:`TrainingBackend` is passed
    on unchanged, through :meth:`pass_on`, unless a subclass says otherwise.

    The methods are made from the protocol's own list (:data:`BACKEND_METHODS`), so a method added to the protocol
    is passed on by every wrapper at once; a wrapper writes only what it changes: one method, or :meth:`pass_on`
    to treat every question alike (recording the answers, replaying them)."""

    def __init__(self, backend: TrainingBackend):
        self.backend = backend

    def pass_on(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Ask the wrapped backend the question ``name`` (a :data:`BACKEND_METHODS` name) and return its answer."""
        return getattr(self.backend, name)(*args, **kwargs)


def _passed_on(name: str) -> Any:
    @functools.wraps(getattr(TrainingBackend, name))  # the protocol's signature and docstring
    def method(self: BackendWrapper, *args: Any, **kwargs: Any) -> Any:
        return self.pass_on(name, *args, **kwargs)

    method.__qualname__ = f"BackendWrapper.{name}"
    return method


for _name in BACKEND_METHODS:
    setattr(BackendWrapper, _name, _passed_on(_name))
