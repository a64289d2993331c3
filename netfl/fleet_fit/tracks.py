"""One device's day as the fit sees it: when it was eligible, in use, charging, and its battery level.

Both sides of a fit reduce to these tracks -- a logged device from its state changes (:func:`tracks_of_log`),
a simulated one from the engine's idle events (:mod:`netfl.fleet_fit.simulated`) -- so that one implementation
of the statistics (:mod:`netfl.fleet_fit.statistics`) serves both, and a difference between them is the
world's, not the bookkeeping's.

Eligibility is a rule over the logged states (:mod:`netfl.fleet_logs.rules`, the one the replay uses; by
default locked and charging and on Wi-Fi); before a state's first change it has the replay's initial value
(:data:`netfl.fleet_logs.rules.INITIAL`). The observed span is from the device's first change to its last.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netfl.fleet_logs.rules import DEFAULT_RULE, INITIAL, Rule, parse_rule
from netfl.fleet_logs.states import BATTERY, CHARGER, SCREEN

__all__ = ["Tracks", "intervals_of", "tracks_of_log"]

_DEFAULT = parse_rule(DEFAULT_RULE)


@dataclass(frozen=True, eq=False)
class Tracks:
    """A device's observed span ``[start, end)`` (seconds on the simulated clock) and, as sorted disjoint
    ``(starts, ends)`` intervals, when it was eligible, in use (screen on) and charging; its battery as
    ``(times, percent)`` samples (a straight line between samples)."""

    device: str
    start: float
    end: float
    eligible: tuple[np.ndarray, np.ndarray]
    use: tuple[np.ndarray, np.ndarray]
    charge: tuple[np.ndarray, np.ndarray]
    battery: tuple[np.ndarray, np.ndarray]


def intervals_of(edges: np.ndarray, on: np.ndarray, end: float) -> tuple[np.ndarray, np.ndarray]:
    """The intervals where a step function is on: it takes ``on[k]`` from ``edges[k]`` to the next edge (the
    last to ``end``); consecutive equal values merge."""
    if not len(edges):
        return np.empty(0), np.empty(0)
    on = np.asarray(on, dtype=bool)
    padded = np.concatenate(([False], on, [False])).view(np.int8)
    change = np.diff(padded)
    bounds = np.append(edges, end)
    starts, ends = bounds[np.flatnonzero(change == 1)], bounds[np.flatnonzero(change == -1)]
    keep = ends > starts
    return starts[keep], ends[keep]


def _state_at(times: np.ndarray, kinds: np.ndarray, values: np.ndarray, kind: int, edges: np.ndarray) -> np.ndarray:
    """The value of ``kind`` holding from each of ``edges`` on (its initial value before its first change)."""
    mine = kinds == kind
    t, v = times[mine], values[mine]
    index = np.searchsorted(t, edges, side="right") - 1
    return np.where(index >= 0, v[np.maximum(index, 0)] if len(v) else INITIAL[kind], INITIAL[kind])


def tracks_of_log(log, rule: Rule = _DEFAULT) -> Tracks:
    """A logged device's tracks (``log``: a :class:`netfl.fleet_logs.DeviceLog`); eligible while ``rule`` holds
    (default: locked and charging and on Wi-Fi, the rule of Google's and FLASH's production FL)."""
    times, kinds, values = log.times, log.kinds, log.values
    start, end = float(times[0]), float(times[-1])
    edges = np.unique(times[kinds != BATTERY]) if len(times) else times
    if not len(edges) or edges[0] > start:
        edges = np.concatenate(([start], edges))
    screen = _state_at(times, kinds, values, SCREEN, edges) == 1
    plugged = _state_at(times, kinds, values, CHARGER, edges) == 1
    starts, ends = rule.intervals(log)
    starts, ends = np.maximum(starts, start), np.minimum(ends, end)
    inside = ends > starts
    battery = kinds == BATTERY
    return Tracks(
        device=log.device,
        start=start,
        end=end,
        eligible=(starts[inside], ends[inside]),
        use=intervals_of(edges, screen, end),
        charge=intervals_of(edges, plugged, end),
        battery=(times[battery], values[battery]),
    )
