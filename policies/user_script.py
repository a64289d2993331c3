"""Policies written by users: ``policy: path/to/file.py:ClassName``.

A per-device class (:class:`~netfl.policies.base.RoundPolicy`,
:class:`~netfl.policies.base.SessionPolicy`) is wrapped here; a population
policy (:class:`~netfl.policies.population_policy.PopulationPolicy`) becomes
a row view of its own population model there, fenced the same way.

The file is imported as a module of its own (relative paths start at the
topology file's folder). Whatever goes wrong in the user's code -- a syntax
error, an exception at import, an exception or a nonsensical answer while
the simulation runs -- becomes a :class:`~netfl.errors.PolicyError` naming
the file and line, so the run stops with a message instead of a traceback.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import numpy as np

from netfl import user_code
from netfl.errors import PolicyError
from netfl.policies.base import AvailabilityPolicy, RoundPolicy, SessionPolicy
from netfl.policies.population_policy import PopulationPolicy, population_view
from netfl.signals import interruptible
from netfl.user_code import is_user_reference

__all__ = ["is_user_reference", "load_user_policy"]


def load_user_policy(reference: str, base_dir: Path) -> type[AvailabilityPolicy]:
    ref = user_code.parse_reference(reference, base_dir)
    if not user_code.python_file_present(ref.path):
        raise PolicyError(f"policy {reference!r}: file not found: {ref.path}")
    cls = user_code.load_attribute(ref, what="policy", error=PolicyError)
    if inspect.isclass(cls) and issubclass(cls, PopulationPolicy):
        return population_view(cls, ref.name, ref.path)
    if not (inspect.isclass(cls) and issubclass(cls, (RoundPolicy, SessionPolicy))):
        raise PolicyError(
            f"{ref.path}: {ref.name} must subclass netfl.policies.RoundPolicy or SessionPolicy (one object per "
            "device), or PopulationPolicy (a whole group at once)"
        )
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise PolicyError(f"{ref.path}: {ref.name} does not define {missing}")
    return _wrap_class(cls, ref.name, ref.path)


def _wrap_class(cls: type[AvailabilityPolicy], class_name: str, path: Path) -> type[AvailabilityPolicy]:
    """A factory-compatible subclass whose calls into user code are guarded."""
    guard = _GuardedRound if issubclass(cls, RoundPolicy) else _GuardedSession

    class Guarded(guard):  # type: ignore[misc, valid-type]
        Params = cls.Params

        def __init__(self, params, device, rng):
            self._path, self._name = path, class_name
            self.params, self.device, self.rng = params, device, rng
            self._inner = self._call("__init__", cls, params, device, rng)

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded[{class_name}]"
    return Guarded


class _Guard:
    _path: Path
    _name: str

    def _call(self, what: str, fn, *args):
        with interruptible():  # Ctrl-C ends a call that never returns, checkpoints kept or not
            return user_code.call(fn, *args, path=self._path, what=f"{self._name}.{what}", error=PolicyError)

    def _defined_at(self, fn) -> str:
        return user_code.defined_at(fn, self._path)

    def participation_probability(self) -> float | None:
        fn = self._inner.participation_probability
        p = self._call("participation_probability", fn)
        if p is None:
            return None
        if isinstance(p, bool) or not isinstance(p, (int, float, np.floating)) or not 0 < float(p) <= 1:
            raise PolicyError(
                f"{self._defined_at(fn)}: {self._name} gives participation probability {p!r}; "
                "expected a number in (0, 1], or None"
            )
        return float(p)

    def battery_marks(self) -> tuple[float, ...]:
        fn = self._inner.battery_marks
        marks = self._call("battery_marks", fn)
        try:
            marks = tuple(float(m) for m in marks if not isinstance(m, bool))
        except (TypeError, ValueError):
            marks = None
        if marks is None or not all(0 <= m <= 1 for m in marks):
            raise PolicyError(
                f"{self._defined_at(fn)}: {self._name}.battery_marks returned an unusable value; "
                "expected battery fractions between 0 and 1, e.g. (0.5,)"
            )
        return marks

    def _yes_no(self, fn, what: str, answer) -> bool:
        if not isinstance(answer, (bool, int, np.bool_)):
            raise PolicyError(
                f"{self._defined_at(fn)}: {self._name}.{what} returned {answer!r}; expected True or False"
            )
        return bool(answer)


class _GuardedRound(_Guard, RoundPolicy):
    def participates(self, round_index: int) -> bool:
        fn = self._inner.participates
        return self._yes_no(fn, "participates", self._call("participates", fn, round_index))


class _GuardedSession(_Guard, SessionPolicy):
    def online(self, now: float, state) -> bool:
        fn = self._inner.online
        return self._yes_no(fn, "online", self._call("online", fn, now, state))

    def next_wakeup(self, now: float) -> float:
        fn = self._inner.next_wakeup
        at = self._call("next_wakeup", fn, now)
        try:
            at = float(at)
        except (TypeError, ValueError):
            raise PolicyError(
                f"{self._defined_at(fn)}: {self._name}.next_wakeup returned {at!r}; expected a time in seconds"
            ) from None
        if math.isnan(at) or at <= now:
            raise PolicyError(
                f"{self._defined_at(fn)}: {self._name}.next_wakeup({now:g}) returned {at:g}, "
                "which is not after now (math.inf: never)"
            )
        return at
