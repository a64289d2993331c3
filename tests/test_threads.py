"""Thread counts: chosen on purpose, recorded, and without effect on the simulated world."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from click.testing import CliRunner

from netfl.cli.main import main
from netfl.learn.runtime import DEFAULT_THREADS, use_threads


@pytest.fixture
def restore_threads():
    yield
    use_threads(1)


def test_default_is_one_thread_and_counts_are_checked(restore_threads) -> None:
    assert DEFAULT_THREADS == 1
    assert use_threads() == 1 and torch.get_num_threads() == 1
    assert use_threads(2) == 2 and torch.get_num_threads() == 2
    with pytest.raises(ValueError, match="at least 1"):
        use_threads(0)


def _run(tmp_path, model: str, threads: int) -> tuple[dict, bytes, bytes, list[str]]:
    data = {"name": f"threads-{model}", "seed": 5, "stop": {"rounds": 3},
            "task": {"dataset": {"name": "digits", "partition": {"kind": "dirichlet", "alpha": 0.5}},
                     "model": {"name": model, "hidden": [32]}, "local": {"steps": 4, "batch_size": 8, "lr": 0.1}},
            "devices": [{"group": "d", "count": 12, "compute": {"flops_per_s": 1e8}, "link": {"uplink": 1e6},
                         "battery": {"capacity": "200J"}, "availability": {"policy": "bernoulli", "p": 0.7}}],
            "server": {"round": {"participants": 6, "deadline": "2s"}}, "eval": {"every": 1}}
    path = tmp_path / f"{model}.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / f"{model}-{threads}"
    result = CliRunner().invoke(main, ["simulate", str(path), "--out", str(out), "-q", "--threads", str(threads)])
    assert result.exit_code == 0, result.output
    return (json.loads((out / "summary.json").read_text()), (out / "events.parquet").read_bytes(),
            (out / "devices.parquet").read_bytes(), (out / "metrics.csv").read_text().splitlines())


@pytest.mark.parametrize("model", ["mlp", "lenet5"])
def test_threads_change_no_simulated_outcome_and_are_recorded(tmp_path, model, restore_threads) -> None:
    """Events, devices, times and energy are the same bytes; accuracies and losses agree up to float rounding."""
    one, events_1, devices_1, metrics_1 = _run(tmp_path, model, 1)
    two, events_2, devices_2, metrics_2 = _run(tmp_path, model, 2)
    assert one["torch_threads"] == 1 and two["torch_threads"] == 2
    assert events_1 == events_2 and devices_1 == devices_2
    for key in ("rounds", "sim_time_s", "energy_j", "updates_received", "updates_dropped", "bytes_up"):
        assert one[key] == two[key], key
    for a, b in zip(metrics_1[1:], metrics_2[1:]):
        loss_1, loss_2 = float(a.split(",")[3]), float(b.split(",")[3])
        assert loss_1 == pytest.approx(loss_2, rel=1e-3)
