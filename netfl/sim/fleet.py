"""The server's view of all devices: who is eligible now, and the actor of a device it asks to work.

Two engines behind one interface:

* :class:`EagerFleet` -- every device is a :class:`~netfl.sim.device.Device`
  from the start, with its own SimPy processes; every online/offline change,
  battery mark and charger plug is an event in the log. The default: exact
  and readable, at a few kilobytes and some Python work per device and change.
* :class:`LazyFleet` -- devices are rows of arrays (:class:`DeviceTable`,
  a :class:`~netfl.policies.population.PopulationModel` per group, battery
  levels as linear functions of time). Availability is advanced only when
  the server asks, in vectorised steps; a device becomes a ``Device`` only
  while it works and is folded back into the arrays when the round ends.
  A million devices cost a few hundred bytes each. What nobody asked about
  is not logged: the event log holds the changes of working devices only;
  online time, energy and battery levels are still exact per device.

The lazy engine takes built-in policies with a population form, batteries
without chargers, and synchronous rounds; ``netfl validate`` says so when a
scenario asks for more.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import simpy

from netfl.policies.base import SessionPolicy
from netfl.policies.population import PopulationModel
from netfl.sim.device import Device
from netfl.sim.device_table import DeviceTable

ACTIVITIES = ("idle", "compute", "transmit", "receive")


@dataclass
class DeviceStats:
    """One value per device, at the end of a run (devices.parquet and the summary)."""

    group: list[str]
    tasks_started: np.ndarray
    updates_delivered: np.ndarray
    online_time_s: np.ndarray
    energy_by_activity_j: dict[str, np.ndarray]
    charged_j: np.ndarray
    battery_fraction: np.ndarray  # nan on mains power
    battery_empty: np.ndarray

    @property
    def energy_j(self) -> np.ndarray:
        return sum(self.energy_by_activity_j.values(), np.zeros(len(self.group)))


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
            group=[d.profile.group for d in self.devices],
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


def _fraction(level_j: float, capacity_j: float) -> float:
    return math.nan if math.isinf(capacity_j) else level_j / capacity_j


def _by_activity(energy: list[dict[str, float]]) -> dict[str, np.ndarray]:
    """Per-device energy dicts as one array per activity (the standard activities first, in their order)."""
    activities = dict.fromkeys(ACTIVITIES) | {a: None for e in energy for a in e}
    return {a: np.array([e.get(a, 0.0) for e in energy]) for a in activities}


def fleet_energy_j(by_activity: dict[str, np.ndarray], *, work_only: bool = False) -> float:
    """The fleet's total, summed as ``DeviceStats.energy_j.sum()`` sums it (so the two agree to the bit);
    ``work_only``: without the idle draw, i.e. what training and the radio cost (the energy FL spends)."""
    n = len(next(iter(by_activity.values()))) if by_activity else 0
    arrays = [e for activity, e in by_activity.items() if not (work_only and activity == "idle")]
    return float(sum(arrays, np.zeros(n)).sum())


MakeDevice = Callable[[int, "LazyPolicy", float], Device]


class LazyFleet:
    """Devices as arrays; a ``Device`` only while one works (see the module docstring)."""

    def __init__(
        self, env: simpy.Environment, table: DeviceTable, models: Sequence[PopulationModel], make_device: MakeDevice
    ):
        self.env = env
        self.table = table
        self.slices = table.group_slices()
        self.models = list(models)
        if len(self.models) != len(self.slices):
            raise ValueError(f"{len(self.models)} availability models for {len(self.slices)} groups")
        self._make = make_device
        n = len(table)
        self.level_j = table.initial_j.copy()
        self.since = np.zeros(n)  # level_j and the idle energy are accounted up to here
        self.dead_at = np.full(n, math.inf)
        self.below_at = np.full(n, math.inf)  # when the level falls to min_level while idle
        self._update_marks(np.arange(n))
        self.busy = np.zeros(n, dtype=bool)
        self.tasks_started = np.zeros(n, dtype=np.int64)
        self.updates_delivered = np.zeros(n, dtype=np.int64)
        self.online_time_s = np.zeros(n)
        self.energy_j = {a: np.zeros(n) for a in ACTIVITIES}
        self.active: dict[int, Device] = {}
        self.round_starts: list[float] = []  # simulated time at which each round started

    def __len__(self) -> int:
        return len(self.table)

    # --------------------------------------------------------------- battery

    def _update_marks(self, devices: np.ndarray) -> None:
        """When each device, idle from ``since`` on, empties and falls to its min_level (inf on mains power)."""
        idle, level, since = self.table.idle_w[devices], self.level_j[devices], self.since[devices]
        mains = np.isinf(self.table.capacity_j[devices])
        floor = self.table.min_level[devices] * np.where(mains, 0.0, self.table.capacity_j[devices])
        with np.errstate(divide="ignore", invalid="ignore"):
            empty = np.where(~mains & (idle > 0), since + level / idle, math.inf)
            below = np.where(~mains & (idle > 0), since + (level - floor) / idle, math.inf)
        empty = np.where(~mains & (level <= 0), np.minimum(self.dead_at[devices], since), empty)  # died working
        self.dead_at[devices] = empty
        self.below_at[devices] = np.minimum(np.where(~mains & (level <= floor), since, below), empty)

    def _settle_idle(self, devices: np.ndarray, now: float) -> None:
        """Account the idle drain of ``devices`` (not working) up to ``now``."""
        until = np.minimum(now, self.dead_at[devices])
        spent = self.table.idle_w[devices] * np.maximum(until - self.since[devices], 0.0)
        self.energy_j["idle"][devices] += spent
        finite = np.isfinite(self.level_j[devices])
        self.level_j[devices[finite]] = np.maximum(self.level_j[devices[finite]] - spent[finite], 0.0)
        self.since[devices] = now

    # ----------------------------------------------------------- availability

    def _accrue(self, offset: int, rounds: bool) -> Callable:
        """A flip hook adding each finished online stretch, cut at the device's death, to its online time."""

        def hook(devices, since, at, was_on):
            if not was_on.any():
                return
            devices, since, at = devices[was_on] + offset, since[was_on], at[was_on]
            if rounds:
                since, at = self._round_time(since), self._round_time(at)
            cap = self.dead_at[devices]
            self.online_time_s[devices] += np.maximum(np.minimum(at, cap) - np.minimum(since, cap), 0.0)

        return hook

    def _round_time(self, rounds: np.ndarray) -> np.ndarray:
        starts = np.asarray(self.round_starts)
        return starts[np.clip(rounds.astype(np.int64), 0, len(starts) - 1)]

    def _advance(self, round_index: int | None) -> None:
        now = self.env.now
        for sl, model in zip(self.slices, self.models):
            if model.time_base == "round":
                if round_index is not None:
                    model.advance(round_index, self._accrue(sl.start, rounds=True))
            else:
                model.advance(now, self._accrue(sl.start, rounds=False))

    def online(self) -> np.ndarray:
        return np.concatenate([m.state for m in self.models]) if self.models else np.zeros(0, dtype=bool)

    def eligible(self, round_index: int) -> np.ndarray:
        self.round_starts.append(self.env.now)
        self._advance(round_index)
        ok = self.online() & (self.env.now < self.below_at) & ~self.busy
        return np.flatnonzero(ok)

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
        self._settle_idle(new, self.env.now)
        for index in new.tolist():
            g = int(self.table.group[index])
            policy = LazyPolicy(self, g, index - self.slices[g].start)
            self.active[index] = self._make(index, policy, float(self.level_j[index]))
        self.busy[new] = True

    def release(self, indices: Sequence[int]) -> None:
        done = [int(i) for i in indices if int(i) in self.active and self.active[int(i)].task is None]
        self._fold(done, stop=True)

    def _fold(self, indices: list[int], stop: bool) -> None:
        """Write devices' working time back into the arrays and forget their actors."""
        if not indices:
            return
        now = self.env.now
        for index in indices:
            device = self.active.pop(index)
            if stop:
                device.stop()
            device.battery.settle(now)
            for activity, joules in device.battery.energy_j.items():
                if activity not in self.energy_j:
                    self.energy_j[activity] = np.zeros(len(self))
                self.energy_j[activity][index] += joules
            self.tasks_started[index] += device.tasks_started
            self.updates_delivered[index] += device.updates_delivered
            self.level_j[index] = device.battery.level_j
            if device.dead:
                self.dead_at[index] = device.died_at
        rows = np.array(indices, dtype=np.int64)
        self.since[rows] = now
        self.busy[rows] = False
        self._update_marks(rows)

    # ----------------------------------------------------------------- stats

    def stats(self) -> DeviceStats:
        now = self.env.now
        self._fold(list(self.active), stop=False)  # the run is over: account the working devices as they are
        self._advance(None)
        self._settle_idle(np.arange(len(self)), now)
        online = self.online_time_s.copy()
        for sl, model in zip(self.slices, self.models):  # the stretch still open at the end
            on = np.flatnonzero(model.state)
            devices = on + sl.start
            start = model.since[on]
            if model.time_base == "round":
                start = self._round_time(start)
            until = np.minimum(now, self.dead_at[devices])
            online[devices] += np.maximum(until - np.minimum(start, until), 0.0)
        capacity = self.table.capacity_j
        with np.errstate(invalid="ignore"):
            fraction = np.where(np.isinf(capacity), math.nan, self.level_j / capacity)
        return DeviceStats(
            group=[self.table.group_names[g] for g in self.table.group],
            tasks_started=self.tasks_started.copy(),
            updates_delivered=self.updates_delivered.copy(),
            online_time_s=online,
            energy_by_activity_j={a: e.copy() for a, e in self.energy_j.items()},
            charged_j=np.zeros(len(self)),
            battery_fraction=fraction,
            battery_empty=self.dead_at <= now,
        )

    def state_at(self, now: float) -> FleetState:
        """The arrays at ``now``: continuous-time availability advanced to it (the realisation depends on the seed
        alone, not on when it is advanced), idle batteries drained since they were last settled, the working
        devices' actors read as they are."""
        self._advance(None)
        online = self.online() & (self.dead_at > now)
        capacity = self.table.capacity_j
        until = np.minimum(now, self.dead_at)
        level = np.maximum(self.level_j - self.table.idle_w * np.maximum(until - self.since, 0.0), 0.0)
        below = now >= self.below_at
        working, dead = np.zeros(len(self), dtype=bool), self.dead_at <= now
        started, delivered = self.tasks_started.copy(), self.updates_delivered.copy()
        for index, device in self.active.items():  # a working device's battery and counts are its actor's
            level[index] = device.battery.level_at(now)
            below[index], dead[index] = device.below_min, device.dead
            online[index] = device.online and not device.dead
            working[index] = device.task is not None
            started[index] += device.tasks_started
            delivered[index] += device.updates_delivered
        with np.errstate(invalid="ignore"):
            battery = np.where(np.isinf(capacity), math.nan, level / capacity)
        return FleetState(
            online=online,
            available=online & ~below,
            working=working,
            charging=np.zeros(len(self), dtype=bool),  # the lazy engine takes no chargers
            dead=dead,
            below_min=below,
            battery=battery,
            tasks_started=started,
            updates_delivered=delivered,
        )

    def energy_at(self, now: float) -> dict[str, np.ndarray]:
        """What :meth:`stats` would fold and settle, added up on copies: the idle devices' drain since they were
        last settled, and the working devices' batteries."""
        spent = self.table.idle_w * np.maximum(np.minimum(now, self.dead_at) - self.since, 0.0)
        working = np.fromiter(self.active, dtype=np.int64, count=len(self.active))
        spent[working] = 0.0  # a working device's idle draw is in its battery
        by_activity = dict(self.energy_j)
        by_activity["idle"] = by_activity["idle"] + spent
        copied = {"idle"}
        for index, device in self.active.items():
            for activity, joules in device.battery.energy_at(now).items():
                if activity not in copied:
                    base = by_activity.get(activity)
                    by_activity[activity] = np.zeros(len(self)) if base is None else base.copy()
                    copied.add(activity)
                by_activity[activity][index] += joules
        return by_activity


class LazyPolicy(SessionPolicy):
    """A working device's view of its group's population model, through the per-device protocol."""

    def __init__(self, fleet: LazyFleet, group: int, row: int):
        self.model, self.row = fleet.models[group], row
        self._hook = fleet._accrue(fleet.slices[group].start, rounds=self.model.time_base == "round")
        self.label = self.model.policy  # what the event log names (netfl.policies.catalog.policy_label)

    def online(self, now: float, state) -> bool:
        if self.model.time_base == "round":  # per-round policies change only at round starts
            return bool(self.model.state[self.row])
        return self.model.advance_one(self.row, now, self._hook)

    def next_wakeup(self, now: float) -> float:
        if self.model.time_base == "round":
            return math.inf
        self.model.advance_one(self.row, now, self._hook)
        return float(self.model.change[self.row])


__all__ = ["ACTIVITIES", "DeviceStats", "FleetState", "Fleet", "EagerFleet", "LazyFleet", "LazyPolicy"]
