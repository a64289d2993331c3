"""Test-wide settings: one training thread with one torch thread.

A test suite sharing two cores with other processes collapses under torch's
default pool (one spinning thread per core); tests that need several
training threads (test_threads.py) ask for them.
"""

from __future__ import annotations


def pytest_configure(config) -> None:
    from netfl.learn.training.runtime import use_threads

    use_threads(1)
