"""How many of this process's CPUs other processes keep busy: what a run's default thread count yields to.

Two runs on two cores, each training with two threads, put four threads on two cores: every time slice
evicts the other thread's activations from the cache, and both runs lose time (``benchmarks/speed.py``,
threads section). With the default thread count, netfl's worker threads therefore look, about once a
second, at how busy the CPUs this process may use were with *other* work -- the kernel's per-CPU counters
in ``/proc/stat`` (time stolen by a hypervisor counts as busy), less this process's own CPU time -- and
train with only the CPUs left over (at least one). Two runs started together settle at one thread each,
and a run gets its other threads back when the other run ends. Which thread trains which job never changes
a result, so this changes speed only. Where ``/proc/stat`` cannot be read (not Linux), every CPU is used.
"""

from __future__ import annotations

import os
import time

__all__ = ["CpuShare"]

_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class CpuShare:
    """The cores of ``cpus`` that other processes kept busy over the last ``interval_s`` or more."""

    def __init__(self, cpus: set[int], interval_s: float = 1.0, stat_path: str = "/proc/stat"):
        self.cpus, self.interval_s, self.stat_path = set(cpus), interval_s, stat_path
        self._last = self._sample()
        self._others = 0.0

    def _sample(self) -> tuple[float, float, float] | None:
        """(wall clock s, busy s of ``cpus`` summed over them, this process's CPU s), None if unreadable."""
        try:
            with open(self.stat_path) as stat:
                lines = stat.readlines()
        except OSError:
            return None
        busy = 0
        for line in lines:
            if not (line.startswith("cpu") and line[3:4].isdigit()):
                continue
            name, *fields = line.split()
            if int(name[3:]) not in self.cpus or len(fields) < 5:
                continue
            ticks = [int(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal (guest is in user)
            busy += sum(ticks) - ticks[3] - ticks[4]
        return time.monotonic(), busy / _TICKS_PER_S, time.process_time()

    def others_busy(self) -> float:
        """Cores kept busy by other processes, averaged since the previous reading (read again once
        ``interval_s`` has passed; in between, the last figure). 0 when unknown."""
        if self._last is None:
            return 0.0
        now = time.monotonic()
        if now - self._last[0] < self.interval_s:
            return self._others
        sample = self._sample()
        if sample is None:
            return self._others
        wall = sample[0] - self._last[0]
        others = (sample[1] - self._last[1]) - (sample[2] - self._last[2])
        self._last, self._others = sample, max(0.0, others / wall)
        return self._others

    def free(self, cpus: int) -> int:
        """How many of ``cpus`` worker threads to run now: the CPUs other processes leave free, at least 1."""
        return max(1, min(cpus, round(len(self.cpus) - self.others_busy())))
