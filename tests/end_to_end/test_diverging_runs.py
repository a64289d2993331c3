"""`netfl simulate` of a run whose training blows up: stopped_by diverged, exit code 3, partial results kept;
or, with server.on_divergence: skip_update, the non-finite updates dropped and the run carried on."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from cli_support import TINY, run

EXIT_DIVERGED = 3


def _simulate(tmp_path: Path, *settings: str):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    out = tmp_path / "out"
    result = run("simulate", path, "--out", out, "-q", "--threads", "1", *(a for s in settings for a in ("--set", s)))
    summary = json.loads((out / "summary.json").read_text())
    with (out / "metrics.csv").open() as f:
        metrics = list(csv.DictReader(f))
    return result, summary, metrics


@pytest.mark.parametrize(
    "settings,where",
    [
        (("task.model.name=lenet5", "task.local.lr=1e6", "task.local.steps=5"), "update"),
        (("task.local.lr=3e38",), "update"),
        (("task.model.name=mlp", "server.algorithm={name: fedavg, server_lr: 1e30}"), "evaluation"),
    ],
)
def test_a_diverging_run_stops_with_its_round_and_clients(
    tmp_path: Path, settings: tuple[str, ...], where: str
) -> None:
    result, summary, metrics = _simulate(tmp_path, *settings)
    assert result.exit_code == EXIT_DIVERGED, (result.output, result.exception)
    assert "Traceback" not in result.output and result.stdout == ""
    assert result.stderr.startswith("diverged: round 0: ") and "(stopped_by: diverged)" in result.stderr
    # skip_update is offered where it helps: not for a global model that is not finite
    assert ("set server.on_divergence: skip_update" in result.stderr) == (where == "update")
    assert summary["stopped_by"] == "diverged" and summary["complete"] is True
    d = summary["divergence"]
    assert d["where"] == where and d["round"] == 0 and d["sim_time_s"] == summary["sim_time_s"] > 0
    assert d["clients"] and set(d["clients"]) <= {0, 1, 2, 3}
    assert summary["rounds"] == (1 if where == "evaluation" else 0)  # the round that diverged did not count
    # what was measured before is kept; nothing non-finite was evaluated
    assert [m["round"] for m in metrics] == ["0"] and metrics[0]["test_loss"] not in ("nan", "inf")


def test_skip_update_drops_the_non_finite_updates_and_finishes(tmp_path: Path) -> None:
    result, summary, metrics = _simulate(tmp_path, "task.local.lr=3e38", "server.on_divergence=skip_update")
    assert result.exit_code == 0, (result.output, result.exception)
    assert "8 update(s) or report(s) were not finite" in result.stderr
    assert summary["stopped_by"] == "rounds" and summary["divergence"] is None and summary["rounds"] == 2
    assert (summary["updates_received"], summary["updates_applied"], summary["updates_skipped"]) == (8, 0, 8)
    assert len({m["test_accuracy"] for m in metrics}) == 1  # no update was applied: the model never changed


def test_a_normal_run_reports_no_divergence(tmp_path: Path) -> None:
    result, summary, _ = _simulate(tmp_path)
    assert result.exit_code == 0 and result.stderr == ""
    assert summary["stopped_by"] == "rounds" and summary["divergence"] is None and summary["updates_skipped"] == 0


NAN_FROM_THE_START = """
import torch
from torch import nn


class Nan(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.fc(x.flatten(1)) * float("nan")
"""


@pytest.mark.parametrize("checkpoint", [False, True])
def test_a_model_not_finite_from_the_start_diverges_at_round_0_like_any_round(tmp_path: Path, checkpoint) -> None:
    """The initial evaluation (before the engine starts) is where such a model is first seen: the run stops there
    as at any round -- exit 3, ``diverged``, its files written -- and validate warns of it before any run."""
    import yaml

    (tmp_path / "nan.py").write_text(NAN_FROM_THE_START)
    data = yaml.safe_load(TINY)
    data["task"]["model"] = {"path": "nan.py:Nan"}
    path = tmp_path / "nan.yaml"
    path.write_text(yaml.safe_dump(data))
    checked = run("validate", path)
    assert checked.exit_code == 0, checked.output
    assert "warning: nan.py:Nan: the model's output on two training samples is not finite" in checked.stderr
    out = tmp_path / "out"
    extra = ["--checkpoint-every", "1rounds"] if checkpoint else []
    result = run("simulate", path, "--out", out, "-q", *extra)
    assert result.exit_code == EXIT_DIVERGED, (result.output, result.exception)
    assert "Traceback" not in result.output
    assert result.stderr.startswith("diverged: the initial model's test loss is not finite")
    assert "look at the model's forward pass" in result.stderr and "server_lr" not in result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_by"] == "diverged" and summary["complete"] is True and summary["rounds"] == 0
    assert summary["divergence"] == {"round": None, "sim_time_s": 0, "where": "evaluation", "clients": []}
    assert summary["final_test_accuracy"] is None
    with (out / "metrics.csv").open() as f:
        assert list(csv.DictReader(f)) == []  # nothing finite was ever evaluated
    assert {"events.parquet", "devices.parquet", "scenario.yaml"} <= {p.name for p in out.iterdir()}
    assert not (tmp_path / ".out.checkpoint").exists()  # the run is whole: nothing to resume
