"""A one-line progress bar on stderr, silent when stderr is not a terminal."""

from __future__ import annotations

import sys
from typing import TextIO

from netfl.units import format_duration


class Progress:
    def __init__(
        self,
        *,
        max_rounds: int | None,
        max_time_s: float | None,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        width: int = 24,
    ):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.max_rounds = max_rounds
        self.max_time_s = max_time_s
        self.width = width

    def fraction(self, sim_time_s: float, rounds: int) -> float:
        parts = []
        if self.max_rounds:
            parts.append(rounds / self.max_rounds)
        if self.max_time_s:
            parts.append(sim_time_s / self.max_time_s)
        return min(1.0, max(parts, default=0.0))

    def line(self, sim_time_s: float, rounds: int, accuracy: float | None) -> str:
        done = self.fraction(sim_time_s, rounds)
        filled = int(done * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        of = f"/{self.max_rounds}" if self.max_rounds else ""
        acc = "-" if accuracy is None else f"{100 * accuracy:.1f}%"
        return f"[{bar}] {100 * done:3.0f}%  sim {format_duration(sim_time_s)}  round {rounds}{of}  acc {acc}"

    def update(self, sim_time_s: float, rounds: int, accuracy: float | None) -> None:
        if self.enabled:
            self.stream.write("\r" + self.line(sim_time_s, rounds, accuracy))
            self.stream.flush()

    def note(self, message: str) -> None:
        """A line for the user (a warning) on the bar's stream, the bar redrawn below it by the next update."""
        self.stream.write(("\r\033[K" if self.enabled else "") + message + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
