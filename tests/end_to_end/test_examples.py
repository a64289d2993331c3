"""The reproductions in examples/: every study file expands and validates, and a table script reads a real sweep.

The full reproductions take tens of minutes each; here every study is only expanded (every run validated, as
``netfl sweep --dry-run`` does), and the cheapest one (Fed-CVaR-Avg's 2-D toy) runs for a few rounds, as the
README's commands run it, into its table script.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import idx_placeholders, run

from netfl.config import load_scenario
from netfl.study import load_study

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
STUDIES = sorted(EXAMPLES.glob("**/*study*.yaml")) + sorted(
    p for p in (REPO / "docs" / "studies").glob("*/*.yaml") if p.name != "topology.yaml"
)
REPRODUCTIONS = sorted(p.parent for p in EXAMPLES.glob("*/study.yaml"))


def test_the_examples_have_their_studies() -> None:
    assert {p.name for p in REPRODUCTIONS} >= {
        "fedau_participation",
        "afa_noniid",
        "cvar_blobs",
        "cvar_fashion",
        "mmfl_sampling",
    }
    assert EXAMPLES / "quickstart_study.yaml" in STUDIES
    assert REPO / "docs" / "studies" / "fashion-diurnal" / "study.yaml" in STUDIES
    assert REPO / "docs" / "studies" / "slow-uplink" / "tuning.yaml" in STUDIES


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_study_file_expands_and_validates(path: Path, tmp_path: Path) -> None:
    # ScenarioError (naming the run and the path) on any problem; Fashion-MNIST installed or not
    study = load_study(path, data_dir=idx_placeholders(tmp_path))
    assert study.runs and len({run.folder for run in study.runs}) == len(study.runs)
    assert study.out == Path("results") / study.name  # what the README's commands pass to table.py and report


@pytest.mark.parametrize("folder", REPRODUCTIONS, ids=lambda p: p.name)
def test_every_reproduction_is_a_topology_a_study_and_a_table(folder: Path) -> None:
    scenario = load_scenario(folder / "topology.yaml")  # netfl simulate runs it on its own
    assert scenario.name == folder.name == load_study(folder / "study.yaml").name
    assert (folder / "table.py").is_file()


@pytest.mark.slow
def test_a_table_script_reads_a_tiny_real_sweep(tmp_path: Path) -> None:
    out = tmp_path / "cvar_blobs"
    result = run(
        "sweep",
        EXAMPLES / "cvar_blobs" / "study.yaml",
        "--set",
        "stop.rounds=3",
        "--set",
        "eval.every=1 round",
        "--seeds",
        "1",
        "--jobs",
        "2",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    table = subprocess.run(
        [sys.executable, EXAMPLES / "cvar_blobs" / "table.py", out], capture_output=True, text=True, check=True
    ).stdout
    rows = [line for line in table.splitlines() if line.startswith("| mlp")]
    assert [row.split(" | ")[:2] for row in rows] == [
        ["| mlp", "1 (FedAvg)"],
        ["| mlp", "0.1"],
        ["| mlp_softmax", "1 (FedAvg)"],
        ["| mlp_softmax", "0.1"],
    ]
    assert "3 rounds (the paper: 3999)" in table and "3 updates relayed per run" in table
    assert (out / "table.md").read_text() in table
    assert (out / "rare_class.png").stat().st_size > 0
