"""A device's sufficient statistics, and a fleet's: what the fit and the fit report need, and no more.

A device's tracks (:mod:`netfl.fleet_fit.tracks`) reduce to a few dozen numbers and two short lists
(:class:`DeviceStats`), so a fleet of 10^5 devices' week is fitted from a few hundred megabytes whatever the
size of its logs. The same function reduces a logged and a simulated device, so that the report compares like
with like.

Hours are of the simulated clock (hour 0: 00:00-01:00 of the fitted world's local time). A charging window is a
charge lasting at least :data:`WINDOW_MIN` (a top-up at the office is not the nightly charger the ``daily`` model
stands for); session lengths are binned on :data:`LENGTH_EDGES` (log-spaced), times of day on minutes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from netfl.fleet_fit.tracks import Tracks

__all__ = [
    "DeviceStats",
    "FleetStats",
    "HOUR",
    "DAY",
    "LENGTH_EDGES",
    "WINDOW_MIN",
    "device_stats",
    "hourly_seconds",
]

HOUR, DAY = 3600.0, 86400.0
WINDOW_MIN = 3600.0
#: Session-length bins: 1 s to 1 day, log-spaced (48 bins: about 21 % wide each).
LENGTH_EDGES = np.geomspace(1.0, DAY, 49)
#: Battery level is read every this many seconds along its straight lines, for the level by hour.
LEVEL_STEP = 600.0
_HOURS = np.arange(24) * HOUR


def hourly_seconds(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Seconds of the intervals ``[starts, ends)`` that fall in each hour of the day (24 numbers)."""
    if not len(starts):
        return np.zeros(24)

    def covered(t: np.ndarray) -> np.ndarray:  # seconds of hour h in [0, t), for each h: (24, n)
        days, into = np.divmod(t, DAY)
        return days * HOUR + np.clip(into - _HOURS[:, None], 0.0, HOUR)

    return (covered(np.asarray(ends)[None, :]) - covered(np.asarray(starts)[None, :])).sum(axis=1)


def _hour_of(t: np.ndarray) -> np.ndarray:
    return (np.floor(np.asarray(t) / HOUR) % 24).astype(np.int64)


@dataclass(eq=False)
class DeviceStats:
    """One device, reduced (see the module docstring). Battery rates are the least-squares solution of
    ``delta level = charge * t_plugged - idle * t - use * t_in_use`` (percent per second) over consecutive
    battery samples, of which ``drain_normal`` / ``drain_rhs`` are the normal equations."""

    device: str
    days: float
    exposure: np.ndarray  # seconds observed, by hour
    eligible: np.ndarray  # seconds eligible, by hour
    eligible_starts: float  # times it became eligible
    use: np.ndarray  # seconds in use, by hour
    use_starts: np.ndarray  # sessions begun, by hour
    lengths: np.ndarray  # sessions by LENGTH_EDGES bin (int)
    plug_ins: np.ndarray  # the charging windows' start times, seconds after midnight
    plug_outs: np.ndarray  # and their end times
    level_sum: np.ndarray  # battery percent summed over LEVEL_STEP readings, by hour
    level_count: np.ndarray
    first_level: float  # percent at the first battery sample (nan: none)
    drain_normal: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))
    drain_rhs: np.ndarray = field(default_factory=lambda: np.zeros(3))

    @property
    def use_fraction(self) -> float:
        return float(self.use.sum() / max(self.exposure.sum(), 1e-9))

    @property
    def eligible_fraction(self) -> float:
        return float(self.eligible.sum() / max(self.exposure.sum(), 1e-9))


def _battery(tracks: Tracks) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Level by hour (sums and counts) and the drain's normal equations, from the battery samples."""
    times, levels = tracks.battery
    level_sum, level_count = np.zeros(24), np.zeros(24)
    normal, rhs = np.zeros((3, 3)), np.zeros(3)
    if len(times) < 2:
        return level_sum, level_count, normal, rhs, float(levels[0]) if len(levels) else float("nan")
    grid = np.arange(times[0], times[-1], LEVEL_STEP)
    hours = _hour_of(grid)
    level_sum += np.bincount(hours, np.interp(grid, times, levels), minlength=24)
    level_count += np.bincount(hours, minlength=24)
    a, b = times[:-1], times[1:]
    dl = np.diff(levels)
    # a full battery on the charger, or an empty one, does not move: those pairs say nothing of the powers
    flat = ((levels[:-1] >= 99.5) & (levels[1:] >= 99.5)) | ((levels[:-1] <= 0.5) & (levels[1:] <= 0.5))
    keep = (b > a) & ~flat
    a, b, dl = a[keep], b[keep], dl[keep]
    x = np.stack([_overlap(tracks.charge, a, b), -(b - a), -_overlap(tracks.use, a, b)], axis=1)
    return level_sum, level_count, x.T @ x, x.T @ dl, float(levels[0])


