"""Test-wide settings: one training thread with one torch thread; the compiled kernels built once.

A test suite sharing two cores with other processes collapses under torch's
default pool (one spinning thread per core); tests that need several
training threads (test_threads.py) ask for them.

With xdist, the controller loads the compiled idle step (netfl/kernels/) before
it starts its workers: on a fresh checkout that compiles it into numba's cache
once (about 70 s of CPU) instead of in every worker at once; with the cache
warm it costs the controller numba's import and a cache load (about 0.7 s).
"""

from __future__ import annotations


def pytest_configure(config) -> None:
    from netfl.learn.training.runtime import use_threads

    use_threads(1)
    if not hasattr(config, "workerinput") and config.getoption("numprocesses", None) not in (None, 0):
        import netfl.kernels.idle_step  # noqa: F401  (compiles into the cache the workers then load)
