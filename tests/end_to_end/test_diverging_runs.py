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
        (("task.local.lr=.inf",), "update"),
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
    result, summary, metrics = _simulate(tmp_path, "task.local.lr=.inf", "server.on_divergence=skip_update")
    assert result.exit_code == 0, (result.output, result.exception)
    assert "8 update(s) or report(s) were not finite" in result.stderr
    assert summary["stopped_by"] == "rounds" and summary["divergence"] is None and summary["rounds"] == 2
    assert (summary["updates_received"], summary["updates_applied"], summary["updates_skipped"]) == (8, 0, 8)
    assert len({m["test_accuracy"] for m in metrics}) == 1  # no update was applied: the model never changed


def test_a_normal_run_reports_no_divergence(tmp_path: Path) -> None:
    result, summary, _ = _simulate(tmp_path)
    assert result.exit_code == 0 and result.stderr == ""
    assert summary["stopped_by"] == "rounds" and summary["divergence"] is None and summary["updates_skipped"] == 0
