"""algorithm.csv end to end: the quickstart's FedAvg writes one row per aggregation, on the rounds and times of the
``aggregate`` events; a strategy that returns a bare tensor runs to the same results with the place columns only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from netfl.config import load_scenario
from netfl.learn.federation.algorithms import ALGORITHMS
from netfl.runner import run_scenario

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "topologies" / "quickstart.yaml"


def quickstart(out: Path) -> Path:
    run_scenario(load_scenario(QUICKSTART, overrides=["stop.rounds=3"]), out_dir=out, threads=1)
    return out


def test_one_row_per_aggregation_with_fedavgs_metrics(tmp_path: Path) -> None:
    out = quickstart(tmp_path / "run")
    rows = pd.read_csv(out / "algorithm.csv")
    assert list(rows.columns) == ["sim_time_s", "round", "task", "updates", "samples"]
    aggregates = pd.read_parquet(out / "events.parquet").query("kind == 'aggregate'")
    assert len(rows) == len(aggregates) == 3
    assert rows["round"].tolist() == aggregates["round"].tolist() == [0, 1, 2]
    assert rows["sim_time_s"].tolist() == aggregates["sim_time_s"].tolist()  # exact: the same floats
    assert rows["task"].tolist() == [0, 0, 0]
    assert rows["updates"].tolist() == aggregates["applied"].tolist()
    assert (rows["samples"] > rows["updates"]).all()


def test_a_strategy_returning_a_bare_tensor_runs_to_the_same_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = quickstart(tmp_path / "full")
    fedavg = ALGORITHMS["fedavg"]
    plain = fedavg.aggregate
    monkeypatch.setattr(fedavg, "aggregate", lambda self, x, updates, context: plain(self, x, updates, context).vector)
    bare = quickstart(tmp_path / "bare")
    for name in ("metrics.csv", "events.parquet", "devices.parquet"):
        assert (bare / name).read_bytes() == (full / name).read_bytes(), name
    rows = pd.read_csv(bare / "algorithm.csv")
    assert list(rows.columns) == ["sim_time_s", "round", "task"] and rows["round"].tolist() == [0, 1, 2]
