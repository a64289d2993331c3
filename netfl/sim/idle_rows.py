"""Idle devices as rows of arrays: availability, the owner's use, the charger and the battery, in closed form.

Between two changes of its own a device's power is constant -- the idle draw
(while it is on), its owner's use (while a session runs that began while it
was on), less the charger (while plugged in) -- so its battery level is
linear in time, clipped to [0, capacity]. Its changes are the flips of its
availability, usage and charger models (:mod:`netfl.policies.population`)
and the instant its battery empties, computed from the level and the net
drain. :class:`IdleRows` processes each device's changes in its own time
order, vectorised over the devices due, and only when the engine asks: a
million devices cost a few arrays, and a device nobody asks about costs
nothing per change. The physics is :class:`~netfl.sim.device.Device`'s with
its :class:`~netfl.sim.battery.Battery`: a dead phone draws nothing, charges
while plugged in and powers on when plugged into a charger that out-supplies
its idle draw; a full battery stays full; the charger feeds the loads first.

The accounts (energy by load, charge, online time) are settled only at a
device's own changes and when it starts or stops working, never at the
instant someone reads them, so reading the world (the timeline, the energy
at an evaluation) changes no result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from netfl.policies.population import PopulationModel
from netfl.sim.device_table import DeviceTable


@dataclass(frozen=True)
class UsageSetup:
    """A device group's own use (netfl/policies/usage.py): when (a population model), its power, and whether a
    device in use is still idle enough to train."""

    model: PopulationModel
    power_w: float
    train_while_in_use: bool = False


@dataclass(frozen=True)
class GroupRows:
    """One device group's models: availability, and optionally a charger and the owner's use."""

    availability: PopulationModel
    charger: PopulationModel | None = None
    usage: UsageSetup | None = None


_INF = math.inf
#: Rows taken in one vectorised step: the temporaries of a step (a few arrays of this many values) stay below
#: the size above which the C library maps fresh pages for each one and returns them after -- at ten million
#: devices whole-size temporaries at every round cost more time in page faults than in arithmetic.
_ROWS_PER_STEP = 1 << 18
# the sources of a device's changes, in the order in which changes at the same instant are taken
# (_FLOOR: a charging battery rising to its min_level, which makes the device eligible again)
_EMPTY, _FLOOR, _AVAILABILITY, _CHARGER, _USAGE = range(5)


def _per_group(values: list[float], slices: list[slice]) -> np.ndarray:
    """A quantity constant within each group, per device: a read-only broadcast (no memory per device) when every
    group has the same value."""
    n = slices[-1].stop if slices else 0
    if len(set(values)) <= 1:
        return np.broadcast_to(np.float64(values[0] if values else 0.0), (n,))
    return np.concatenate([np.full(sl.stop - sl.start, v) for v, sl in zip(values, slices)])


class IdleRows:
    """Every device's state between its tasks (see the module docstring); the fleet hands working devices to
    actors (:meth:`take`) and back (:meth:`give_back`)."""

    def __init__(self, table: DeviceTable, groups: Sequence[GroupRows]):
        self.table = table
        self.groups = list(groups)
        self.slices = table.group_slices()
        if len(self.groups) != len(self.slices):
            raise ValueError(f"{len(self.groups)} availability models for {len(self.slices)} groups")
        n = len(table)
        self.capacity = table.capacity_j
        self.finite = np.isfinite(self.capacity)
        self.level = np.where(self.finite, table.initial_j, _INF)
        self.since = np.zeros(n)  # the battery and the energy are accounted up to here
        self.alive = ~self.finite | (self.level > 0)
        self.charging = np.zeros(n, dtype=bool)
        self.using = np.zeros(n, dtype=bool)  # in a session of use that began while the device was on
        self.online = np.zeros(n, dtype=bool)  # its availability says so and it is on
        self.online_since = np.zeros(n)
        self.online_time_s = np.zeros(n)
        self.busy = np.zeros(n, dtype=bool)  # held by an actor
        self.energy_j = {"idle": np.zeros(n), "use": np.zeros(n)}
        self.charged_j = np.zeros(n)
        self.use_w = _per_group([group.usage.power_w if group.usage else 0.0 for group in self.groups], self.slices)
        self.next_at = np.full(n, _INF)
        for g, (sl, group) in enumerate(zip(self.slices, self.groups)):
            rows = np.arange(sl.stop - sl.start)
            d = rows + sl.start
            if group.charger is not None:
                self.charging[d] = group.charger.state
                self._boot(g, rows, d, 0.0)
            if group.usage is not None:
                self.using[d] = group.usage.model.state & self.alive[d]
            if group.availability.time_base == "continuous":
                self.online[d] = self._says_online(g, rows, d)
            self._schedule(g, rows)

    def __len__(self) -> int:
        return len(self.table)

    # ----------------------------------------------------------------- power

    def net_drain_w(self, d: np.ndarray | slice) -> np.ndarray:
        """The rate at which each device's level falls (negative while the charger out-supplies its loads)."""
        load = np.where(self.alive[d], self.table.idle_w[d], 0.0) + np.where(self.using[d], self.use_w[d], 0.0)
        return load - np.where(self.charging[d], self.table.charge_w[d], 0.0)

    def level_at(self, d: np.ndarray | slice, now: float, drain: np.ndarray | None = None) -> np.ndarray:
        """The charge of devices ``d`` (idle, advanced to ``now``; ``slice(None)``: all, read without gathering)
        at ``now``, settling nothing (inf: mains); ``drain``: their :meth:`net_drain_w`, if the caller has it."""
        drain = self.net_drain_w(d) if drain is None else drain
        level = self.level[d] - drain * (now - self.since[d])
        return np.where(self.finite[d], np.clip(level, 0.0, self.capacity[d]), _INF)

    def _settle(self, d: np.ndarray, t: np.ndarray) -> None:
        """Account devices ``d``'s energy and charge from their ``since`` up to ``t`` (their next change or now)."""
        dt = t - self.since[d]
        alive, using = self.alive[d], self.using[d]
        self.energy_j["idle"][d] += np.where(alive, self.table.idle_w[d] * dt, 0.0)
        self.energy_j["use"][d] += np.where(using, self.use_w[d] * dt, 0.0)
        finite = self.finite[d]
        if finite.any():
            f = d[finite]
            before = self.level[f]
            after = np.clip(before - self.net_drain_w(f) * dt[finite], 0.0, self.capacity[f])
            self.charged_j[f] += np.maximum(after - before, 0.0)
            self.level[f] = after
        self.since[d] = t

    def _empty_at(self, d: np.ndarray, drain: np.ndarray) -> np.ndarray:
        """When each of devices ``d`` empties at its present ``drain`` (inf: never, on mains power, or off)."""
        draining = self.alive[d] & self.finite[d] & (drain > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(draining, self.since[d] + self.level[d] / drain, _INF)

    def _floor_at(self, d: np.ndarray, drain: np.ndarray) -> np.ndarray:
        """When each of devices ``d``, charging below its min_level at ``drain``, reaches it (inf otherwise)."""
        floor = self.table.min_level[d] * np.where(self.finite[d], self.capacity[d], 0.0)
        rising = self.alive[d] & self.finite[d] & (drain < 0) & (self.level[d] < floor)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(rising, self.since[d] + (floor - self.level[d]) / -drain, _INF)

    # ---------------------------------------------------------------- changes

    def _sources(self, g: int, rows: np.ndarray) -> np.ndarray:
        """Each row's next change from each source (5 x rows: empty, min_level, availability, charger, usage)."""
        d = rows + self.slices[g].start
        out = np.full((5, len(rows)), _INF)
        drain = self.net_drain_w(d)
        out[_EMPTY] = self._empty_at(d, drain)
        out[_FLOOR] = self._floor_at(d, drain)
        for source, model in self._models(g).items():
            out[source] = model.change[rows]
        return out

    def _models(self, g: int) -> dict[int, PopulationModel]:
        """Group ``g``'s models that change in continuous time, by the source of the changes they make."""
        group, models = self.groups[g], {}
        if group.availability.time_base == "continuous":
            models[_AVAILABILITY] = group.availability
        if group.charger is not None:
            models[_CHARGER] = group.charger
        if group.usage is not None:
            models[_USAGE] = group.usage.model
        return models

    def _schedule(self, g: int, rows: np.ndarray) -> None:
        d = rows + self.slices[g].start
        self.next_at[d] = np.where(self.busy[d], _INF, self._sources(g, rows).min(axis=0))

    def advance(self, now: float, devices: np.ndarray | None = None) -> None:
        """Take every idle device's changes up to ``now`` (or only ``devices``' ones), each device in its own
        time order."""
        for g, sl in enumerate(self.slices):
            if devices is None:
                rows = np.flatnonzero(self.next_at[sl] <= now)
            else:
                mine = devices[(devices >= sl.start) & (devices < sl.stop)]
                rows = mine[self.next_at[mine] <= now] - sl.start
            models = self._models(g)
            for first in range(0, rows.size, _ROWS_PER_STEP):  # devices are independent: a bounded step at a time
                self._take_changes(g, rows[first : first + _ROWS_PER_STEP], now, models)

    def _take_changes(
        self, g: int, rows: np.ndarray, now: float | np.ndarray, models: dict[int, PopulationModel]
    ) -> None:
        """Take rows ``rows`` of group ``g`` through their changes up to ``now`` (one time, or one per row),
        vectorised over the rows."""
        start = self.slices[g].start
        sources = self._sources(g, rows)
        while rows.size:
            t = sources.min(axis=0)
            d = rows + start
            first = sources.argmin(axis=0)
            power = first != _AVAILABILITY  # availability alone changes no load: the battery stays linear
            self._settle(d[power], t[power])
            for source, take in (
                (_EMPTY, self._emptied),
                (_FLOOR, self._at_floor),
                (_AVAILABILITY, self._availability_flipped),
                (_CHARGER, self._charger_flipped),
                (_USAGE, self._usage_flipped),
            ):
                mine = first == source
                if mine.any():
                    take(g, rows[mine], d[mine], t[mine])
                    # a change moves its own source's next change and, if it changed a load or the level,
                    # the battery's marks; the other sources' changes stay where they were
                    if source in models:
                        sources[source, mine] = models[source].change[rows[mine]]
            if power.any():
                drain = self.net_drain_w(d[power])
                sources[_EMPTY, power] = self._empty_at(d[power], drain)
                sources[_FLOOR, power] = self._floor_at(d[power], drain)
            upcoming = sources.min(axis=0)
            self.next_at[d] = upcoming
            due = upcoming <= now
            rows, sources = rows[due], sources[:, due]
            now = now if np.ndim(now) == 0 else now[due]

    def _at_floor(self, g: int, rows: np.ndarray, d: np.ndarray, t: np.ndarray) -> None:
        self.level[d] = self.table.min_level[d] * self.capacity[d]  # exact: rounding must not leave it short

    def _says_online(self, g: int, rows: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Whether devices ``d`` (rows ``rows`` of group ``g``) are online: their availability says so and they
        are on -- and plugged in, where the policy asks for the charger (``eligible``'s ``charging``)."""
        model = self.groups[g].availability
        online = model.state[rows] & self.alive[d]
        if getattr(model, "requires_charging", False):
            online &= self.charging[d]
        return online

    def _set_online(self, d: np.ndarray, online: np.ndarray, t: np.ndarray | float) -> None:
        t = np.broadcast_to(t, d.shape)
        going = self.online[d] & ~online
        self.online_time_s[d[going]] += t[going] - self.online_since[d[going]]
        coming = ~self.online[d] & online
        self.online_since[d[coming]] = t[coming]
        self.online[d] = online

    def _emptied(self, g: int, rows: np.ndarray, d: np.ndarray, t: np.ndarray) -> None:
        self.level[d] = 0.0
        self.alive[d] = False
        self.using[d] = False
        self._set_online(d, np.zeros(len(d), dtype=bool), t)
        self._boot(g, rows, d, t)  # emptied while plugged in (its loads out-drew the charger): it powers on again

    def _boot(self, g: int, rows: np.ndarray, d: np.ndarray, t: np.ndarray | float) -> None:
        """Dead devices on a charger that out-supplies their idle draw power on (availability asked again)."""
        boots = ~self.alive[d] & self.charging[d] & (self.table.charge_w[d] > self.table.idle_w[d])
        if not boots.any():
            return
        self.alive[d[boots]] = True
        if self.groups[g].availability.time_base == "continuous":
            t = np.broadcast_to(t, d.shape)
            self._set_online(d[boots], self._says_online(g, rows[boots], d[boots]), t[boots])

    def _availability_flipped(self, g: int, rows: np.ndarray, d: np.ndarray, t: np.ndarray) -> None:
        self.groups[g].availability.flip(rows)
        self._set_online(d, self._says_online(g, rows, d), t)

    def _charger_flipped(self, g: int, rows: np.ndarray, d: np.ndarray, t: np.ndarray) -> None:
        charger = self.groups[g].charger
        charger.flip(rows)
        self.charging[d] = charger.state[rows]
        self._boot(g, rows, d, t)
        model = self.groups[g].availability
        if getattr(model, "requires_charging", False) and model.time_base == "continuous":
            self._set_online(d, self._says_online(g, rows, d), t)

    def _usage_flipped(self, g: int, rows: np.ndarray, d: np.ndarray, t: np.ndarray) -> None:
        model = self.groups[g].usage.model
        model.flip(rows)
        self.using[d] = model.state[rows] & self.alive[d]

    def start_round(self, round_index: int, now: float) -> None:
        """Per-round availability steps into ``round_index`` (at ``now``); the idle devices' online follow it."""
        for g, (sl, group) in enumerate(zip(self.slices, self.groups)):
            model = group.availability
            if model.time_base != "round":
                continue
            model.advance(round_index)
            rows = np.flatnonzero(~self.busy[sl])
            d = rows + sl.start
            self._set_online(d, self._says_online(g, rows, d), now)

    # ------------------------------------------------------------ who can work

    def eligible(self, now: float, devices: np.ndarray | None = None) -> np.ndarray:
        """Devices (ascending; of ``devices`` only, if given) that are idle, online, on, not in use (where use
        excludes training) and above their ``min_level`` at ``now`` (advanced to ``now``)."""
        if devices is None:  # every device: whole arrays, no gathering (this runs at every round)
            ok = self.online & self.alive & ~self.busy
            for sl, group in zip(self.slices, self.groups):
                if group.usage is not None and not group.usage.train_while_in_use:
                    ok[sl] &= ~self.using[sl]
            check = np.flatnonzero(ok & (self.table.min_level > 0) & self.finite)
            for first in range(0, check.size, _ROWS_PER_STEP):  # bounded temporaries (see _ROWS_PER_STEP)
                some = check[first : first + _ROWS_PER_STEP]
                ok[some[self.below_min(some, now)]] = False
            return np.flatnonzero(ok)
        d = np.sort(devices)
        ok = self.online[d] & self.alive[d] & ~self.busy[d]
        for sl, group in zip(self.slices, self.groups):
            if group.usage is not None and not group.usage.train_while_in_use:
                mine = (d >= sl.start) & (d < sl.stop)
                ok[mine] &= ~self.using[d[mine]]
        check = np.flatnonzero(ok & (self.table.min_level[d] > 0) & self.finite[d])
        if check.size:
            ok[check[self.below_min(d[check], now)]] = False
        return d[ok]

    def below_min(self, d: np.ndarray | slice, now: float) -> np.ndarray:
        """Whether each of devices ``d`` is below its ``min_level`` at ``now`` (at it exactly: while draining), as
        the actor's battery watch says."""
        threshold = self.table.min_level[d] * np.where(self.finite[d], self.capacity[d], 0.0)
        drain = self.net_drain_w(d)
        level = self.level_at(d, now, drain)
        below = (level < threshold) | ((level == threshold) & (drain > 0))
        return (self.table.min_level[d] > 0) & self.finite[d] & below

    # ------------------------------------------- each device at its own instant (asynchronous arrivals)

    def advance_each(self, devices: np.ndarray, until: np.ndarray) -> None:
        """Take each of ``devices``' (distinct, idle) changes up to its own time ``until[k]``: asynchronous workers
        waiting for their device ask at each device's own instants (netfl/sim/workers.py)."""
        for g, sl in enumerate(self.slices):
            mine = (devices >= sl.start) & (devices < sl.stop)
            d, t = devices[mine], until[mine]
            due = self.next_at[d] <= t
            if due.any():
                self._take_changes(g, d[due] - sl.start, t[due], self._models(g))

    def eligible_each(self, devices: np.ndarray, at: np.ndarray) -> np.ndarray:
        """Whether each of ``devices`` (advanced to its own time ``at[k]``) is eligible then: what
        :meth:`eligible` says of it at that instant."""
        ok = self.online[devices] & self.alive[devices] & ~self.busy[devices]
        for sl, group in zip(self.slices, self.groups):
            if group.usage is not None and not group.usage.train_while_in_use:
                mine = (devices >= sl.start) & (devices < sl.stop)
                ok[mine] &= ~self.using[devices[mine]]
        check = np.flatnonzero(ok & (self.table.min_level[devices] > 0) & self.finite[devices])
        if check.size:
            ok[check[self.below_min(devices[check], at[check])]] = False
        return ok

    def offline_until(self, devices: np.ndarray) -> np.ndarray:
        """Until when each of ``devices`` is offline for sure: the next change of its availability where that (a
        continuous one) says offline now, else -inf."""
        until = np.full(len(devices), -_INF)
        for sl, group in zip(self.slices, self.groups):
            model = group.availability
            if model.time_base != "continuous":
                continue
            mine = np.flatnonzero((devices >= sl.start) & (devices < sl.stop))
            rows = devices[mine] - sl.start
            off = ~model.state[rows]
            until[mine[off]] = model.change[rows[off]]
        return until

    # -------------------------------------------------------- actors take over

    def settle(self, d: np.ndarray, now: float) -> None:
        """Settle devices ``d``'s accounts (energy, charge, online time) up to ``now``."""
        self._settle(d, np.full(len(d), now))
        on = d[self.online[d]]
        self.online_time_s[on] += now - self.online_since[on]
        self.online_since[on] = now

    def take(self, d: np.ndarray, now: float) -> None:
        """Devices ``d`` start working at ``now``: their accounts settled to now, an actor takes over."""
        self.settle(d, now)
        self.busy[d] = True
        self.next_at[d] = _INF

    def give_back(
        self,
        d: np.ndarray,
        now: float,
        *,
        level_j: np.ndarray,
        alive: np.ndarray,
        charging: np.ndarray,
        using: np.ndarray,
        online: np.ndarray,
        online_time_s: np.ndarray,
    ) -> None:
        """Devices ``d`` are idle again at ``now`` (their actors' accounts are added by the caller); their actors
        stepped their rows of the models while they worked, and leave them ``charging``, ``using``..."""
        self.level[d] = level_j
        self.alive[d] = alive
        self.charging[d] = charging
        self.using[d] = using
        self.online[d] = online
        self.online_since[d] = now
        self.online_time_s[d] += online_time_s
        self.since[d] = now
        self.busy[d] = False
        groups = self.table.group[d]
        for g in np.unique(groups):
            mine = d[groups == g]
            self._schedule(int(g), mine - self.slices[g].start)

    def energy_at(self, now: float) -> dict[str, np.ndarray]:
        """The idle devices' energy by load up to ``now`` (advanced to ``now``), settling nothing."""
        idle = ~self.busy
        dt = np.where(idle, now - self.since, 0.0)
        return {
            "idle": self.energy_j["idle"] + np.where(idle & self.alive, self.table.idle_w * dt, 0.0),
            "use": self.energy_j["use"] + np.where(idle & self.using, self.use_w * dt, 0.0),
        }


__all__ = ["GroupRows", "IdleRows", "UsageSetup"]
