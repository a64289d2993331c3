"""Ctrl-C and SIGTERM: stop a run between events, write what it has, and never half-write it.

A run interrupted by either signal finishes the event under way, writes its
partial results (``complete: false``) and exits non-zero; a second signal
while those results are written waits for the write to end instead of
destroying it. Signal handlers can only be set from the main thread; from
any other thread these helpers change nothing.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class Interrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C or SIGTERM; ``written`` is the folder its partial results went to, or None when
    it was stopped before there was anything to write (while building its world); ``checkpointed_at``: the
    simulated time of the checkpoint written where it stopped (runs keeping checkpoints), else None."""

    def __init__(self, written: Path | None, checkpointed_at: float | None = None):
        super().__init__(str(written) if written is not None else "")
        self.written = written
        self.checkpointed_at = checkpointed_at


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Inside: SIGTERM (a scheduler's or a ``kill``'s stop) is handled exactly like Ctrl-C."""
    if not _main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def signals_deferred() -> Iterator[list[int]]:
    """Inside: Ctrl-C and SIGTERM are noted (in the yielded list), not raised; the caller decides after."""
    received: list[int] = []
    if not _main_thread():
        yield received
        return
    previous = {
        s: signal.signal(s, lambda signum, frame: received.append(signum)) for s in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield received
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def ignore_further_signals() -> None:
    """After an interruption has been handled: more Ctrl-C only repeats the request; let the exit finish."""
    if _main_thread():
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)
