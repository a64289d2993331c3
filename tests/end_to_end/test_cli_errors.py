"""The `netfl` command: bad input is one clear message with exit code 2, never a traceback
and never a half-written results folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from cli_support import TINY, assert_user_error, run

import netfl.results.staging as staging
import netfl.results.writer as writer
from netfl.errors import NetflError
from netfl.sim.recorder import EventRecorder

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "topologies" / "quickstart.yaml"
NETFL_SCRIPT = Path(sys.executable).parent / "netfl"
RESULT_FILES = {
    ".netfl-run",
    "algorithm.csv",
    "summary.json",
    "scenario.yaml",
    "metrics.csv",
    "events.parquet",
    "devices.parquet",
    "accuracy_vs_time.png",
    "timeline.parquet",
    "timeline.png",
}

BAD_FILES = {
    # name: (text, what the message must point at)
    "malformed.yaml": ("name: x\nstop: {rounds: 3\ndevices: []\n", "line 3"),
    "unknown_key.yaml": (TINY.replace("seed: 1", "seeed: 1"), "seeed"),
    "wrong_type.yaml": (TINY.replace("count: 4", "count: many"), "devices[0].count"),
    "negative_rate.yaml": (TINY.replace("uplink: 10Mbps", "uplink: -5Mbps"), "devices[0].link.uplink"),
    "over_commit_negative.yaml": (
        TINY + "server:\n  round: {participants: 2, over_commit: -30%}\n",
        "server.round.over_commit",
    ),
    "over_commit_without_participants.yaml": (
        TINY + "server:\n  round: {over_commit: 30%}\n",
        "server.round.over_commit: over-commit asks",
    ),
    "over_commit_async.yaml": (
        TINY + "server:\n  mode: async\n  round: {participants: 2, over_commit: 30%}\n",
        "server.round.over_commit: over-commit closes synchronous rounds",
    ),
    "fedbuff_k.yaml": (
        TINY + "server:\n  mode: async\n  algorithm: {name: fedbuff, K: 4}\n",
        "server.algorithm: FedBuff's buffer size K",
    ),
    "fedbuff_weight.yaml": (
        TINY + "server:\n  mode: async\n  algorithm: {name: fedbuff, staleness_weight: sqrt}\n",
        "server.algorithm.staleness_weight",
    ),
}


def hidden_entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from an empty folder so a default results/ folder would show up here."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ------------------------------------------------------------------------------ validate


def test_validate_good_file_prints_ok_and_summary() -> None:
    result = run("validate", QUICKSTART)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"OK {QUICKSTART}"
    assert "quickstart (seed 7)" in result.stdout
    assert "60 rounds" in result.stdout
    assert "20 in 2 group(s)" in result.stdout
    assert "phones" in result.stdout and "boards" in result.stdout
    assert "bernoulli(p=0.5)" in result.stdout
    assert "fedavg" in result.stdout
    assert result.stderr == ""


def test_validate_tiny_file(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    result = run("validate", path)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"OK {path}\n")
    assert "4 in 1 group(s)" in result.stdout


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_validate_bad_file_exits_2_naming_file_and_field(tmp_path: Path, name: str) -> None:
    text, where = BAD_FILES[name]
    path = tmp_path / name
    path.write_text(text)
    result = run("validate", path)
    assert_user_error(result, str(path), where)
    assert "OK" not in result.stdout


def test_validate_malformed_yaml_gives_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "malformed.yaml"
    path.write_text(BAD_FILES["malformed.yaml"][0])
    assert_user_error(run("validate", path), "malformed YAML", "line 3, column")


def test_validate_lists_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "many.yaml"
    path.write_text(
        TINY.replace("seed: 1", "seeed: 1").replace("count: 4", "count: 0").replace("uplink: 10Mbps", "uplink: 10Mbs")
    )
    result = run("validate", path)
    assert_user_error(result, f"{path}: 3 problem(s)", "seeed", "devices[0].count", "devices[0].link.uplink")
    assert "Mbps" in result.stderr  # what is accepted


def test_validate_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    assert_user_error(run("validate", path), str(path), "file not found")


def test_validate_yaml_list(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    assert_user_error(run("validate", path), str(path), "mapping")


def test_validate_unknown_policy(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(TINY + "    availability: {policy: sometimes}\n")
    assert_user_error(run("validate", path), "devices[0].availability.policy", "bernoulli")


@pytest.mark.slow
def test_real_console_script_has_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "negative_rate.yaml"
    path.write_text(BAD_FILES["negative_rate.yaml"][0])
    assert NETFL_SCRIPT.exists(), NETFL_SCRIPT
    proc = subprocess.run(
        [str(NETFL_SCRIPT), "validate", str(path)], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: {path}: 1 problem(s)")
    assert "devices[0].link.uplink: must be > 0" in proc.stderr
    assert proc.stdout == ""


# ------------------------------------------------------------------------------ simulate


def test_simulate_bad_file_exits_2_and_writes_nothing(in_tmp: Path) -> None:
    path = in_tmp / "unknown_key.yaml"
    path.write_text(BAD_FILES["unknown_key.yaml"][0])
    assert_user_error(run("simulate", path, "--out", in_tmp / "out"), str(path), "seeed")
    assert sorted(p.name for p in in_tmp.iterdir()) == ["unknown_key.yaml"]


def test_simulate_missing_fashion_mnist_files(in_tmp: Path) -> None:
    path = in_tmp / "fashion.yaml"
    path.write_text(TINY.replace("name: digits", "name: fashion-mnist").replace("name: logistic", "name: lenet5"))
    empty = in_tmp / "empty-data"
    empty.mkdir()
    result = run("simulate", path, "--data-dir", empty, "--out", in_tmp / "out")
    assert_user_error(
        result,
        str(empty / "train-images-idx3-ubyte"),
        "file not found",
        "apt-get install dataset-fashion-mnist",
        "--data-dir",
    )
    # neither the --out folder nor a default results/ folder, nor any staging folder
    assert sorted(p.name for p in in_tmp.iterdir()) == ["empty-data", "fashion.yaml"]
    assert list(empty.iterdir()) == []


def test_simulate_missing_fashion_mnist_files_default_out(in_tmp: Path) -> None:
    path = in_tmp / "fashion.yaml"
    path.write_text(TINY.replace("name: digits", "name: fashion-mnist"))
    (in_tmp / "empty").mkdir()
    assert_user_error(run("simulate", path, "--data-dir", in_tmp / "empty", "-q"), "dataset-fashion-mnist")
    assert not (in_tmp / "results").exists()


def test_simulate_tiny_digits_writes_its_result_files(in_tmp: Path) -> None:
    path = in_tmp / "tiny.yaml"
    path.write_text(TINY)
    out = in_tmp / "out"
    result = run("simulate", path, "--out", out)
    assert result.exit_code == 0, (result.output, result.exception)
    assert "tiny: fedavg, 2 rounds" in result.stdout
    assert f"results: {out}/" in result.stdout
    assert {p.name for p in out.iterdir()} == RESULT_FILES
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True
    assert summary["rounds"] == 2 and summary["num_devices"] == 4
    assert hidden_entries(in_tmp) == []


def test_simulate_default_out_is_results_name(in_tmp: Path) -> None:
    path = in_tmp / "tiny.yaml"
    path.write_text(TINY)
    result = run("simulate", path, "--quiet", "--seed", "3")
    assert result.exit_code == 0, (result.output, result.exception)
    assert result.stdout == ""
    out = in_tmp / "results" / "tiny"
    assert {p.name for p in out.iterdir()} == RESULT_FILES
    assert json.loads((out / "summary.json").read_text())["seed"] == 3


def make_old_run(out: Path) -> dict[str, bytes]:
    out.mkdir(parents=True)
    (out / "summary.json").write_text('{"old": true}\n')
    (out / "metrics.csv").write_text("old\n")
    (out / "extra-from-old-run.txt").write_text("stale\n")
    return {p.name: p.read_bytes() for p in out.iterdir()}


def test_simulate_replaces_an_older_run(in_tmp: Path) -> None:
    path = in_tmp / "tiny.yaml"
    path.write_text(TINY)
    out = in_tmp / "runs" / "tiny"
    before = make_old_run(out)
    assert_user_error(run("simulate", path, "--out", out, "-q"), f"{out}: holds an earlier run; add --overwrite")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    result = run("simulate", path, "--out", out, "-q", "--overwrite")
    assert result.exit_code == 0, (result.output, result.exception)
    assert {p.name for p in out.iterdir()} == RESULT_FILES  # the old extra file is gone
    assert json.loads((out / "summary.json").read_text())["scenario"] == "tiny"
    assert hidden_entries(out.parent) == []  # no .tiny.partial-* or .tiny.previous-*
    assert [p.name for p in out.parent.iterdir()] == ["tiny"]


def test_the_default_folder_never_replaces_an_earlier_run(in_tmp: Path) -> None:
    """Copy the topology, change the algorithm, run: the earlier run (same name) is kept, and the message says
    where the new one went."""
    path = in_tmp / "tiny.yaml"
    path.write_text(TINY)
    first = run("simulate", path)
    assert first.exit_code == 0 and "results: results/tiny/\n" in first.stdout
    second = run("simulate", path, "--set", "server.algorithm.name=fedau")
    assert second.exit_code == 0, second.output
    assert "results: results/tiny-2/ (results/tiny/ holds an earlier run; --overwrite replaces it)" in second.stdout
    assert json.loads((in_tmp / "results" / "tiny" / "summary.json").read_text())["algorithm"] == "fedavg"
    assert json.loads((in_tmp / "results" / "tiny-2" / "summary.json").read_text())["algorithm"] == "fedau"


def test_an_out_folder_that_cannot_be_written_is_refused_before_the_run(in_tmp: Path) -> None:
    path = in_tmp / "tiny.yaml"
    path.write_text(TINY)
    (in_tmp / "a-file").write_text("not a folder")
    result = run("simulate", path, "--out", in_tmp / "a-file" / "run")
    assert_user_error(result, "cannot write the results there")
    assert "rounds in" not in result.stdout  # refused before simulating


def _fail_plot(*args: object, **kwargs: object) -> None:
    raise RuntimeError("plotting broke")


def test_failed_write_during_simulate_keeps_previous_results(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = in_tmp / "tiny.yaml"
    path.write_text(TINY)
    out = in_tmp / "runs" / "tiny"
    before = make_old_run(out)
    monkeypatch.setattr(writer, "plot_accuracy_vs_time", _fail_plot)
    result = run("simulate", path, "--out", out, "-q", "--overwrite")
    assert result.exit_code != 0
    assert isinstance(result.exception, RuntimeError)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in out.parent.iterdir()] == ["tiny"]


def fake_run(out: Path) -> Path:
    metrics = [
        SimpleNamespace(
            sim_time_s=t,
            round=r,
            test_accuracy=0.5 + r / 10,
            test_loss=1.0 / (r + 1),
            participants=3,
            energy_j=t,
            work_energy_j=t / 2,
            per_class_accuracy=[0.5, 0.6],
        )
        for r, t in ((1, 10.0), (2, 20.0))
    ]
    recorder = EventRecorder()
    recorder.log(0.0, 0, 0, "start")
    recorder.log(10.0, 1, 1, "upload", job=0, bytes=100)
    events = recorder.columns()
    devices = {"device": [0, 1], "group": ["a", "a"], "battery_fraction": [0.5, float("nan")]}
    return writer.write_run(
        out,
        summary={"scenario": "fake", "complete": True},
        metrics=metrics,
        num_classes=[2],
        events=events,
        devices=devices,
        title="fake",
        scenario={"name": "fake"},
        source="fake.yaml",
    )


def test_write_run_failing_midway_leaves_previous_folder_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "results" / "fake"
    before = make_old_run(out)
    monkeypatch.setattr(writer, "plot_accuracy_vs_time", _fail_plot)
    with pytest.raises(RuntimeError, match="plotting broke"):
        fake_run(out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in out.parent.iterdir()] == ["fake"]  # no staging folder left behind


def test_write_run_failing_on_first_run_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "results" / "fake"
    monkeypatch.setattr(writer, "plot_accuracy_vs_time", _fail_plot)
    with pytest.raises(RuntimeError):
        fake_run(out)
    assert list(out.parent.iterdir()) == []


def test_write_run_replaces_previous_run(tmp_path: Path) -> None:
    out = tmp_path / "fake"
    make_old_run(out)
    assert fake_run(out) == out
    assert {p.name for p in out.iterdir()} == RESULT_FILES - {
        "timeline.parquet",
        "timeline.png",
        "algorithm.csv",
    }  # none given
    assert json.loads((out / "summary.json").read_text()) == {"scenario": "fake", "complete": True}
    assert hidden_entries(tmp_path) == []


def test_simulate_out_is_an_existing_file(in_tmp: Path) -> None:
    path = in_tmp / "tiny.yaml"
    path.write_text(TINY)
    (in_tmp / "out").write_text("my notes\n")
    assert_user_error(run("simulate", path, "--out", in_tmp / "out", "-q"), "out: exists and is not a folder")
    assert (in_tmp / "out").read_text() == "my notes\n"  # the user's file is neither moved nor replaced
    assert hidden_entries(in_tmp) == []


def test_write_run_under_a_file_is_a_user_error(tmp_path: Path) -> None:
    from netfl.errors import NetflError

    (tmp_path / "notafolder").write_text("x")
    with pytest.raises(NetflError, match="cannot create the results folder"):
        fake_run(tmp_path / "notafolder" / "run")
    assert hidden_entries(tmp_path) == []


def test_write_run_never_replaces_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "chapter1.tex").write_text("precious")
    with pytest.raises(NetflError, match="holds files that are not a netfl run"):
        fake_run(thesis)  # the library refuses too, not only the CLI
    assert (thesis / "chapter1.tex").read_text() == "precious"
    fake_run(tmp_path / "fresh")
    fake_run(tmp_path / "fresh")  # an earlier run is replaced


def test_write_errors_are_user_errors_and_leave_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer, "write_events", disk_full)
    with pytest.raises(NetflError, match="cannot write the results: .*No space left on device"):
        fake_run(tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "device,expected",
    [("tpu", "is not a torch device"), ("cuda:x", "is not a torch device")]
    + ([] if __import__("torch").cuda.is_available() else [("cuda", "cannot use a CUDA GPU")]),
)
def test_unusable_training_device(in_tmp: Path, device: str, expected: str) -> None:
    path = in_tmp / "tiny.yaml"
    path.write_text(TINY)
    assert_user_error(run("simulate", path, "--device", device, "-q"), f"device {device!r}", expected)
    assert not (in_tmp / "results").exists()  # refused before any data was loaded or written


def stage_as(out: Path, pid: int) -> None:
    """What process ``pid`` leaves beside ``out`` when killed while replacing it: netfl's marker, then staging."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging.staging_marker(out, pid).write_text(staging._marker_text(out, pid))
    staging.staging_folders(out, pid)[0].mkdir()


def test_staging_left_by_a_killed_process_is_cleaned_and_a_parked_run_put_back(tmp_path: Path) -> None:
    """SIGKILL between the two renames of a replacement leaves the earlier run parked aside: put it back."""
    dead = 2**22 + 12345  # above Linux's default pid_max: no process has it
    out = tmp_path / "results" / "fake"
    stage_as(out, dead)
    parked = tmp_path / "results" / f".fake.previous-{dead}"
    make_old_run(parked)
    staging.clean_stale_staging(out)
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["fake"]
    assert (out / "summary.json").exists()  # the earlier run, back in place
    stage_as(out, dead)
    alive = tmp_path / "results" / f".fake.partial-{os.getppid()}"
    stage_as(out, os.getppid())  # a live process's staging is its own business
    fake_run(out)
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == [
        alive.name,
        f".fake.staging-{os.getppid()}",
        "fake",
    ]
