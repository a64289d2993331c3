"""Traces as arrays: merged intervals and change points by hand, the vectorised lookups against each interval,
and a 10^5-client FedScale trace written by benchmarks/make_fedscale_trace.py held in arrays only."""

from __future__ import annotations

import gc
import importlib.util
import math
import pickle
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from netfl.policies.builtin import BUILTIN_POLICIES
from netfl.policies.population import build_population_model
from netfl.policies.trace_arrays import Toggles, merge_intervals

REPO = Path(__file__).resolve().parents[2]


def test_merge_sorts_joins_overlapping_and_touching_and_drops_empty() -> None:
    owner = np.array([1, 0, 0, 0, 2, 0, 1, 0])
    starts = np.array([5.0, 3.0, 0.0, 1.0, 7.0, 10.0, 2.0, 12.0])
    ends = np.array([6.0, 4.0, 10.0, 2.0, 7.0, 12.0, 5.0, 13.0])
    offsets, bounds = merge_intervals(owner, starts, ends, 4)
    # row 0: [0,10) holds [1,2) and [3,4); [10,12) touches it, [12,13) touches that: one interval
    # row 1: [2,5) and [5,6) touch; row 2: [7,7) is empty; row 3: nothing
    assert offsets.tolist() == [0, 2, 4, 4, 4]
    assert bounds.tolist() == [0.0, 13.0, 2.0, 6.0]


def test_change_points_at_a_cycles_ends() -> None:
    rows = [
        [(0.0, 100.0)],  # online all the cycle: no change ever
        [(0.0, 30.0)],  # online at 0: a change at 30 and back on at the cycle's end
        [(40.0, 100.0)],  # online at the end, offline at the start: off at the cycle's end
        [(0.0, 10.0), (60.0, 100.0)],  # online across the cycle's end: one stretch from 60 to 110
        [(20.0, 30.0)],
        [],  # never online
    ]
    owner = np.array([r for r, row in enumerate(rows) for _ in row])
    starts = np.array([s for row in rows for s, _ in row])
    ends = np.array([e for row in rows for _, e in row])
    t = Toggles(*merge_intervals(owner, starts, ends, len(rows)), np.full(len(rows), 100.0))
    points = [t.points[t.offsets[r] : t.offsets[r + 1]].tolist() for r in range(len(rows))]
    assert points == [[], [30.0, 100.0], [40.0, 100.0], [10.0, 60.0], [20.0, 30.0], []]
    assert t.start_on.tolist() == [True, True, False, True, False, False]
    for r, row in enumerate(rows):
        assert t.intervals(r).tolist() == [list(pair) for pair in row], r
    state, _, _, change = t.seek(np.arange(6), np.full(6, 105.0))
    assert state.tolist() == [True, True, False, True, False, False]
    assert change.tolist() == [math.inf, 130.0, 140.0, 110.0, 120.0, math.inf]
    once = Toggles(*merge_intervals(owner, starts, ends, len(rows)), None)  # no period: after the last, never
    state, _, _, change = once.seek(np.arange(6), np.full(6, 105.0))
    assert not state.any() and np.isinf(change).all()
    state, _, _, change = once.seek(np.arange(6), np.zeros(6))
    assert state.tolist() == [True, True, False, True, False, False]
    assert change.tolist() == [100.0, 30.0, 40.0, 10.0, 20.0, math.inf]


def truth(active: list[float], inactive: list[float], finish: float, t: float) -> tuple[bool, float]:
    """FedScale's rule read off the intervals themselves: online at ``t`` when ``t mod finish`` lies in one; the
    next change is the first interval bound (of this cycle or a later one) where the state differs."""

    def online(local: float) -> bool:
        return any(a <= local < b for a, b in zip(active, inactive))

    cycle = math.floor(t / finish)
    now = online(t - cycle * finish)
    for k in range(cycle, cycle + 3):
        for b in sorted({b for b in (*active, *inactive) if b < finish} | {0.0}):
            if k * finish + b > t and online(b) != now:  # the state from bound b of cycle k on
                return now, k * finish + b
    return now, math.inf


def load_maker():
    spec = importlib.util.spec_from_file_location("make_fedscale_trace", REPO / "benchmarks" / "make_fedscale_trace.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_a_hundred_thousand_clients_held_as_arrays_and_looked_up_vectorised(tmp_path: Path) -> None:
    n, finish = 100_000, 3600.0
    trace = load_maker().make_trace(n, finish=finish, online=300.0, offline=900.0, seed=4)
    assert sum(len(c["active"]) for c in trace.values()) / n == pytest.approx(2.5, abs=1.0)  # a few each
    (tmp_path / "trace.pkl").write_bytes(pickle.dumps(trace))
    sample = np.random.default_rng(1).choice(n, 300, replace=False)
    clients = {int(d): trace[int(d)] for d in sample}
    del trace
    params = BUILTIN_POLICIES["fedscale_trace"].Params.model_validate({"file": "trace.pkl", "trust_pickle": True})

    gc.collect()
    tracemalloc.start()
    try:
        model = build_population_model("fedscale_trace", params, n, 1, np.zeros((n, 1)), 0, base_dir=tmp_path)
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    points = len(model.toggles.points)
    # the change points (8 bytes each) and some 75 bytes per device: the trace's offsets, period, state at 0 and
    # id, the model's state, change, since, draws, row, cycle and pointer; nothing per interval in Python
    assert held < 8 * points + 100 * n, (held, points)

    times = np.sort(np.random.default_rng(2).uniform(0, 3 * finish, 40))
    for t in times:
        state, _, _, change = model.toggles.seek(sample, np.full(len(sample), t))  # any rows, any time
        model.advance(t)  # the model, flip by flip
        for j, d in enumerate(sample):
            c = clients[int(d)]
            expected = truth(c["active"], c["inactive"], finish, t)
            assert (bool(state[j]), float(change[j])) == pytest.approx(expected), (d, t)
            assert (bool(model.state[d]), float(model.change[d])) == pytest.approx(expected), (d, t)
