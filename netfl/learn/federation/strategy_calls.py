"""Every call the learner makes of its strategy, fenced where the strategy is a user's, and every answer checked.

A strategy of the user's own (from a file named by ``server.algorithm.path``, or a class given in Python) is code
that netfl runs: whatever its hooks raise becomes a :class:`~netfl.errors.StrategyError` naming the user's file and
line and the hook, and an answer of the wrong kind (a selection of devices that are not eligible, a vector of
another shape, dtype or device than the model's, a non-finite vector made from finite updates, a byte count that is
not a number) is refused with one line naming the method and what was expected, so that a run stops with a message
and its partial results instead of a traceback or a silently wrong model. A built-in's answers are checked alike
(its errors are netfl's own and keep their tracebacks).

Observers (``on_aggregate``): callables of the user's that see each aggregation as it happens -- its inputs (the
current vector, the updates with their clients and staleness) and its result -- without patching any class
(:class:`AggregationRecord`).
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from netfl.backend import DeviceStates, Evaluation, RoundContext
from netfl.errors import StrategyError
from netfl.learn.federation.strategy import Aggregate, ClientInfo, ClientUpdate, Strategy, as_aggregate
from netfl.learn.training.objective import Correction, ExtraScalars
from netfl.user_code import defined_at, guarded

#: The folder of netfl's own code: a strategy class defined below it is a built-in (or netfl's test double).
_NETFL = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class AggregationRecord:
    """One aggregation as an observer sees it: the ``context`` (round, time, who was eligible, asked, delivered),
    the ``task`` and ``edge`` (None: the server's own model), the vector ``x`` before, the ``updates`` the
    strategy combined (each with its client, start version -- ``context.round_index - start_version`` is its
    staleness -- and delta) and what it returned (``result``: the next vector and the metrics)."""

    context: RoundContext
    task: int
    edge: int | None
    x: torch.Tensor
    updates: tuple[ClientUpdate, ...]
    result: Aggregate

    @property
    def staleness(self) -> tuple[int, ...]:
        """Each update's staleness: the server's version minus the one it started from."""
        return tuple(self.context.round_index - u.start_version for u in self.updates)


def users_file(cls: type) -> Path | None:
    """The file of a user's strategy class (None for netfl's own classes); ``<python>`` where a class given in
    Python has no file (a notebook)."""
    try:
        file = inspect.getsourcefile(cls)
    except TypeError:
        file = None
    if file is None:
        return Path("<python>")
    path = Path(file).resolve()
    return None if path.is_relative_to(_NETFL) else path


def build_strategy(cls: type[Strategy], params: dict[str, Any], clients: ClientInfo) -> Strategy:
    """An instance of the strategy class ``cls`` with ``params`` validated against its ``Params`` (a ValueError for
    a problem of the scenario, such as no participation probabilities); a user's class is built behind the fence."""
    checked = cls.Params.model_validate(dict(params))
    path = users_file(cls)
    if path is None:
        return cls(checked, clients)
    with guarded(path=path, what=f"{cls.__qualname__}(params, clients)", error=StrategyError):
        return cls(checked, clients)


class _Members:
    """Whether a client is among ``available`` (the round's eligible clients, ascending: a million and more at scale),
    by binary search: a Python set of them cost more than the rest of the round at ten million devices."""

    def __init__(self, available: Sequence[int]):
        values = np.asarray(available, dtype=np.int64).ravel()
        if values.size > 1 and not (values[1:] > values[:-1]).all():
            values = np.unique(values)
        self.values = values

    def __contains__(self, client: object) -> bool:
        k = int(np.searchsorted(self.values, client))
        return k < self.values.size and int(self.values[k]) == client


