"""The named steps of starting a sweep's run, where a test acts exactly (a signal sent at one, not a race
against the clock: tests/end_to_end/test_sweep_stop.py). Nothing is told of them in use."""

from __future__ import annotations

from collections.abc import Callable

#: In the order the driver reaches them for one run: picked from the queue; its process about to be forked
#: (multiprocessing's forkserver forks it); forked, not yet tracked by the driver; tracked; the sweep
#: writing sweep.json to say it started (a critical section inside the driver's own); that written.
STEPS = ("queued", "forking", "forked", "tracked", "announcing", "announced")

#: Tests only: ``hook(step, run label)`` at each step; None in use.
hook: Callable[[str, str], None] | None = None


def reached(step: str, run: str) -> None:
    if hook is not None:
        hook(step, run)
