"""Idle devices as rows of arrays: availability, the owner's use, the charger and the battery, in closed form.

Between two changes of its own a device's battery level is linear in time
(:mod:`netfl.sim.idle_battery`). Its changes are the flips of its
availability, usage and charger models (:mod:`netfl.policies.population`)
and its battery's marks, computed from the level and the net drain.
:class:`IdleRows` processes each device's changes in its own time order,
vectorised over the devices due, and only when the engine asks: a device
nobody asks about costs nothing per change. The physics is
:class:`~netfl.sim.device.Device`'s with its
:class:`~netfl.sim.battery.Battery`.

The accounts (energy by load, charge, online time) are settled only at a
device's own changes and when it starts or stops working, never at the
instant someone reads them, so reading the world (the timeline, the energy
at an evaluation) changes no result.

Given somewhere to put them (:class:`~netfl.sim.idle_events.IdleEvents`),
the rows also log the idle devices' events as the actor form does (the
battery's marks between changes: :mod:`netfl.sim.idle_battery`). Without,
none of that is done and nothing else changes either way.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from netfl.policies.population import PopulationModel
from netfl.registry.device_params import UsageSpec
from netfl.sim.device_table import DeviceTable
from netfl.sim.idle_battery import IdleBattery
from netfl.sim.idle_events import BATTERY_EMPTY, CHARGING, NO_CAUSE, IdleEvents

_INF = math.inf


@dataclass(frozen=True)
class UsageSetup:
    """A device group's own use (netfl/policies/usage.py): when (a population model), and as the group declares it
    (``devices[].usage``): its power, and whether a device in use is still idle enough to train."""

    model: PopulationModel
    spec: UsageSpec


@dataclass(frozen=True)
class GroupRows:
    """One device group's models: availability, and optionally a charger and the owner's use."""

    availability: PopulationModel
    charger: PopulationModel | None = None
    usage: UsageSetup | None = None


#: Rows taken in one vectorised step: the temporaries of a step (a few arrays of this many values) stay below
#: the size above which the C library maps fresh pages for each one and returns them after -- at ten million
#: devices whole-size temporaries at every round cost more time in page faults than in arithmetic.
_ROWS_PER_STEP = 1 << 18
# the sources of a device's changes, in the order in which changes at the same instant are taken (_BATTERY: its
# battery empties, or, charging below its min_level, reaches it -- which makes the device eligible again)
_BATTERY, _AVAILABILITY, _CHARGER, _USAGE = range(4)


def _first_change(sources: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column's earliest time and its source (the first row holding it): ``min`` and ``argmin`` over axis 0,
    row by row instead of across the columns' stride."""
    t = sources.min(axis=0)
    first = np.zeros(len(t), dtype=np.int8)
    for source in range(len(sources) - 1, -1, -1):  # the lowest source holding the minimum wins, as argmin's
        first[np.flatnonzero(sources[source] == t)] = source
    return t, first


def _per_group(values: list[float], slices: list[slice]) -> np.ndarray:
    """A quantity constant within each group, per device: a read-only broadcast (no memory per device) when every
    group has the same value."""
    n = slices[-1].stop if slices else 0
    if len(set(values)) <= 1:
        return np.broadcast_to(np.float64(values[0] if values else 0.0), (n,))
    return np.concatenate([np.full(sl.stop - sl.start, v) for v, sl in zip(values, slices)])


