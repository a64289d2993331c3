"""Every value that passes validation runs, or is refused up front with the reason: models too large to hold,
jobs and rounds too long to finish, runs too big for memory, durations that overflow simulated time, clients
left without data. Each through the command line: exit 2, the field's path, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import TINY, assert_user_error, idx_placeholders, run

from netfl.config.budget import MAX_MODEL_BYTES, MAX_ROUND_FLOPS
from netfl.learn.models.builtin import build_model, forward_flops_per_sample
from netfl.registry.datasets import DATASETS
from netfl.registry.models import MODEL_NAMES, TEXT_MODELS, model_cost
from netfl.results.writer import finite_json


def _validate(tmp_path: Path, *settings: str):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return run("validate", path, *(a for s in settings for a in ("--set", s)))


@pytest.mark.parametrize("dataset", [name for name, info in DATASETS.items() if info.leaf is None])
@pytest.mark.parametrize("model", [name for name in MODEL_NAMES if name not in TEXT_MODELS])
def test_model_cost_matches_the_torch_model(dataset: str, model: str) -> None:
    """Image and feature models; LEAF's text models are measured on the module once their data is read."""
    info = DATASETS[dataset]
    try:
        built = build_model(model, info.input_shape, info.num_classes, hidden=(24, 12))
    except RuntimeError:  # a convolutional model on blobs3's 1x1x2 points
        with pytest.raises(ValueError, match="too small"):
            model_cost(model, info.input_shape, info.num_classes, (24, 12))
        return
    cost = model_cost(model, info.input_shape, info.num_classes, (24, 12))
    assert cost.parameters == sum(p.numel() for p in built.parameters())
    assert cost.forward_flops == forward_flops_per_sample(built, info.input_shape)


@pytest.mark.parametrize(
    "settings,path,words",
    [
        (
            ("task.model={name: mlp, hidden: [2000000000]}",),
            "task.model.hidden",
            ["150,000,000,010 parameters", f"over {MAX_MODEL_BYTES // 2**30:.1f} GiB"],
        ),
        (("task.local.steps=1000000000000",), "task.local.steps", ["8e+12 samples", "1e+08 per job"]),
        (("task.local={epochs: 1.0e+9}",), "task.local.epochs", ["1e+09 epochs of a client's 360 samples"]),
        (
            ("server.mode=async", "server.async={buffer: 2, local_steps: {uniform: [1, 1.0e+12]}}"),
            "server.async.local_steps",
            ["up to 1,000,000,000,000 steps"],
        ),
        (
            (
                "devices[0].count=40",
                "task.model={name: mlp, hidden: [100000]}",
                "task.dataset.partition={kind: iid, samples_per_client: 1000}",
                "task.local={steps: 100000, batch_size: 1000}",
            ),
            "task.local.steps",
            ["a round would train 40 jobs", f"{MAX_ROUND_FLOPS:.0e} per round"],
        ),
        (
            (
                "devices[0].count=20000",
                "task.model={name: mlp, hidden: [20000]}",
                "server.algorithm.name=mifa",
                "server.round.participants=10",
                "task.dataset.partition={kind: iid, samples_per_client: 5}",
            ),
            "server.algorithm",
            ["20,000 that mifa keeps for its 20,000 clients", "this machine has"],
        ),
        (
            ("devices[0].count=2000",),
            "task.dataset.partition",
            ["2,000 devices but digits has 1,438 training samples", "samples_per_client"],
        ),
        (
            ("task.dataset.name=blobs3", "task.model.name=lenet5"),
            "task.model.name",
            ["lenet5 does not apply to blobs3's 1x1x2 inputs"],
        ),
        (("devices[0].link.latency=1.7e+308",), "devices[0].link.latency", ["at most 1e+10 s"]),
        (("stop.sim_time=400000d",), "stop.sim_time", ["longer than netfl simulates"]),
        (("devices[0].link.uplink=1.0e-300",), "devices[0].link.uplink", ["2.08e+304 s at 1e-300 bit/s"]),
        (
            ("devices[0].compute.flops_per_s={uniform: [1.0e-300, 1]}",),
            "devices[0].compute.flops_per_s",
            ["s at 1e-300 FLOP/s, longer than netfl simulates"],
        ),
    ],
    ids=[
        "huge-model",
        "steps",
        "epochs",
        "async-steps",
        "round-flops",
        "client-state",
        "devices-over-samples",
        "conv-on-points",
        "latency",
        "sim-time",
        "slow-link",
        "slow-device",
    ],
)
def test_absurd_values_are_refused_by_validate(
    tmp_path: Path, settings: tuple[str, ...], path: str, words: list[str]
) -> None:
    assert_user_error(_validate(tmp_path, *settings), f"{path}: ", *words)


def test_the_bounds_leave_room_for_real_studies(tmp_path: Path) -> None:
    """A 200-wide MLP on Fashion-MNIST with 5 epochs, MIFA over 1000 devices (100 a round), a 24-hour run: all
    accepted. (All 1000 in every 1.6-second round of the day would log 3.7e8 events: see test_run_size.py.)"""
    data = idx_placeholders(tmp_path / "fashion")
    result = _validate(
        tmp_path,
        "task.dataset.name=fashion-mnist",
        f"task.dataset.data_dir={data}",
        "task.model={name: mlp, hidden: [200, 200]}",
        "task.local={epochs: 5, batch_size: 32}",
        "devices[0].count=1000",
        "server.algorithm.name=mifa",
        "server.round.participants=100",
        "stop={sim_time: 24h}",
    )
    assert result.exit_code == 0, result.output


def test_a_client_left_without_data_is_refused_before_the_run(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    result = run(
        "simulate",
        path,
        "--out",
        tmp_path / "out",
        "-q",
        "--set",
        "devices[0].count=1430",
        "--set",
        "task.dataset.partition={kind: classes, classes_per_client: 1}",
    )
    assert_user_error(
        result,
        "task.dataset.partition: classes leaves 6 of 1430 clients without a training sample",
        "samples_per_client",
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning")  # numpy's, summing the infinite energies
def test_a_run_whose_energy_overflows_is_still_written(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    out = tmp_path / "out"
    result = run(
        "simulate",
        path,
        "--out",
        out,
        "-q",
        "--set",
        "devices[0].power={idle: 1.0e+308}",
        "--set",
        "stop={sim_time: 2s}",  # 1e308 W for 2 s: past the largest float on each device (about 470 rounds)
    )
    assert result.exit_code == 0, (result.output, result.exception)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["energy_j"] is None and summary["energy_by_activity_j"]["idle"] is None
    assert summary["sim_time_s"] == 2.0


def test_a_summary_with_non_finite_numbers_is_still_written() -> None:
    summary = {"sim_time_s": float("inf"), "energy_j": float("nan"), "tasks": [{"best": float("-inf"), "n": 3}]}
    assert json.loads(json.dumps(finite_json(summary), allow_nan=False)) == {
        "sim_time_s": None,
        "energy_j": None,
        "tasks": [{"best": None, "n": 3}],
    }
