"""A device as a SimPy actor: its availability, its power and the tasks it runs.

:class:`Device` is one object composed of three concerns, each in its own
module:

* :mod:`~netfl.sim.device.availability` -- online or not, eligibility, and
  the owner's day: the availability policy, the charger, the owner's use;
* :mod:`~netfl.sim.device.power` -- the loads, the battery's marks, emptying
  and powering on again;
* :mod:`~netfl.sim.device.task` -- download, train, upload, and partial work
  under a deadline.

They are mixins of one class rather than objects the device owns because
they act on one state and on one another at the same instant: an empty
battery takes the device offline and interrupts its task, plugging in powers
a dead device on, the owner's use switches a load on and interrupts the
task. Apart, each would hold a reference back to the device and the device
would forward the state the fleet, the server, the media and the session
policies read on it (``online``, ``dead``, ``using``, ``task``,
``upload_bps``, ``charging``...). As mixins, each module holds one concern's
methods and declares the state it owns; this class sets all of it up in one
place, in the order the first instant's events depend on, and runs the
device's processes: it starts and stops them and names them for the
watchdog (netfl/sim/watchdog.py names a process by its generator function,
one of this class's).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import contextmanager

import simpy

from netfl.policies.base import AvailabilityPolicy, SessionPolicy, policy_origin
from netfl.policies.catalog import policy_label
from netfl.sim.battery import Battery
from netfl.sim.device.availability import Availability, Usage
from netfl.sim.device.power import Power
from netfl.sim.device.task import Deadline, TaskPipeline
from netfl.sim.device_table import DeviceProfile
from netfl.sim.network import Network
from netfl.sim.recorder import EventRecorder

__all__ = ["Deadline", "Device", "Usage"]


class Device(Availability, Power, TaskPipeline):
    """One device of the actor form (see the package docstring)."""

    def __init__(
        self,
        env: simpy.Environment,
        profile: DeviceProfile,
        battery: Battery,
        policy: AvailabilityPolicy,
        recorder: EventRecorder,
        current_round: Callable[[], int],
        network: Network,
        charger: SessionPolicy | None = None,
        online: bool = False,
        usage: Usage | None = None,
        using: bool = False,
        levels: tuple | None = None,
    ):
        """``online``, ``using``: the state the device starts in, without an event (a device the array form
        hands to an actor, already online and maybe in use); its policies are asked at once either way.
        ``levels``: its logged battery levels' points and the power from each (netfl/sim/logged_levels.py), if
        its battery follows them."""
        self.env = env
        self.profile = profile
        self.battery = battery
        self.policy = policy
        self._policy_cause = f"policy:{policy_label(policy)}"
        self.charger = charger
        self.usage = usage
        self.using = False
        self.network = network
        self._waiters = []
        self.recorder = recorder
        self.current_round = current_round
        self.index = profile.index
        self.dead = False
        self.died_at = math.inf
        self.logged_w = 0.0
        self.online = online
        self.online_time_s = 0.0
        self._online_since = env.now
        self.task = None
        self.tasks_started = 0
        self.upload_bps = None
        self.updates_delivered = 0
        self._power_changed = None
        self._state_changed = None
        self._full = battery.level_j >= battery.capacity_j
        self.set_load("idle", profile.idle_w)
        self._in_session = False
        if usage is not None and online:
            self._in_session = bool(usage.policy.online(env.now, self))
            if using:
                self.using = True
                self.set_load("use", usage.spec.power)
        # below the threshold as the battery watch says it (at it exactly: while draining), so that the watch's
        # first look agrees: a device the array form hands over at its min_level, charging, is not below it
        level_j, threshold_j = battery.level_j, battery.min_level * battery.capacity_j
        draining = battery.net_drain_w > 0
        self.below_min = battery.min_level > 0 and (level_j < threshold_j or (level_j == threshold_j and draining))
        if self.below_min:
            self.log("below_min_level", level=battery.fraction(env.now))
        if not battery.mains and battery.level_j <= 0:
            self._empty()
        self._processes: list[simpy.Process] = []
        if isinstance(policy, SessionPolicy):
            self._processes.append(env.process(self._sessions()))
        if not battery.mains:
            self._processes.append(env.process(self._watch_battery()))
        if charger is not None:
            self._processes.append(env.process(self._charging()))
        if usage is not None:
            self._processes.append(env.process(self._use()))
        if levels is not None:
            self._processes.append(env.process(self._levels(*levels)))

    def stop(self) -> None:
        """End the device's own processes (availability, battery, charger, use): the array form is done with it."""
        for process in self._processes:
            if process.is_alive:
                process.interrupt("stopped")
        self._processes = []

    def log(self, kind: str, detail: str = "", **fields) -> None:
        """One event of this device; ``fields`` fill the log's typed columns (job=, cause=, ...)."""
        self.recorder.log(self.env.now, self.current_round(), self.index, kind, detail, **fields)

    def settle(self) -> None:
        """Bring the energy and online-time bookkeeping up to the present (end of a run)."""
        self.battery.settle(self.env.now)
        if self.online:
            self.online_time_s += self.env.now - self._online_since
            self._online_since = self.env.now

    # ------------------------------------------------------------- processes (their names are the watchdog's)

    def _sessions(self):
        """The availability policy's process (a session policy's; a round policy is asked by ``eligible``)."""
        policy: SessionPolicy = self.policy  # type: ignore[assignment]
        with _until_stopped():
            yield from self._ask_sessions(policy)

    def _watch_battery(self):
        """The battery watch's process (a device on mains power has none)."""
        with _until_stopped():
            yield from self._watch_levels()

    def _charging(self):
        """The charger's process."""
        with _until_stopped():
            yield from self._follow_charger(self.charger)

    def _use(self):
        """The owner's use's process."""
        with _until_stopped():
            yield from self._follow_usage(self.usage)

    def _levels(self, times, powers):
        """The logged battery levels' process."""
        with _until_stopped():
            yield from self._follow_levels(times, powers)

    def describe_process(self, name: str) -> str | None:
        """Which of this device's processes ``name`` is, for the watchdog's message (netfl/sim/watchdog.py)."""
        if name == "_sessions":
            return f"device {self.index}'s availability policy {policy_origin(self.policy)}"
        if name == "_charging" and self.charger is not None:
            return f"device {self.index}'s charging policy {policy_origin(self.charger)}"
        if name == "_use" and self.usage is not None:
            return f"device {self.index}'s usage policy {policy_origin(self.usage.policy)}"
        return {
            "_watch_battery": f"device {self.index}'s battery",
            "_levels": f"device {self.index}'s logged battery levels",
            "_task": f"device {self.index}'s task",
        }.get(name)


@contextmanager
def _until_stopped():
    """Ends a device process quietly when :meth:`Device.stop` interrupts it."""
    try:
        yield
    except simpy.Interrupt as interrupt:
        if interrupt.cause != "stopped":
            raise
