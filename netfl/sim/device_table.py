"""Every device's fixed parameters, as one array per quantity.

The quantities are declared once, in :data:`netfl.registry.device_params.DEVICE_COLUMNS`: each is an attribute of
:class:`DeviceTable` and of a device's :class:`DeviceProfile`, and
:func:`netfl.assemble.world.device_table` draws it once per group from the scenario seed (one stream per group
and quantity), so a device's values depend only on the seed, its group and its position in the group. Arrays
rather than one object per device: the array form keeps a million devices here for a few dozen bytes each (a
value the whole group shares is a read-only broadcast, no memory per device) and builds a :class:`DeviceProfile`
and a :class:`~netfl.sim.battery.Battery` only for a device that works.
"""

from __future__ import annotations

import math

import numpy as np

from netfl.registry.device_params import DEVICE_COLUMNS
from netfl.sim.battery import Battery

#: The table's quantities, by name, in the declaration's order.
COLUMNS: tuple[str, ...] = tuple(column.name for column in DEVICE_COLUMNS)


class DeviceProfile:
    """The fixed physical parameters of one device: ``index``, ``group`` (its name) and each quantity of
    :data:`COLUMNS` as a float (``profile.compute_w``)."""

    def __init__(self, index: int, group: str, **values: float):
        self.index = index
        self.group = group
        vars(self).update(values)

    def __repr__(self) -> str:
        return f"DeviceProfile({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


class DeviceTable:
    """Every device's quantities: ``group`` (an index into ``group_names``, devices of a group contiguous) and one
    array per name of :data:`COLUMNS`, each an attribute (``table.capacity_j``) and in ``columns``."""

    def __init__(self, group: np.ndarray, group_names: list[str], **columns: np.ndarray):
        if set(columns) != set(COLUMNS):
            missing, unknown = sorted(set(COLUMNS) - set(columns)), sorted(set(columns) - set(COLUMNS))
            raise TypeError(f"DeviceTable takes the columns {', '.join(COLUMNS)}; missing {missing}, unknown {unknown}")
        self.group = group
        self.group_names = group_names
        self.columns = {name: columns[name] for name in COLUMNS}
        vars(self).update(self.columns)

    def __len__(self) -> int:
        return len(self.group)

    def group_slices(self) -> list[slice]:
        """The devices of each group (groups are contiguous, in scenario order)."""
        counts = np.bincount(self.group, minlength=len(self.group_names))
        ends = np.cumsum(counts)
        return [slice(int(e - c), int(e)) for c, e in zip(counts, ends)]

    def profile(self, i: int) -> DeviceProfile:
        values = {name: float(column[i]) for name, column in self.columns.items()}
        return DeviceProfile(i, self.group_names[self.group[i]], **values)

    def battery(self, i: int, level_j: float | None = None, now: float = 0.0) -> Battery:
        """Device i's battery at ``now`` holding ``level_j`` (its initial charge if None)."""
        capacity = float(self.capacity_j[i])
        if math.isinf(capacity):
            return Battery.on_mains(now)
        level = float(self.initial_j[i]) if level_j is None else level_j
        return Battery(capacity, level, float(self.min_level[i]), float(self.charge_w[i]), now=now)
