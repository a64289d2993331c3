"""A small job's start-up: the run's imports are not garbage-collected on the way (each full collection scanned
every object torch and pandas had made so far: about 1.5 s of a 30-round text job), and collection comes back
whatever happens."""

from __future__ import annotations

import gc

import pytest

from netfl.cli.run_commands import settled_imports


def test_imports_settle_without_collections_then_collection_comes_back() -> None:
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    with settled_imports():
        assert not gc.isenabled()
        made = [[n] for n in range(1000)]  # what an import makes: kept, frozen at the end
    assert gc.isenabled() and gc.get_freeze_count() >= frozen + len(made)
    with pytest.raises(RuntimeError), settled_imports():
        raise RuntimeError("a bad topology")
    assert gc.isenabled()
