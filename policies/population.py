"""Built-in availability policies for a whole device group at once: the one implementation of each.

A population model keeps a group's availability as arrays -- the state of
each device and the time (or round) of its next change -- and advances them
only when asked, in one vectorised step over the devices whose change is
due: a device nobody asks about costs nothing per change. The array form of
the engine advances the models itself (netfl/sim/idle_rows.py); in the actor
form a device's policy is a view of its row (:mod:`netfl.policies.rows`), so
both forms draw one world from one seed.

Every draw comes from :mod:`netfl.keyed_random`: draw k of device i depends
on (seed, group, role, i, k) alone, so the realisation does not depend on
when or how often the engine asks. The tests check each model against its
closed forms (stationary behaviour, session lengths, FedAU's patterns).

The classes hold each model's parameters and state; the continuous-time
models' next changes are drawn by compiled kernels
(:mod:`netfl.kernels.models`, loaded on first use), which the engine's
per-change step calls too: :meth:`PopulationModel.kernel_model` hands a
model over, every parameter as one value per device.

Every model is an alternating on/off process on an axis that is simulated
seconds (continuous-time policies) or round indices (per-round policies):

* ``always`` -- on for ever;
* ``sessions`` -- on/off durations from their distributions (exponential
  durations make it a two-state continuous-time Markov chain);
* ``diurnal`` -- the hour-by-hour Markov chain of
  :class:`~netfl.policies.sessions.Diurnal`;
* ``daily`` -- the daily window with per-day jitter;
* ``bernoulli`` / ``markov`` -- per-round two-state Markov chains (Bernoulli
  is the chain whose next state ignores the current one); runs of rounds are
  drawn whole, geometric, so a long run costs one draw;
* ``cyclic`` -- deterministic cycles with a random phase.

A model's parameters that may differ from device to device (time zones, the
factors of light and heavy users: :mod:`netfl.policies.per_device`) are
float64 arrays of n, read-only broadcasts where the group shares one value,
and ``_next_change`` reads them at the devices due.

Traces (:mod:`~netfl.policies.traces`), ``eligible`` and a user's
population policy (:mod:`~netfl.policies.population_policy`) have population
models of their own, in their modules; :mod:`~netfl.policies.catalog` says
which policies have one and builds it from a topology's spec.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from netfl import keyed_random
from netfl.kernels import codes
from netfl.policies.base import shared_rng
from netfl.policies.participation import resolve_probabilities
from netfl.policies.per_device import constant_of, device_values, reciprocal

__all__ = ["PopulationModel", "POPULATION_MODELS", "build_population_model", "HOUR", "DAY"]

HOUR = 3600.0
DAY = 24 * HOUR

#: Sees each batch of flips: (devices, since, at, was_on) -- the interval [since, at) each device just left.
FlipHook = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]


def _same(kept: Any, now: Any) -> bool:
    """An input of :meth:`PopulationModel._as_kernel` unchanged: the same array, or an equal number or tuple."""
    if kept is now:
        return True
    if isinstance(kept, np.ndarray) or isinstance(now, np.ndarray):
        return False
    return type(kept) is type(now) and kept == now


class PopulationModel(ABC):
    """n devices alternating on/off along one axis (seconds, or rounds for per-round policies).

    ``state[j]`` holds between ``since[j]`` and ``change[j]``, the point of the next flip (inf:
    never). Subclasses set the start and draw the next change; ``advance`` flips every device whose
    change is due, as often as needed, in vectorised steps.
    """

    time_base: ClassVar[str] = "continuous"
    policy = ""  # the built-in's name, set by build_population_model (events name it as a cause)
    #: Built with the keywords ``base_dir`` (the topology's folder, for files it reads) and ``first`` (the scenario
    #: index of its row 0, for traces replaying device n's row) besides the parameters every model takes.
    placed: ClassVar[bool] = False

    def __init__(self, n: int, key: int, params: Any = None):
        self.n = n
        self.key = key
        self.params = params  # the policy's validated parameters (the per-device views read them)
        self.state = np.zeros(n, dtype=bool)
        self.change = np.full(n, math.inf)
        self.since = np.zeros(n)
        self.draws = np.zeros(n, dtype=np.uint32)  # draw numbers used so far, per device (2**32: ages of flips)
        self._earliest = -math.inf

    # ---------------------------------------------------------------- queries

    def advance(self, now: float, on_flip: FlipHook | None = None) -> None:
        """Bring every device to ``now``. ``on_flip(devices, at, was_on)`` sees each batch of flips."""
        if now < self._earliest:
            return
        while True:
            due = np.flatnonzero(self.change <= now)
            if not due.size:
                break
            self.flip(due, on_flip)
        self._earliest = float(self.change.min()) if self.n else math.inf

    def advance_one(self, j: int, now: float, on_flip: FlipHook | None = None) -> bool:
        """Bring device ``j`` alone to ``now``; its state."""
        while self.change[j] <= now:
            self.flip(np.array([j]), on_flip)
        self._earliest = min(self._earliest, float(self.change[j]))
        return bool(self.state[j])

    def advance_rows(self, rows: np.ndarray, until: np.ndarray, on_flip: FlipHook | None = None) -> None:
        """Bring each of ``rows`` (distinct) to its own time ``until[k]``, as :meth:`advance_one` does one."""
        while True:
            due = self.change[rows] <= until
            if not due.any():
                break
            self.flip(rows[due], on_flip)
        if len(rows):
            self._earliest = min(self._earliest, float(self.change[rows].min()))

    def flip(self, due: np.ndarray, on_flip: FlipHook | None = None) -> None:
        """Flip the devices ``due`` (whose change has come) at their ``change``, and draw their next."""
        at = self.change[due]
        if on_flip is not None:
            on_flip(due, self.since[due], at, self.state[due])
        self.state[due] = ~self.state[due]
        self.since[due] = at
        self.change[due] = self._next_change(due, at)

    @abstractmethod
    def _next_change(self, due: np.ndarray, at: np.ndarray) -> np.ndarray:
        """When each device in ``due``, having just entered ``state[due]`` at ``at``, next flips."""

    # ------------------------------------------------------- compiled draws

    def kernel_model(self) -> tuple:
        """This model as the compiled kernels take it (netfl/kernels/models.py): :data:`~netfl.kernels.codes.EXTERNAL`
        (its changes drawn here, in Python) unless a subclass draws them compiled."""
        return self._as_kernel(codes.EXTERNAL)

    def _as_kernel(
        self,
        kind: int,
        params: tuple = (),
        dist: tuple[int, int] = (0, 0),
        profile: np.ndarray | None = None,
        day: np.ndarray | None = None,
    ) -> tuple:
        """The kernels' tuple: ``params`` (up to six) and ``profile`` (per device and hour) with one value per
        device, a value all share given once (broadcast, no memory per device). Made once and kept while every
        input is the same object (or equal number): the engine asks for it at every call of its compiled step,
        tens of thousands of times a run, and each broadcast costs microseconds."""
        inputs = (kind, dist, profile, day, self.key, self.state, self.change, self.since, self.draws, *params)
        kept = self.__dict__.get("_kernel_tuple")
        if kept is not None and len(kept[0]) == len(inputs) and all(map(_same, kept[0], inputs)):
            return kept[1]
        made = self._make_kernel_tuple(kind, params, dist, profile, day)
        self._kernel_tuple = (inputs, made)
        return made

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("_kernel_tuple", None)  # its broadcasts would be pickled whole (one value per device)
        return state

    def _make_kernel_tuple(self, kind: int, params: tuple, dist: tuple, profile, day) -> tuple:
        n = self.n
        per_device = [np.broadcast_to(np.asarray(p, dtype=np.float64), (n,)) for p in params]
        per_device += [_NO_PARAM] * (6 - len(per_device))
        hours = _NO_PROFILE if profile is None else np.broadcast_to(np.asarray(profile, dtype=np.float64), (n, 24))
        return (
            np.int64(kind),
            np.uint64(self.key & 0xFFFFFFFFFFFFFFFF),
            self.state,
            self.change,
            self.since,
            self.draws,
            _NO_DAY if day is None else day,
            np.asarray(dist, dtype=np.int64),
            *per_device,
            hours,
        )

    def _compiled_next_change(self, due: np.ndarray, at: np.ndarray) -> np.ndarray:
        """:meth:`_next_change` by the compiled draws of :meth:`kernel_model`."""
        out = np.empty(len(due))
        _kernels().next_changes(
            self.kernel_model(), np.asarray(due, dtype=np.int64), np.asarray(at, dtype=np.float64), out
        )
        return out

    # ------------------------------------------------------------------ draws

    def _uniform(self, due: np.ndarray) -> np.ndarray:
        """The next uniform of each device in ``due`` (its own draw counter)."""
        draws = self.draws[due]
        self.draws[due] = draws + 1
        return keyed_random.uniform(self.key, due, draws)

    @property
    def participation(self) -> np.ndarray | None:
        """Each device's probability of being available, where the policy defines one (per-round patterns)."""
        return None


