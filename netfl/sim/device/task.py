"""A device's task: download the global model, train, upload the update, and partial work under a deadline.

A task advances simulated time only by physics: transfer time = bytes /
link rate + latency, compute time = job FLOPs / device speed; the energy is
that of the loads it switches on (the radio's, the compute load). If the
battery empties, the device goes offline or its owner starts using it
mid-task, the task is interrupted and its work is lost (a dropout, with the
interrupt's cause). The task ends when the upload's last bit has left the
device (``upload_end``): the link's latency after that is the network's (the
update in flight arrives whatever becomes of the device).

Partial work (:class:`Deadline`): a device whose job would not leave in
time trains only the local steps that let its upload's last bit leave by
then, from its own speed, the FLOPs of one step and its upload time at the
throughput its previous upload achieved (waiting for the medium and
retransmissions included; the link's nominal rate before its first, see
:meth:`Network.send_estimate_s`) stretched by a margin, decided once its
download is done; the ``train_start`` event says ``steps`` (done) of
``asked_steps`` and carries the FLOPs done, ``train_end`` their energy. A
job that fits no step stops there (a dropout with cause ``deadline``).

:class:`TaskPipeline` is a mixin of :class:`~netfl.sim.device.Device` (why a
mixin: see that package's docstring). Of the device's state it owns ``task``
(the running task's process, None between tasks), ``tasks_started``,
``updates_delivered`` and ``upload_bps``; it switches loads on and off with
the power mixin's ``set_load``, and the availability and power mixins
interrupt ``task`` when the device goes away.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import simpy

from netfl.backend import Work
from netfl.sim.network import Radio


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


class TaskPipeline:
    """Download, train and upload one piece of work at a time (see the module docstring)."""

    task: simpy.Process | None  # the running task, None between tasks
    tasks_started: int
    updates_delivered: int
    # what its last upload achieved (bits over upload_start..upload_end); after one the deadline cut, a back-off
    # (_upload_cut); None: the link's nominal rate
    upload_bps: float | None

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
        completes and measures the throughput again (or it gives up, :meth:`_gave_up`). Without it, a device
        whose every upload is cut plans with the same rate round after round and loses its work in each."""
        if had_s <= 0:
            return
        planned_s = bits / self.upload_bps if self.upload_bps else self.network.send_estimate_s(self.index, bits)
        self.upload_bps = bits / max(planned_s, 2.0 * had_s)

    def _gave_up(self, bits: float) -> None:
        """Its plan left no step to train, so it sends nothing and measures nothing: without more, a device the
        back-off (:meth:`_upload_cut`) kept from working would plan with the same throughput, and give up, in
        every later round. Each time it gives up it plans the next with twice the throughput instead, up to the
        link's nominal one, so that it tries an upload again after a few rounds (and backs off again if that
        one is cut too): exponential back-off with recovery, as a sender's retransmission timer has."""
        if not self.upload_bps:
            return
        nominal_bps = bits / self.network.send_estimate_s(self.index, bits)
        self.upload_bps = None if 2.0 * self.upload_bps >= nominal_bps else 2.0 * self.upload_bps

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
                        self._gave_up(8.0 * work.upload_bytes)
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
