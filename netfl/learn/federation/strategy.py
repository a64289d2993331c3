"""The strategy interface every FL algorithm implements.

In the spirit of Flower's ``Strategy``: a strategy decides how the server
combines the updates that reached it (and, as algorithms need it, what a
client optimises locally). The engine never sees a strategy: it talks to
the learner, which calls the strategy at each aggregation with flat
parameter vectors.

Conventions (as in the papers): ``delta = y - x`` is a client's end-of-
training vector minus the vector it started from; the client learning rate
(``task.local.lr``, gamma) and the server learning rate (``server_lr``,
eta) are kept apart. Algorithms written in the MIFA notes' convention use
the gradient-like ``Delta = (x - y) / gamma = -delta / gamma`` and step
``x <- x - eta * G``; each strategy's docstring says which one it uses.

What the server asks: ``select`` picks the (client, task) pairs that train
in a synchronous round among the eligible clients (by default
``round.participants`` of them uniformly at random, all on task 0). A
strategy that needs information from the clients first sets ``probe`` (a
:class:`~netfl.learn.federation.probes.Probe`): the server then asks every
eligible client for one number per task, and ``assign`` decides from the
reports. A strategy with ``multi_task = True`` trains several models
(``tasks:`` in the scenario); the learner calls ``aggregate`` once per task
per round, with that task's updates (``ClientUpdate.task``).

What a client does is the strategy's too, through hooks the learner applies
to every job without knowing the algorithm (defaults: plain cross-entropy
SGD on the model, the learner's fast path): ``correction`` (a term linear in
the parameters added to each local gradient, fixed when the job starts:
FedProx's proximal pull, SCAFFOLD's control variates; the strategy keeps any
client-side state it needs), ``extras`` (trainable scalars beside the model,
with their own loss and step size: Fed-CVaR-Avg's threshold t), and
``download_bytes`` / ``upload_bytes`` (what travels with the model, which
the simulated network times). ``admit`` may refuse an update that arrived
(FedAsync drops one staler than its bound). ``evaluate`` is the hook the
server tests the global model through (default: the task's test set).

What ``aggregate`` returns, as Flower's ``aggregate_fit`` returns its
parameters and metrics: an :class:`Aggregate`, the next global vector with
the metrics of that aggregation (numbers by name, those a reader of the
paper looks at: FedAU's estimated participation intervals, MIFA's clients
in memory, ...), which the run writes to ``algorithm.csv``. A bare tensor is
accepted as the vector with no metrics.

Every strategy class carries ``name`` (the key in ``server.algorithm``) and
``Params`` (a pydantic model: its fields, defaults and descriptions are the
algorithm's documented parameters; unknown keys are rejected). The algorithm
is registered under that name in :mod:`netfl.registry.algorithms`, which
validation and listings read without importing torch: the entry holds the
Params model (the class's must be the same), ``summary`` (one line for
``netfl algorithms``), ``paper`` (the citation) and the flags
``needs_participation`` and ``multi_task``, which the class takes from it.
"""

from __future__ import annotations

import inspect
import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import torch

from netfl.backend import AGGREGATION_PLACE, DeviceStates, Evaluation, RoundContext, sample_uniform
from netfl.learn.federation.probes import Probe
from netfl.learn.training.objective import Correction, ExtraScalars
from netfl.learn.training.reference import scheduled_lr
from netfl.registry.algorithm_params import StrategyParams
from netfl.registry.algorithms import ALGORITHMS, AlgorithmEntry, declared_entry


@dataclass(frozen=True)
class ClientInfo:
    """What the server may know about the clients when the strategy is built."""

    sizes: tuple[int, ...]  # local data set sizes n_i
    local_lr: float  # the client learning rate gamma (task.local.lr)
    # p_i of each client's availability policy where it has one (FedAU's "known statistics", MIFA's
    # unbiased variants); None where the policy has no such parameter.
    participation: tuple[float | None, ...] | None = None
    # how the client learning rate evolves over rounds (task.local.lr_schedule): "constant" or
    # "inverse_round" (gamma_t = gamma / (t + 1), the MIFA reference code's schedule)
    lr_schedule: str = "constant"
    # n_{i,s}: local data set sizes per task (tasks x clients); empty means one task with ``sizes``
    task_sizes: tuple[tuple[int, ...], ...] = ()

    @property
    def sizes_by_task(self) -> tuple[tuple[int, ...], ...]:
        return self.task_sizes or (self.sizes,)

    def client_lr(self, round_index: int) -> float:
        """gamma_t: the client learning rate of jobs started in round ``round_index``."""
        return scheduled_lr(self.local_lr, self.lr_schedule, round_index)