class AlwaysModel(PopulationModel):
    def __init__(self, params: Any, n: int, key: int, label_mix: np.ndarray, seed: int):
        super().__init__(n, key, params)
        self.state[:] = True

    def _next_change(self, due: np.ndarray, at: np.ndarray) -> np.ndarray:
        return np.full(len(due), math.inf)

    def kernel_model(self) -> tuple:
        return self._as_kernel(codes.NEVER)


class SessionsModel(PopulationModel):
    """:class:`~netfl.policies.sessions.OnOff` for a group: start online with the stationary probability,
    then alternate full on and off durations."""

    def __init__(self, params: Any, n: int, key: int, label_mix: np.ndarray, seed: int):
        super().__init__(n, key, params)
        self.on, self.off = params.on, params.off
        # per device (broadcasts where the group shares one value): the factors of its on and off durations
        self.on_scale = device_values(params.length_scale, key, "length_scale", n)
        self.off_scale = reciprocal(device_values(params.rate_scale, key, "rate_scale", n))
        self.scaled = not (constant_of(self.on_scale) == 1.0 and constant_of(self.off_scale) == 1.0)
        on_mean, off_mean = self.on.mean, self.off.mean
        if self.scaled:
            on_mean, off_mean = on_mean * self.on_scale, off_mean * self.off_scale
        self.stationary = on_mean / (on_mean + off_mean)  # the long-run online fraction (per device, if scaled)
        everyone = np.arange(n)
        self.state[:] = self._uniform(everyone) < self.stationary
        self.change[:] = self._next_change(everyone, np.zeros(n))

    def kernel_model(self) -> tuple:
        """On and off lengths (one draw each, a normal from its own stream): parameters p0, p1 and p2, p3; each
        device's factors of them p4 (on) and p5 (off)."""
        (on0, on1), (off0, off1) = ((*d.params, 0.0)[:2] for d in (self.on, self.off))
        kinds = tuple(codes.DISTRIBUTIONS.get(d.kind, codes.UNIFORM) for d in (self.on, self.off))
        params = (on0, on1, off0, off1, self.on_scale, self.off_scale)
        return self._as_kernel(codes.SESSIONS, params, dist=kinds)

    _next_change = PopulationModel._compiled_next_change