class IdleRows(IdleBattery):
    """Every device's state between its tasks (see the module docstring); the fleet hands working devices to
    actors (:meth:`take`) and back (:meth:`give_back`)."""

    def __init__(self, table: DeviceTable, groups: Sequence[GroupRows], events: IdleEvents | None = None):
        """``events``: where the idle devices' events go (:mod:`netfl.sim.idle_events`); None: nowhere, at no
        cost."""
        self.groups = list(groups)
        slices = table.group_slices()
        if len(self.groups) != len(slices):
            raise ValueError(f"{len(self.groups)} availability models for {len(slices)} groups")
        n = len(table)
        super().__init__(table, _per_group([g.usage.spec.power if g.usage else 0.0 for g in self.groups], slices))
        self.online = np.zeros(n, dtype=bool)  # its availability says so and it is on
        self.online_since = np.zeros(n)
        self.online_time_s = np.zeros(n)
        self.busy = np.zeros(n, dtype=bool)  # held by an actor
        self.battery_at = np.full(n, _INF)  # the battery's next mark at its present drain (see _battery_at)
        self.next_at = np.full(n, _INF)  # the earliest of the device's next changes
        for g, sl in enumerate(self.slices):
            for first in range(0, sl.stop - sl.start, _ROWS_PER_STEP):  # bounded temporaries (see _ROWS_PER_STEP)
                self._start(g, np.arange(first, min(first + _ROWS_PER_STEP, sl.stop - sl.start)))
        if events is not None:
            self._log_start(events)

    def _start(self, g: int, rows: np.ndarray) -> None:
        """Rows ``rows`` of group ``g`` at time 0: plugged in, in use and online as their models start, and their
        first change scheduled."""
        group, d = self.groups[g], rows + self.slices[g].start
        if group.charger is not None:
            self.charging[d] = group.charger.state[rows]
            self._boot(g, rows, d, 0.0)
        if group.usage is not None:
            self.using[d] = group.usage.model.state[rows] & self.alive[d]
        if group.availability.time_base == "continuous":
            self.online[d] = self._says_online(g, rows, d)
        self._schedule(g, rows)

    def _log_start(self, events: IdleEvents) -> None:
        """Log time 0 as the actor form does, each device's events in its order: those of building it (below
        min_level, with its level; empty), those of its processes' first answers (online; the charger, and a
        power-on; its owner's use), then online where that waited for the charger; and every event from now on."""
        self.events = events
        self._cause = [events.cause(f"policy:{group.availability.policy}") for group in self.groups]
        table = self.table
        with np.errstate(divide="ignore", invalid="ignore"):
            fraction = np.where(self.finite, table.initial_j / self.capacity, 1.0)
        floor = table.min_level * np.where(self.finite, self.capacity, 0.0)  # an actor starts off its charger
        at_floor_draining = (table.initial_j == floor) & (table.idle_w > 0)
        self.below = self.finite & (table.min_level > 0) & ((table.initial_j < floor) | at_floor_draining)
        empty = self.finite & (table.initial_j <= 0)
        below = np.flatnonzero(self.below)
        events.now(
            0.0,
            0,
            [
                ("below_min_level", below, NO_CAUSE, fraction[below]),
                ("battery_empty", np.flatnonzero(empty), NO_CAUSE, None),
            ],
        )
        self.below |= empty & (table.min_level > 0)  # as the actor's _empty sets it
        at_once = np.zeros(len(self), dtype=bool)  # online at its availability's first answer, before any charger
        for sl, group in zip(self.slices, self.groups):
            if not getattr(group.availability, "requires_charging", False):
                at_once[sl] = ~empty[sl]

        def online(which: np.ndarray) -> list[tuple]:
            return [
                ("online", np.flatnonzero(which[sl]) + sl.start, self._cause[g], None)
                for g, sl in enumerate(self.slices)
            ]

        plugged = np.flatnonzero(self.charging)
        first = [
            ("charge_start", plugged, NO_CAUSE, np.where(empty, 0.0, fraction)[plugged]),
            ("power_on", np.flatnonzero(empty & self.alive), CHARGING, None),
            ("use_start", np.flatnonzero(self.using), NO_CAUSE, None),
        ]
        events.now(0.0, 0, online(self.online & at_once) + first)  # each device's processes' first answers
        events.now(0.0, 0, online(self.online & ~at_once))  # their answers once the charger has been asked

    # ---------------------------------------------------------------- changes

    def _sources(self, g: int, rows: np.ndarray) -> np.ndarray:
        """Each row's next change from each source (4 x rows: battery, availability, charger, usage)."""
        out = np.full((4, len(rows)), _INF)
        out[_BATTERY] = self.battery_at[rows + self.slices[g].start]
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
        """Rows ``rows`` of group ``g`` start (or are idle again): their battery's next mark and next change."""
        d = rows + self.slices[g].start
        self.battery_at[d] = self._battery_at(d, self.net_drain_w(d, g), g)
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
            t, first = _first_change(sources)
            d = rows + start
            power = np.flatnonzero(first != _AVAILABILITY)  # availability alone changes no load: the battery
            if power.size:  # stays linear
                self._settle(d[power], t[power], g)
            for source, take in (
                (_BATTERY, self._battery_mark),
                (_AVAILABILITY, self._availability_flipped),
                (_CHARGER, self._charger_flipped),
                (_USAGE, self._usage_flipped),
            ):
                mine = np.flatnonzero(first == source)
                if mine.size:
                    changed = rows[mine]
                    take(g, changed, d[mine], t[mine])
                    # a change moves its own source's next change and, if it changed a load or the level,
                    # the battery's marks; the other sources' changes stay where they were
                    if source in models:
                        sources[source, mine] = models[source].change[changed]
            if power.size:
                dp = d[power]
                marks = self._battery_at(dp, self.net_drain_w(dp, g), g)
                self.battery_at[dp] = marks
                sources[_BATTERY, power] = marks
            upcoming = sources.min(axis=0)
            self.next_at[d] = upcoming
            due = np.flatnonzero(upcoming <= now)
            rows, sources = rows[due], sources[:, due]
            now = now if np.ndim(now) == 0 else now[due]

    def _battery_mark(self, g: int, rows: np.ndarray, d: np.ndarray, t: np.ndarray) -> None:
        """Devices ``d`` reached their battery's mark (settled to it): emptied if draining, else at min_level."""
        draining = self.net_drain_w(d, g) > 0
        for handle, which in ((self._emptied, np.flatnonzero(draining)), (self._at_floor, np.flatnonzero(~draining))):
            if which.size:
                handle(g, rows[which], d[which], t[which])

    def _at_floor(self, g: int, rows: np.ndarray, d: np.ndarray, t: np.ndarray) -> None:
        self.level[d] = self._of("min_level", d, g) * self._of("capacity", d, g)  # exact: no rounding short
        if self.events is not None:
            was = np.flatnonzero(self.below[d])
            self.below[d] = False
            level = self._of("min_level", d, g)
            level = level[was] if isinstance(level, np.ndarray) else level
            self.events.add("above_min_level", d[was], t[was], level=level)

    def _says_online(self, g: int, rows: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Whether devices ``d`` (rows ``rows`` of group ``g``) are online: their availability says so and they
        are on -- and plugged in, where the policy asks for the charger (``eligible``'s ``charging``)."""
        model = self.groups[g].availability
        online = model.state[rows] & self.alive[d]
        if getattr(model, "requires_charging", False):
            online &= self.charging[d]
        return online

    def _set_online(
        self,
        d: np.ndarray,
        online: np.ndarray,
        t: np.ndarray | float,
        g: int,
        emptied: bool = False,
        round_index: int = -1,
    ) -> None:
        """Devices ``d`` (of group ``g``) are ``online`` from ``t``; ``emptied``: those going offline because their
        battery emptied (else their availability says so); ``round_index``: the round a per-round answer is for."""
        t = np.broadcast_to(t, d.shape)
        was = self.online[d]
        going = np.flatnonzero(was & ~online)
        gone = d[going]
        self.online_time_s[gone] += t[going] - self.online_since[gone]
        coming = np.flatnonzero(~was & online)
        self.online_since[d[coming]] = t[coming]
        self.online[d] = online
        if self.events is None:
            return
        if round_index >= 0:  # a per-round answer, at its round's start: logged now
            flipped = np.flatnonzero(was != online)
            if flipped.size:
                came, flips = online[flipped], d[flipped]
                parts = [("online", flips[came], self._cause[g], None), ("offline", flips[~came], self._cause[g], None)]
                self.events.now(float(t[flipped[0]]), round_index, parts)
            return
        self.events.add("offline", gone, t[going], cause=BATTERY_EMPTY if emptied else self._cause[g])
        self.events.add("online", d[coming], t[coming], cause=self._cause[g])

    def _emptied(self, g: int, rows: np.ndarray, d: np.ndarray, t: np.ndarray) -> None:
        self.level[d] = 0.0
        self.alive[d] = False
        self.using[d] = False
        if self.events is not None:
            self.events.add("battery_empty", d, t)
            self.below[d] |= self._of("min_level", d, g) > 0  # as the actor's _empty sets it
        self._set_online(d, np.zeros(len(d), dtype=bool), t, g, emptied=True)
        self._boot(g, rows, d, t)  # emptied while plugged in (its loads out-drew the charger): it powers on again

    def _boot(self, g: int, rows: np.ndarray, d: np.ndarray, t: np.ndarray | float) -> None:
        """Dead devices on a charger that out-supplies their idle draw power on (availability asked again)."""
        boots = ~self.alive[d] & self.charging[d] & (self._of("charge_w", d, g) > self._of("idle_w", d, g))
        if not boots.any():
            return
        self.alive[d[boots]] = True
        t = np.broadcast_to(t, d.shape)
        if self.events is not None:
            self.events.add("power_on", d[boots], t[boots], cause=CHARGING)
        if self.groups[g].availability.time_base == "continuous":
            self._set_online(d[boots], self._says_online(g, rows[boots], d[boots]), t[boots], g)

    def _availability_flipped(self, g: int, rows: np.ndarray, d: np.ndarray, t: np.ndarray) -> None:
        self.groups[g].availability.flip(rows)
        self._set_online(d, self._says_online(g, rows, d), t, g)

    def _charger_flipped(self, g: int, rows: np.ndarray, d: np.ndarray, t: np.ndarray) -> None:
        charger = self.groups[g].charger
        charger.flip(rows)
        self.charging[d] = charger.state[rows]
        if self.events is not None:
            self._log_plugs(d, t)
        self._boot(g, rows, d, t)
        model = self.groups[g].availability
        if getattr(model, "requires_charging", False) and model.time_base == "continuous":
            self._set_online(d, self._says_online(g, rows, d), t, g)

    def _log_plugs(self, d: np.ndarray, t: np.ndarray) -> None:
        """Devices ``d`` were plugged in or unplugged at ``t`` (settled to it): with their battery's fraction."""
        with np.errstate(invalid="ignore"):
            fraction = np.where(self.finite[d], self.level[d] / self.capacity[d], 1.0)
        plugged = self.charging[d]
        for kind, which in (("charge_start", np.flatnonzero(plugged)), ("charge_stop", np.flatnonzero(~plugged))):
            self.events.add(kind, d[which], t[which], level=fraction[which])

    def _usage_flipped(self, g: int, rows: np.ndarray, d: np.ndarray, t: np.ndarray) -> None:
        model = self.groups[g].usage.model
        model.flip(rows)
        using = model.state[rows] & self.alive[d]
        if self.events is not None:
            was = self.using[d]
            self.events.add("use_start", d[~was & using], t[~was & using])
            self.events.add("use_end", d[was & ~using], t[was & ~using])
        self.using[d] = using

    def start_round(self, round_index: int, now: float) -> None:
        """Per-round availability steps into ``round_index`` (at ``now``); the idle devices' online follow it."""
        for g, (sl, group) in enumerate(zip(self.slices, self.groups)):
            model = group.availability
            if model.time_base != "round":
                continue
            model.advance(round_index)
            rows = np.flatnonzero(~self.busy[sl])
            d = rows + sl.start
            self._set_online(d, self._says_online(g, rows, d), now, g, round_index=round_index)

    # ------------------------------------------------------------ who can work

    def eligible(self, now: float, devices: np.ndarray | None = None) -> np.ndarray:
        """Devices (ascending; of ``devices`` only, if given) that are idle, online, on, not in use (where use
        excludes training) and above their ``min_level`` at ``now`` (advanced to ``now``)."""
        if devices is None:  # every device: whole arrays, no gathering (this runs at every round)
            ok = self.online & self.alive
            ok &= ~self.busy
            for g, (sl, group) in enumerate(zip(self.slices, self.groups)):
                if group.usage is not None and not group.usage.spec.train_while_in_use:
                    ok[sl] &= ~self.using[sl]
                mine = ok[sl]
                check = np.flatnonzero(mine & (self._of("min_level", sl, g) > 0) & self._of("finite", sl, g))
                for first in range(0, check.size, _ROWS_PER_STEP):  # bounded temporaries (see _ROWS_PER_STEP)
                    some = check[first : first + _ROWS_PER_STEP]
                    mine[some[self.below_min(some + sl.start, now, g)]] = False
            return np.flatnonzero(ok)
        d = np.sort(devices)
        return d[self.eligible_each(d, np.full(len(d), now))]

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
            if group.usage is not None and not group.usage.spec.train_while_in_use:
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
        if self.events is not None:  # below min_level as the actor's watch would say it now
            floor, drain = self._floor(d), self.net_drain_w(d)
            self.below[d] = (
                (self.table.min_level[d] > 0)
                & self.finite[d]
                & (~alive | (level_j < floor) | ((level_j == floor) & (drain > 0)))
            )
        groups = self.table.group[d]
        for g in np.unique(groups):
            mine = d[groups == g]
            self._schedule(int(g), mine - self.slices[g].start)

    def energy_at(self, now: float) -> dict[str, np.ndarray]:
        """The idle devices' energy by load up to ``now`` (advanced to ``now``), settling nothing."""
        out = {"idle": np.empty(len(self)), "use": np.empty(len(self))}
        for _, part in self.steps():
            idle = ~self.busy[part]
            dt = np.where(idle, now - self.since[part], 0.0)
            for load, on, watts in (("idle", self.alive, self.table.idle_w), ("use", self.using, self.use_w)):
                out[load][part] = self.energy_j[load][part] + np.where(idle & on[part], watts[part] * dt, 0.0)
        return out

    def settle_idle(self, now: float) -> None:
        """Settle every idle device's accounts up to ``now`` (the run is over)."""
        for _, part in self.steps():
            self.settle(part.start + np.flatnonzero(~self.busy[part]), now)

    def steps(self) -> Iterator[tuple[int, slice]]:
        """Every device, a bounded step of one group's rows at a time (see _ROWS_PER_STEP): (group, rows)."""
        for g, sl in enumerate(self.slices):
            for first in range(sl.start, sl.stop, _ROWS_PER_STEP):
                yield g, slice(first, min(first + _ROWS_PER_STEP, sl.stop))


__all__ = ["GroupRows", "IdleRows", "UsageSetup"]
