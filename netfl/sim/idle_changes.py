"""How an idle device's state moves: its changes taken in its own time order, a compiled pass per device.

A device's changes are the flips of its availability, usage and charger
models (:mod:`netfl.policies.population`) and its battery's marks, computed
from the level and the net drain (:mod:`netfl.sim.idle_battery`).
:class:`IdleChanges` holds every device's state between its tasks (online,
in use, plugged in, the battery) and takes each device through its changes
only when the engine asks (:meth:`IdleChanges.advance`): a device nobody asks
about costs nothing per change. The step itself is compiled
(:mod:`netfl.kernels.idle_step`, loaded when the first such world is built):
one pass per device, no temporaries, the models' next changes drawn in it;
the flips of a model whose draws are Python's (traces, ``eligible``, a
user's population policy) are handed back here and taken for all the devices
stopped at one at once. :class:`~netfl.sim.idle_rows.IdleRows` adds what the
fleet asks of idle devices (who can work, handing devices to actors and
back).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from netfl.kernels import codes
from netfl.policies.population import PopulationModel
from netfl.registry.device_params import UsageSpec
from netfl.sim.device_table import DeviceTable
from netfl.sim.idle_battery import IdleBattery
from netfl.sim.logged_levels import LoggedPower

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


# the sources of a device's changes, in the order in which changes at the same instant are taken (netfl/kernels/
# idle_step.py; _BATTERY: its battery empties, or, charging below its min_level, reaches it; its next logged
# battery level, netfl/sim/logged_levels.py, is the compiled step's own)
_BATTERY, _AVAILABILITY, _CHARGER, _USAGE = range(4)


def _step():
    """The compiled step (numba loads with it, once)."""
    from netfl.kernels import idle_step

    return idle_step


#: A role a group does not have (no charger, no use), as the kernels take it: never read.
_ABSENT = (
    np.int64(codes.ABSENT),
    np.uint64(0),
    np.zeros(1, dtype=bool),
    np.full(1, _INF),
    np.zeros(1),
    np.zeros(1, dtype=np.uint32),
    np.zeros(1, dtype=np.int32),
    np.zeros(2, dtype=np.int64),
    *(np.zeros(1),) * 6,
    np.zeros((1, 24)),
)


def _per_group(values: list[float], slices: list[slice]) -> np.ndarray:
    """A quantity constant within each group, per device: a read-only broadcast (no memory per device) when every
    group has the same value."""
    n = slices[-1].stop if slices else 0
    if len(set(values)) <= 1:
        return np.broadcast_to(np.float64(values[0] if values else 0.0), (n,))
    return np.concatenate([np.full(sl.stop - sl.start, v) for v, sl in zip(values, slices)])


class IdleChanges(IdleBattery):
    """Every device's state between its tasks, and its changes (see the module docstring)."""

    #: Rows one call of the compiled step scans: a Ctrl-C is seen between two calls.
    ROWS_PER_STEP = 1 << 18
    #: Idle devices' events the compiled step buffers before handing them over.
    EVENT_BUFFER = 1 << 16

    def __init__(self, table: DeviceTable, groups: Sequence[GroupRows], levels: LoggedPower | None = None):
        self.groups = list(groups)
        slices = table.group_slices()
        if len(self.groups) != len(slices):
            raise ValueError(f"{len(self.groups)} availability models for {len(slices)} groups")
        n = len(table)
        use_w = _per_group([g.usage.spec.power if g.usage else 0.0 for g in self.groups], slices)
        super().__init__(table, use_w, levels)
        self.online = np.zeros(n, dtype=bool)  # its availability says so and it is on
        self.online_since = np.zeros(n)
        self.online_time_s = np.zeros(n)
        self.busy = np.zeros(n, dtype=bool)  # held by an actor
        self.battery_at = np.full(n, _INF)  # the battery's next mark at its present drain (see _battery_at)
        self.next_at = np.full(n, _INF)  # the earliest of the device's next changes
        self._kernel = _step()
        self._columns_k = tuple(
            np.asarray(self._columns[name], dtype=bool if name == "finite" else np.float64)
            for name in ("idle_w", "charge_w", "capacity", "min_level", "use_w", "finite")
        ) + ((levels if levels is not None else LoggedPower.none(n)).kernel_tuple(),)
        self._buffer = tuple(np.empty(0, dtype=t) for t in (np.float64, np.int64, np.int64, np.int64, np.float64))
        self._stops = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0), np.zeros(1, np.int64))
        for g, sl in enumerate(self.slices):
            self._kernel.start_rows(*self._context(g), self._events_buffer(), np.arange(sl.stop - sl.start))

    # ------------------------------------------------- the compiled step's arguments

    def _context(self, g: int) -> tuple:
        """(device state, device quantities, group, availability, charger, use) as the compiled step takes them."""
        group = self.groups[g]
        events = self.events is not None
        below = self.below if events else self.busy  # read only when events are logged
        state = (
            self.level,
            self.since,
            self.alive,
            self.charging,
            self.using,
            self.energy_j["idle"],
            self.energy_j["use"],
            self.charged_j,
            below,
            self.online,
            self.online_since,
            self.online_time_s,
            self.battery_at,
            self.next_at,
            self.busy,
        )
        continuous = group.availability.time_base == "continuous"
        flags = np.array(
            [
                self.slices[g].start,
                continuous,
                bool(getattr(group.availability, "requires_charging", False)),
                self._cause[g] if events else 0,
                events,
            ],
            dtype=np.int64,
        )
        models = (
            group.availability.kernel_model() if continuous else _ABSENT,
            group.charger.kernel_model() if group.charger is not None else _ABSENT,
            group.usage.model.kernel_model() if group.usage is not None else _ABSENT,
        )
        return state, self._columns_k, flags, *models

    def _events_buffer(self) -> tuple:
        """Where the compiled step puts events (none unless they are logged), emptied by :meth:`_hand_over`."""
        if self.events is not None and not len(self._buffer[0]):
            self._buffer = tuple(np.empty(self.EVENT_BUFFER, dtype=b.dtype) for b in self._buffer)
        return (*self._buffer, np.zeros(1, dtype=np.int64))

    def _hand_over(self, events: tuple) -> None:
        """The events the compiled step buffered, into the log's arrays."""
        n = int(events[5][0])
        if n:
            times, devices, kinds, causes, levels = (column[:n].copy() for column in events[:5])
            self.events.add_rows(kinds, devices, times, causes, levels)

    def _stops_for(self, rows: int) -> tuple:
        if len(self._stops[0]) < rows:
            self._stops = (np.empty(rows, np.int64), np.empty(rows, np.int64), np.empty(rows), np.zeros(1, np.int64))
        self._stops[3][0] = 0
        return self._stops

    # ---------------------------------------------------------------- changes

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
        self._kernel.schedule_rows(*self._context(g), np.asarray(rows, dtype=np.int64))

    def _settle(self, d: np.ndarray, t: np.ndarray) -> None:
        """Account devices ``d``'s energy and charge from their ``since`` up to ``t`` (logging the marks passed)."""
        events = self._events_buffer()
        flags = np.array([0, 0, 0, 0, self.events is not None], dtype=np.int64)
        state = self._context(0)[0] if self.slices else None
        for first in range(0, len(d), self.EVENT_BUFFER // 2):  # at most two marks each
            part = slice(first, first + self.EVENT_BUFFER // 2)
            events[5][0] = 0
            self._kernel.settle_devices(
                state, self._columns_k, flags, events, np.asarray(d[part], dtype=np.int64), np.asarray(t[part], float)
            )
            self._hand_over(events)

    def advance(self, now: float, devices: np.ndarray | None = None) -> None:
        """Take every idle device's changes up to ``now`` (or only ``devices``' ones), each device in its own
        time order."""
        for g, sl in enumerate(self.slices):
            if devices is None:
                for first in range(0, sl.stop - sl.start, self.ROWS_PER_STEP):  # a Ctrl-C is seen between steps
                    last = min(first + self.ROWS_PER_STEP, sl.stop - sl.start)
                    while first < last:
                        context, events, stops = self._context(g), self._events_buffer(), self._stops_for(last - first)
                        first = self._kernel.take_due(*context, events, first, last, float(now), stops)
                        self._hand_over(events)
                        if stops[3][0]:  # rows stopped at an external model's change (stops: their rows)
                            rows = np.arange(last)
                            self._take_rows(g, *self._resume(g, stops, rows, np.broadcast_to(float(now), (last,))))
            else:
                mine = devices[(devices >= sl.start) & (devices < sl.stop)]
                rows = mine[self.next_at[mine] <= now] - sl.start
                self._take_changes(g, rows, np.broadcast_to(float(now), rows.shape))

    def _take_changes(self, g: int, rows: np.ndarray, now: np.ndarray) -> None:
        """Take rows ``rows`` of group ``g`` through their changes up to ``now[k]`` each."""
        for first in range(0, rows.size, self.ROWS_PER_STEP):  # a Ctrl-C is seen between steps
            part = slice(first, first + self.ROWS_PER_STEP)
            some = np.asarray(rows[part], dtype=np.int64)
            self._take_rows(g, some, np.ascontiguousarray(now[part], dtype=np.float64), np.full(len(some), -1), None)

    def _take_rows(self, g: int, rows: np.ndarray, now: np.ndarray, pending: np.ndarray, at: np.ndarray | None) -> None:
        """Rows ``rows`` through their changes up to ``now[k]`` each, ``pending[k]`` (a source, or -1) first: the
        external model's flip at ``at[k]`` taken since the row stopped at it."""
        work = [(rows, now, pending, np.zeros(len(rows)) if at is None else at)]
        while work:  # the rows stopped at an external model's change come back here, for as long as they stop
            rows, now, pending, at = work.pop()
            done = 0
            while done < len(rows):
                context, events, stops = self._context(g), self._events_buffer(), self._stops_for(len(rows) - done)
                part = slice(done, None)
                filled = self._kernel.take_rows(*context, events, rows[part], now[part], pending[part], at[part], stops)
                self._hand_over(events)
                resumed = self._resume(g, stops, rows[part], now[part])
                if resumed is not None:
                    work.append(resumed)
                done += filled

    def _resume(self, g: int, stops: tuple, rows: np.ndarray, now: np.ndarray) -> tuple | None:
        """The rows the compiled step stopped at an external model's change (``stops``: their positions in
        ``rows``): those models' flips taken here, for all of them at once; what to take them on from there with
        (:meth:`_take_rows`' arguments), or None."""
        n = int(stops[3][0])
        if not n:
            return None
        position, source, at = (column[:n].copy() for column in stops[:3])
        stopped = np.ascontiguousarray(rows[position], dtype=np.int64)
        for which, model in self._models(g).items():
            flips = np.flatnonzero(source == which)
            if flips.size:
                model.flip(stopped[flips])

        return stopped, np.ascontiguousarray(now[position], dtype=np.float64), source, at

    def _says_online(self, g: int, rows: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Whether devices ``d`` (rows ``rows`` of group ``g``) are online: their availability says so and they
        are on -- and plugged in, where the policy asks for the charger (``eligible``'s ``charging``)."""
        model = self.groups[g].availability
        online = model.state[rows] & self.alive[d]
        if getattr(model, "requires_charging", False):
            online &= self.charging[d]
        return online

    def _set_online(self, d: np.ndarray, online: np.ndarray, t: float, g: int, round_index: int) -> None:
        """Devices ``d`` (of group ``g``) are ``online`` from ``t`` on, as their per-round availability answered for
        round ``round_index`` at its start (logged now; a change between rounds is the compiled step's)."""
        was = self.online[d]
        going = np.flatnonzero(was & ~online)
        gone = d[going]
        self.online_time_s[gone] += t - self.online_since[gone]
        self.online_since[d[np.flatnonzero(~was & online)]] = t
        self.online[d] = online
        if self.events is None:
            return
        flipped = np.flatnonzero(was != online)
        if flipped.size:
            came, flips = online[flipped], d[flipped]
            parts = [("online", flips[came], self._cause[g], None), ("offline", flips[~came], self._cause[g], None)]
            self.events.now(t, round_index, parts)

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
