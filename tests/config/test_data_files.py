"""A data set's files are checked where the run would read them: by `netfl validate`, before `netfl simulate`
imports torch, for every run of `netfl sweep` (--dry-run included) and by the loader, all at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import TINY, assert_user_error, idx_placeholders, run

from netfl.errors import DataError
from netfl.learn.data.datasets import load_dataset
from netfl.registry.datasets import CIFAR10_FILES

FASHION = TINY.replace("name: digits", "name: fashion-mnist")


def _topology(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "topology.yaml"
    path.write_text(text)
    return path


def test_validate_names_every_missing_file_and_the_option(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = run("validate", _topology(tmp_path, FASHION), "--data-dir", tmp_path / "empty")
    missing = str(tmp_path / "empty" / "train-images-idx3-ubyte")
    assert_user_error(
        result,
        "--data-dir: fashion-mnist: file not found: ",
        f"{missing}(.gz) (and 3 more: train-labels-idx1-ubyte",
        "apt-get install dataset-fashion-mnist",
    )


def test_validate_names_the_yaml_data_dir_relative_to_the_file(tmp_path: Path) -> None:
    text = FASHION.replace("name: fashion-mnist}", "name: fashion-mnist, data_dir: data}")
    path = _topology(tmp_path, text)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train-images-idx3-ubyte.gz").touch()  # one of four, gzipped
    assert_user_error(
        run("validate", path),
        "task.dataset.data_dir: fashion-mnist: file not found: "
        f"{tmp_path / 'data' / 'train-labels-idx1-ubyte'}(.gz) (and 2 more",
    )
    idx_placeholders(tmp_path / "data")
    assert run("validate", path).exit_code == 0


def test_mnist_needs_a_folder(tmp_path: Path) -> None:
    path = _topology(tmp_path, TINY.replace("name: digits", "name: mnist"))
    assert_user_error(
        run("validate", path),
        "task.dataset.name: mnist: no data folder given and mnist has no default "
        "location; it needs train-images-idx3-ubyte",
    )
    result = run("validate", path, "--data-dir", idx_placeholders(tmp_path / "mnist"))
    assert result.exit_code == 0, result.output


def test_cifar10_is_looked_for_in_its_subfolder(tmp_path: Path) -> None:
    path = _topology(tmp_path, TINY.replace("name: digits", "name: cifar10").replace("logistic", "lenet5"))
    batches = tmp_path / "data" / "cifar-10-batches-py"
    batches.mkdir(parents=True)
    for name in CIFAR10_FILES[:-1]:
        (batches / name).touch()
    assert_user_error(
        run("validate", path, "--data-dir", tmp_path / "data"), str(batches / "test_batch"), "cifar-10-batches-py"
    )
    (batches / "test_batch").touch()
    assert run("validate", path, "--data-dir", tmp_path / "data").exit_code == 0


def test_the_loader_reports_every_missing_file_before_reading_any(tmp_path: Path) -> None:
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(b"not read")
    with pytest.raises(
        DataError,
        match=r"train-images-idx3-ubyte\(\.gz\) \(and 2 more: train-labels-idx1-ubyte, "
        r"t10k-images-idx3-ubyte\)",
    ):
        load_dataset("mnist", data_dir=tmp_path)


def test_sweep_dry_run_checks_every_run_and_says_it_once(tmp_path: Path) -> None:
    _topology(tmp_path, FASHION)
    study = tmp_path / "study.yaml"
    study.write_text("base: topology.yaml\nseeds: 3\ncases: {a: {}, b: {task.local.lr: 0.5}}\n")
    (tmp_path / "empty").mkdir()
    result = run("sweep", study, "--dry-run", "--data-dir", tmp_path / "empty")
    assert_user_error(result, "a, seed 1: --data-dir: fashion-mnist: file not found")
    assert result.stderr.count("file not found") == 1
    ok = run("sweep", study, "--dry-run", "--data-dir", idx_placeholders(tmp_path / "data"))
    assert ok.exit_code == 0 and ok.stdout.count("to run") == 6


@pytest.mark.slow
def test_simulate_refuses_a_missing_data_set_before_importing_torch(tmp_path: Path) -> None:
    path = _topology(tmp_path, FASHION)
    (tmp_path / "empty").mkdir()
    args = ["simulate", str(path), "--data-dir", str(tmp_path / "empty"), "-q"]
    code = (
        f"import sys\nfrom netfl.cli.main import main\ntry:\n    main({args!r})\n"
        "except SystemExit as exc:\n    print(exc.code, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["2", "False"], out.stderr
    assert "file not found" in out.stderr