@dataclass(frozen=True)
class ClientUpdate:
    client: int
    num_samples: int
    delta: torch.Tensor  # y - x, flat
    start_version: int  # the global model version the client started from
    lr: float | None = None  # the client learning rate this job trained with (None: ClientInfo.local_lr)
    steps: int | None = None  # K: the local SGD steps this job ran (None: unknown)
    task: int = 0  # which model (of ``tasks:``) this update belongs to
    correction: Correction | None = None  # what the strategy's ``correction`` gave the job when it started
    start: torch.Tensor | None = None  # the global vector the job started from, as the client received it


@dataclass(frozen=True)
class Aggregate:
    """What :meth:`Strategy.aggregate` returns: the next global ``vector`` and the ``metrics`` of this aggregation
    (name -> number: an int for a count, else a float, NaN where it is undefined this time), which change nothing
    in the run and are written to the run folder's algorithm.csv, one row per call."""

    vector: torch.Tensor
    metrics: Mapping[str, float] = field(default_factory=dict)


def as_aggregate(result: object, strategy: Strategy) -> Aggregate:
    """``strategy.aggregate``'s ``result`` as an :class:`Aggregate` (a bare tensor: no metrics); a TypeError naming
    the strategy's ``aggregate`` (file and line) when it is neither, or a metric is not a named number."""
    if isinstance(result, torch.Tensor):
        return Aggregate(result)
    where = _source_of(type(strategy).aggregate)
    if not isinstance(result, Aggregate) or not isinstance(result.vector, torch.Tensor):
        what = f"Aggregate with a {type(result.vector).__name__} vector" if isinstance(result, Aggregate) else None
        raise TypeError(
            f"{where}: {type(strategy).__qualname__}.aggregate returned {what or type(result).__name__}; return the "
            "next global vector (a torch.Tensor) or Aggregate(vector, metrics)"
        )
    for name, value in result.metrics.items():
        if not isinstance(name, str) or not name or name in AGGREGATION_PLACE:
            raise TypeError(
                f"{where}: {type(strategy).__qualname__}.aggregate's metric {name!r}: a metric's name must be a "
                f"non-empty string other than {', '.join(AGGREGATION_PLACE)}"
            )
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(
                f"{where}: {type(strategy).__qualname__}.aggregate's metric {name!r} is {type(value).__name__} "
                f"{value!r}; a metric must be a number (an int or a float)"
            )
    return result


def _source_of(function: Callable) -> str:
    """``file:line`` of ``function``, or its qualified name where Python cannot say."""
    try:
        return f"{inspect.getsourcefile(function)}:{inspect.getsourcelines(function)[1]}"
    except (OSError, TypeError):
        return getattr(function, "__qualname__", repr(function))


