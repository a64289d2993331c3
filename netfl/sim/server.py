"""The server's schedule for synchronous rounds.

Each round: ask every device whether it is eligible (policy, battery),
select up to ``participants`` of them uniformly at random, start their
tasks, wait until all have replied or the deadline passes, stop the
stragglers (their work is lost), aggregate what arrived, and start the next
round. A round in which nobody is available still counts (the per-round
policies and algorithms such as FedAU see it as a round everybody missed);
the server then waits ``idle_wait`` seconds before trying again. With an
``interval``, rounds start at most that often (production FL paces rounds
so as not to exhaust the devices that are eligible at a time).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import simpy

from netfl.backend import RoundContext, TrainingBackend
from netfl.sim.device import Device
from netfl.sim.recorder import SERVER, EventRecorder


class SyncServer:
    def __init__(self, env: simpy.Environment, devices: Sequence[Device], backend: TrainingBackend,
                 recorder: EventRecorder, rng: np.random.Generator, *, participants: int | None,
                 deadline_s: float, idle_wait_s: float, max_rounds: int | None, interval_s: float = 0.0,
                 on_round_end: Callable[[int], None]):
        self.env = env
        self.devices = devices
        self.backend = backend
        self.recorder = recorder
        self.rng = rng
        self.participants = participants
        self.deadline_s = deadline_s
        self.idle_wait_s = idle_wait_s
        self.interval_s = interval_s
        self.max_rounds = max_rounds
        self.on_round_end = on_round_end
        self.round_index = 0  # the round in progress (or next to start)
        self.rounds_done = 0
        self.updates_received = 0
        self.updates_applied = 0
        self.updates_dropped = 0

    def log(self, kind: str, detail: str = "") -> None:
        self.recorder.log(self.env.now, self.round_index, SERVER, kind, detail)

    def run(self):
        while self.max_rounds is None or self.rounds_done < self.max_rounds:
            started = self.env.now
            yield from self._round()
            if self.env.now - started < self.interval_s:
                yield self.env.timeout(started + self.interval_s - self.env.now)
            self.rounds_done += 1
            self.on_round_end(self.round_index)
            self.round_index += 1

    def _round(self):
        r = self.round_index
        available = [d for d in self.devices if d.eligible(r)]
        self.log("round_start", f"available={len(available)}")
        k = len(available) if self.participants is None else min(self.participants, len(available))
        chosen_idx = np.sort(self.rng.choice(len(available), size=k, replace=False)) if k else []
        chosen = [available[i] for i in chosen_idx]

        delivered: list[int] = []
        jobs: dict[int, Device] = {}
        tasks = []
        for device in chosen:
            job = self.backend.submit(device.index, r)
            jobs[job] = device
            device.log("selected", f"job={job}")
            tasks.append(device.start_task(job, self.backend.model_bytes, self.backend.job_flops(device.index),
                                           delivered.append))
        if tasks:
            everyone = self.env.all_of(tasks)
            if math.isinf(self.deadline_s):
                yield everyone
            else:
                yield everyone | self.env.timeout(self.deadline_s)
            stragglers = [t for t in tasks if t.is_alive]
            for task in stragglers:
                task.interrupt("deadline")
            if stragglers:
                yield self.env.all_of(stragglers)
        else:
            yield self.env.timeout(self.idle_wait_s)

        for job in jobs:
            if job not in delivered:
                self.backend.cancel(job)
        context = RoundContext(round_index=r, sim_time_s=self.env.now,
                               available=tuple(d.index for d in available),
                               selected=tuple(d.index for d in chosen), delivered=tuple(delivered))
        applied = self.backend.aggregate(context)
        self.updates_received += len(delivered)
        self.updates_applied += applied
        self.updates_dropped += len(jobs) - len(delivered)
        self.log("aggregate", f"received={len(delivered)} applied={applied} dropped={len(jobs) - len(delivered)}")
