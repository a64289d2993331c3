"""The trackers' hostile targets: each refused before the run in one line (exit 2, nothing written), another
program's files left alone, and a tracker failing after the run saying where the run's results are.

Every target is written here: a plain file named as a database, a folder, another program's SQLite database and
event file, an earlier run folder, a port on 127.0.0.1 that nothing listens on. Skipped where the tracking extra
is not installed.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from pathlib import Path

import pytest
from cli_support import TINY, assert_user_error, run

from netfl.errors import NetflError
from netfl.results.tracking import Tracking, check_tracking

pytest.importorskip("tensorboardX")
pytest.importorskip("mlflow")
pytest.importorskip("sqlalchemy")

OTHERS = "events.out.tfevents.1000.otherhost"  # another program's event file


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def here(tmp_path: Path, monkeypatch) -> Path:
    (tmp_path / "tiny.yaml").write_text(TINY)
    monkeypatch.chdir(tmp_path)
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_another_programs_event_file_in_the_run_subfolder_is_never_removed(here: Path):
    (here / "tb" / "out").mkdir(parents=True)
    (here / "tb" / "out" / OTHERS).write_bytes(b"not netfl's")
    (here / "tb" / "out" / "notes.txt").write_text("mine")
    for again in ([], ["--overwrite"]):
        result = run("simulate", "tiny.yaml", "--out", "out", "--tensorboard", "tb", "-q", *again)
        assert result.exit_code == 0, result.output
        assert (here / "tb" / "out" / OTHERS).read_bytes() == b"not netfl's"
        assert (here / "tb" / "out" / "notes.txt").read_text() == "mine"
        ours = list((here / "tb" / "out").glob("events.out.tfevents.*.netfl"))
        assert len(ours) == 1  # the run logged again replaced netfl's own event file, and only it


def test_a_trackers_store_inside_netfls_own_folders_is_refused_before_the_run(here: Path):
    assert run("simulate", "tiny.yaml", "--out", "run0", "-q").exit_code == 0
    before = _files(here / "run0")
    refused = [
        (["--mlflow", "run0"], "--mlflow file://", f"inside {here / 'run0'}/, a netfl run folder"),
        (["--mlflow", "sqlite:///run0/sub/ml.db"], "a netfl run folder", f"e.g. sqlite:///{here / 'mlflow.db'}"),
        (["--tensorboard", "run0"], f"--tensorboard {here / 'run0'}: inside", "a netfl run folder"),
        (["--tensorboard", "."], f"inside {here / 'r1'}/, this run's results folder", f"e.g. {here / 'tb'}"),
        (["--mlflow", "r1/store"], "this run's results folder", "give one outside them"),
    ]
    for options, *expected in refused:
        result = run("simulate", "tiny.yaml", "--out", "r1", "-q", *options)
        assert_user_error(result, *expected)
        assert len(result.stderr.splitlines()) == 1
        assert not (here / "r1").exists()  # refused before the run
    # the run folder itself, replaced by this very run
    result = run("simulate", "tiny.yaml", "--out", "run0", "--overwrite", "-q", "--mlflow", "sqlite:///run0/ml.db")
    assert_user_error(result, "this run's results folder")
    assert _files(here / "run0") == before  # no store, no .trash/, no experiment folder: untouched
    (here / "pair.yaml").write_text(
        "name: pair\nbase: tiny.yaml\ncases:\n  a: {server.algorithm.name: fedavg}\nseeds: [1]\n"
    )
    result = run("sweep", "pair.yaml", "--out", "study", "--tensorboard", "study/tb", "-q")
    assert_user_error(result, f"inside {here / 'study'}/, this sweep's study folder")
    assert not (here / "study").exists()


def test_an_mlflow_database_that_cannot_be_one_is_refused_before_the_run(here: Path):
    (here / "afile").write_text("a plain text file\n")
    (here / "adir").mkdir()
    with sqlite3.connect(here / "theirs.db") as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    (here / "ml.db").touch()
    (here / "ml-artifacts").write_text("")  # where the run's figures would go: a file
    refused = [
        ("sqlite:///afile", f"{here / 'afile'} is not an SQLite database"),
        ("sqlite:///adir", f"{here / 'adir'} is a folder, not a database file"),
        # a read-only place that stays read-only for root: a database whose folder would be a regular file
        ("sqlite:///afile/ml.db", f"{here / 'afile'} is a file, so {here / 'afile' / 'ml.db'} cannot be made"),
        ("sqlite:///theirs.db", "another program's SQLite database (no MLflow tables: notes)"),
        ("sqlite:///ml.db", f"{here / 'ml-artifacts'}, where the run's figures go, is a file"),
    ]
    for uri, expected in refused:
        started = time.monotonic()
        result = run("simulate", "tiny.yaml", "--out", "r1", "-q", "--mlflow", uri)
        assert time.monotonic() - started < 60  # a hang guard: MLflow's own retries took 109 s
        assert_user_error(result, f"--mlflow sqlite:///{here}", expected, "give a new file")
        assert not (here / "r1").exists()
    assert (here / "afile").read_text() == "a plain text file\n" and not any((here / "adir").iterdir())
    (here / "tiny2.yaml").write_text(TINY + "tracking: {mlflow: 'sqlite:///adir'}\n")  # the topology's key alike
    assert_user_error(run("validate", "tiny2.yaml"), "tiny2.yaml: tracking.mlflow sqlite:///", "is a folder")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files (the parent-is-a-file case runs as root)")
def test_a_read_only_mlflow_database_is_refused(here: Path):
    (here / "ro").mkdir()
    sqlite3.connect(here / "ro" / "ml.db").close()
    (here / "ro" / "ml.db").chmod(0o444)
    (here / "ro").chmod(0o555)
    try:
        (here / "ro.yaml").write_text(TINY + "tracking: {mlflow: 'sqlite:///ro/ml.db'}\n")
        assert_user_error(run("validate", "ro.yaml"), "ro.yaml: tracking.mlflow", "is read-only")
    finally:
        (here / "ro").chmod(0o755)


def test_an_unreachable_tracking_server_is_refused_at_once(here: Path, monkeypatch):
    with socket.socket() as bound:  # bound, never listening: a connection to it is refused at once
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        started = time.monotonic()
        result = run("simulate", "tiny.yaml", "--out", "r1", "-q", "--mlflow", f"http://127.0.0.1:{port}")
        assert time.monotonic() - started < 60  # a hang guard: MLflow's own retries took 257 s
        assert_user_error(result, f"--mlflow http://127.0.0.1:{port}: the tracking server is unreachable",
                          "connection refused")  # fmt: skip
        assert not (here / "r1").exists()
        with socket.socket() as listening:
            listening.bind(("127.0.0.1", 0))
            listening.listen()
            server = f"http://127.0.0.1:{listening.getsockname()[1]}"
            check_tracking(Tracking(mlflow=server))  # a server that answers passes
            monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{port}")  # ... unless reached through a dead proxy
            with pytest.raises(NetflError, match=f"unreachable through the proxy 127.0.0.1:{port}"):
                check_tracking(Tracking(mlflow=server))


def test_a_tensorboard_folder_that_is_a_file_or_empty_is_refused_before_the_run(here: Path):
    (here / "afile").write_text("x")
    (here / "tb").mkdir()
    (here / "tb" / "r1").write_text("x")  # the run's subfolder is a file
    refused = [
        ("afile", f"--tensorboard {here / 'afile'}: {here / 'afile'} is a file, so {here / 'afile' / 'r1'} cannot"),
        ("tb", f"{here / 'tb' / 'r1'} is a file, not a folder"),
        ("", "--tensorboard '': an empty path"),
    ]
    for board, expected in refused:
        result = run("simulate", "tiny.yaml", "--out", "r1", "-q", "--tensorboard", board)
        assert_user_error(result, expected)
        assert not (here / "r1").exists()
    (here / "tiny2.yaml").write_text(TINY + "tracking: {tensorboard: afile}\n")
    assert_user_error(run("simulate", "tiny2.yaml", "-q"), "tiny2.yaml: tracking.tensorboard", "is a file")
    (here / "tiny3.yaml").write_text(TINY + "tracking: {tensorboard: ''}\n")
    assert_user_error(run("validate", "tiny3.yaml"), "tracking.tensorboard")
    assert not (here / "results").exists()


def test_a_tracker_failing_after_the_run_says_where_the_results_are(here: Path, monkeypatch):
    from netfl.config import load_scenario
    from netfl.results.tracking import Label, track_run
    from netfl.runner import run_scenario

    class Meanwhile:  # a progress bar under which the run's TensorBoard subfolder becomes a file
        def update(self, sim_time_s, rounds, accuracy):
            (here / "tb").mkdir(exist_ok=True)
            (here / "tb" / "run").touch()

        def close(self):
            pass

    scenario = load_scenario(here / "tiny.yaml")
    with pytest.raises(NetflError) as caught:
        run_scenario(scenario, out_dir=here / "run", progress=Meanwhile(), tracking=Tracking(here / "tb"))
    assert f"TensorBoard {here / 'tb'}/: cannot write the event file" in str(caught.value)
    assert str(caught.value).endswith(f"the run itself is complete, its results written in {here / 'run'}/")
    assert (here / "run" / "summary.json").is_file()

    def broken(record, uri, label):  # a tracker's own exception, of a page
        raise RuntimeError("the store broke\n  at line 1\n  at line 2")

    import netfl.results.tracking_mlflow as tracking_mlflow

    monkeypatch.setattr(tracking_mlflow, "log_mlflow", broken)
    (here / "tb" / "run").unlink()
    with pytest.raises(NetflError) as caught:
        track_run(here / "run", Tracking(here / "tb", "sqlite:///x.db"), Label.of_run(here / "run", "tiny"))
    message = str(caught.value)
    assert "\n" not in message and "MLflow sqlite:///x.db: cannot log" in message
    assert "RuntimeError: the store broke;" in message and message.endswith(f"written in {here / 'run'}/")
    assert list((here / "tb" / "run").glob("*.netfl"))  # TensorBoard logged although MLflow failed
