"""Thread counts: chosen on purpose, recorded, and without effect on any result."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from click.testing import CliRunner

from netfl.cli.main import main
from netfl.learn.runtime import available_cpus, threads_in_use, use_threads


@pytest.fixture
def restore_threads():
    yield
    use_threads(1)


def test_workers_default_to_the_cpus_and_keep_one_torch_thread_each(restore_threads) -> None:
    assert use_threads() == available_cpus() == threads_in_use()
    assert torch.get_num_threads() == 1  # parallel across jobs, never inside an operation
    assert use_threads(3) == 3 == threads_in_use() and torch.get_num_threads() == 1
    with pytest.raises(ValueError, match="at least 1"):
        use_threads(0)


def _run(tmp_path, model: str, threads: int) -> tuple[dict, bytes, bytes, list[str]]:
    data = {
        "name": f"threads-{model.replace(':', '-')}",
        "seed": 5,
        "stop": {"rounds": 3},
        "task": {
            "dataset": {"name": "digits", "partition": {"kind": "dirichlet", "alpha": 0.5}},
            "model": {"path": "models.py:" + model.split(":")[1]}
            if model.startswith("user:")
            else {"name": model, "hidden": [32]},
            "local": {"steps": 4, "batch_size": 8, "lr": 0.1},
        },
        "devices": [
            {
                "group": "d",
                "count": 12,
                "compute": {"flops_per_s": 1e8},
                "link": {"uplink": 1e6},
                "battery": {"capacity": "200J"},
                "availability": {"policy": "bernoulli", "p": 0.7},
            }
        ],
        "server": {"round": {"participants": 6, "deadline": "2s"}},
        "eval": {"every": "1 round"},
    }
    path = tmp_path / f"{model.replace(':', '-')}.yaml"
    path.write_text(yaml.safe_dump(data))
    (tmp_path / "models.py").write_text(USER_MODELS)
    out = tmp_path / f"{model.replace(':', '-')}-{threads}"
    result = CliRunner().invoke(main, ["simulate", str(path), "--out", str(out), "-q", "--threads", str(threads)])
    assert result.exit_code == 0, result.output
    return (
        json.loads((out / "summary.json").read_text()),
        (out / "events.parquet").read_bytes(),
        (out / "devices.parquet").read_bytes(),
        (out / "metrics.csv").read_text().splitlines(),
    )


USER_MODELS = """
import torch
from torch import nn


class WithBN(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.drop, self.fc = nn.Dropout(0.3), nn.Linear(4 * 16, num_classes)

    def forward(self, x):
        return self.fc(self.drop(nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2).flatten(1)))
"""


@pytest.mark.parametrize("model", ["mlp", "lenet5", "cnn", "user:WithBN"])
def test_results_are_the_same_bits_whatever_the_thread_count(tmp_path, model, restore_threads, monkeypatch) -> None:
    """Jobs (replicas) or chunks of jobs (the fused MLP kernel) go to worker threads, but which chunk a job is in
    does not depend on their number, a job runs on one thread from start to end, and dropout draws from a
    generator seeded per job: the same bits with 1 or 3 threads, for every path and model family."""
    from netfl.learn import stacked

    monkeypatch.setattr(stacked, "CPU_CHUNK_BYTES", 1)  # one job per chunk: every chunk is a task for the pool
    one, events_1, devices_1, metrics_1 = _run(tmp_path, model, 1)
    three, events_3, devices_3, metrics_3 = _run(tmp_path, model, 3)
    assert one["threads"] == 1 and three["threads"] == 3
    assert events_1 == events_3 and devices_1 == devices_3 and metrics_1 == metrics_3
    for key in ("final_test_accuracy", "rounds", "sim_time_s", "energy_j", "updates_received", "bytes_up"):
        assert one[key] == three[key], key
