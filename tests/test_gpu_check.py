"""The GPU check (benchmarks/gpu_check.py) cannot rot: its smoke run on the CPU, and the wheels it would fetch
for the GPU machine's Python and platform (listed, nothing fetched)."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GPU_CHECK = REPO / "benchmarks" / "gpu_check.py"


@pytest.mark.slow
def test_the_gpu_check_runs_on_the_cpu_at_small_sizes(tmp_path: Path) -> None:
    """Every step at small sizes (the GPU tests collected and skipped, W1, W2, the ResNet and the large workload
    in netfl and the plain loop, the world on the CPU twice): a summary that passes, with every figure."""
    summary_path = tmp_path / "summary.json"
    done = subprocess.run(
        [sys.executable, str(GPU_CHECK), "--device", "cpu", "--small", "--work", str(tmp_path), "--summary",
         str(summary_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    assert summary["ok"] and summary["failures"] == [] and summary["device"] == "cpu"
    tests = summary["steps"]["tests"]
    assert tests["passed"] == 0 and tests["skipped"] > 10 and tests["failed"] == []  # GPU cases, no GPU here
    assert (
        "tests/learning/test_training_paths.py" in tests["files"]
        and "tests/end_to_end/test_checkpoint.py" in tests["files"]
    )
    runs = summary["steps"]["speed"]["runs"]
    assert set(runs) == {"w1", "w2", "resnet", "w2-6-clients"}
    for label, by in runs.items():
        netfl, plain = by["netfl"], by["plain loop"]
        assert netfl["updates_per_s"] > 0 and plain["updates_per_s"] > 0, label
        assert netfl["speed_up"] == pytest.approx(netfl["updates_per_s"] / plain["updates_per_s"])
        assert 0 < netfl["share_of_conv_peak"] and netfl["gflops"] > 0
    assert runs["w1"]["netfl"]["training"].startswith("fused") and runs["resnet"]["netfl"]["training"].startswith(
        "replicas"
    )
    (world,) = summary["steps"]["world"]["cases"]
    assert world["identical"] and world["accuracy_max_diff"] == 0.0 and world["rounds"] == 2
    assert "gpu check passed" in done.stdout


def test_the_wheels_for_the_gpu_machine_are_netfls_missing_dependencies_pinned_here() -> None:
    done = subprocess.run(
        [sys.executable, str(GPU_CHECK), "--prepare-wheels", "unused-folder", "--list"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    pins = dict(line.split("==") for line in lines if "==" in line and " " not in line)
    expected = {"simpy", "pydantic", "pydantic-core", "pyyaml", "annotated-types", "typing-extensions",
                "typing-inspection", "numba", "llvmlite"}  # fmt: skip
    assert set(pins) == expected
    assert all(pins[name] == importlib.metadata.version(name) for name in pins)
    assert not {"torch", "numpy", "pandas", "click"} & set(pins)  # the machine has them: its torch stays
    assert any(line.startswith("netfl (built from") for line in lines)
    command = lines[-1]
    assert "--python-version 3.12" in command and "--only-binary=:all:" in command and "--no-deps" in command
    for platform in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "any"):
        assert f"--platform {platform}" in command
    assert not Path("unused-folder").exists()