class DiurnalModel(PopulationModel):
    """:class:`~netfl.policies.sessions.Diurnal` for a group: an exponential holding time at the current
    local hour's rate, redrawn from the hour boundary at the next hour's rate when it crosses it."""

    def __init__(self, params: Any, n: int, key: int, label_mix: np.ndarray, seed: int):
        super().__init__(n, key, params)
        self.profile = np.asarray(params.hourly(), dtype=float)
        self.mixing = params.mixing
        # per device (float64 arrays of n, broadcasts where the group shares one value): its time zone, and the
        # factors of its rates of leaving each state (off: rate_scale; on: 1 / length_scale)
        self.offset = device_values(params.time_zone_offset, key, "time_zone_offset", n)
        self.come_scale = device_values(params.rate_scale, key, "rate_scale", n)
        self.leave_scale = reciprocal(device_values(params.length_scale, key, "length_scale", n))
        self.scaled = not (constant_of(self.come_scale) == 1.0 and constant_of(self.leave_scale) == 1.0)
        everyone = np.arange(n)
        start = self._start_probability(everyone)
        self.state[:] = self._uniform(everyone) < start
        self.change[:] = self._next_change(everyone, np.zeros(n))

    def _start_probability(self, devices: np.ndarray) -> np.ndarray | float:
        """P(online) of ``devices`` in their local hour at time 0: the chain's stationary probability there."""
        offset = constant_of(self.offset)
        hour = math.floor(offset / HOUR) if offset is not None else np.floor(self.offset[devices] / HOUR)
        p = self.profile[np.asarray(hour, dtype=np.int64) % 24]
        if not self.scaled:
            return p
        odds = self.come_scale[devices] / self.leave_scale[devices]  # a s
        return odds * p / (odds * p + (1.0 - p))

    def kernel_model(self) -> tuple:
        """The hourly profile, the mixing time (p0), each device's time-zone offset (p1) and the factors of its
        rates of coming online (p2) and of leaving (p3)."""
        params = (self.mixing, self.offset, self.come_scale, self.leave_scale)
        return self._as_kernel(codes.DIURNAL, params, profile=self.profile)

    _next_change = PopulationModel._compiled_next_change


