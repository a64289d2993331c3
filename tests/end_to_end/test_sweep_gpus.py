"""Sweeps on GPU clusters: on Ray, each run asks for a share of a GPU (``--gpus-per-run``, fractional as Flower's
``num_gpus``) and trains on the GPU Ray assigned it. Checked on the CPU: a local Ray declared logical GPUs assigns
them and sets ``CUDA_VISIBLE_DEVICES``; no CUDA is needed."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import TINY, assert_user_error, run

from netfl.errors import NetflError
from netfl.study import load_study, run_sweep
from netfl.study.ray_runner import RayRunner, gpu_request, task_options


@pytest.mark.parametrize(
    ("gpus", "device", "ray", "given", "expected"),
    [
        (None, "cpu", True, False, (None, "cpu")),  # no GPU asked, none used
        (None, "cuda", True, True, (1.0, "cuda")),  # --device cuda on Ray: a whole GPU per run, not none
        (0.25, "cpu", True, False, (0.25, "cuda")),  # a share alone trains on the GPU
        (0.25, "cuda", True, True, (0.25, "cuda")),
        (1.0, "cuda", True, True, (1.0, "cuda")),
        (0.0001, "cuda", True, True, (0.0001, "cuda")),  # Ray's smallest share
        (None, "cuda", False, True, (None, "cuda")),  # a local sweep: every run on --device, as before
    ],
)
def test_the_gpu_share_asked_and_the_device_trained_on(gpus, device, ray, given, expected) -> None:
    assert gpu_request(gpus, device, on_ray=ray, device_given=given) == expected


@pytest.mark.parametrize(
    ("gpus", "device", "ray", "given", "message"),
    [
        (0.5, "cuda", False, True, "use it with --ray or --ray-address"),
        (0.5, "cpu", True, True, "--gpus-per-run with --device cpu"),
        (-0.25, "cuda", True, True, "from 0.0001 (Ray's smallest) to 1"),
        (0.0, "cuda", True, True, "from 0.0001"),
        (0.00001, "cuda", True, True, "from 0.0001"),
        (1.5, "cuda", True, True, "a run trains on one GPU"),
        (2.0, "cuda", True, True, "a run trains on one GPU"),  # whole GPUs Ray would give; a run uses one
        (0.5, "cuda:1", True, True, "Ray picks the GPU"),
        (None, "cuda:1", True, True, "Ray picks the GPU"),
    ],
)
def test_what_cannot_work_is_refused(gpus, device, ray, given, message) -> None:
    with pytest.raises(NetflError, match=message.replace("(", r"\(").replace(")", r"\)")):
        gpu_request(gpus, device, on_ray=ray, device_given=given)


def test_the_task_asks_ray_for_the_share() -> None:
    assert task_options(2, 0.25) == {"num_cpus": 2, "max_retries": 0, "num_gpus": 0.25}
    assert task_options(1, None) == {"num_cpus": 1, "max_retries": 0}  # no GPU asked: no num_gpus at all


def test_the_command_refuses_a_share_that_cannot_work(tmp_path: Path) -> None:
    (tmp_path / "study.yaml").write_text("base: tiny.yaml\n")
    study = tmp_path / "study.yaml"
    assert_user_error(run("sweep", study, "--gpus-per-run", "0.5"), "--ray or --ray-address")
    assert_user_error(run("sweep", study, "--ray", "--gpus-per-run", "0.5", "--device", "cpu"), "--device cpu")
    assert_user_error(run("sweep", study, "--ray", "--gpus-per-run", "1.5"), "a run trains on one GPU")
    assert_user_error(run("sweep", study, "--ray", "--gpus-per-run", "-1"), "from 0.0001")
    assert not (tmp_path / "results").exists()


@pytest.fixture
def two_runs(tmp_path: Path):
    (tmp_path / "tiny.yaml").write_text(TINY)
    (tmp_path / "study.yaml").write_text("base: tiny.yaml\nseeds: 2\n")
    return load_study(tmp_path / "study.yaml", out=tmp_path / "out")


@pytest.mark.slow
def test_each_run_trains_on_the_gpu_ray_assigned_it(two_runs) -> None:
    """Two logical GPUs, half of one per run: each task is given one GPU, made its only visible one, and its run
    trains on it as cuda:0 (here, without CUDA, torch refuses cuda:0: the run fails saying so; on a GPU it runs)."""
    pytest.importorskip("ray")
    runner = RayRunner(address=None, threads=1, device="cuda", gpus_per_run=0.5, local_cpus=2, local_gpus=2)
    assert runner.describe() == "Ray tasks on a local Ray instance, 1 CPU(s) and 0.5 GPU each"
    outcome = run_sweep(two_runs, runner)
    for record in outcome.records.values():
        assigned = record["ray_gpu"]
        assert len(assigned["gpu_ids"]) == 1 and assigned["gpu_ids"][0] in {"0", "1"}, assigned
        assert assigned["cuda_visible_devices"] == assigned["gpu_ids"][0]  # the assigned GPU, and only it
        import torch

        if torch.cuda.is_available():
            assert record["status"] == "complete", record
        else:
            assert record["status"] == "failed" and "'cuda:0'" in record["error"], record


@pytest.mark.slow
def test_a_share_of_a_gpu_ray_does_not_have_is_refused_not_waited_for(two_runs) -> None:
    pytest.importorskip("ray")
    runner = RayRunner(address=None, threads=1, device="cuda", gpus_per_run=0.25, local_cpus=1, local_gpus=0)
    with pytest.raises(NetflError, match=r"--gpus-per-run 0.25: the local Ray instance has 0 GPU\(s\)"):
        run_sweep(two_runs, runner)
