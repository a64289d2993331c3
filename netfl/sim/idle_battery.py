"""An idle device's battery in closed form: its net drain, its level at any instant, and the accounts settled
between two of its changes (netfl/sim/idle_rows.py takes the changes).

Between two changes a device's power is constant -- the idle draw (while it
is on), its owner's use, less the charger (while plugged in) -- so its level
is linear in time, clipped to [0, capacity]: :class:`IdleBattery` holds
every device's level and accounts as arrays and computes these for any set
of devices at once, reading a quantity a whole group shares once. The
physics is :class:`~netfl.sim.battery.Battery`'s: a dead phone draws
nothing, charges while plugged in, a full battery stays full, the charger
feeds the loads first. Where idle devices' events are wanted, settling a
stretch also logs the marks the level passed without changing anything here
(full, and min_level on the way down: the actor's battery watch wakes at
both), at the instant the level reached each.
"""

from __future__ import annotations

import math

import numpy as np

from netfl.sim.device_table import DeviceTable
from netfl.sim.idle_events import IdleEvents

_INF = math.inf


# numpy's boolean indexing and np.where take a branch per row, and on the random masks of devices' changes they
# cost about ten times a product or an index: the steps below select rows by index (np.flatnonzero) and zero loads
# by multiplying with a mask -- the same numbers, for the finite, non-negative powers and times they are given.


def _when(mask: np.ndarray, value: np.ndarray | float) -> np.ndarray:
    """``value`` where ``mask``, else 0 (``value`` finite and >= 0: exactly ``np.where(mask, value, 0.0)``)."""
    return mask * value


