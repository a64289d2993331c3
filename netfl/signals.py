"""Ctrl-C and SIGTERM: stop a run between events, write what it has, and never half-write it.

A run interrupted by either signal finishes the event under way, writes its
partial results (``complete: false``) and exits non-zero; a second signal
while those results are written waits for the write to end instead of
destroying it. Signal handlers can only be set from the main thread; from
any other thread these helpers change nothing.

While the engine runs, an interruption is also *kept*
(:func:`interrupts_kept`): SimPy turns an exception raised inside a process
-- a Ctrl-C arriving while a policy's code runs -- into that process's
failure and goes on with the others, so a policy that loops forever would
be interrupted once per device and never stop the run. The engine asks after
each event whether one struck, and stops there.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
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


class _Depth(threading.local):
    value = 0  # how deep this thread is in code that may never return (interruptible)


_depth = _Depth()


@contextmanager
def interruptible() -> Iterator[None]:
    """Inside: code that may never return, which the engine calls inside one of its events (a user's policy): a
    signal that the handler in force would only note (:func:`signals_deferred`) raises here all the same while
    the engine runs (:func:`interrupts_kept`), since the event would never end. The learner's code is not
    wrapped: a checkpoint written at a Ctrl-C holds every answer it gave."""
    _depth.value += 1
    try:
        yield
    finally:
        _depth.value -= 1


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


class Noted(list):
    """The signals a :func:`signals_deferred` section noted, in the order they came. Those its code did not
    :meth:`take` are delivered again as the section ends, to the handler in force outside it."""

    def __init__(self) -> None:
        super().__init__()
        self.taken = 0

    def take(self) -> bool:
        """Whether a signal came: the caller acts on those noted so far itself, so they are not delivered again;
        one noted after this call still is. One read of the count, so a signal arriving meanwhile is never
        taken unseen."""
        self.taken = count = len(self)
        return count > 0


@contextmanager
def signals_deferred() -> Iterator[Noted]:
    """Inside: Ctrl-C and SIGTERM are noted (in the yielded :class:`Noted`), not raised, so no step is left
    halfway. The section's code acts on them itself (:meth:`Noted.take`) or not: as it ends, every signal it
    did not take is delivered to the handler in force outside (an enclosing section notes it in turn, the
    default raises KeyboardInterrupt or ends the process), so a signal is never lost, whenever it arrives."""
    received = Noted()
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
        # Read once the handlers are back: a signal arriving from here on goes to them directly.
        for signum in dict.fromkeys(received[received.taken :]):
            signal.raise_signal(signum)


@contextmanager
def interrupts_kept() -> Iterator[Callable[[], bool]]:
    """Inside: the Ctrl-C and SIGTERM handlers in force still act, and an interruption they raise is remembered:
    the yielded ``struck()`` says whether one did, for the engine to stop after the event it interrupted. Where
    the handler in force only notes the signal (:func:`signals_deferred`: the run stops between two events), a
    signal arriving inside :func:`interruptible` code (a policy's ``next_change`` that never returns) raises
    there all the same, since no event would ever end. A signal ignored (``SIG_IGN``) or left to the system stays so."""
    struck = [False]
    if not _main_thread():
        yield lambda: struck[0]
        return

    def keep(previous: Callable) -> Callable:
        def handler(signum, frame):
            try:
                previous(signum, frame)
            except KeyboardInterrupt:
                struck[0] = True
                raise
            if _depth.value:
                struck[0] = True
                raise KeyboardInterrupt

        return handler

    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    kept = {s: handler for s, handler in previous.items() if callable(handler)}
    for s, handler in kept.items():
        signal.signal(s, keep(handler))
    try:
        yield lambda: struck[0]
    finally:
        for s in kept:
            signal.signal(s, previous[s])


def ignore_further_signals() -> None:
    """After an interruption has been handled: more Ctrl-C only repeats the request; let the exit finish.
    Lasts until the command ends (:func:`handlers_given_back`)."""
    if _main_thread():
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)


@contextmanager
def handlers_given_back() -> Iterator[None]:
    """Inside: a command that may end by ignoring further signals (:func:`ignore_further_signals`). As it ends,
    the Ctrl-C and SIGTERM handlers it found are back: a command called from Python (a notebook, a test)
    does not leave its caller deaf to Ctrl-C, and the next command run in the same process can be stopped."""
    if not _main_thread():
        yield
        return
    found = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in found.items():
            if handler is not None:  # None: set from outside Python, which cannot be restored from here
                signal.signal(s, handler)