class DailyModel(PopulationModel):
    """:class:`~netfl.policies.sessions.Daily` for a group: on inside each day's window, whose start and end
    move by independent uniform jitter (day d's draws are numbers 2d+2 and 2d+3 of the device)."""

    def __init__(self, params: Any, n: int, key: int, label_mix: np.ndarray, seed: int):
        super().__init__(n, key, params)
        offset = device_values(params.time_zone_offset, key, "time_zone_offset", n)
        self.start, self.jitter = window_start(params.start, offset), params.jitter  # per device (see window_start)
        self.length = (params.end - params.start) % DAY
        self.day = np.full(n, -1, dtype=np.int32)  # the day whose window is current or next
        _kernels().daily_start(self.kernel_model())  # yesterday's window may still be open at 0

    def kernel_model(self) -> tuple:
        """Day 0's window start on the simulated clock (p0), its length (p1), the jitter (p2), each day's."""
        return self._as_kernel(codes.DAILY, (self.start, self.length, self.jitter), day=self.day)

    _next_change = PopulationModel._compiled_next_change


class _RoundChain(PopulationModel):
    """Per-round two-state Markov chains, one transition before each round is read (as FedAU's code).

    From a state, the number of transitions until the chain leaves it is geometric, so a run of
    rounds is one draw: the device flips at the round of that transition.
    """

    time_base = "round"

    def __init__(self, params: Any, n: int, key: int, label_mix: np.ndarray, seed: int):
        super().__init__(n, key, params)
        self.p = resolve_probabilities(params.p, label_mix, lambda name: shared_rng(seed, name))
        self.to_on, self.to_off = self._transitions(params)
        everyone = np.arange(n)
        self.state[:] = self._uniform(everyone) < self.p
        self.since[:] = -1.0  # the start state is round -1's; round 0 follows one transition
        self.change[:] = self._next_change(everyone, np.full(n, -1.0))

    @abstractmethod
    def _transitions(self, params: Any) -> tuple[np.ndarray, np.ndarray]:
        """P(off -> on) and P(on -> off) per device."""

    def _next_change(self, due: np.ndarray, at: np.ndarray) -> np.ndarray:
        leave = np.where(self.state[due], self.to_off[due], self.to_on[due])
        u = self._uniform(due)
        with np.errstate(divide="ignore", invalid="ignore"):
            runs = np.where(leave >= 1.0, 1.0, np.ceil(np.log1p(-u) / np.log1p(-leave)))
        runs = np.where(leave <= 0.0, math.inf, np.maximum(runs, 1.0))
        return at + runs

    @property
    def participation(self) -> np.ndarray:
        return self.p


class BernoulliModel(_RoundChain):
    """Independent rounds: the chain whose next state ignores the current one (to_on = p, to_off = 1 - p)."""

    def _transitions(self, params: Any) -> tuple[np.ndarray, np.ndarray]:
        return self.p, 1.0 - self.p