def _overlap(intervals: tuple[np.ndarray, np.ndarray], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Seconds of the (sorted, disjoint) ``intervals`` inside each ``[a, b)``."""
    starts, ends = intervals
    if not len(starts):
        return np.zeros(len(a))
    covered = np.concatenate(([0.0], np.cumsum(ends - starts)))

    def upto(t: np.ndarray) -> np.ndarray:  # seconds covered in (-inf, t)
        k = np.searchsorted(starts, t, side="right")  # intervals begun by t
        inside = np.minimum(t, ends[np.maximum(k - 1, 0)]) - starts[np.maximum(k - 1, 0)]
        return covered[np.maximum(k - 1, 0)] + np.where(k > 0, np.maximum(inside, 0.0), 0.0)

    return upto(b) - upto(a)


def device_stats(tracks: Tracks) -> DeviceStats:
    """Reduce one device's tracks to its statistics."""
    span_start, span_end = np.array([tracks.start]), np.array([tracks.end])
    use_starts, use_ends = tracks.use
    open_at_end = use_ends >= tracks.end  # a session cut by the end of the log has no length
    lengths = (use_ends - use_starts)[~open_at_end & (use_starts > tracks.start)]
    charge_starts, charge_ends = tracks.charge
    window = (charge_ends - charge_starts >= WINDOW_MIN) & (charge_starts > tracks.start) & (charge_ends < tracks.end)
    level_sum, level_count, normal, rhs, first = _battery(tracks)
    eligible_starts = tracks.eligible[0]
    return DeviceStats(
        device=tracks.device,
        days=(tracks.end - tracks.start) / DAY,
        exposure=hourly_seconds(span_start, span_end),
        eligible=hourly_seconds(*tracks.eligible),
        eligible_starts=float(np.count_nonzero(eligible_starts > tracks.start)),
        use=hourly_seconds(*tracks.use),
        use_starts=np.bincount(_hour_of(use_starts[use_starts > tracks.start]), minlength=24).astype(float),
        lengths=np.histogram(lengths, LENGTH_EDGES)[0],
        plug_ins=charge_starts[window] % DAY,
        plug_outs=charge_ends[window] % DAY,
        level_sum=level_sum,
        level_count=level_count,
        first_level=first,
        drain_normal=normal,
        drain_rhs=rhs,
    )


@dataclass
class FleetStats:
    """A set of devices' statistics summed: what the report shows of logged and simulated fleets alike."""

    devices: int = 0
    days: float = 0.0
    exposure: np.ndarray = field(default_factory=lambda: np.zeros(24))
    eligible: np.ndarray = field(default_factory=lambda: np.zeros(24))
    use: np.ndarray = field(default_factory=lambda: np.zeros(24))
    use_starts: np.ndarray = field(default_factory=lambda: np.zeros(24))
    lengths: np.ndarray = field(default_factory=lambda: np.zeros(len(LENGTH_EDGES) - 1))
    plug_ins: np.ndarray = field(default_factory=lambda: np.zeros(1440))  # by minute of the day
    plug_outs: np.ndarray = field(default_factory=lambda: np.zeros(1440))
    level_sum: np.ndarray = field(default_factory=lambda: np.zeros(24))
    level_count: np.ndarray = field(default_factory=lambda: np.zeros(24))

    def add(self, s: DeviceStats) -> None:
        self.devices += 1
        self.days += s.days
        for name in ("exposure", "eligible", "use", "use_starts", "lengths", "level_sum", "level_count"):
            getattr(self, name).__iadd__(getattr(s, name))
        self.plug_ins += np.bincount((s.plug_ins // 60).astype(np.int64) % 1440, minlength=1440)
        self.plug_outs += np.bincount((s.plug_outs // 60).astype(np.int64) % 1440, minlength=1440)

    @classmethod
    def of(cls, stats) -> FleetStats:
        fleet = cls()
        for s in stats:
            fleet.add(s)
        return fleet

    @property
    def eligible_by_hour(self) -> np.ndarray:
        return self.eligible / np.maximum(self.exposure, 1e-9)

    @property
    def use_by_hour(self) -> np.ndarray:
        return self.use / np.maximum(self.exposure, 1e-9)

    @property
    def sessions_per_hour(self) -> np.ndarray:
        """Sessions begun per device-hour, by hour of the day."""
        return self.use_starts / np.maximum(self.exposure / HOUR, 1e-9)

    @property
    def level_by_hour(self) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return self.level_sum / self.level_count