class StrategyCalls:
    """The strategy's hooks as the learner calls them (``strategy``: the instance; ``observers``: callables taking an
    :class:`AggregationRecord`, called after each aggregation)."""

    def __init__(self, strategy: Strategy, observers: Sequence[Callable[[AggregationRecord], Any]] = ()):
        self.strategy = strategy
        self.observers = tuple(observers)
        self.path = users_file(type(strategy))
        extras = strategy.extras
        if extras is not None and users_file(type(extras)) is not None:  # called in every minibatch: fenced there
            strategy.extras = FencedExtras(extras)

    @property
    def users(self) -> bool:
        return self.path is not None

    # ---------------------------------------------------------------------------------------------- calls

    def _call(self, hook: str, *args: Any) -> Any:
        method = getattr(self.strategy, hook)
        if self.path is None:
            return method(*args)
        with guarded(path=self.path, what=f"{type(self.strategy).__qualname__}.{hook}", error=StrategyError):
            return method(*args)

    def _refuse(self, hook: str, problem: str) -> StrategyError:
        method = getattr(type(self.strategy), hook)
        where = defined_at(method, self.path) if self.path is not None else _source(method)
        return StrategyError(f"{where}: {type(self.strategy).__qualname__}.{hook} {problem}")

    def select(
        self,
        round_index: int,
        available: Sequence[int],
        participants: int | None,
        rng: np.random.Generator,
        devices: DeviceStates | None,
        tasks: int,
    ) -> list[tuple[int, int]]:
        """The (client, task) pairs that train, each client eligible, each task one of the ``tasks`` models."""
        pairs = self._call("select", round_index, available, participants, rng, devices)
        return self._pairs("select", pairs, _Members(available), "eligible this round", tasks)

    def assign(
        self, round_index: int, reports: dict[int, np.ndarray], participants: int | None, rng: np.random.Generator,
        tasks: int,
    ) -> list[tuple[int, int]]:  # fmt: skip
        """After a probe: the pairs that train, each client one that reported."""
        pairs = self._call("assign", round_index, reports, participants, rng)
        return self._pairs("assign", pairs, set(reports), "among the clients that reported", tasks)

    def _pairs(
        self, hook: str, pairs: Any, allowed: Container[int], allowed_as: str, tasks: int
    ) -> list[tuple[int, int]]:
        expected = "a list of (client, task) pairs"
        try:
            items = list(pairs)
        except TypeError:
            raise self._refuse(hook, f"returned {type(pairs).__name__}; expected {expected}") from None
        out, seen = [], set()
        for item in items:
            if not (isinstance(item, (tuple, list)) and len(item) == 2 and all(_is_int(v) for v in item)):
                raise self._refuse(hook, f"returned {item!r} among its pairs; expected {expected} of ints")
            client, task = int(item[0]), int(item[1])
            if client not in allowed:
                raise self._refuse(hook, f"returned client {client}, which is not {allowed_as}")
            if not 0 <= task < tasks:
                raise self._refuse(hook, f"returned task {task} for client {client}; the tasks are 0..{tasks - 1}")
            if (client, task) in seen:
                raise self._refuse(hook, f"returned client {client} on task {task} twice")
            seen.add((client, task))
            out.append((client, task))
        return out

    def correction(self, client: int, task: int) -> Correction | None:
        value = self._call("correction", client, task)
        if value is not None and not isinstance(value, Correction):
            raise self._refuse("correction", f"returned {type(value).__name__}; expected a Correction or None")
        return value

    def download_bytes(self, model_bytes: float) -> float:
        return self._bytes("download_bytes", model_bytes)

    def upload_bytes(self, model_bytes: float) -> float:
        return self._bytes("upload_bytes", model_bytes)

    def _bytes(self, hook: str, model_bytes: float) -> float:
        value = self._call(hook, model_bytes)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
            raise self._refuse(hook, f"returned {value!r}; expected a finite number of bytes >= 0")
        return float(value)

    def admit(self, update: ClientUpdate, context: RoundContext) -> bool:
        value = self._call("admit", update, context)
        if not isinstance(value, (bool, np.bool_)):
            raise self._refuse("admit", f"returned {type(value).__name__} {value!r}; expected True or False")
        return bool(value)

    def aggregate(
        self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext, task: int, edge: int | None
    ) -> Aggregate:
        """The next vector and the metrics, checked; each observer sees the aggregation."""
        raw = self._call("aggregate", x, updates, context)
        try:
            result = as_aggregate(raw, self.strategy)
        except TypeError as exc:
            if self.path is None:
                raise
            raise StrategyError(str(exc)) from None
        vector = result.vector
        for what, theirs, ours in (
            ("shape", tuple(vector.shape), tuple(x.shape)),
            ("dtype", vector.dtype, x.dtype),
            ("device", vector.device, x.device),
        ):
            if theirs != ours:
                raise self._refuse("aggregate", f"returned a vector of {what} {theirs}; expected {ours}, as x's")
        if self.users and not bool(torch.isfinite(vector).all()) and _finite(x, updates):
            raise self._refuse(
                "aggregate", "returned a vector that is not finite (NaN or inf) from a finite x and finite updates"
            )
        for observer in self.observers:
            record = AggregationRecord(context, task, edge, x, tuple(updates), result)
            with guarded(path=_file_of(observer), what="an on_aggregate observer", error=StrategyError):
                observer(record)
        return result

    def state(self) -> dict:
        """The strategy's own state for a checkpoint (:meth:`Strategy.state`)."""
        value = self._call("state")
        if not isinstance(value, dict):
            raise self._refuse("state", f"returned {type(value).__name__}; expected a dict")
        return value

    def restore(self, state: dict) -> None:
        """Continue the strategy from a checkpoint's :meth:`state`."""
        self._call("restore", state)

    def evaluate(self, task: int, x: torch.Tensor, test: Callable[[torch.Tensor], Evaluation]) -> Evaluation:
        value = self._call("evaluate", task, x, test)
        if not isinstance(value, Evaluation):
            raise self._refuse("evaluate", f"returned {type(value).__name__}; expected an Evaluation")
        return value

    # ------------------------------------------------------------------------------------- the probe's calls

    def probe_report(self, task: Any, client: int, update: ClientUpdate | None) -> float:
        """The number the strategy's probe reports for ``client`` on one task (NaN and inf pass: the divergence
        watch deals with them as with a non-finite update)."""
        value = self._probe_call("report", task, client, update)
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
            raise self._refuse_probe("report", f"returned {type(value).__name__} {value!r}; expected a number")
        return float(value)

    def probe_flops(self, task: Any, client: int) -> float:
        """The probe's compute on ``client`` for one task, beyond any training job."""
        value = self._probe_call("flops", task, client)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
            raise self._refuse_probe("flops", f"returned {value!r}; expected a finite number of FLOPs >= 0")
        return float(value)

    def _probe_call(self, hook: str, *args: Any) -> Any:
        probe = self.strategy.probe
        path = users_file(type(probe))
        if path is None:
            return getattr(probe, hook)(*args)
        with guarded(path=path, what=f"{type(probe).__qualname__}.{hook}", error=StrategyError):
            return getattr(probe, hook)(*args)

    def _refuse_probe(self, hook: str, problem: str) -> StrategyError:
        probe = self.strategy.probe
        path = users_file(type(probe))
        method = getattr(type(probe), hook)
        where = defined_at(method, path) if path is not None else _source(method)
        return StrategyError(f"{where}: {type(probe).__qualname__}.{hook} {problem}")


