"""A device's availability and its owner's day: online or not, plugged in or not, in use or not.

Three schedules move a device through its day, each a policy asked at its
own wake-ups: its availability policy (a :class:`RoundPolicy` asked at each
round's start, or a :class:`SessionPolicy` asked at its wake-ups and
whenever something it may read changes: online = available), its charger (a
session policy: online = plugged in) and its owner's use (:class:`Usage`: a
session policy, online = in use, which draws power and, unless the device
may train while in use, keeps it from training and interrupts its task).
Whether a device can be asked to work follows from these, its power
(``dead``, ``below_min``) and whether it is already working.

:class:`Availability` is a mixin of :class:`~netfl.sim.device.Device` (why a
mixin: see that package's docstring). Of the device's state it owns
``online`` and its time, ``using`` and the owner's session, and the events
that tell waiters and the session policy of a change; it reads the power
mixin's ``dead`` and ``below_min``, powers a dead device on through its
``_can_boot`` and ``_revive``, and interrupts the task mixin's ``task`` when
the device goes offline or into use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import simpy

from netfl.errors import PolicyError
from netfl.policies.base import RoundPolicy, SessionPolicy, policy_origin
from netfl.registry.device_params import UsageSpec


@dataclass(frozen=True)
class Usage:
    """Its owner's use of a device: when (a session policy: online = in use), and as its group declares it
    (``devices[].usage``): the power drawn meanwhile, and whether a device in use may train
    (netfl/policies/usage.py)."""

    policy: SessionPolicy
    spec: UsageSpec


def after_now(policy: SessionPolicy, now: float, at: float, whose: str) -> float:
    """``at``, a policy's next wake-up, if it is after ``now``: else time would stop (the watchdog's case, caught
    at once here for every policy; a user's script is checked as it answers, with its line)."""
    if not at > now:  # NaN too
        raise PolicyError(
            f"{policy_origin(policy)}: next_wakeup({now:g}) returned {at!r}, which is not "
            f"after now ({whose}); return a later time, or math.inf for never"
        )
    return at


class Availability:
    """Online state, eligibility, and the processes of the availability policy, the charger and the owner's use
    (see the module docstring)."""

    online: bool
    online_time_s: float  # up to _online_since while online (settle brings it to the present)
    _online_since: float
    using: bool  # in a session of its owner's use that began while it was on (netfl/policies/usage.py)
    _in_session: bool  # whether its owner's session is on (one may begin while the device is off: not using)
    _policy_cause: str  # an offline (and a dropout) the availability policy causes names it
    _waiters: list[simpy.Event]  # changed()'s events, fired at the next change
    _state_changed: simpy.Event | None  # fires when something a session policy may read changes

    def _set_online(self, online: bool, reason: str = "") -> None:
        if online == self.online:
            return
        self.online = online
        if online:
            self._online_since = self.env.now
        else:
            self.online_time_s += self.env.now - self._online_since
        self.log("online" if online else "offline", cause=reason or None)
        if not online and self.task is not None:
            self.task.interrupt(reason or "offline")
        self._wake_waiters()

    def eligible(self, round_index: int) -> bool:
        """Whether the device can be asked to train at the start of ``round_index``."""
        if isinstance(self.policy, RoundPolicy) and not self.dead:
            self._set_online(self.policy.participates(round_index), self._policy_cause)
        return self.can_start() and not self.below_min

    def can_start(self) -> bool:
        """Whether work handed out later in a round (after a probe) can still start: on, online, not working and
        not in use (where its owner's use keeps it from training)."""
        return self.online and not self.dead and self.task is None and not self._in_use_blocks()

    def _in_use_blocks(self) -> bool:
        return self.using and not self.usage.spec.train_while_in_use

    # DeviceState, as session policies see it
    @property
    def charging(self) -> bool:
        return self.battery.charging

    @property
    def mains(self) -> bool:
        return self.battery.mains

    @property
    def battery_fraction(self) -> float:
        return self.battery.fraction(self.env.now)

    def state_changed(self) -> None:
        """Tell the availability process that something a policy may read has changed."""
        if self._state_changed is not None and not self._state_changed.triggered:
            self._state_changed.succeed()
        self._wake_waiters()

    def changed(self) -> simpy.Event:
        """An event that fires at the next change of online state, battery state or task (async workers wait on it)."""
        event = self.env.event()
        self._waiters.append(event)
        return event

    def _wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for event in waiters:
            event.succeed()

    def _after_now(self, policy: SessionPolicy, at: float, role: str) -> float:
        return after_now(policy, self.env.now, at, f"the {role} policy of device {self.index}")

    def _ask_sessions(self, policy: SessionPolicy):
        """Re-ask the session policy at its wake-ups and whenever the device's state changes."""
        while True:
            self._state_changed = self.env.event()
            self._set_online(not self.dead and policy.online(self.env.now, self), self._policy_cause)
            at = self._after_now(policy, policy.next_wakeup(self.env.now), "availability")
            events = [self._state_changed]
            if not math.isinf(at):
                events.append(self.env.timeout(max(0.0, at - self.env.now)))
            yield self.env.any_of(events)

    def _follow_charger(self, charger: SessionPolicy):
        """Plug and unplug the charger as its schedule (a session policy) says."""
        while True:
            plugged = bool(charger.online(self.env.now, self))
            if plugged != self.battery.charging:
                self.battery.set_charging(self.env.now, plugged)
                self.log("charge_start" if plugged else "charge_stop", level=self.battery.fraction(self.env.now))
                if plugged and self._can_boot():
                    self._revive()
                self._power_change()
                self.state_changed()
            at = self._after_now(charger, charger.next_wakeup(self.env.now), "charging")
            if math.isinf(at):
                return
            yield self.env.timeout(max(0.0, at - self.env.now))

    def _follow_usage(self, usage: Usage):
        """Start and end its owner's sessions of use as the usage policy says (a dead phone is not used)."""
        policy = usage.policy
        while True:
            in_use = bool(policy.online(self.env.now, self))
            if in_use != self._in_session:
                self._in_session = in_use
                if in_use and not self.dead:
                    self.using = True
                    self.set_load("use", usage.spec.power)
                    self.log("use_start")
                    if self.task is not None and not usage.spec.train_while_in_use:
                        self.task.interrupt("in_use")
                    self.state_changed()
                elif not in_use and self.using:
                    self.using = False
                    self.set_load("use", 0.0)
                    self.log("use_end")
                    self.state_changed()
            at = self._after_now(policy, policy.next_wakeup(self.env.now), "usage")
            if math.isinf(at):
                return
            yield self.env.timeout(max(0.0, at - self.env.now))
