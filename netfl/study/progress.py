"""A sweep's progress: one line per finished run, and on a terminal one bar over all runs with an ETA."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from netfl.study.spec import RunPlan
from netfl.units import format_duration


class SweepProgress:
    """The ETA is the remaining runs at the pace runs have finished so far (runs of one study cost alike, and
    the pace already counts how many run side by side)."""

    def __init__(self, *, stream: TextIO | None = None, bar: bool | None = None, width: int = 24):
        self.stream = stream or sys.stderr
        self.bar = self.stream.isatty() if bar is None else bar
        self.width = width
        self.total = self.finished = self.failed = self.running = 0
        self.started = time.perf_counter()
        self._drawn = False

    def start(self, todo: list[RunPlan]) -> None:
        self.total, self.started = len(todo), time.perf_counter()

    def eta_s(self, now: float) -> float | None:
        if not self.finished:
            return None
        return (now - self.started) / self.finished * (self.total - self.finished)

    def line(self, now: float) -> str:
        done = self.finished / self.total if self.total else 1.0
        filled = int(done * self.width)
        eta = self.eta_s(now)
        failed = f"  {self.failed} failed" if self.failed else ""
        return (
            f"[{'#' * filled}{'.' * (self.width - filled)}] {self.finished}/{self.total} runs  "
            f"{self.running} running{failed}  {format_duration(now - self.started)} elapsed  "
            f"ETA {format_duration(eta) if eta is not None else '-'}"
        )

    def tick(self, running: int) -> None:
        self.running = running
        if self.bar:
            self.stream.write("\r" + self.line(time.perf_counter()) + "\033[K")
            self.stream.flush()
            self._drawn = True

    def done(self, plan: RunPlan, record: dict[str, Any]) -> None:
        self.finished += 1
        self.failed += record["status"] == "failed"
        self._clear()
        self.stream.write(f"[{self.finished}/{self.total}] {plan.label}: {describe_record(record)}\n")
        self.tick(max(0, self.running - 1))

    def close(self) -> None:
        self._clear()

    def _clear(self) -> None:
        if self._drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._drawn = False


def describe_record(record: dict[str, Any]) -> str:
    took = f" in {format_duration(record['wall_time_s'])}" if record.get("wall_time_s") is not None else ""
    if record["status"] == "complete":
        accuracy = record.get("final_test_accuracy")
        acc = f", final accuracy {100 * accuracy:.1f}%" if isinstance(accuracy, float) else ""
        diverged = ", training diverged" if record.get("stopped_by") == "diverged" else ""
        diverged += ", the test loss exploded (summary.json: loss_explosion)" if record.get("loss_explosion") else ""
        return (
            f"complete{took} ({record['rounds']} rounds, {format_duration(record['sim_time_s'])} simulated{acc}"
            f"{diverged})"
        )
    return f"failed{took}: {str(record.get('error', '')).splitlines()[0] if record.get('error') else 'unknown error'}"
