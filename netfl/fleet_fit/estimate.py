"""The world's parameters from a set of devices' statistics: the estimators, each a closed form.

* availability and use: the ``diurnal`` chain. Its probability of being on in hour h is the fraction of the
  hour's observed time the devices were on (eligible, or in use); its ``mixing`` m follows from how often they
  switched on, since the chain switches on at the rate ``p_h (1 - p_h) / m`` in hour h:
  ``m = sum_h p_h (1 - p_h) T_h / N`` over the observed seconds ``T_h`` and the ``N`` switches on.
* the charger: the ``daily`` window. ``start`` and ``end`` are the circular means of the windows' plug-in
  and plug-out times; a uniform jitter of half-width J has standard deviation ``J / sqrt(3)``, so
  ``jitter = sqrt(3) * sd`` (the two ends' variances pooled: ``daily`` has one jitter), kept below half the
  window and half the gap as ``daily`` requires.
* the powers: the least-squares rates of ``delta level = charge t_plugged - idle t - use t_in_use`` (percent
  per second) over the devices' normal equations, times the capacity: watts.
* the initial charge: uniform between the 5th and 95th percentiles of the first logged levels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netfl.fleet_fit.statistics import DAY, DeviceStats, FleetStats

__all__ = ["FittedGroup", "fit_group", "circular_mean_sd"]

#: A chain that never switches on (too few events to say) gets this mixing.
NO_SWITCHES_MIXING = DAY


@dataclass(frozen=True)
class FittedGroup:
    """One group's fitted parameters (SI units: seconds, watts, joules; times of day in seconds)."""

    name: str
    devices: tuple[str, ...]
    days: float
    availability_profile: tuple[float, ...]
    availability_mixing: float
    use_profile: tuple[float, ...] | None
    use_mixing: float
    use_power: float
    idle_power: float
    charge_power: float
    capacity: float
    initial: tuple[float, float]
    window: tuple[float, float, float] | None  # start, end, jitter; None: no nightly charger seen
    windows_seen: int


def circular_mean_sd(times: np.ndarray) -> tuple[float, float]:
    """The circular mean (seconds after midnight) of times of day and their spread about it (seconds)."""
    angle = 2 * math.pi * np.asarray(times) / DAY
    mean = math.atan2(float(np.sin(angle).sum()), float(np.cos(angle).sum())) % (2 * math.pi)
    centre = mean * DAY / (2 * math.pi)
    offsets = (np.asarray(times) - centre + DAY / 2) % DAY - DAY / 2
    return centre, float(np.sqrt(np.mean(offsets**2))) if len(offsets) else 0.0


def _chain(on: np.ndarray, exposure: np.ndarray, switches: float) -> tuple[tuple[float, ...], float]:
    profile = np.clip(on / np.maximum(exposure, 1e-9), 0.0, 1.0)
    flux = float((profile * (1 - profile) * exposure).sum())
    mixing = flux / switches if switches > 0 and flux > 0 else NO_SWITCHES_MIXING
    return tuple(round(float(p), 4) for p in profile), max(mixing, 1.0)


def _rates(stats: list[DeviceStats]) -> np.ndarray:
    """charge, idle and use rates (percent per second), least squares over every device's pairs of samples."""
    normal = sum((s.drain_normal for s in stats), np.zeros((3, 3)))
    rhs = sum((s.drain_rhs for s in stats), np.zeros(3))
    rates = np.zeros(3)
    seen = np.diag(normal) > 0
    if seen.any():
        sub = normal[np.ix_(seen, seen)]
        rates[seen] = np.linalg.lstsq(sub, rhs[seen], rcond=None)[0]
    return np.maximum(rates, 0.0)


def fit_group(name: str, stats: list[DeviceStats], capacity: float) -> FittedGroup:
    """The parameters of one group of devices (a cluster, or one device)."""
    fleet = FleetStats.of(stats)
    availability, availability_mixing = _chain(fleet.eligible, fleet.exposure, sum(s.eligible_starts for s in stats))
    used = fleet.use.sum() > 0
    use_profile, use_mixing = _chain(fleet.use, fleet.exposure, fleet.use_starts.sum())
    charge, idle, use = _rates(stats) * capacity / 100.0
    plug_ins = np.concatenate([s.plug_ins for s in stats])
    plug_outs = np.concatenate([s.plug_outs for s in stats])
    window = None
    if len(plug_ins) and len(plug_outs):
        start, sd_in = circular_mean_sd(plug_ins)
        end, sd_out = circular_mean_sd(plug_outs)
        length = (end - start) % DAY
        jitter = math.sqrt(3.0) * math.sqrt((sd_in**2 + sd_out**2) / 2)
        jitter = min(jitter, 0.49 * min(length, DAY - length))
        window = (round(start / 60) * 60.0 % DAY, round(end / 60) * 60.0 % DAY, round(jitter))
        if window[0] == window[1]:
            window = None
    firsts = np.array([s.first_level for s in stats if s.first_level == s.first_level]) / 100.0
    initial = (float(np.quantile(firsts, 0.05)), float(np.quantile(firsts, 0.95))) if len(firsts) else (1.0, 1.0)
    return FittedGroup(
        name=name,
        devices=tuple(s.device for s in stats),
        days=fleet.days,
        availability_profile=availability,
        availability_mixing=round(availability_mixing, 1),
        use_profile=use_profile if used else None,
        use_mixing=round(use_mixing, 1),
        use_power=round(float(use), 4),
        idle_power=round(float(idle), 5),
        charge_power=round(float(charge), 3),
        capacity=capacity,
        initial=(round(initial[0], 3), round(initial[1], 3)),
        window=window,
        windows_seen=len(plug_ins),
    )
