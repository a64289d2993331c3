"""A user's availability policy for a whole device group at once: the population protocol.

The per-device protocol (:mod:`netfl.policies.base`) asks one object per
device; at 10^6 devices that is 10^6 objects and a Python call per device
and change. A population policy answers for arrays of devices instead, and
runs at any scale in either form of the engine (a device held as an actor
sees its row, :mod:`netfl.policies.rows`), giving one world per seed::

    import numpy as np
    from netfl.policies import PolicyParams, PopulationPolicy

    class Flicker(PopulationPolicy):
        \"\"\"On and off for exponential stretches of mean ``on`` and ``off`` seconds.\"\"\"

        class Params(PolicyParams):
            on: float = 600.0
            off: float = 1800.0

        def start(self, devices):
            online = self.uniform(devices) < 0.25
            return online, self.next_change(devices, np.zeros(len(devices)), online)

        def next_change(self, devices, at, online):
            return at + self.exponential(devices, np.where(online, self.params.on, self.params.off))

``start(devices)`` is called once, with every device of the group (rows 0
to ``n`` - 1): each device's state at time 0 and the time of its first
change (after 0; ``math.inf``: never). ``next_change(devices, at, online)``
is called for the devices that just changed, at times ``at``, into the
states ``online``: when each changes next (after ``at``). Draw only with
:meth:`~PopulationPolicy.uniform` and :meth:`~PopulationPolicy.exponential`
(or :meth:`~PopulationPolicy.shared_rng` for draws every device shares):
draw k of device i depends on the seed, the group, i and k alone, so the
world does not depend on when or how often the engine asks, nor on which
devices are asked together. With ``time_base = "round"`` the axis is round
indices (state of round 0 at start, changes at whole rounds). A population
policy does not read battery or charger state: the engine applies
``min_level``, empty and full as for any policy.

Loaded like a per-device class (``policy: file.py:Class``); its calls are
fenced (:mod:`netfl.user_code`): an exception names the user's file and
line, and an answer that is not one real time per device, after the change
it follows, stops the run naming the class and file. The arrays it is given
are read-only views of the engine's (a write in place raises in the user's
line), a clock that creeps by less than an instant is stopped, and a Ctrl-C
ends a call that never returns (:func:`netfl.signals.interruptible`).
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from netfl import user_code
from netfl.errors import PolicyError
from netfl.policies.base import PolicyParams, shared_rng
from netfl.policies.population import PopulationModel
from netfl.policies.rows import PopulationRow, RoundRow, SessionRow
from netfl.signals import interruptible

__all__ = ["PopulationPolicy", "population_view"]


class PopulationPolicy(ABC):
    """Base of a user's population policy (see the module docstring).

    netfl sets ``params`` (the validated ``Params``), ``n`` (devices in the group), ``label_mix`` (n x labels:
    each device's label shares) and ``seed`` before anything runs; an ``__init__`` of your own takes no
    arguments. Device ``devices[k]`` is the group's row (0 to n - 1).
    """

    Params: ClassVar[type[PolicyParams]] = PolicyParams
    time_base: ClassVar[str] = "continuous"  # or "round": changes at round indices

    params: Any
    n: int
    label_mix: np.ndarray
    seed: int
    _model: PopulationModel

    @abstractmethod
    def start(self, devices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(state at 0, time of the first change) of each device: called once, with every device."""

    @abstractmethod
    def next_change(self, devices: np.ndarray, at: np.ndarray, online: np.ndarray) -> np.ndarray:
        """When each of ``devices``, which changed at ``at`` into the states ``online``, changes next."""

    def participation_probability(self) -> np.ndarray | None:
        """Each device's probability of being available, for algorithms that divide by it (per-round policies)."""
        return None

    # ------------------------------------------------------------- draws

    def uniform(self, devices: np.ndarray) -> np.ndarray:
        """The next U[0, 1) draw of each of ``devices`` (distinct rows), from its own keyed stream."""
        rows = np.asarray(devices)
        if rows.dtype.kind not in "iu" or rows.ndim != 1 or (len(rows) and not 0 <= rows.min() <= rows.max() < self.n):
            raise ValueError(f"devices must be a 1-d array of whole rows 0 to {self.n - 1}, got {_summary(rows)}")
        return self._model._uniform(rows)

    def exponential(self, devices: np.ndarray, mean: np.ndarray | float) -> np.ndarray:
        """The next exponential draw of each of ``devices``, of mean ``mean`` (a number or one per device)."""
        return -np.asarray(mean, dtype=float) * np.log1p(-self.uniform(devices))

    def shared_rng(self, name: str) -> np.random.Generator:
        """A generator every device of the scenario shares (one draw for all: a common shift, a Dirichlet)."""
        return shared_rng(self.seed, name)


class UserPopulationModel(PopulationModel):
    """A user's population policy as a population model: its answers fenced and checked."""

    user_class: ClassVar[type[PopulationPolicy]]
    path: ClassVar[Path]
    name: ClassVar[str]

    def __init__(self, params: Any, n: int, key: int, label_mix: np.ndarray, seed: int):
        super().__init__(n, key, params)
        user = self.user_class.__new__(self.user_class)
        user.params, user.n, user.label_mix, user.seed, user._model = params, n, _read_only(label_mix), seed, self
        self.user = user
        self._quick: np.ndarray | None = None  # answers less than an instant later, per device (_watch_the_clock)
        self._call("__init__", user.__init__)
        everyone = np.arange(n)
        answer = self._call("start", user.start, _read_only(everyone))
        if not (isinstance(answer, tuple) and len(answer) == 2):
            raise PolicyError(
                f"{self._where(user.start)}: {self.name}.start returned {type(answer).__name__}; expected "
                "(online, first change): two arrays, one value per device"
            )
        self.state[:] = self._states(user.start, answer[0])
        self.change[:] = self._times(user.start, "start", answer[1], everyone, np.zeros(n))
        p = self._call("participation_probability", user.participation_probability)
        self._p = None if p is None else self._probabilities(user.participation_probability, p)

    def _next_change(self, due: np.ndarray, at: np.ndarray) -> np.ndarray:
        fn = self.user.next_change
        answer = self._call("next_change", fn, _read_only(due), _read_only(at), _read_only(self.state[due]))
        times = self._times(fn, "next_change", answer, due, at)
        self._watch_the_clock(fn, due, at, times)
        return times

    @property
    def participation(self) -> np.ndarray | None:
        return self._p

    # ------------------------------------------------------- the fence

    def _call(self, what: str, fn, *args):
        with interruptible(), user_code.guarded(path=self.path, what=f"{self.name}.{what}", error=PolicyError):
            try:
                return fn(*args)
            except ValueError as exc:  # numpy's words for a write to an array netfl handed over read-only
                if "read-only" in str(exc):
                    exc.args = (f"{exc} (netfl hands its arrays over read-only: change a copy, np.array(devices))",)
                raise

    def _where(self, fn) -> str:
        return user_code.defined_at(fn, self.path)

    def _array(self, fn, what: str, answer: Any, count: int, dtype: type) -> np.ndarray:
        """``answer`` as ``count`` real numbers, or a one-line error: never a value quietly cast (a complex
        number's imaginary part dropped, a string read as a number)."""
        try:
            raw = np.asarray(answer)
        except (TypeError, ValueError):  # ragged lists
            raw = None
        kind = _KINDS.get(raw.dtype.kind) if raw is not None else "values of different lengths"
        if kind is not None or raw.shape != (count,):
            got = f"{type(answer).__name__} of {kind}" if kind is not None else f"shape {raw.shape}"
            raise PolicyError(
                f"{self._where(fn)}: {self.name}.{fn.__name__} gave {what} as {got}; expected one real number for "
                f"each of the {count} devices asked about"
            )
        return raw.astype(dtype)

    def _states(self, fn, answer: Any) -> np.ndarray:
        values = self._array(fn, "the states", answer, self.n, float)
        if not np.isin(values, (0.0, 1.0)).all():
            raise PolicyError(f"{self._where(fn)}: {self.name}.start gave states other than True and False")
        return values.astype(bool)

    def _times(self, fn, what: str, answer: Any, devices: np.ndarray, after: np.ndarray) -> np.ndarray:
        times = self._array(fn, "the times of change", answer, len(devices), float)
        bad = ~(times > after)  # NaN too
        if self.time_base == "round":
            bad |= np.isfinite(times) & (times != np.floor(times))
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            unit = "round" if self.time_base == "round" else "time"
            raise PolicyError(
                f"{self._where(fn)}: {self.name}.{what} gave device {int(devices[k])} its next change at "
                f"{float(times[k])!r}, which is not a later {unit} than its last ({after[k]:g}); return a later "
                f"{'whole round' if unit == 'round' else 'time'}, or math.inf for never"
            )
        return times

    def _watch_the_clock(self, fn, due: np.ndarray, at: np.ndarray, times: np.ndarray) -> None:
        """Stop a policy whose clock creeps (``np.nextafter(at, inf)``): each answer later, but by less than an
        instant, so that the engine would take changes forever without simulated time advancing. Counted per
        device, in a row; the counts are kept only once such an answer has come."""
        quick = times - at < INSTANT_S
        if self._quick is None:
            if not quick.any():
                return
            self._quick = np.zeros(self.n, dtype=np.uint16)
        self._quick[due[~quick]] = 0
        self._quick[due[quick]] += 1
        stuck = due[self._quick[due] >= QUICK_LIMIT]
        if stuck.size:
            k = int(np.flatnonzero(due == stuck[0])[0])
            raise PolicyError(
                f"{self._where(fn)}: {self.name}.next_change gave device {int(due[k])} {QUICK_LIMIT:,} changes in a "
                f"row, each less than 1 us after the last (the last at {float(times[k]):.17g} s): "
                "simulated time stopped advancing; return a time later by a real amount (seconds), or math.inf "
                "for never"
            )

    def _probabilities(self, fn, answer: Any) -> np.ndarray:
        p = self._array(fn, "participation probabilities", answer, self.n, float)
        if not ((p > 0) & (p <= 1)).all():
            raise PolicyError(f"{self._where(fn)}: {self.name}.participation_probability gave values outside (0, 1]")
        return p


#: What an answer's array held when it was not numbers (numpy's dtype kinds); booleans and numbers pass.
_KINDS = {
    "c": "complex numbers",
    "U": "strings",
    "S": "bytes",
    "O": "objects",
    "M": "dates",
    "m": "timedeltas",
    "V": "records",
}

#: A change less than this after the last one does not advance simulated time (netfl/sim/watchdog.py's instant).
INSTANT_S = 1e-6
#: Such changes of one device in a row that stop the run: a real policy gives a handful at one instant.
QUICK_LIMIT = 10_000


def _read_only(values: np.ndarray) -> np.ndarray:
    """A view of ``values`` that user code cannot write to: an in-place change raises in the user's own line
    instead of rewriting the engine's arrays (reversing ``devices`` would scramble the group's states). A view,
    not a copy: a group's label shares at ten million devices are most of a gigabyte."""
    view = np.asarray(values).view()
    view.setflags(write=False)
    return view


def _summary(values: np.ndarray) -> str:
    """An array in a few words for a message (at a million devices, its values would be a page)."""
    words = f"a {values.dtype} array of shape {values.shape}"
    if values.size and values.dtype.kind in "iuf":
        words += f", from {values.min().item()!r} to {values.max().item()!r}"
    return words


_views: dict[tuple[type, str, Path], type[PopulationRow]] = {}


def population_view(cls: type[PopulationPolicy], name: str, path: Path) -> type[PopulationRow]:
    """The policy class a topology's ``file.py:Name`` gives for a population policy: each device's view is a row
    of the group's model (one class per user class, so every device of a group shares it)."""
    if (cls, name, path) in _views:
        return _views[cls, name, path]
    if cls.time_base not in ("continuous", "round"):
        raise PolicyError(f"{path}: {name}.time_base must be 'continuous' or 'round', got {cls.time_base!r}")
    if inspect.isabstract(cls):
        raise PolicyError(f"{path}: {name} does not define {', '.join(sorted(cls.__abstractmethods__))}")
    if not (inspect.isclass(cls.Params) and issubclass(cls.Params, PolicyParams)):
        raise PolicyError(f"{path}: {name}.Params must subclass netfl.policies.PolicyParams")
    label = f"{path.name}:{name}"
    model = type(
        f"Population[{name}]",
        (UserPopulationModel,),
        {"user_class": cls, "path": path, "name": name, "time_base": cls.time_base, "policy": label},
    )
    row = RoundRow if cls.time_base == "round" else SessionRow
    attrs = {"Params": cls.Params, "population": model, "_path": path, "_name": name, "__doc__": cls.__doc__}
    _views[cls, name, path] = view = type(f"Rows[{name}]", (row,), attrs)
    return view