class FencedExtras(ExtraScalars):
    """A user's :class:`~netfl.algorithms.ExtraScalars` behind the fence: ``objective`` and ``lr``, called in every
    minibatch of a job, name the user's file and line when they raise, and their answers are checked (a scalar
    tensor; a finite step size >= 0)."""

    def __init__(self, extras: ExtraScalars):
        self.inner, self.initial = extras, extras.initial
        self.path = users_file(type(extras)) or Path("<python>")

    def __len__(self) -> int:
        return len(self.inner)

    def __getattr__(self, name: str) -> Any:  # the user's own attributes, as their strategy reads them
        return getattr(self.__dict__["inner"], name)

    def lr(self, model_lr: float) -> float:
        with guarded(path=self.path, what=f"{type(self.inner).__qualname__}.lr", error=StrategyError):
            value = self.inner.lr(model_lr)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
            raise self._refuse("lr", f"returned {value!r}; expected a finite step size >= 0")
        return value

    def objective(self, loss: torch.Tensor, extra: torch.Tensor) -> torch.Tensor:
        with guarded(path=self.path, what=f"{type(self.inner).__qualname__}.objective", error=StrategyError):
            value = self.inner.objective(loss, extra)
        if not (isinstance(value, torch.Tensor) and value.numel() == 1):
            shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise self._refuse("objective", f"returned {shape}; expected a scalar tensor (the minibatch's objective)")
        return value

    def _refuse(self, hook: str, problem: str) -> StrategyError:
        where = defined_at(getattr(type(self.inner), hook), self.path)
        return StrategyError(f"{where}: {type(self.inner).__qualname__}.{hook} {problem}")


def _is_int(value: Any) -> bool:
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_))


def _finite(x: torch.Tensor, updates: Sequence[ClientUpdate]) -> bool:
    return bool(torch.isfinite(x).all()) and all(bool(torch.isfinite(u.delta).all()) for u in updates)


def _source(function: Callable) -> str:
    try:
        return f"{inspect.getsourcefile(function)}:{inspect.getsourcelines(function)[1]}"
    except (OSError, TypeError):
        return getattr(function, "__qualname__", repr(function))


def _file_of(function: Callable) -> Path:
    try:
        return Path(inspect.getsourcefile(function) or "<python>")
    except TypeError:
        return Path("<python>")
