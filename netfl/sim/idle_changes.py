"""How an idle device's state moves: its changes taken in its own time order, vectorised over the devices due.

A device's changes are the flips of its availability, usage and charger
models (:mod:`netfl.policies.population`) and its battery's marks, computed
from the level and the net drain (:mod:`netfl.sim.idle_battery`).
:class:`IdleChanges` holds every device's state between its tasks (online,
in use, plugged in, the battery) and takes each device through its changes
only when the engine asks (:meth:`IdleChanges.advance`): a device nobody asks
about costs nothing per change. :class:`~netfl.sim.idle_rows.IdleRows` adds
what the fleet asks of idle devices (who can work, handing devices to actors
and back).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from netfl.policies.population import PopulationModel
from netfl.registry.device_params import UsageSpec
from netfl.sim.device_table import DeviceTable
from netfl.sim.idle_battery import IdleBattery
from netfl.sim.idle_events import BATTERY_EMPTY, CHARGING

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


class IdleChanges(IdleBattery):
    """Every device's state between its tasks, and its changes (see the module docstring)."""

    #: Rows taken in one vectorised step: the temporaries of a step (a few arrays of this many values) stay below
    #: the size above which the C library maps fresh pages for each one and returns them after -- at ten million
    #: devices whole-size temporaries at every round cost more time in page faults than in arithmetic.
    ROWS_PER_STEP = 1 << 18

    def __init__(self, table: DeviceTable, groups: Sequence[GroupRows]):
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
            for first in range(0, sl.stop - sl.start, self.ROWS_PER_STEP):  # bounded temporaries (see ROWS_PER_STEP)
                self._start(g, np.arange(first, min(first + self.ROWS_PER_STEP, sl.stop - sl.start)))

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
            for first in range(0, rows.size, self.ROWS_PER_STEP):  # devices are independent: a bounded step at a time
                self._take_changes(g, rows[first : first + self.ROWS_PER_STEP], now, models)

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
