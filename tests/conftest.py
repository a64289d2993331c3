"""Test-wide settings: one training thread with one torch thread, the compiled kernels built once, one
forkserver per test process, and every test checked to leave the signal handlers as it found them.

A test suite sharing two cores with other processes collapses under torch's
default pool (one spinning thread per core); tests that need several
training threads (test_threads.py) ask for them.

A sweep ends the forkserver its runs were forked from (netfl.study.local), so
that ``netfl sweep`` exits at once; the next sweep starts a new one, which
imports torch and netfl again (4 s of CPU). Tests run a hundred sweeps: here the
forkserver outlives each sweep and serves the next, and is ended once, with
the test process. Every run is still a fresh fork of a server that started
clean (the sweep's own behaviour); what is shared is only that server's
imports. The tests of stopping (tests/end_to_end/test_sweep_stop.py) run
``netfl sweep`` in a process of its own, where it ends its helpers as always.

The modules that hold slow tests run first: two workers (pytest-xdist) then
finish together on the many quick ones, instead of one of them waiting while the
other runs a minute-long test that happened to be collected last. A module is
kept whole, so that its module-scoped fixtures are built once.

With xdist, the controller loads the compiled idle step (netfl/kernels/) before
it starts its workers: on a fresh checkout that compiles it into numba's cache
once (about 70 s of CPU) instead of in every worker at once; with the cache
warm it costs the controller numba's import and a cache load (about 0.7 s).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest


def pytest_configure(config) -> None:
    from netfl.learn.training.runtime import use_threads

    use_threads(1)
    if not hasattr(config, "workerinput") and config.getoption("numprocesses", None) not in (None, 0):
        import netfl.kernels.idle_step  # noqa: F401  (compiles into the cache the workers then load)


def pytest_collection_modifyitems(config, items) -> None:
    slow_modules = {item.module.__name__ for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.module.__name__ not in slow_modules)  # stable: each module's order kept


@pytest.fixture(autouse=True, scope="session")
def one_forkserver_for_the_session() -> Iterator[None]:
    from netfl.study import local

    stop_helpers = local._stop_helpers
    local._stop_helpers = lambda: None
    yield
    local._stop_helpers = stop_helpers
    stop_helpers()


@pytest.fixture(autouse=True)
def signal_handlers_left_as_found() -> Iterator[None]:
    """A test, or the netfl code it calls in this process, leaves Ctrl-C's and SIGTERM's handlers as it found
    them: a handler left behind (SIGINT ignored after an interrupted command) would make a later test in the
    same worker -- or a user's notebook after a call into netfl -- deaf to Ctrl-C."""
    import signal

    found = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    left = {s: signal.getsignal(s) for s in found}
    changed = [f"{signal.Signals(s).name}: {found[s]!r} -> {left[s]!r}" for s in found if left[s] is not found[s]]
    assert not changed, "the test left signal handlers changed: " + "; ".join(changed)