class Strategy(ABC):
    """An FL algorithm: what the server asks, what a client does, how updates are combined (the module's text).

    Subclass it in a file of your own and name it in a topology (``server.algorithm: {path: my_fl.py:TrimmedMean,
    trim: 0.1}``) or pass the class to :func:`netfl.run` (``algorithm=TrimmedMean``). The class declares what netfl
    checks before a run starts, as class attributes (all optional but :meth:`aggregate`):

    ``Params``
        a :class:`StrategyParams` subclass (pydantic): the keys of ``server.algorithm`` beside ``path``, with
        defaults, bounds and descriptions; unknown keys are refused. The instance gets them as ``self.params``.
    ``name``, ``summary``, ``paper``
        how listings and messages name it (default: the class's name, its docstring's first line, nothing).
    ``needs_participation``
        True if the rule divides by each client's participation probability p_i (``self.probabilities``); the
        scenario must give every device a policy with a ``p``.
    ``client_state``
        model-sized vectors the strategy keeps per client that ever trained (SCAFFOLD's c_i: 1), counted in the
        memory budget checked before the run.
    ``mode``
        ``"sync"`` or ``"async"`` if the strategy runs in one server mode only (None: both).
    ``multi_task``
        True if it trains several models at once (one per entry of ``tasks:``).
    ``own_server_step``
        why a server optimiser (``server.optimizer``) cannot take its step, if it cannot (empty: the step is
        ``x + Delta`` and an optimiser may take it instead).
    ``edge_rule``
        True if edge servers may run the rule on their own devices' updates (hierarchical FL): it keeps no state
        across rounds.

    A class whose ``name`` is a built-in algorithm's (``netfl algorithms``) implements that algorithm: it takes
    the built-in's declarations, and its ``Params`` must be the built-in's.
    """

    name: ClassVar[str] = ""
    Params: ClassVar[type[StrategyParams]] = StrategyParams
    summary: ClassVar[str] = ""  # one line, for listings
    paper: ClassVar[str] = ""  # where the rule comes from
    needs_participation: ClassVar[bool] = False
    multi_task: ClassVar[bool] = False
    client_state: ClassVar[int] = 0
    own_server_step: ClassVar[str] = ""
    edge_rule: ClassVar[bool] = False
    mode: ClassVar[str | None] = None
    #: What validation and the run read of the class (set by __init_subclass__): the built-in's registry entry, or
    #: one made from the declarations above.
    entry: ClassVar[AlgorithmEntry]
    # What the server asks every eligible client before assigning work (set in __init__); None: nothing
    probe: Probe | None = None
    # Trainable scalars a client optimises beside the model (set in __init__). The learner appends them to
    # each flat vector (model first, extras last), hands strategies the extended vectors and evaluates the
    # model part only. None: the model alone.
    extras: ExtraScalars | None = None

    def __init_subclass__(cls, **kwargs):
        """A class naming a built-in takes its registry entry; any other, an entry from its own declarations."""
        super().__init_subclass__(**kwargs)
        builtin = ALGORITHMS.get(cls.__dict__.get("name", ""))
        if builtin is not None:
            if cls.Params is not builtin.params:
                raise TypeError(
                    f"{cls.__qualname__}.Params must be the built-in {builtin.name}'s {builtin.params.__qualname__}, "
                    f"the parameters validation checks (or give the class another name)"
                )
            cls.entry = builtin
            cls.summary, cls.paper = builtin.summary, builtin.paper
            cls.needs_participation, cls.multi_task = builtin.needs_participation, builtin.multi_task
            cls.client_state, cls.own_server_step = builtin.client_state, builtin.own_server_step
            cls.edge_rule, cls.mode = builtin.edge_rule, builtin.mode[0] if builtin.mode else None
            return
        cls.entry = declared_entry(cls)

    def __init__(self, params: StrategyParams, clients: ClientInfo):
        self.params = params
        self.clients = clients
        if self.needs_participation:
            self.probabilities = participation_probabilities(self.entry.name, clients)

    # ---- what the server asks

    def select(
        self,
        round_index: int,
        available: Sequence[int],
        participants: int | None,
        rng: np.random.Generator,
        devices: DeviceStates | None = None,
    ) -> list[tuple[int, int]]:
        """The (client, task) pairs that train in synchronous round ``round_index``: by default ``participants``
        (``server.round.participants``; None: all) of the ``available`` clients (those eligible now, ascending)
        uniformly without replacement, each on task 0. ``rng``: the run's selection stream (draw from it, not from
        a generator of your own, so that the seed decides); ``devices``: what the server observes of the
        ``available`` devices (:class:`~netfl.backend.DeviceStates`: battery, charging, uplink rate, jobs so far,
        when each was last asked), for rules that look at them; None outside a simulation. Every client returned
        must be one of ``available``, each pair once."""
        return [(client, 0) for client in sample_uniform(available, participants, rng)]

    def assign(
        self, round_index: int, reports: dict[int, np.ndarray], participants: int | None, rng: np.random.Generator
    ) -> list[tuple[int, int]]:
        """After a probe: the (client, task) pairs that train, from each reporting client's values (one per task)."""
        raise TypeError(f"{self.entry.name} sets a probe ({type(self.probe).__name__}) but does not define assign()")

    @property
    def client_sizes(self) -> tuple[int, ...]:
        return self.clients.sizes

    @property
    def num_clients(self) -> int:
        return len(self.clients.sizes)

    def update_lr(self, update: ClientUpdate) -> float:
        """gamma of one job: the lr it trained with, else the constant client lr."""
        return self.clients.local_lr if update.lr is None else update.lr

    def update_steps(self, update: ClientUpdate) -> int:
        """K of one job: the local steps it ran (a ValueError if the learner did not say)."""
        if update.steps is None or update.steps < 1:
            raise ValueError(
                f"{self.entry.name} needs each update's number of local steps K; client "
                f"{update.client}'s update has steps={update.steps!r}"
            )
        return int(update.steps)

    # ---- what a client is asked to do

    def correction(self, client: int, task: int) -> Correction | None:
        """The term a job of ``client`` on ``task`` adds to its local gradients; None (the default): none.

        Called when the job starts, so it holds what the client receives with the model then (a stale
        job keeps its own); the job's ClientUpdate carries it back to ``aggregate``.
        """
        return None

    def download_bytes(self, model_bytes: float) -> float:
        """What a client downloads to train: the model (``model_bytes``, extras included), plus what the
        strategy sends with it."""
        return model_bytes

    def upload_bytes(self, model_bytes: float) -> float:
        """What a client uploads after training: its update (``model_bytes``), plus what the strategy
        sends with it."""
        return model_bytes

    def admit(self, update: ClientUpdate, context: RoundContext) -> bool:
        """Whether an update that arrived is applied (True by default); one that is not is counted as received
        and not applied, and reaches neither ``aggregate`` nor the model (FedAsync's staleness bound)."""
        return True

    @abstractmethod
    def aggregate(
        self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext
    ) -> Aggregate | torch.Tensor:
        """The next global vector from the current one and the updates that arrived (possibly none), with the
        metrics of this aggregation (:class:`Aggregate`), or the vector alone (no metrics)."""

    # ---- checkpoints

    def state(self) -> dict:
        """What a checkpoint keeps of the strategy: everything a run changes in it (server vectors, per-client
        memories, counters), as a dict of plain containers, numbers, numpy arrays and tensors that pickle.

        By default every attribute the instance holds but ``params`` and ``clients`` (which the resumed run builds
        again from the scenario); override it with :meth:`restore` to keep less or to convert."""
        return {k: v for k, v in vars(self).items() if k not in _BUILT_FROM_THE_SCENARIO}

    def restore(self, state: dict) -> None:
        """Continue from :meth:`state`, on a strategy built afresh from the same scenario (tensors are already on
        the run's device). By default the attributes are set back as they were."""
        vars(self).update(state)

    # ---- what the server tests

    def evaluate(self, task: int, x: torch.Tensor, test: Callable[[torch.Tensor], Evaluation]) -> Evaluation:
        """Task ``task``'s test result when the global vector is ``x``, as Flower's ``Strategy.evaluate``: by
        default ``test(x)`` (the task's test set on the model part of ``x``); a strategy may test another vector
        of the same size (an average of its iterates) or return a result of its own."""
        return test(x)


