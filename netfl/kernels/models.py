"""The continuous-time population models' next change, compiled: a device at a time, to the same bits.

A model is handed over as one tuple (:data:`MODEL`), built by its Python class in
:mod:`netfl.policies.population` (which holds its parameters and state):
``(kind, key, state, change, since, draws, day, dist, p0, p1, p2, p3, p4, p5, profile)`` --
its kind (the constants below), its stream's key, its per-device arrays (state, next change, since, draws used,
the current day of a daily window), the kinds of its two session lengths (sessions) and its parameters, each an
array with one value per device (a broadcast where they all share one):

* sessions: ``p0, p1`` the online length's parameters, ``p2, p3`` the offline length's (``dist[0]``,
  ``dist[1]``: their kinds, :data:`CONSTANT` to :data:`UNIFORM`, drawn as numpy's ``sample_durations`` drew
  them), ``p4, p5`` the device's factors of its online and offline lengths (1: as drawn);
* diurnal: ``profile[j, h]`` device j's probability of being on in local hour h, ``p0`` the mixing time,
  ``p1`` the device's time-zone offset (s), ``p2, p3`` the factors of its rates of coming online and of
  leaving (:mod:`netfl.policies.per_device`);
* daily: ``p0`` where day 0's window opens on the simulated clock, ``p1`` its length, ``p2`` the jitter.

:data:`~netfl.kernels.codes.EXTERNAL` marks a model whose changes Python draws (traces, ``eligible``, a
user's population policy): the engine's step (:mod:`netfl.kernels.idle_step`) reads its ``state`` and
``change`` and hands its flips back. :data:`~netfl.kernels.codes.ABSENT` marks a role a group does not have (no
charger, no use); its arrays are never read.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types

from netfl.kernels.codes import ABSENT, CONSTANT, DAILY, DIURNAL, EXPONENTIAL, LOGNORMAL, SESSIONS, WEIBULL
from netfl.kernels.keyed import _INLINE, _JIT, standard_normal, uniform

__all__ = ["ABSENT", "MODEL", "daily_start", "flip", "next_change", "next_changes"]


HOUR = 3600.0
DAY = 24 * HOUR


def array(dtype, ndim: int = 1, readonly: bool = False) -> types.Array:
    """An array of any layout (a broadcast included), for the explicit signatures."""
    return types.Array(dtype, ndim, "A", readonly=readonly)


F8, B1, U4, I4, I8 = (array(t) for t in (types.float64, types.boolean, types.uint32, types.int32, types.int64))
PARAM, PARAM2 = array(types.float64, readonly=True), array(types.float64, 2, readonly=True)
#: A model, as its Python class hands it over (the module docstring).
MODEL = types.Tuple(
    (
        types.int64,
        types.uint64,
        B1,
        F8,
        F8,
        U4,
        I4,
        array(types.int64, readonly=True),
        PARAM,
        PARAM,
        PARAM,
        PARAM,
        PARAM,
        PARAM,
        PARAM2,
    )
)


@njit(**_JIT)
def _duration(kind, key, device, draw, a, b):
    """One session length of kind ``kind`` with parameters ``a, b`` (sample_durations' arithmetic)."""
    if kind == CONSTANT:
        return a
    if kind == EXPONENTIAL:
        return -a * math.log1p(-uniform(key, device, draw))
    if kind == LOGNORMAL:
        return a * math.exp(b * standard_normal(key, device, draw))
    u = uniform(key, device, draw)
    if kind == WEIBULL:
        return b * (-math.log1p(-u)) ** (1.0 / a)
    return a + (b - a) * u


@njit(**_JIT)
def _diurnal(key, online, draws, profile, mixing, offset, scale, j, at):
    """An exponential holding time at the local hour's rate of leaving the state (times the device's ``scale`` of
    that rate), redrawn from the hour's end at the next hour's rate when it crosses it (DiurnalModel); the model's
    arrays it needs, not its tuple."""
    leaves = False  # a state never left (its rate zero at every hour): its devices never change
    for h in range(24):
        p = profile[j, h]
        if (1.0 - p if online else p) != 0.0:
            leaves = True
            break
    if not leaves:
        return math.inf
    device = np.uint64(j)
    t = at
    hour = np.int64(math.floor((t + offset) / HOUR))
    while True:
        p = profile[j, hour % 24]
        rate = (1.0 - p if online else p) / mixing * scale  # x * 1.0 is x: an unscaled device's bits unchanged
        boundary = (hour + 1) * HOUR - offset
        u = uniform(key, device, np.uint64(draws[j]))
        draws[j] += 1
        arrive = t - math.log1p(-u) / rate
        if rate > 0 and arrive < boundary:
            return arrive
        t = boundary
        hour += 1


@njit(**_INLINE)
def _window(m, j):
    """Where device j's current day's window opens and closes, with that day's jitter (DailyModel)."""
    key, day, start, length, jitter = m[1], m[6][j], m[8][j], m[9][j], m[10][j]
    opens = day * DAY + start
    closes = opens + length
    if jitter > 0:
        draw = np.uint64(2 * (day + 1))
        device = np.uint64(j)
        opens = opens + jitter * (2 * uniform(key, device, draw) - 1)
        closes = closes + jitter * (2 * uniform(key, device, draw + np.uint64(1)) - 1)
    return opens, closes


@njit(**_INLINE)
def next_change(m, j, at):
    """When device j of model ``m``, having just entered ``state[j]`` at ``at``, next flips (its draws used)."""
    kind = m[0]
    if kind == SESSIONS:
        draws = m[5]
        if m[2][j]:  # scalars picked, never arrays: a tuple of arrays made here would count references each time
            dist, a, b, scale = m[7][0], m[8][j], m[9][j], m[12][j]
        else:
            dist, a, b, scale = m[7][1], m[10][j], m[11][j], m[13][j]
        duration = _duration(dist, m[1], np.uint64(j), np.uint64(draws[j]), a, b)
        draws[j] += 1
        return at + duration * scale  # x * 1.0 is x: an unscaled device's bits unchanged
    if kind == DIURNAL:
        scale = m[11][j] if m[2][j] else m[10][j]  # leaving: 1 / length_scale; coming online: rate_scale
        return _diurnal(m[1], m[2][j], m[5], m[14], m[8][j], m[9][j], scale, j, at)
    if kind == DAILY:
        if m[2][j]:  # just went online: the same day's window closes next
            return _window(m, j)[1]
        m[6][j] += 1
        return _window(m, j)[0]
    return math.inf


@njit(**_INLINE)
def flip(m, j):
    """Device j of model ``m`` flips at its change; its next change drawn."""
    at = m[3][j]
    m[2][j] = not m[2][j]
    m[4][j] = at
    m[3][j] = next_change(m, j, at)


@njit(types.void(MODEL, array(types.int64, readonly=True), PARAM, F8), **_JIT)
def next_changes(m, due, at, out):
    """``out[k]``: the next change of device ``due[k]``, which just entered its state at ``at[k]``."""
    for k in range(due.size):
        out[k] = next_change(m, due[k], at[k])


@njit(types.void(MODEL), **_JIT)
def daily_start(m):
    """A daily model's devices at time 0: yesterday's window may still be open; else the first that closes after 0
    is current or next (``day`` starts at -1)."""
    state, change, day = m[2], m[3], m[6]
    for j in range(state.size):
        opens, closes = _window(m, j)
        while closes <= 0:
            day[j] += 1
            opens, closes = _window(m, j)
        state[j] = opens <= 0
        change[j] = closes if state[j] else opens