class IdleBattery:
    """Every device's battery and energy accounts between its changes (see the module docstring)."""

    def __init__(self, table: DeviceTable, use_w: np.ndarray):
        """``use_w``: each device's power while its owner uses it."""
        self.table = table
        self.slices = table.group_slices()
        n = len(table)
        self.capacity = table.capacity_j
        self.finite = np.isfinite(self.capacity)
        self.level = np.where(self.finite, table.initial_j, _INF)
        self.since = np.zeros(n)  # the battery and the energy are accounted up to here
        self.alive = ~self.finite | (self.level > 0)
        self.charging = np.zeros(n, dtype=bool)
        self.using = np.zeros(n, dtype=bool)  # in a session of use that began while the device was on
        self.energy_j = {"idle": np.zeros(n), "use": np.zeros(n)}
        self.charged_j = np.zeros(n)
        self.use_w = use_w
        self._columns = {
            "idle_w": table.idle_w,
            "charge_w": table.charge_w,
            "capacity": self.capacity,
            "min_level": table.min_level,
            "use_w": self.use_w,
            "finite": self.finite,
        }
        for name in ("idle_w", "charge_w", "use_w"):  # _when's products are exact for these alone
            if not np.all(np.isfinite(self._columns[name]) & (self._columns[name] >= 0)):
                raise ValueError(f"{name}: every device's power must be finite and >= 0")
        self._constants = [self._constant_in(sl) for sl in self.slices]
        self.events: IdleEvents | None = None  # where idle devices' events go, once set (netfl/sim/idle_rows.py)
        self.below: np.ndarray | None = None  # below min_level as the actor's battery watch says (events only)

    def __len__(self) -> int:
        return len(self.table)

    def _constant_in(self, sl: slice) -> dict[str, float | bool]:
        """The fixed quantities (:attr:`_columns`) that one group's devices all share, as Python values: a step
        over that group's rows uses the value instead of gathering it for every row (same arithmetic)."""
        constants = {}
        for name, column in self._columns.items():
            part = column[sl]
            if part.size and (part.strides == (0,) or bool(np.all(part == part[0]))):
                constants[name] = part[0].item()
        return constants

    def _of(self, name: str, d: np.ndarray | slice, g: int | None) -> np.ndarray | float | bool:
        """Quantity ``name`` of devices ``d`` (of group ``g``, if the caller knows it): the group's one value, or
        the devices' own."""
        if g is not None:
            value = self._constants[g].get(name)
            if value is not None:
                return value
        return self._columns[name][d]

    # ----------------------------------------------------------------- power

    def net_drain_w(self, d: np.ndarray | slice, g: int | None = None) -> np.ndarray:
        """The rate at which each device's level falls (negative while the charger out-supplies its loads);
        ``g``: the devices' group, where they are all of one."""
        load = _when(self.alive[d], self._of("idle_w", d, g))
        load += _when(self.using[d], self._of("use_w", d, g))
        load -= _when(self.charging[d], self._of("charge_w", d, g))
        return load

    def level_at(
        self, d: np.ndarray | slice, now: float, drain: np.ndarray | None = None, g: int | None = None
    ) -> np.ndarray:
        """The charge of devices ``d`` (idle, advanced to ``now``; ``slice(None)``: all, read without gathering)
        at ``now``, settling nothing (inf: mains); ``drain``: their :meth:`net_drain_w`, if the caller has it."""
        drain = self.net_drain_w(d, g) if drain is None else drain
        level = self.level[d] - drain * (now - self.since[d])
        finite = self._of("finite", d, g)
        if isinstance(finite, bool):
            return np.clip(level, 0.0, self._of("capacity", d, g)) if finite else np.full(level.shape, _INF)
        return np.where(finite, np.clip(level, 0.0, self._of("capacity", d, g)), _INF)

    def _settle(self, d: np.ndarray, t: np.ndarray, g: int | None = None) -> None:
        """Account devices ``d``'s energy and charge from their ``since`` up to ``t`` (their next change or now)."""
        dt = t - self.since[d]
        self.energy_j["idle"][d] += _when(self.alive[d], self._of("idle_w", d, g) * dt)
        using = np.flatnonzero(self.using[d])  # only they add anything
        use_w = self._of("use_w", d, g)
        self.energy_j["use"][d[using]] += (use_w[using] if isinstance(use_w, np.ndarray) else use_w) * dt[using]
        finite = self._of("finite", d, g)
        if isinstance(finite, np.ndarray):
            keep = np.flatnonzero(finite)
            f, dt = d[keep], dt[keep]
        else:
            keep = None
            f = d if finite else d[:0]
        if f.size:
            before = self.level[f]
            drain = self.net_drain_w(f, g)
            after = np.clip(before - drain * dt, 0.0, self._of("capacity", f, g))
            if self.events is not None:
                self._marks_passed(f, g, before, after, drain, t if keep is None else t[keep])
            gained = after - before
            charged = np.flatnonzero(gained > 0)  # only they add anything
            self.charged_j[f[charged]] += gained[charged]
            self.level[f] = after
        self.since[d] = t

    def _marks_passed(
        self, f: np.ndarray, g: int | None, before: np.ndarray, after: np.ndarray, drain: np.ndarray, until: np.ndarray
    ) -> None:
        """Log the marks that devices ``f``'s batteries passed from ``before`` (at their ``since``) to ``after`` (at
        ``until``) at ``drain``, which change nothing here but at which the actor's battery watch wakes: full while
        charging, min_level on the way down. Each at the instant the level reached it, as the watch computes it."""
        events, since = self.events, self.since[f]
        capacity, min_level = self._of("capacity", f, g), self._of("min_level", f, g)
        full = np.flatnonzero((drain < 0) & (after >= capacity) & (before < capacity))
        if full.size:
            top = capacity[full] if isinstance(capacity, np.ndarray) else capacity
            at = since[full] + (before[full] - top) / drain[full]
            events.add("battery_full", f[full], np.clip(at, since[full], until[full]))
        floor = min_level * capacity
        down = np.flatnonzero((drain > 0) & (min_level > 0) & (after <= floor) & ~self.below[f])
        if down.size:
            mark = floor[down] if isinstance(floor, np.ndarray) else floor
            at = since[down] + (before[down] - mark) / drain[down]
            self.below[f[down]] = True
            level = min_level[down] if isinstance(min_level, np.ndarray) else min_level
            events.add("below_min_level", f[down], np.clip(at, since[down], until[down]), level=level)

    def _floor(self, d: np.ndarray | slice, g: int | None = None) -> np.ndarray | float:
        """Devices ``d``'s min_level in joules (0 on mains power)."""
        return self._of("min_level", d, g) * np.where(self._of("finite", d, g), self._of("capacity", d, g), 0.0)

    def _battery_at(self, d: np.ndarray, drain: np.ndarray, g: int | None = None) -> np.ndarray:
        """When each of devices ``d`` reaches its battery's next mark at its present ``drain``: empty while it
        drains, its min_level while it charges below it (inf: neither, on mains power, or off). The two never
        coincide: the sign of the drain says which one a mark is."""
        level, since = self.level[d], self.since[d]
        live = self.alive[d] & self._of("finite", d, g)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = since + level / drain
        out[np.flatnonzero(~(live & (drain > 0)))] = _INF
        floor = self._floor(d, g)
        rising = np.flatnonzero(live & (drain < 0) & (level < floor))
        if rising.size:
            below = floor[rising] if isinstance(floor, np.ndarray) else floor
            out[rising] = since[rising] + (below - level[rising]) / -drain[rising]
        return out

    def below_min(self, d: np.ndarray | slice, now: float, g: int | None = None) -> np.ndarray:
        """Whether each of devices ``d`` is below its ``min_level`` at ``now`` (at it exactly: while draining), as
        the actor's battery watch says."""
        threshold = self._floor(d, g)
        drain = self.net_drain_w(d, g)
        level = self.level_at(d, now, drain, g)
        below = (level < threshold) | ((level == threshold) & (drain > 0))
        return (self._of("min_level", d, g) > 0) & self._of("finite", d, g) & below