#: What the strategy is built from (the scenario): not part of its checkpointed state.
_BUILT_FROM_THE_SCENARIO = ("params", "clients")


def weighted_sum(updates: Sequence[ClientUpdate], weights: Sequence[float], like: torch.Tensor) -> torch.Tensor:
    """``sum_k weights[k] * delta_k``, shaped and typed like ``like``.

    Accumulated one update at a time: stacking the updates first would allocate and copy a
    (``len(updates)`` x model size) matrix every round.
    """
    total = torch.zeros_like(like)
    for update, weight in zip(updates, weights):
        delta, weight = update.delta.to(dtype=like.dtype, device=like.device).view_as(like), float(weight)
        if math.isfinite(weight) and abs(weight) > torch.finfo(like.dtype).max:  # add_ refuses such an alpha:
            total.add_(delta * weight)  # the product is infinite, as the arithmetic makes it (the run diverges)
        else:
            total.add_(delta, alpha=weight)
    return total


def data_weights(updates: Sequence[ClientUpdate], weighting: str) -> list[float]:
    """p_k of each update: its client's share of the updates' samples (``samples``) or 1 / ``len(updates)``
    (``uniform``)."""
    sizes = [u.num_samples if weighting == "samples" else 1 for u in updates]
    total = sum(sizes)
    return [n / total for n in sizes]


def participation_probabilities(algorithm: str, clients: ClientInfo) -> tuple[float, ...]:
    """Every client's p_i, or a ValueError that says which clients lack one and what would do."""
    probs = clients.participation
    if probs is None:
        probs = (None,) * len(clients.sizes)
    missing = [i for i, p in enumerate(probs) if p is None]
    if missing:
        shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
        raise ValueError(
            f"algorithm {algorithm!r} divides each update by its client's participation probability p, "
            f"but {len(missing)} of {len(probs)} clients have an availability policy without one "
            f"(clients {shown}); give every device group a per-round policy with a `p` "
            f"(bernoulli, markov or cyclic), or pick an algorithm that needs no p (fedau, mifa, fedavg)"
        )
    bad = [i for i, p in enumerate(probs) if not 0 < p <= 1]
    if bad:
        raise ValueError(
            f"algorithm {algorithm!r} needs participation probabilities in (0, 1]; "
            f"client {bad[0]} has p = {probs[bad[0]]}"
        )
    return tuple(float(p) for p in probs)


def staleness_metrics(updates: Sequence[ClientUpdate], context: RoundContext) -> dict[str, float]:
    """``staleness_mean`` and ``staleness_max`` of the updates: the server's version (``context.round_index``) minus
    the one each started from (NaN with no update)."""
    stale = [context.round_index - u.start_version for u in updates]
    if not stale:
        return {"staleness_mean": math.nan, "staleness_max": math.nan}
    return {"staleness_mean": sum(stale) / len(stale), "staleness_max": max(stale)}


def norm(vector: torch.Tensor | None) -> float:
    """The Euclidean norm of ``vector`` as a float (0 for None, a vector not yet made: zero)."""
    return 0.0 if vector is None else float(torch.linalg.vector_norm(vector))
