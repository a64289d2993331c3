"""The array form of the fleet (:class:`LazyFleet`; the module netfl/sim/fleet.py says how it differs from the
actor form): idle devices are rows of :class:`~netfl.sim.idle_rows.IdleRows`, and a device is a
:class:`~netfl.sim.device.Device` only while it works, handed its rows' state (:class:`Handover`) as it starts
and folded back into them (its work added to a :class:`WorkAccount`) when its work ends."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import simpy

from netfl.policies.base import SessionPolicy
from netfl.policies.rows import SessionRow
from netfl.sim.device import Device, Usage
from netfl.sim.fleet_readings import ACTIVITIES, NOT_FL, DeviceStats, FleetState, battery_fractions
from netfl.sim.idle_rows import IdleRows


@dataclass(frozen=True)
class Handover:
    """What the arrays hand to a device's actor as it starts working: its state, and views of its rows."""

    policy: SessionPolicy
    level_j: float
    charger: SessionPolicy | None = None
    charging: bool = False
    usage: Usage | None = None
    using: bool = False
    levels: tuple | None = None  # its logged battery levels (netfl/sim/logged_levels.py), if its battery follows them


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
        self._halted = False  # interrupted: no model is asked again (halt)

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
            rows.levels.row(index) if rows.levels is not None else None,
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

    def halt(self) -> None:
        """The run was interrupted, perhaps inside a model's change or a user's policy that never returns: the
        totals take no more changes, and count each idle device up to its next change not taken (or now)."""
        self._halted = True

    def _totals(self) -> DeviceStats:
        now = self.env.now
        self._fold(list(self.active), stop=False)  # the run is over: account the working devices as they are
        rows = self.rows
        if self._halted:
            rows.settle_idle(now, taken_only=True)
        else:
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
            battery_fraction=battery_fractions(rows.level, self.table.capacity_j),
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
        battery = battery_fractions(level, self.table.capacity_j)
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

    def energy_spent_at(self, now: float) -> tuple[float, float]:
        """What :meth:`stats` would fold and settle, added up without its columns: the idle devices' draw since
        they were last settled, and the working devices' batteries. Each device's sum is the one
        :func:`~netfl.sim.fleet_readings.fleet_energy_j` takes of the columns (the same additions in the same
        order), but an activity only the devices that have worked draw (training, the radio) is added at their
        rows alone: at ten million devices each such column would be 80 MB of zeros at every evaluation."""
        self.rows.advance(now)
        idle_rows = self.rows.energy_at(now)
        worked = np.fromiter(self.worked, dtype=np.int64, count=len(self.worked))
        # activity -> a column (the idle draw, the owner's use) or (rows, values): zero elsewhere
        columns: dict[str, np.ndarray | tuple[np.ndarray, np.ndarray]] = {
            "idle": self._plus_worked(idle_rows["idle"], lambda a: a.idle_j)
        }
        activities = dict.fromkeys(a for a in ACTIVITIES if a != "idle")
        for account in self.worked.values():
            activities.update(dict.fromkeys(account.energy_j))
        for activity in activities:
            values = np.fromiter((a.energy_j.get(activity, 0.0) for a in self.worked.values()), np.float64, worked.size)
            columns[activity] = (worked, values)
        if self.rows.use_w.any():
            columns["use"] = self._plus_worked(idle_rows["use"], lambda a: a.use_j)
        if self.active:
            self._add_working(columns, now, worked)
        n = len(self)
        total, work = np.zeros(n), np.zeros(n)
        for activity, column in columns.items():
            for into in (total,) if activity in NOT_FL else (total, work):
                if isinstance(column, tuple):
                    into[column[0]] += column[1]
                else:
                    into += column
        return float(total.sum()), float(work.sum())

    def _add_working(self, columns: dict, now: float, worked: np.ndarray) -> None:
        """The working devices' batteries added into ``columns`` (:meth:`energy_spent_at`) at their rows: each
        device's value in an activity's rows the sum its column would hold."""
        position = {int(d): k for k, d in enumerate(worked)}
        extra: dict[str, dict[int, float]] = {}  # activity -> row -> joules, for rows not among ``worked``
        for index, device in self.active.items():
            for activity, joules in device.battery.energy_at(now).items():
                column = columns.setdefault(activity, (worked[:0], np.zeros(0)))
                if not isinstance(column, tuple):
                    column[index] += joules
                elif index in position and column[0] is worked:
                    column[1][position[index]] += joules
                else:
                    mine = extra.setdefault(activity, {})
                    mine[index] = mine.get(index, 0.0) + joules
        for activity, rows in extra.items():
            index, values = columns[activity]
            columns[activity] = (
                np.concatenate([index, np.fromiter(rows, np.int64, len(rows))]),
                np.concatenate([values, np.fromiter(rows.values(), np.float64, len(rows))]),
            )


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


__all__ = ["Handover", "LazyFleet", "LazyPolicy", "MakeDevice", "WorkAccount"]
