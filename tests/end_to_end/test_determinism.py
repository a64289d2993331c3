"""Same scenario, same seed: the same event log, byte for byte (and a different seed differs)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from netfl.config import scenario_from_dict
from netfl.runner import run_scenario

ROUNDS = 5
SLOW = 2


def small_scenario(seed: int):
    """Digits, 6 devices: 4 fast ones with a battery, available with p = 0.6; 2 that
    compute at 1 kFLOP/s and always miss the 2 s deadline (their work is dropped)."""
    return scenario_from_dict(
        {
            "name": "determinism",
            "seed": seed,
            "stop": {"rounds": ROUNDS},
            "task": {
                "dataset": {"name": "digits", "partition": {"kind": "iid"}},
                "model": {"name": "logistic"},
                "local": {"steps": 5, "batch_size": 16, "lr": 0.1},
            },
            "devices": [
                {
                    "group": "fast",
                    "count": 4,
                    "compute": {"flops_per_s": {"uniform": [1e8, 1e9]}},
                    "battery": {"capacity": "1kJ", "initial": {"uniform": [0.5, 1.0]}},
                    "availability": {"policy": "bernoulli", "p": 0.6},
                    "link": {"uplink": "1Mbps", "downlink": "4Mbps", "latency": "10ms"},
                },
                {
                    "group": "slow",
                    "count": SLOW,
                    "compute": {"flops_per_s": 1e3},
                    "availability": {"policy": "bernoulli", "p": 1.0},
                    "link": {"uplink": {"uniform": ["100kbps", "1Mbps"]}},
                },
            ],
            "server": {"round": {"deadline": "2s"}},
            "eval": {"every": "1 round"},
        }
    )


def _run(seed: int, out: Path) -> dict:
    return run_scenario(small_scenario(seed), out_dir=out).summary


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("determinism")
    out = {"a": base / "a", "b": base / "b", "other": base / "other"}
    _run(3, out["a"])
    _run(3, out["b"])
    _run(4, out["other"])
    return out


def test_same_seed_gives_identical_event_log_and_metrics(runs: dict[str, Path]) -> None:
    a, b = runs["a"], runs["b"]
    assert (a / "events.parquet").read_bytes() == (b / "events.parquet").read_bytes()
    assert (a / "metrics.csv").read_text() == (b / "metrics.csv").read_text()


def test_summaries_agree_except_wall_time(runs: dict[str, Path]) -> None:
    import json

    sa = json.loads((runs["a"] / "summary.json").read_text())
    sb = json.loads((runs["b"] / "summary.json").read_text())
    sa.pop("wall_time_s"), sb.pop("wall_time_s")
    assert sa == sb
    # the scenario did what it was built for: every round ran, the slow devices always missed the deadline
    assert sa["rounds"] == ROUNDS and sa["complete"] is True and sa["stopped_by"] == "rounds"
    assert sa["updates_dropped"] == SLOW * ROUNDS
    assert sa["updates_received"] == sa["updates_applied"] > 0


def test_deadline_drops_are_in_the_log(runs: dict[str, Path]) -> None:
    events = pq.read_table(runs["a"] / "events.parquet").to_pydict()
    drops = [(d, c) for k, d, c in zip(events["kind"], events["device"], events["cause"]) if k == "dropout"]
    assert len(drops) == SLOW * ROUNDS
    assert all(d >= 4 and c == "deadline" for d, c in drops)
    aggregates = [t for k, t in zip(events["kind"], events["sim_time_s"]) if k == "aggregate"]
    assert aggregates == pytest.approx([2.0 * (r + 1) for r in range(ROUNDS)], rel=1e-12)


def test_different_seed_gives_a_different_event_log(runs: dict[str, Path]) -> None:
    a = pq.read_table(runs["a"] / "events.parquet")
    other = pq.read_table(runs["other"] / "events.parquet")
    assert not a.equals(other)
    assert (runs["a"] / "events.parquet").read_bytes() != (runs["other"] / "events.parquet").read_bytes()