class MarkovModel(_RoundChain):
    """:class:`~netfl.policies.rounds.Markov` for a group (the same rescaling of small p)."""

    def _transitions(self, params: Any) -> tuple[np.ndarray, np.ndarray]:
        to_on = np.full(self.n, params.transition)
        to_off = params.transition * (1.0 / self.p - 1.0)
        scale = np.maximum(to_off, 1.0)
        return to_on / scale, to_off / scale


class CyclicModel(PopulationModel):
    """:class:`~netfl.policies.rounds.Cyclic` for a group: round t is on iff (offset + t) mod (on + off) >= off."""

    time_base = "round"

    def __init__(self, params: Any, n: int, key: int, label_mix: np.ndarray, seed: int):
        super().__init__(n, key, params)
        self.p = resolve_probabilities(params.p, label_mix, lambda name: shared_rng(seed, name))
        self.on = np.maximum(1, np.round(params.period * self.p)).astype(np.int64)
        self.off = np.maximum(1, params.period - self.on)
        everyone = np.arange(n)
        left = np.floor(self._uniform(everyone) * self.off).astype(np.int64)  # off rounds left, as randint(off)
        self.offset = self.off - left
        self.since[:] = -1.0
        phase = (self.offset - 1) % (self.on + self.off)  # round -1's phase
        self.state[:] = phase >= self.off
        self.change[:] = self._next_change(everyone, np.full(n, -1.0))

    def _next_change(self, due: np.ndarray, at: np.ndarray) -> np.ndarray:
        cycle = self.on[due] + self.off[due]
        phase = (self.offset[due] + at.astype(np.int64)) % cycle
        left = np.where(self.state[due], cycle - phase, self.off[due] - phase)
        return at + left

    @property
    def participation(self) -> np.ndarray:
        return self.p


# what the kernels' tuple holds for a parameter a model does not have (never read)
_NO_PARAM = np.broadcast_to(np.float64(0.0), (1,))
_NO_PROFILE = np.broadcast_to(np.float64(0.0), (1, 24))
_NO_DAY = np.zeros(1, dtype=np.int32)


def _kernels():
    """The compiled draws, imported on first use (numba loads then: a world without these models never does)."""
    from netfl.kernels import models

    return models


def window_start(start: float, offset: np.ndarray) -> np.ndarray:
    """Where day 0's window of a ``daily`` policy opens on the simulated clock, per device: ``start`` local, the
    device's time-zone ``offset`` taken modulo a day (the windows repeat daily), so that day -1's window is the
    earliest that may still be open at 0. A broadcast stays one (no memory per device)."""
    one = constant_of(offset)
    if one is not None:
        return np.broadcast_to(np.float64(start - one % DAY), offset.shape)
    return start - offset % DAY


#: The built-ins' population models by name (:mod:`netfl.policies.builtin` adds those defined beside their policies).
POPULATION_MODELS: dict[str, type[PopulationModel]] = {
    "always": AlwaysModel,
    "bernoulli": BernoulliModel,
    "markov": MarkovModel,
    "cyclic": CyclicModel,
    "sessions": SessionsModel,
    "daily": DailyModel,
    "diurnal": DiurnalModel,
}


def build_population_model(
    policy: str | type[PopulationModel],
    params: Any,
    n: int,
    key: int,
    label_mix: np.ndarray,
    seed: int,
    *,
    base_dir: Path | None = None,
    first: int = 0,
) -> PopulationModel:
    """The population model of ``policy`` -- a built-in's name, or a model class (a user's population policy,
    found by :func:`netfl.policies.catalog.population_model`) -- for ``n`` devices; ``label_mix`` (n x labels) feeds
    probabilities given ``from: data`` or ``from: smallest_label``; ``base_dir`` is the topology's folder (for files
    a model reads) and ``first`` the scenario index of the group's first device."""
    cls = POPULATION_MODELS[policy] if isinstance(policy, str) else policy
    place = {"base_dir": base_dir, "first": first} if cls.placed else {}
    model = cls(params, n, key, label_mix, seed, **place)
    if isinstance(policy, str):
        model.policy = policy
    return model
