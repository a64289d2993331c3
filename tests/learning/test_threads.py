"""Thread counts: chosen on purpose, recorded, and without effect on any result."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from click.testing import CliRunner

from netfl.cli.main import main
from netfl.learn.training.runtime import available_cpus, threads_in_use, use_threads


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
    from netfl.learn.training import stacked

    monkeypatch.setattr(stacked, "CPU_CHUNK_BYTES", 1)  # one job per chunk: every chunk is a task for the pool
    one, events_1, devices_1, metrics_1 = _run(tmp_path, model, 1)
    three, events_3, devices_3, metrics_3 = _run(tmp_path, model, 3)
    assert one["threads"] == 1 and three["threads"] == 3
    assert events_1 == events_3 and devices_1 == devices_3 and metrics_1 == metrics_3
    for key in ("final_test_accuracy", "rounds", "sim_time_s", "energy_j", "updates_received", "bytes_up"):
        assert one[key] == three[key], key


def test_explicit_threads_are_fixed_and_the_default_yields_to_other_work(tmp_path, restore_threads) -> None:
    from netfl.learn.training.runtime import adapts_to_other_work

    use_threads(2)
    assert not adapts_to_other_work()
    use_threads()
    assert adapts_to_other_work() == (available_cpus() > 1)
    summary, *_ = _run(tmp_path, "mlp", 2)
    assert summary["threads"] == 2 and summary["threads_adaptive"] is False
    assert "2 worker threads" in summary["tasks"][0]["training"]


def test_a_pool_running_fewer_lanes_gives_every_result_in_order_and_raises_a_workers_error(restore_threads) -> None:
    from netfl.learn.training import runtime

    use_threads(3)
    assert runtime._in_lanes(lambda i: i * i, list(range(11)), 2) == [i * i for i in range(11)]

    def fails_on_seven(i: int) -> int:
        if i == 7:
            raise ValueError("seven")
        return i

    with pytest.raises(ValueError, match="seven"):
        runtime._in_lanes(fails_on_seven, list(range(11)), 2)


class FakeClock:
    def __init__(self) -> None:
        self.wall, self.own = 0.0, 0.0

    def monotonic(self) -> float:
        return self.wall

    def process_time(self) -> float:
        return self.own


def proc_stat(path, ticks: dict[int, tuple[int, int]]) -> None:
    """A /proc/stat with each CPU's (busy, idle) ticks: busy split over user, system and steal."""
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    for cpu, (busy, idle) in ticks.items():
        user, system, steal = busy - busy // 2 - busy // 4, busy // 2, busy // 4
        lines.append(f"cpu{cpu} {user} 0 {system} {idle} 7 0 0 {steal} 0 0")
    path.write_text("\n".join(lines + ["intr 1 2 3", "ctxt 5"]) + "\n")


def test_the_cores_other_processes_keep_busy_by_hand(tmp_path, monkeypatch) -> None:
    from netfl.learn.training import cpu_share

    clock = FakeClock()
    monkeypatch.setattr(cpu_share, "time", clock)
    monkeypatch.setattr(cpu_share, "_TICKS_PER_S", 100)
    stat = tmp_path / "stat"
    proc_stat(stat, {0: (1000, 5000), 1: (2000, 4000), 2: (0, 9000)})
    share = cpu_share.CpuShare({0, 1}, interval_s=1.0, stat_path=str(stat))
    assert share.others_busy() == 0.0 and share.free(2) == 2  # nothing measured yet
    # 2 s later: CPUs 0 and 1 were busy 1.5 s and 2 s (350 ticks), of which this process 0.5 s; CPU 2 is not ours
    clock.wall, clock.own = 2.0, 0.5
    proc_stat(stat, {0: (1150, 5050), 1: (2200, 4000), 2: (200, 9000)})
    assert share.others_busy() == pytest.approx((3.5 - 0.5) / 2.0)  # 1.5 cores
    assert share.free(2) == 1 and share.free(8) == 1  # round(2 - 1.5) = 0, but always one thread
    clock.wall = 2.5  # within the interval: the last figure, the file not read
    stat.write_text("")
    assert share.others_busy() == pytest.approx(1.5)
    clock.wall, clock.own = 4.0, 2.4  # the other work ended: this process alone used 1.9 s of its 2 cores
    proc_stat(stat, {0: (1250, 5150), 1: (2290, 4010), 2: (400, 9000)})
    assert share.others_busy() == pytest.approx(0.0) and share.free(2) == 2


def test_without_proc_stat_every_cpu_trains(tmp_path) -> None:
    from netfl.learn.training.cpu_share import CpuShare

    share = CpuShare({0, 1, 2}, interval_s=0.0, stat_path=str(tmp_path / "absent"))
    assert share.others_busy() == 0.0 and share.free(3) == 3
