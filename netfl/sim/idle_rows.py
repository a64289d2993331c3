"""Idle devices as rows of arrays: availability, the owner's use, the charger and the battery, in closed form.

Between two changes of its own a device's battery level is linear in time
(:mod:`netfl.sim.idle_battery`); its changes -- the flips of its
availability, usage and charger models and its battery's marks -- are taken
in its own time order, a compiled pass per device, and only when the
engine asks (:mod:`netfl.sim.idle_changes`). :class:`IdleRows` answers what
the fleet asks of idle devices: who can work now or at each device's own
instant, and handing devices to actors and back. The physics is
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

import numpy as np

from netfl.sim.device_table import DeviceTable
from netfl.sim.idle_changes import GroupRows, IdleChanges, UsageSetup
from netfl.sim.idle_events import CHARGING, NO_CAUSE, IdleEvents
from netfl.sim.logged_levels import LoggedPower

_INF = math.inf


class IdleRows(IdleChanges):
    """Every device's state between its tasks (see the module docstring); the fleet hands working devices to
    actors (:meth:`take`) and back (:meth:`give_back`)."""

    def __init__(
        self,
        table: DeviceTable,
        groups: Sequence[GroupRows],
        events: IdleEvents | None = None,
        levels: LoggedPower | None = None,
    ):
        """``events``: where the idle devices' events go (:mod:`netfl.sim.idle_events`); None: nowhere, at no
        cost. ``levels``: the batteries driven by their logged levels (:mod:`netfl.sim.logged_levels`)."""
        super().__init__(table, groups, levels)
        if events is not None:
            self._log_start(events)

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

    # ------------------------------------------------------------ who can work

    def eligible(self, now: float, devices: np.ndarray | None = None) -> np.ndarray:
        """Devices (ascending; of ``devices`` only, if given) that are idle, online, on, not in use (where use
        excludes training) and above their ``min_level`` at ``now`` (advanced to ``now``)."""
        if devices is None:  # every device: a compiled pass over a bounded step of rows at a time (every round)
            state, found = self._context(0)[0] if self.slices else None, []
            for sl, group in zip(self.slices, self.groups):
                exclude_using = group.usage is not None and not group.usage.spec.train_while_in_use
                for first in range(sl.start, sl.stop, self.ROWS_PER_STEP):
                    last = min(first + self.ROWS_PER_STEP, sl.stop)
                    out = np.empty(last - first, dtype=np.int64)
                    n = self._kernel.eligible_rows(state, self._columns_k, first, last, exclude_using, float(now), out)
                    found.append(out[:n])
            return np.concatenate(found) if found else np.empty(0, dtype=np.int64)
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
                self._take_changes(g, d[due] - sl.start, t[due])

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

    def settle(self, d: np.ndarray, now: float | np.ndarray) -> None:
        """Settle devices ``d``'s accounts (energy, charge, online time) up to ``now`` (one time, or one each)."""
        until = np.broadcast_to(np.asarray(now, dtype=float), d.shape)
        self._settle(d, until.copy())
        online = self.online[d]
        on = d[online]
        self.online_time_s[on] += until[online] - self.online_since[on]
        self.online_since[on] = until[online]

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
        if self.levels is not None:  # the logged levels passed while they worked
            self.levels.seek(d, now)
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

    def settle_idle(self, now: float, taken_only: bool = False) -> None:
        """Settle every idle device's accounts up to ``now`` (the run is over); ``taken_only``: only up to its next
        change where that is earlier (an interrupted run takes no more changes: the accounts stay exact)."""
        for _, part in self.steps():
            d = part.start + np.flatnonzero(~self.busy[part])
            self.settle(d, np.minimum(now, np.maximum(self.since[d], self.next_at[d])) if taken_only else now)

    def steps(self) -> Iterator[tuple[int, slice]]:
        """Every device, a bounded step of one group's rows at a time (see ROWS_PER_STEP): (group, rows)."""
        for g, sl in enumerate(self.slices):
            for first in range(sl.start, sl.stop, self.ROWS_PER_STEP):
                yield g, slice(first, min(first + self.ROWS_PER_STEP, sl.stop))


__all__ = ["GroupRows", "IdleRows", "UsageSetup"]  # IdleRows and what it is built from (netfl/sim/idle_changes.py)
