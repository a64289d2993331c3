"""A device's power: the loads it draws, the battery's marks, emptying and powering on again.

Energy is drawn by the loads that are on (idle, the owner's use, receive,
compute, transmit: :class:`~netfl.sim.battery.Battery` integrates them).
The battery watch wakes exactly when the level reaches a mark -- empty,
full, the participation threshold ``min_level``, or a level at which the
availability policy's answer may change (``SessionPolicy.battery_marks``)
-- and between marks costs nothing. A device whose battery empties switches
everything off, goes offline and loses its task; it powers on again once
plugged into a charger that out-supplies its idle load.

:class:`Power` is a mixin of :class:`~netfl.sim.device.Device` (why a mixin:
see that package's docstring). Of the device's state it owns ``dead``,
``died_at``, ``below_min`` and whether the battery was last seen full; an
emptying battery takes the device offline through the availability mixin's
``_set_online`` and tells its policies (``state_changed``), and the charger
(availability) powers a dead device on through :meth:`Power._revive`.
"""

from __future__ import annotations

import math

import numpy as np
import simpy

from netfl.policies.base import SessionPolicy


class Power:
    """Loads, the battery watch and its marks, emptying and powering on (see the module docstring)."""

    dead: bool  # battery empty and not charging: the device is off
    died_at: float
    logged_w: float  # the logged levels' power now (0: none, or no logged levels), the dead device's included
    below_min: bool  # below the participation threshold (battery.min_level): not eligible
    _full: bool
    _power_changed: simpy.Event | None  # fires when a load or the charger changes: the watch plans again

    def set_load(self, name: str, watts: float) -> None:
        if self.dead and watts:
            return  # a dead device draws nothing (a radio switched on by a medium after the battery emptied)
        self.battery.set_load(self.env.now, name, watts)
        self._power_change()

    def _power_change(self) -> None:
        if self._power_changed is not None and not self._power_changed.triggered:
            self._power_changed.succeed()

    def _watch_levels(self):
        """Wake exactly when the level reaches a mark: empty, full, the participation threshold, or a mark of the
        availability policy."""
        b = self.battery
        threshold_j = b.min_level * b.capacity_j
        # the levels at which the availability policy's answer may change (SessionPolicy.battery_marks)
        policy_marks = (
            [m * b.capacity_j for m in self.policy.battery_marks() if 0 < m < 1]
            if isinstance(self.policy, SessionPolicy)
            else []
        )
        while True:
            self._power_changed = self.env.event()
            self._check_level(threshold_j)
            marks = [  # (level, seconds until it is reached, the policy's own mark)
                (0.0, math.inf if self.dead else b.time_to_empty(self.env.now), False),
                (b.capacity_j, b.time_to_full(self.env.now) if b.charging or b.logged_w < 0 else math.inf, False),
                (threshold_j, b.time_to_level(self.env.now, threshold_j) if threshold_j > 0 else math.inf, False),
                *(
                    (level, math.inf if self.dead else b.time_to_level(self.env.now, level), True)
                    for level in policy_marks
                ),
            ]
            mark, wait, asks_policy = min(marks, key=lambda m: m[1])
            events = [self._power_changed]
            if not math.isinf(wait):
                events.append(self.env.timeout(wait))
            fired = yield self.env.any_of(events)
            b.settle(self.env.now)
            if self._power_changed not in fired:
                b.level_j = mark  # exact: rounding must not push the level past the mark it reached
                if asks_policy:
                    self.state_changed()

    def _check_level(self, threshold_j: float) -> None:
        """Log and act on the level's position: empty, full, above or below the threshold.

        Works from the level itself rather than from which timer fired, so a
        mark reached at the same instant as a load change is not missed.
        """
        b = self.battery
        draining = b.net_drain_w > 0
        if not self.dead and b.level_j <= 0 and draining:
            self._empty()
            return
        full = b.level_j >= b.capacity_j
        if full and not self._full and b.charging:
            self.log("battery_full")
        self._full = full
        if threshold_j > 0 and not self.dead:
            below = b.level_j < threshold_j or (b.level_j == threshold_j and draining)
            if below != self.below_min:
                self.below_min = below
                self.log("below_min_level" if below else "above_min_level", level=b.min_level)
                self.state_changed()

    def _empty(self) -> None:
        self.battery.level_j = 0.0
        self.dead = True
        self.using = False  # its loads are switched off below, the owner's use with them
        self.died_at = self.env.now
        self.below_min = self.battery.min_level > 0
        self.log("battery_empty")
        for name in list(self.battery.loads):
            self.battery.set_load(self.env.now, name, 0.0)
        if self.battery.logged_w > 0:  # a dead device draws nothing; a logged rise still charges it
            self.battery.set_logged(self.env.now, 0.0)
        was_online = self.online
        self._set_online(False, "battery_empty")  # interrupts a running task
        if not was_online and self.task is not None:
            self.task.interrupt("battery_empty")
        if self._can_boot():  # emptied while plugged in (its loads out-drew the charger): it reboots on the charger
            self._revive()
        self.state_changed()

    def _can_boot(self) -> bool:
        """A dead phone powers on while plugged into a charger that out-supplies its idle load (else it would
        empty again at once); too weak a charger only charges it, switched off."""
        charger = self.battery.charging and self.battery.charge_w > self.profile.idle_w
        return self.dead and (charger or self.logged_w < 0)  # or its logged level rises

    def _revive(self) -> None:
        """A phone that died comes back on when it is plugged in."""
        self.dead = False
        self.battery.set_load(self.env.now, "idle", self.profile.idle_w)
        if self.logged_w:
            self.battery.set_logged(self.env.now, self.logged_w)
        self.log("power_on", cause="charging")

    def _follow_levels(self, times, powers):
        """The logged levels' power, set at each logged level (netfl/sim/logged_levels.py): the level logged up to
        now (included) gives the power from now on; a rise powers a dead device on, as a charger does."""
        k = int(np.searchsorted(times, self.env.now, side="right"))
        self._set_logged(float(powers[k - 1]) if k else 0.0)
        while k < len(times):
            yield self.env.timeout(max(0.0, float(times[k]) - self.env.now))
            self._set_logged(float(powers[k]))
            k += 1

    def _set_logged(self, watts: float) -> None:
        if watts == self.logged_w:
            return
        self.logged_w = watts
        if self._can_boot():
            self._revive()
        self.battery.set_logged(self.env.now, watts if not self.dead or watts < 0 else 0.0)
        self._power_change()
        self.state_changed()
