"""A device as a SimPy actor: availability, battery and the tasks it runs.

A task (download the global model, train, upload the update) advances
simulated time only by physics: transfer time = bytes / link rate +
latency, compute time = job FLOPs / device speed. Energy is drawn by the
loads that are on. If the battery empties or the device goes offline
mid-task, the task is interrupted and its work is lost (a dropout). The
task ends when the upload's last bit has left the device (``upload_end``):
the link's latency after that is the network's (the update in flight
arrives whatever becomes of the device).

Partial work (:class:`Deadline`): a device whose job would not leave in
time trains only the local steps that let its upload's last bit leave by
then, from its own speed, the FLOPs of one step and its upload time at the
throughput its previous upload achieved (waiting for the medium and
retransmissions included; the link's nominal rate before its first, see
:meth:`Network.send_estimate_s`) stretched by a margin, decided once its
download is done; the
``train_start`` event says ``steps`` (done) of ``asked_steps`` and carries the
FLOPs done, ``train_end`` their energy. A job that fits no step stops there
(a dropout with cause ``deadline``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import simpy

from netfl.backend import Work
from netfl.errors import PolicyError
from netfl.policies.base import AvailabilityPolicy, RoundPolicy, SessionPolicy, policy_origin
from netfl.policies.catalog import policy_label
from netfl.sim.battery import Battery
from netfl.sim.device_table import DeviceProfile
from netfl.sim.network import Network, Radio
from netfl.sim.recorder import EventRecorder


@dataclass(frozen=True)
class Usage:
    """Its owner's use of a device: when (a session policy: online = in use), the power drawn meanwhile, and
    whether a device in use may train (netfl/policies/usage.py)."""

    policy: SessionPolicy
    power_w: float
    train_while_in_use: bool = False


@dataclass(frozen=True)
class Deadline:
    """Partial work: the upload's last bit must leave the device by ``leave_by`` (simulated seconds); ``cut(job,
    steps)`` tells the learner how many local steps the job trains."""

    leave_by: float
    cut: Callable[[int, int], None]
    margin: float = 0.0  # the upload is planned to take (1 + margin) times its estimate


def fitting_steps(now: float, end: float, step_s: float, most: int) -> int:
    """The most steps of ``step_s`` seconds each, at most ``most``, that end strictly before ``end`` starting at
    ``now`` (with a margin of 1e-9 relative, so that float sums of the same times cannot tie with ``end``)."""
    if not end > now:
        return 0
    n = min(most, math.floor((end - now) / step_s))
    margin = 1e-9 * max(1.0, abs(end))
    while n > 0 and not now + n * step_s < end - margin:
        n -= 1
    return n


def after_now(policy: SessionPolicy, now: float, at: float, whose: str) -> float:
    """``at``, a policy's next wake-up, if it is after ``now``: else time would stop (the watchdog's case, caught
    at once here for every policy; a user's script is checked as it answers, with its line)."""
    if not at > now:  # NaN too
        raise PolicyError(
            f"{policy_origin(policy)}: next_wakeup({now:g}) returned {at!r}, which is not "
            f"after now ({whose}); return a later time, or math.inf for never"
        )
    return at


