"""Races closed: a run claims its folder for the whole run, so a second run (or sweep) into it is refused at
once with exit code 2, whichever process holds it; a claim never outlives its process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_support import TINY, assert_user_error, run

from netfl.errors import NetflError
from netfl.results.claim import FolderBusy, claim_folder, claim_out_dir, lock_path
from netfl.study import load_study, run_sweep


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return path


def test_a_second_run_into_a_claimed_folder_is_refused_up_front(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with claim_folder(out):  # the first run, still going
        result = run("simulate", tiny, "--out", out, "-q")
        assert_user_error(result, f"{out}: another netfl process (pid {os.getpid()}) is writing this run folder now")
        assert_user_error(run("simulate", tiny, "--out", out, "-q", "--overwrite"), "another netfl process")
        assert not out.exists()
    assert run("simulate", tiny, "--out", out, "-q").exit_code == 0  # released: the folder is free again
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "tiny.yaml"]  # no lock left behind


def test_the_default_folder_skips_one_being_written(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with claim_folder(Path("results/tiny")):
        result = run("simulate", tiny)
        assert result.exit_code == 0, result.output
    assert "results: results/tiny-2/" in result.stdout
    assert not Path("results/tiny").exists()


def test_resume_and_sweep_claim_too(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "cut"
    (tmp_path / ".cut.checkpoint").write_bytes(b"written by the run that is still going")
    with claim_folder(out):
        assert_user_error(run("resume", out, "-q"), "another netfl process")
    (tmp_path / "study.yaml").write_text("base: tiny.yaml\n")
    study = load_study(tmp_path / "study.yaml", out=tmp_path / "study")
    with claim_folder(study.out, noun="study"):
        with pytest.raises(FolderBusy, match="is writing this study folder now"):
            run_sweep(study, runner=None)  # refused before the runner is asked anything
    assert not study.out.exists()


def test_a_claim_dies_with_its_process(tmp_path: Path) -> None:
    """Another process claims the folder and is killed: the lock it leaves is free, and taken over."""
    out, ready = tmp_path / "out", tmp_path / "ready"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, pathlib; from netfl.results.claim import claim_folder; "
            "c = claim_folder(pathlib.Path(sys.argv[1])); pathlib.Path(sys.argv[2]).touch(); time.sleep(600)",
            str(out),
            str(ready),
        ]
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert time.monotonic() < deadline and holder.poll() is None, "the other process never claimed it"
            time.sleep(0.02)
        with pytest.raises(FolderBusy, match=f"pid {holder.pid}"):
            claim_out_dir(out)
    finally:
        holder.kill()
        holder.wait()
    assert lock_path(out).exists()  # SIGKILL: nothing was cleaned up...
    with claim_out_dir(out) as claim:  # ...and nothing needs to be
        assert claim.path == out and lock_path(out).read_text() == f"{os.getpid()}\n"
    assert not lock_path(out).exists()


def test_a_claim_that_cannot_be_made_creates_nothing(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(NetflError, match="cannot write the results there"):
        claim_out_dir(tmp_path / "a-file" / "deeper" / "run")
    with pytest.raises(NetflError, match="holds an earlier run"):
        (tmp_path / "old").mkdir()
        (tmp_path / "old" / "summary.json").write_text(json.dumps({"seed": 1}))
        claim_out_dir(tmp_path / "old")
    with claim_out_dir(tmp_path / "new" / "er" / "run"):
        assert (tmp_path / "new" / "er").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "old"]  # the folders it made, gone again
