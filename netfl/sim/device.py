"""A device as a SimPy actor: availability, battery and the tasks it runs.

A task (download the global model, train, upload the update) advances
simulated time only by physics: transfer time = bytes / link rate +
latency, compute time = job FLOPs / device speed. Energy is drawn by the
loads that are on. If the battery empties or the device goes offline
mid-task, the task is interrupted and its work is lost (a dropout).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import simpy

from netfl.policies.base import AvailabilityPolicy, RoundPolicy, SessionPolicy
from netfl.sim.battery import Battery
from netfl.sim.recorder import EventRecorder


@dataclass(frozen=True)
class DeviceProfile:
    """The fixed physical parameters of one device."""

    index: int
    group: str
    flops_per_s: float
    uplink_bps: float
    downlink_bps: float
    latency_s: float
    compute_w: float
    transmit_w: float
    receive_w: float
    idle_w: float


class Device:
    def __init__(self, env: simpy.Environment, profile: DeviceProfile, battery: Battery,
                 policy: AvailabilityPolicy, recorder: EventRecorder, current_round: Callable[[], int]):
        self.env = env
        self.profile = profile
        self.battery = battery
        self.policy = policy
        self.recorder = recorder
        self.current_round = current_round
        self.index = profile.index
        self.dead = False
        self.online = False
        self.below_min = False
        self.task: simpy.Process | None = None
        self.tasks_started = 0
        self.updates_delivered = 0
        self._power_changed: simpy.Event | None = None
        self.set_load("idle", profile.idle_w)
        if isinstance(policy, SessionPolicy):
            env.process(self._sessions())
        if not battery.mains:
            env.process(self._watch_battery())

    # ----------------------------------------------------------------- state

    def log(self, kind: str, detail: str = "") -> None:
        self.recorder.log(self.env.now, self.current_round(), self.index, kind, detail)

    def set_load(self, name: str, watts: float) -> None:
        self.battery.set_load(self.env.now, name, watts)
        if self._power_changed is not None and not self._power_changed.triggered:
            self._power_changed.succeed()

    def _set_online(self, online: bool, reason: str = "") -> None:
        if online == self.online:
            return
        self.online = online
        self.log("online" if online else "offline", reason)
        if not online and self.task is not None:
            self.task.interrupt(reason or "offline")

    def eligible(self, round_index: int) -> bool:
        """Whether the device can be asked to train at the start of ``round_index``."""
        if self.dead:
            return False
        if isinstance(self.policy, RoundPolicy):
            self._set_online(self.policy.participates(round_index), "policy")
        below = not self.battery.can_participate(self.env.now)
        if below and not self.below_min:
            self.log("below_min_level", f"level={self.battery.fraction(self.env.now):.4f}")
        self.below_min = below
        return self.online and not below and self.task is None

    # ------------------------------------------------------------- processes

    def _sessions(self):
        policy: SessionPolicy = self.policy  # type: ignore[assignment]
        self._set_online(policy.initially_online(), "policy")
        while True:
            at = policy.next_change(self.env.now, self.online)
            if math.isinf(at):
                return
            yield self.env.timeout(max(0.0, at - self.env.now))
            if self.dead:
                return
            self._set_online(not self.online, "policy")

    def _watch_battery(self):
        while True:
            self._power_changed = self.env.event()
            wait = self.battery.time_to_empty(self.env.now)
            events = [self._power_changed]
            if not math.isinf(wait):
                events.append(self.env.timeout(wait))
            fired = yield self.env.any_of(events)
            if self._power_changed not in fired:
                self._empty()
                return

    def _empty(self) -> None:
        self.battery.settle(self.env.now)
        self.battery.level_j = 0.0
        self.dead = True
        self.log("battery_empty")
        for name in list(self.battery.loads):
            self.battery.set_load(self.env.now, name, 0.0)
        was_online = self.online
        self._set_online(False, "battery_empty")  # interrupts a running task
        if not was_online and self.task is not None:
            self.task.interrupt("battery_empty")

    # ------------------------------------------------------------------ task

    def start_task(self, job: int, model_bytes: int, flops: float, deliver: Callable[[int], None]) -> simpy.Process:
        self.tasks_started += 1
        self.task = self.env.process(self._task(job, model_bytes, flops, deliver))
        return self.task

    def _task(self, job: int, model_bytes: int, flops: float, deliver: Callable[[int], None]):
        p = self.profile
        bits = 8.0 * model_bytes
        load = ""
        try:
            self.log("download_start", f"job={job} bytes={model_bytes}")
            yield self.env.timeout(p.latency_s)
            load = "receive"
            self.set_load(load, p.receive_w)
            yield self.env.timeout(bits / p.downlink_bps)
            self.set_load(load, 0.0)
            self.log("download_end", f"job={job}")

            self.log("train_start", f"job={job} flops={flops:.6g}")
            load = "compute"
            self.set_load(load, p.compute_w)
            yield self.env.timeout(flops / p.flops_per_s)
            self.set_load(load, 0.0)
            self.log("train_end", f"job={job}")

            self.log("upload_start", f"job={job} bytes={model_bytes}")
            load = "transmit"
            self.set_load(load, p.transmit_w)
            yield self.env.timeout(bits / p.uplink_bps)
            self.set_load(load, 0.0)
            load = ""
            yield self.env.timeout(p.latency_s)
            self.log("upload_end", f"job={job}")
            self.updates_delivered += 1
            deliver(job)
        except simpy.Interrupt as interrupt:
            if load and not self.dead:
                self.set_load(load, 0.0)
            self.log("dropout", f"job={job} cause={interrupt.cause}")
        finally:
            self.task = None