class Device:
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
    ):
        """``online``, ``using``: the state the device starts in, without an event (a device the array form
        hands to an actor, already online and maybe in use); its policies are asked at once either way."""
        self.env = env
        self.profile = profile
        self.battery = battery
        self.policy = policy
        self._policy_cause = f"policy:{policy_label(policy)}"  # an offline (and a dropout) it causes names it
        self.charger = charger
        self.usage = usage
        self.using = False  # in a session of its owner's use that began while it was on (netfl/policies/usage.py)
        self.network = network
        self._waiters: list[simpy.Event] = []
        self.recorder = recorder
        self.current_round = current_round
        self.index = profile.index
        self.dead = False  # battery empty and not charging: the device is off
        self.died_at = math.inf
        self.online = online
        self.online_time_s = 0.0
        self._online_since = env.now
        self.task: simpy.Process | None = None
        self.tasks_started = 0
        # what its last upload achieved (bits over upload_start..upload_end); after one the deadline cut, a back-off
        # (_upload_cut); None: the link's nominal rate
        self.upload_bps: float | None = None
        self.updates_delivered = 0
        self._power_changed: simpy.Event | None = None
        self._state_changed: simpy.Event | None = None
        self._full = battery.level_j >= battery.capacity_j
        self.set_load("idle", profile.idle_w)
        # whether its owner's session is on (a handed-over device's may have begun while it was off: not using)
        self._in_session = False
        if usage is not None and online:
            self._in_session = bool(usage.policy.online(env.now, self))
            if using:
                self.using = True
                self.set_load("use", usage.power_w)
        self.below_min = battery.min_level > 0 and battery.fraction(env.now) <= battery.min_level
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

    def stop(self) -> None:
        """End the device's own processes (availability, battery, charger, use): the array form is done with it."""
        for process in self._processes:
            if process.is_alive:
                process.interrupt("stopped")
        self._processes = []

    # ----------------------------------------------------------------- state

    def log(self, kind: str, detail: str = "", **fields) -> None:
        """One event of this device; ``fields`` fill the log's typed columns (job=, cause=, ...)."""
        self.recorder.log(self.env.now, self.current_round(), self.index, kind, detail, **fields)

    def set_load(self, name: str, watts: float) -> None:
        if self.dead and watts:
            return  # a dead device draws nothing (a radio switched on by a medium after the battery emptied)
        self.battery.set_load(self.env.now, name, watts)
        self._power_change()

    def _power_change(self) -> None:
        if self._power_changed is not None and not self._power_changed.triggered:
            self._power_changed.succeed()

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

    def settle(self) -> None:
        """Bring the energy and online-time bookkeeping up to the present (end of a run)."""
        self.battery.settle(self.env.now)
        if self.online:
            self.online_time_s += self.env.now - self._online_since
            self._online_since = self.env.now

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
        return self.using and not self.usage.train_while_in_use

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

    # ------------------------------------------------------------- processes

    def _sessions(self):
        """Re-ask the session policy at its wake-ups and whenever the device's state changes."""
        policy: SessionPolicy = self.policy  # type: ignore[assignment]
        with _until_stopped():
            yield from self._ask_sessions(policy)

    def _ask_sessions(self, policy: SessionPolicy):
        while True:
            self._state_changed = self.env.event()
            self._set_online(not self.dead and policy.online(self.env.now, self), self._policy_cause)
            at = self._after_now(policy, policy.next_wakeup(self.env.now), "availability")
            events = [self._state_changed]
            if not math.isinf(at):
                events.append(self.env.timeout(max(0.0, at - self.env.now)))
            yield self.env.any_of(events)

    def _after_now(self, policy: SessionPolicy, at: float, role: str) -> float:
        return after_now(policy, self.env.now, at, f"the {role} policy of device {self.index}")

    def describe_process(self, name: str) -> str | None:
        """Which of this device's processes ``name`` is, for the watchdog's message (netfl/sim/watchdog.py)."""
        if name == "_sessions":
            return f"device {self.index}'s availability policy {policy_origin(self.policy)}"
        if name == "_charging" and self.charger is not None:
            return f"device {self.index}'s charging policy {policy_origin(self.charger)}"
        if name == "_use" and self.usage is not None:
            return f"device {self.index}'s usage policy {policy_origin(self.usage.policy)}"
        return {"_watch_battery": f"device {self.index}'s battery", "_task": f"device {self.index}'s task"}.get(name)

    def _charging(self):
        """Plug and unplug the charger as its schedule (a session policy) says."""
        with _until_stopped():
            yield from self._follow_charger(self.charger)

    def _follow_charger(self, charger: SessionPolicy):
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

    def _use(self):
        """Start and end its owner's sessions of use as the usage policy says (a dead phone is not used)."""
        with _until_stopped():
            yield from self._follow_usage(self.usage)

    def _follow_usage(self, usage: Usage):
        policy = usage.policy
        while True:
            in_use = bool(policy.online(self.env.now, self))
            if in_use != self._in_session:
                self._in_session = in_use
                if in_use and not self.dead:
                    self.using = True
                    self.set_load("use", usage.power_w)
                    self.log("use_start")
                    if self.task is not None and not usage.train_while_in_use:
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

    def _watch_battery(self):
        """Wake exactly when the level reaches a mark: empty, full, or the participation threshold."""
        with _until_stopped():
            yield from self._watch_levels()

    def _watch_levels(self):
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
                (b.capacity_j, b.time_to_full(self.env.now) if b.charging else math.inf, False),
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
        return self.dead and self.battery.charging and self.battery.charge_w > self.profile.idle_w

    def _revive(self) -> None:
        """A phone that died comes back on when it is plugged in."""
        self.dead = False
        self.battery.set_load(self.env.now, "idle", self.profile.idle_w)
        self.log("power_on", cause="charging")

    # ------------------------------------------------------------------ task

    def start_task(
        self,
        work: Work,
        uploaded: Callable[[int], None],
        lost: Callable[[int], None],
        deadline: Deadline | None = None,
    ) -> simpy.Process:
        """Download, compute, upload ``work``. ``uploaded(job)`` once the upload's last bit has left the device (the
        caller carries it on, the hop's latency first: :meth:`Network.in_flight`); ``lost(job)`` if not. With a
        ``deadline``, train only the steps that fit (partial work)."""
        self.tasks_started += 1
        self.task = self.env.process(self._task(work, uploaded, lost, deadline))
        return self.task

    def _steps_in_time(self, work: Work, deadline: Deadline) -> int:
        """How many of the work's local steps let its upload leave by the deadline, starting now."""
        step_s = work.flops / work.steps / self.profile.flops_per_s
        bits = 8.0 * work.upload_bytes
        send_s = bits / self.upload_bps if self.upload_bps else self.network.send_estimate_s(self.index, bits)
        send_s *= 1.0 + deadline.margin
        return fitting_steps(self.env.now, deadline.leave_by - send_s, step_s, work.steps)

    def _upload_cut(self, bits: float, had_s: float) -> None:
        """The deadline cut an upload of ``bits`` after ``had_s`` seconds: sending them takes longer than that, so
        the throughput to plan with is below ``bits / had_s``. How many bits got through is the medium's to know
        (a shared medium may have queued the device all along), so the device backs off by a stated factor: it
        plans its next upload as twice the time this one had (or longer if it already did), until an upload
        completes and measures the throughput again. Without it, a device whose every upload is
        cut plans with the same rate round after round and loses its work in each."""
        if had_s <= 0:
            return
        planned_s = bits / self.upload_bps if self.upload_bps else self.network.send_estimate_s(self.index, bits)
        self.upload_bps = bits / max(planned_s, 2.0 * had_s)

    def _task(
        self, work: Work, uploaded: Callable[[int], None], lost: Callable[[int], None], deadline: Deadline | None
    ):
        p = self.profile
        job, task = work.job, work.task
        try:
            if work.download_bytes > 0:
                self.log("download_start", job=job, task=task, bytes=work.download_bytes)
                receiver = Radio(self.set_load, "receive", p.receive_w, self.env)
                yield from self.network.download(self.index, 8.0 * work.download_bytes, receiver)
                self.log("download_end", job=job, task=task, energy_j=receiver.energy_j)

            if work.flops > 0:
                flops, cut = work.flops, {}
                if deadline is not None and work.steps:
                    steps = self._steps_in_time(work, deadline)
                    if steps == 0:
                        self.log("dropout", job=job, task=task, cause="deadline")
                        lost(job)
                        return
                    if steps < work.steps:
                        deadline.cut(job, steps)
                        flops, cut = work.flops / work.steps * steps, {"steps": steps, "asked_steps": work.steps}
                self.log("train_start", job=job, task=task, flops=flops, **cut)
                seconds = flops / p.flops_per_s
                self.set_load("compute", p.compute_w)
                try:
                    yield self.env.timeout(seconds)
                finally:
                    self.set_load("compute", 0.0)
                self.log("train_end", job=job, task=task, energy_j=p.compute_w * seconds)

            self.log("upload_start", job=job, task=task, bytes=work.upload_bytes)
            sending = self.env.now
            transmitter = Radio(self.set_load, "transmit", p.transmit_w, self.env)
            try:
                sent = yield from self.network.upload_first_hop(self.index, 8.0 * work.upload_bytes, transmitter)
            except simpy.Interrupt as interrupt:
                if interrupt.cause == "deadline":
                    self._upload_cut(8.0 * work.upload_bytes, self.env.now - sending)
                raise
            if not sent:
                self.log("dropout", job=job, task=task, cause="transmission_failed")
                lost(job)
                return
            self.log("upload_end", job=job, task=task, energy_j=transmitter.energy_j)
            if self.env.now > sending:
                self.upload_bps = 8.0 * work.upload_bytes / (self.env.now - sending)
            if not work.report:
                self.updates_delivered += 1
            uploaded(job)
        except simpy.Interrupt as interrupt:
            self.log("dropout", job=job, task=task, cause=interrupt.cause)
            lost(job)
        finally:
            self.task = None


@contextmanager
def _until_stopped():
    """Ends a device process quietly when :meth:`Device.stop` interrupts it."""
    try:
        yield
    except simpy.Interrupt as interrupt:
        if interrupt.cause != "stopped":
            raise
