"""An idle device's battery in closed form: its net drain and its level at any instant, read for many devices
at once (netfl/sim/idle_changes.py takes the changes).

Between two changes a device's power is constant -- the idle draw (while it
is on), its owner's use, less the charger (while plugged in) -- so its level
is linear in time, clipped to [0, capacity]: :class:`IdleBattery` holds
every device's level and accounts as arrays and reads these for any set
of devices at once (who is eligible, the energy at an evaluation), reading a
quantity a whole group shares once. The physics is
:class:`~netfl.sim.battery.Battery`'s: a dead phone draws nothing, charges
while plugged in, a full battery stays full, the charger feeds the loads
first. Settling the accounts between two changes, the battery's next mark
and the marks passed on the way (full, and min_level on the way down, logged
where idle devices' events are wanted) are the compiled step's
(:mod:`netfl.kernels.idle_step`), the same arithmetic as these reads.
"""

from __future__ import annotations

import math

import numpy as np

from netfl.sim.device_table import DeviceTable
from netfl.sim.idle_events import IdleEvents
from netfl.sim.logged_levels import LoggedPower

_INF = math.inf


# numpy's boolean indexing and np.where take a branch per row, and on the random masks of devices' changes they
# cost about ten times a product or an index: the steps below select rows by index (np.flatnonzero) and zero loads
# by multiplying with a mask -- the same numbers, for the finite, non-negative powers and times they are given.


def _when(mask: np.ndarray, value: np.ndarray | float) -> np.ndarray:
    """``value`` where ``mask``, else 0 (``value`` finite and >= 0: exactly ``np.where(mask, value, 0.0)``)."""
    return mask * value


class IdleBattery:
    """Every device's battery and energy accounts between its changes (see the module docstring)."""

    def __init__(self, table: DeviceTable, use_w: np.ndarray, levels: LoggedPower | None = None):
        """``use_w``: each device's power while its owner uses it; ``levels``: the batteries driven by their logged
        levels (netfl/sim/logged_levels.py), if any."""
        self.table = table
        self.levels = levels
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
        if self.levels is not None:  # the compiled step's: a dead device draws nothing, a logged rise still charges
            logged = self.levels.power_w[d]
            load += np.where(self.alive[d] | (logged < 0), logged, 0.0)
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

    def _floor(self, d: np.ndarray | slice, g: int | None = None) -> np.ndarray | float:
        """Devices ``d``'s min_level in joules (0 on mains power)."""
        return self._of("min_level", d, g) * np.where(self._of("finite", d, g), self._of("capacity", d, g), 0.0)

    def below_min(self, d: np.ndarray | slice, now: float, g: int | None = None) -> np.ndarray:
        """Whether each of devices ``d`` is below its ``min_level`` at ``now`` (at it exactly: while draining), as
        the actor's battery watch says."""
        threshold = self._floor(d, g)
        drain = self.net_drain_w(d, g)
        level = self.level_at(d, now, drain, g)
        below = (level < threshold) | ((level == threshold) & (drain > 0))
        return (self._of("min_level", d, g) > 0) & self._of("finite", d, g) & below
