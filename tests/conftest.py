"""Test-wide settings: torch computes on one intra-op thread, as netfl does by default.

A test suite sharing two cores with other processes collapses under torch's
default pool (one spinning thread per core); netfl's own default is one
thread (netfl/learn/runtime.py), and the tests run the same way.
"""

from __future__ import annotations


def pytest_configure(config) -> None:
    from netfl.learn.runtime import use_threads

    use_threads(1)
