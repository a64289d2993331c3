"""The server's view of all devices: who is eligible now, and the actor of a device it asks to work.

The two forms of the engine behind one interface (netfl/config/engine_form.py chooses):

* :class:`EagerFleet` -- the actor form: every device is a
  :class:`~netfl.sim.device.Device` from the start, with its own SimPy
  processes; every online/offline change, battery mark, charger plug and
  session of use is an event in the log, at a few kilobytes and some Python
  work per device and change. Needed for per-device policy classes and edge
  servers.
* :class:`LazyFleet` -- the array form: idle devices are rows
  (:class:`~netfl.sim.idle_rows.IdleRows`: availability, chargers and the
  owner's use as population models, batteries in closed form), advanced only
  when the server asks; a device becomes a ``Device`` only while it works,
  with views of its rows, and is folded back when its work ends. A million
  devices cost a few hundred bytes each; the event log holds the work (and,
  if asked, the idle devices' events, which the rows log:
  netfl/sim/idle_events.py), and online time, energy and battery levels are
  exact per device.

Both draw the same world from one seed (tests/engine/test_one_world.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import simpy

from netfl.policies.base import SessionPolicy
from netfl.policies.rows import SessionRow
from netfl.sim.device import Device, Usage
from netfl.sim.idle_rows import IdleRows

ACTIVITIES = ("idle", "compute", "transmit", "receive")


@dataclass
class DeviceStats:
    """One value per device, at the end of a run (devices.parquet and the summary); ``group``: each device's
    index into ``group_names`` (a million devices' names would be a million strings)."""

    group: np.ndarray
    group_names: list[str]
    tasks_started: np.ndarray
    updates_delivered: np.ndarray
    online_time_s: np.ndarray
    energy_by_activity_j: dict[str, np.ndarray]
    charged_j: np.ndarray
    battery_fraction: np.ndarray  # nan on mains power
    battery_empty: np.ndarray

    @property
    def energy_j(self) -> np.ndarray:
        return summed(self.energy_by_activity_j.values(), len(self.group))

    @property
    def work_energy_j(self) -> np.ndarray:
        """What federated learning cost each device: all but standing by and its owner's use."""
        work = [e for activity, e in self.energy_by_activity_j.items() if activity not in NOT_FL]
        return summed(work, len(self.group))


@dataclass
class FleetState:
    """Every device at one instant, as the timeline reads it (netfl/sim/timeline.py); reading it changes nothing.

    ``online``: its availability says so and its battery is not empty; ``available``: online and above its
    battery's ``min_level`` (it could be asked, busy or not); ``working``: a task under way; ``battery``: the
    charge as a fraction (NaN on mains power); ``tasks_started`` and ``updates_delivered``: totals so far."""

    online: np.ndarray
    available: np.ndarray
    working: np.ndarray
    charging: np.ndarray
    dead: np.ndarray
    below_min: np.ndarray
    battery: np.ndarray
    tasks_started: np.ndarray
    updates_delivered: np.ndarray


class Fleet(Protocol):
    def __len__(self) -> int: ...

    def eligible(self, round_index: int) -> np.ndarray:
        """Indices (ascending) of the devices that can be asked to train at the start of ``round_index``."""

    def __getitem__(self, index: int) -> Device:
        """The device's actor (the lazy fleet brings it to life)."""

    def activate(self, indices: Sequence[int]) -> None:
        """These devices are about to work (the lazy fleet brings them to life together)."""

    def release(self, indices: Sequence[int]) -> None:
        """The round is over for these devices (the lazy fleet folds idle ones back into its arrays)."""

    def stats(self) -> DeviceStats:
        """Per-device totals up to now."""

    def energy_at(self, now: float) -> dict[str, np.ndarray]:
        """Energy drawn by each device for each activity up to ``now`` (the present), equal to ``stats()``'s at
        that instant but settling nothing (metrics.csv's cumulative energy, read at every evaluation)."""

    def state_at(self, now: float) -> FleetState:
        """Every device at ``now`` (the present), settling and drawing nothing."""


class EagerFleet:
    """Every device a live actor, as built."""

    def __init__(self, devices: Sequence[Device]):
        self.devices = list(devices)

    def __len__(self) -> int:
        return len(self.devices)

    def __getitem__(self, index: int) -> Device:
        return self.devices[index]

    def __iter__(self):
        return iter(self.devices)

    def eligible(self, round_index: int) -> np.ndarray:
        return np.fromiter((d.index for d in self.devices if d.eligible(round_index)), dtype=np.int64)

    def activate(self, indices: Sequence[int]) -> None:
        pass

    def release(self, indices: Sequence[int]) -> None:
        pass

    def stats(self) -> DeviceStats:
        for d in self.devices:
            d.settle()
        energy = _by_activity([d.battery.energy_j for d in self.devices])
        return DeviceStats(
            **_groups([d.profile.group for d in self.devices]),
            tasks_started=np.array([d.tasks_started for d in self.devices]),
            updates_delivered=np.array([d.updates_delivered for d in self.devices]),
            online_time_s=np.array([d.online_time_s for d in self.devices]),
            energy_by_activity_j=energy,
            charged_j=np.array([d.battery.charged_j for d in self.devices]),
            battery_fraction=np.array(
                [math.nan if d.battery.mains else d.battery.level_j / d.battery.capacity_j for d in self.devices]
            ),
            battery_empty=np.array([d.dead for d in self.devices]),
        )

    def energy_at(self, now: float) -> dict[str, np.ndarray]:
        return _by_activity([d.battery.energy_at(now) for d in self.devices])

    def state_at(self, now: float) -> FleetState:
        devices = self.devices
        online = np.array([d.online and not d.dead for d in devices], dtype=bool)
        below = np.array([d.below_min for d in devices], dtype=bool)
        return FleetState(
            online=online,
            available=online & ~below,
            working=np.array([d.task is not None for d in devices], dtype=bool),
            charging=np.array([d.battery.charging for d in devices], dtype=bool),
            dead=np.array([d.dead for d in devices], dtype=bool),
            below_min=below,
            battery=np.array([_fraction(d.battery.level_at(now), d.battery.capacity_j) for d in devices]),
            tasks_started=np.array([d.tasks_started for d in devices], dtype=np.int64),
            updates_delivered=np.array([d.updates_delivered for d in devices], dtype=np.int64),
        )


def _groups(names: list[str]) -> dict:
    """Per-device group names as DeviceStats keeps them: indices into the distinct names."""
    distinct = list(dict.fromkeys(names))
    index = {name: i for i, name in enumerate(distinct)}
    return {"group": np.fromiter((index[n] for n in names), dtype=np.int32, count=len(names)), "group_names": distinct}


def _fraction(level_j: float, capacity_j: float) -> float:
    return math.nan if math.isinf(capacity_j) else level_j / capacity_j


def _fractions(level_j: np.ndarray, capacity_j: np.ndarray) -> np.ndarray:
    """:func:`_fraction` of every device, computed in ``level_j`` (an array the caller gives up)."""
    with np.errstate(invalid="ignore"):
        level_j /= capacity_j
    level_j[np.isinf(capacity_j)] = math.nan
    return level_j


def _by_activity(energy: list[dict[str, float]]) -> dict[str, np.ndarray]:
    """Per-device energy dicts as one array per activity (the standard activities first, in their order)."""
    activities = dict.fromkeys(ACTIVITIES) | {a: None for e in energy for a in e}
    return {a: np.array([e.get(a, 0.0) for e in energy]) for a in activities}


#: What a device draws whether or not it takes part in FL: standing by, and its owner's use.
NOT_FL = ("idle", "use")


def fleet_energy_j(by_activity: dict[str, np.ndarray], *, work_only: bool = False) -> float:
    """The fleet's total, summed as ``DeviceStats.energy_j.sum()`` sums it (so the two agree to the bit);
    ``work_only``: without the idle draw and the owner's use, i.e. what training and the radio cost (the energy
    FL spends)."""
    n = len(next(iter(by_activity.values()))) if by_activity else 0
    arrays = [e for activity, e in by_activity.items() if not (work_only and activity in NOT_FL)]
    return float(summed(arrays, n).sum())


def summed(arrays: Iterable[np.ndarray], n: int) -> np.ndarray:
    """``sum(arrays, np.zeros(n))`` -- the same additions in the same order, so the same bits -- in one array, not
    one per addition (at ten million devices each is 80 MB)."""
    total = np.zeros(n)
    for values in arrays:
        total += values
    return total


@dataclass(frozen=True)
class Handover:
    """What the arrays hand to a device's actor as it starts working: its state, and views of its rows."""

    policy: SessionPolicy
    level_j: float
    charger: SessionPolicy | None = None
    charging: bool = False
    usage: Usage | None = None
    using: bool = False


MakeDevice = Callable[[int, Handover], Device]


class WorkAccount:
    """What one device's actors drew and did, added up over its tasks (the array form keeps one only for the
    devices that have worked: a few among millions)."""

    __slots__ = ("energy_j", "idle_j", "use_j", "charged_j", "tasks_started", "updates_delivered")

    def __init__(self) -> None:
        self.energy_j: dict[str, float] = {}  # training and the radio, by activity
        self.idle_j = self.use_j = self.charged_j = 0.0  # the idle draw and the owner's use while working
        self.tasks_started = self.updates_delivered = 0

    def add(self, device: Device) -> None:
        energy = dict(device.battery.energy_j)
        self.idle_j += energy.pop("idle", 0.0)
        self.use_j += energy.pop("use", 0.0)
        for activity, joules in energy.items():
            self.energy_j[activity] = self.energy_j.get(activity, 0.0) + joules
        self.charged_j += device.battery.charged_j
        self.tasks_started += device.tasks_started
        self.updates_delivered += device.updates_delivered


class LazyFleet:
    """Devices as rows of arrays (:class:`~netfl.sim.idle_rows.IdleRows`); a ``Device`` only while one works."""

    def __init__(self, env: simpy.Environment, rows: IdleRows, make_device: MakeDevice):
        self.env = env
        self.rows = rows
        self.table = rows.table
        self.slices = rows.slices
        self._make = make_device
        self.worked: dict[int, WorkAccount] = {}  # the devices that have worked (at scale a few among millions)
        self.active: dict[int, Device] = {}
        self.upload_bps: dict[int, float] = {}  # what each device's last upload achieved (partial work plans with it)
        self._final: DeviceStats | None = None  # the totals, once the run is over (stats)

    def __len__(self) -> int:
        return len(self.table)

    @property
    def busy(self) -> np.ndarray:
        return self.rows.busy

    def eligible(self, round_index: int) -> np.ndarray:
        now = self.env.now
        self.rows.advance(now)
        self.rows.start_round(round_index, now)
        return self.rows.eligible(now)

    # ---------------------------------------------------------------- actors

    def __getitem__(self, index: int) -> Device:
        device = self.active.get(index)
        if device is None:
            self.activate([index])
            device = self.active[index]
        return device

    def activate(self, indices: Sequence[int]) -> None:
        """Bring these devices to life (one vectorised settle for all of them)."""
        new = np.array(sorted({int(i) for i in indices} - self.active.keys()), dtype=np.int64)
        if not new.size:
            return
        now, rows = self.env.now, self.rows
        rows.advance(now, new)
        rows.take(new, now)
        for index in new.tolist():
            device = self._make(index, self._handover(index))
            device.upload_bps = self.upload_bps.get(index)
            self.active[index] = device

    def _handover(self, index: int) -> Handover:
        rows = self.rows
        g = int(self.table.group[index])
        row, group = index - self.slices[g].start, rows.groups[g]
        usage = Usage(SessionRow.row_of(group.usage.model, row), group.usage.spec) if group.usage is not None else None
        return Handover(
            LazyPolicy(rows, index),
            float(rows.level[index]),
            SessionRow.row_of(group.charger, row) if group.charger is not None else None,
            bool(rows.charging[index]),
            usage,
            bool(rows.using[index]),
        )

    def release(self, indices: Sequence[int]) -> None:
        done = [int(i) for i in indices if int(i) in self.active and self.active[int(i)].task is None]
        self._fold(done, stop=True)

    def _fold(self, indices: list[int], stop: bool) -> None:
        """Write devices' working time back into the arrays and forget their actors."""
        if not indices:
            return
        devices = [self.active.pop(index) for index in indices]
        for index, device in zip(indices, devices):
            if stop:
                device.stop()
            device.settle()
            account = self.worked.get(index)
            if account is None:
                account = self.worked[index] = WorkAccount()
            account.add(device)
            if device.upload_bps is not None:
                self.upload_bps[index] = device.upload_bps

        def each(read) -> np.ndarray:
            return np.array([read(device) for device in devices])

        self.rows.give_back(
            np.array(indices, dtype=np.int64),
            self.env.now,
            level_j=each(lambda device: device.battery.level_j),
            alive=each(lambda device: not device.dead),
            charging=each(lambda device: device.battery.charging),
            using=each(lambda device: device.using),
            online=each(lambda device: device.online),
            online_time_s=each(lambda device: device.online_time_s),
        )

    # ----------------------------------------------------------------- stats

    def _worked_column(self, read: Callable[[WorkAccount], float], dtype=np.float64) -> np.ndarray:
        """One value per device: ``read(account)`` for the devices that have worked, 0 for the rest."""
        column = np.zeros(len(self), dtype=dtype)
        if self.worked:
            column[np.fromiter(self.worked, dtype=np.int64, count=len(self.worked))] = np.fromiter(
                (read(a) for a in self.worked.values()), dtype=dtype, count=len(self.worked)
            )
        return column

    def _plus_worked(self, column: np.ndarray, read: Callable[[WorkAccount], float]) -> np.ndarray:
        """``column + self._worked_column(read)``, computed in ``column`` (an array of the caller's own): the same
        additions -- 0.0 for a device that has not worked, which changes nothing but a -0.0 -- without a whole
        column of zeros beside it."""
        column += 0.0
        if self.worked:
            index = np.fromiter(self.worked, dtype=np.int64, count=len(self.worked))
            column[index] += np.fromiter((read(a) for a in self.worked.values()), dtype=np.float64, count=index.size)
        return column

    def _energy(self, idle_rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every device's energy by activity: the idle rows' loads (``idle_rows``, added to in place) and the
        working accounts'."""
        energy = {"idle": self._plus_worked(idle_rows["idle"], lambda a: a.idle_j)}
        activities = dict.fromkeys(a for a in ACTIVITIES if a != "idle")
        for account in self.worked.values():
            activities.update(dict.fromkeys(account.energy_j))
        for activity in activities:
            energy[activity] = self._worked_column(lambda a, activity=activity: a.energy_j.get(activity, 0.0))
        if self.rows.use_w.any():
            energy["use"] = self._plus_worked(idle_rows["use"], lambda a: a.use_j)
        return energy

    def stats(self) -> DeviceStats:
        """Every device's totals at the end of the run, made once: the working devices are accounted as they are,
        and the idle rows' accounts become the totals' columns in place (at ten million devices copies of them
        would be gigabytes beside the world), so the fleet is neither advanced nor read after."""
        if self._final is None:
            self._final = self._totals()
        return self._final

    def _totals(self) -> DeviceStats:
        now = self.env.now
        self._fold(list(self.active), stop=False)  # the run is over: account the working devices as they are
        rows = self.rows
        rows.advance(now)
        rows.settle_idle(now)
        return DeviceStats(
            group=self.table.group,
            group_names=list(self.table.group_names),
            tasks_started=self._worked_column(lambda a: a.tasks_started, np.int64),
            updates_delivered=self._worked_column(lambda a: a.updates_delivered, np.int64),
            online_time_s=rows.online_time_s,
            energy_by_activity_j=self._energy(rows.energy_j),
            charged_j=self._plus_worked(rows.charged_j, lambda a: a.charged_j),
            battery_fraction=_fractions(rows.level, self.table.capacity_j),
            battery_empty=rows.finite & ~rows.alive,
        )

    def state_at(self, now: float) -> FleetState:
        """Every device at ``now``: the idle ones advanced to it (the realisation depends on the seed alone, not
        on when it is advanced; nothing is settled), the working devices' actors read as they are."""
        rows = self.rows
        rows.advance(now)
        online = rows.online & rows.alive
        level, below = np.empty(len(self)), np.empty(len(self), dtype=bool)
        for g, part in rows.steps():  # ranges of rows, not gathered, a bounded step at a time
            level[part] = rows.level_at(part, now, g=g)
            below[part] = rows.below_min(part, now, g=g)
        working, dead = np.zeros(len(self), dtype=bool), rows.finite & ~rows.alive
        charging = rows.charging.copy()
        started = self._worked_column(lambda a: a.tasks_started, np.int32)  # the timeline's counts: 32 bits
        delivered = self._worked_column(lambda a: a.updates_delivered, np.int32)
        for index, device in self.active.items():  # a working device's battery and counts are its actor's
            level[index] = device.battery.level_at(now)
            below[index], dead[index] = device.below_min, device.dead
            online[index] = device.online and not device.dead
            working[index] = device.task is not None
            charging[index] = device.battery.charging
            started[index] += device.tasks_started
            delivered[index] += device.updates_delivered
        battery = _fractions(level, self.table.capacity_j)
        return FleetState(
            online=online,
            available=online & ~below,
            working=working,
            charging=charging,
            dead=dead,
            below_min=below,
            battery=battery,
            tasks_started=started,
            updates_delivered=delivered,
        )

    def energy_at(self, now: float) -> dict[str, np.ndarray]:
        """What :meth:`stats` would fold and settle, added up on copies: the idle devices' draw since they were
        last settled, and the working devices' batteries."""
        self.rows.advance(now)
        by_activity = self._energy(self.rows.energy_at(now))
        for index, device in self.active.items():
            for activity, joules in device.battery.energy_at(now).items():
                if activity not in by_activity:
                    by_activity[activity] = np.zeros(len(self))
                by_activity[activity][index] += joules
        return by_activity


class LazyPolicy(SessionPolicy):
    """A working device's view of its group's availability model, through the per-device protocol: a per-round
    pattern changes only at round starts (the arrays step it), a continuous one at its flips."""

    def __init__(self, rows: IdleRows, index: int):
        g = int(rows.table.group[index])
        self.model, self.row = rows.groups[g].availability, index - rows.slices[g].start
        self.label = self.model.policy  # what the event log names (netfl.policies.catalog.policy_label)

    def online(self, now: float, state) -> bool:
        if self.model.time_base == "round":
            on = bool(self.model.state[self.row])
        else:
            on = self.model.advance_one(self.row, now)
        return on and (state.charging or not getattr(self.model, "requires_charging", False))

    def next_wakeup(self, now: float) -> float:
        if self.model.time_base == "round":
            return math.inf
        self.model.advance_one(self.row, now)
        return float(self.model.change[self.row])


__all__ = ["ACTIVITIES", "DeviceStats", "FleetState", "Fleet", "EagerFleet", "LazyFleet", "LazyPolicy"]
