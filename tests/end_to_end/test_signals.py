"""Ctrl-C and SIGTERM: the partial results are written and said where; a second signal never destroys them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_support import TINY, with_ctrl_c

NETFL = Path(sys.executable).parent / "netfl"
#: A policy that says (by a file beside it) when the run is under way: round 3 has begun.
BEACON = """\
from pathlib import Path

from netfl.policies import RoundPolicy


class Beacon(RoundPolicy):
    def participates(self, round_index):
        if round_index == 3:
            Path(__file__).with_name("under-way").touch()
        return True
"""
#: A run that would go on for hours (10^6 rounds), with the beacon.
ENDLESS = TINY.replace("stop: {rounds: 2}", "stop: {rounds: 1000000}").replace(
    "    link: {uplink: 10Mbps}\n", "    link: {uplink: 10Mbps}\n    availability: {policy: beacon.py:Beacon}\n"
)
#: A policy whose construction takes long: the world is still being built when the signal comes.
SLOW_TO_BUILD = """\
import time
from pathlib import Path

from netfl.policies import RoundPolicy


class Slow(RoundPolicy):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        Path(__file__).with_name("under-way").touch()
        time.sleep(60)

    def participates(self, round_index):
        return True
"""

pytestmark = pytest.mark.slow


def start(tmp_path: Path, topology: str, out: Path) -> subprocess.Popen:
    (tmp_path / "beacon.py").write_text(BEACON)
    (tmp_path / "slow.py").write_text(SLOW_TO_BUILD)
    path = tmp_path / "run.yaml"
    path.write_text(topology)
    return subprocess.Popen(
        [NETFL, "simulate", path, "--out", out],
        cwd=tmp_path,
        preexec_fn=with_ctrl_c,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def under_way(tmp_path: Path) -> None:
    """Wait until a policy says the run has reached the point the test is about."""
    deadline = time.monotonic() + 120
    while not (tmp_path / "under-way").exists():
        assert time.monotonic() < deadline, "the run never got under way"
        time.sleep(0.05)
    time.sleep(0.2)


def finish(process: subprocess.Popen) -> tuple[str, str]:
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, (stdout, stderr)
    assert "Traceback" not in stderr, stderr
    return stdout, stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_writes_the_partial_results_and_says_where(tmp_path: Path, signum: int) -> None:
    out = tmp_path / "out"
    process = start(tmp_path, ENDLESS, out)
    under_way(tmp_path)
    process.send_signal(signum)
    _, stderr = finish(process)
    assert f"interrupted: partial results written to {out}/ (complete: false)" in stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and summary["stopped_by"] == "interrupted" and summary["rounds"] > 0


def test_a_second_ctrl_c_does_not_destroy_the_results_being_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    process = start(tmp_path, ENDLESS, out)
    under_way(tmp_path)
    process.send_signal(signal.SIGINT)
    for _ in range(5):  # impatient
        time.sleep(0.02)
        process.send_signal(signal.SIGINT)
    _, stderr = finish(process)
    assert "partial results written to" in stderr
    assert json.loads((out / "summary.json").read_text())["complete"] is False
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_ctrl_c_while_the_world_is_built_writes_nothing_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "out"
    process = start(
        tmp_path,
        TINY.replace(
            "    link: {uplink: 10Mbps}\n", "    link: {uplink: 10Mbps}\n    availability: {policy: slow.py:Slow}\n"
        ),
        out,
    )
    under_way(tmp_path)
    process.send_signal(signal.SIGINT)
    _, stderr = finish(process)
    assert "interrupted: stopped while building the world; nothing was written" in stderr
    assert not out.exists()


#: A policy that stops its own run (SIGTERM to the process it runs in) as round 3 begins.
STOPS_ITSELF = """\
import os, signal

from netfl.policies import RoundPolicy


class StopsItself(RoundPolicy):
    def participates(self, round_index):
        if round_index == 3 and self.device.index == 0:
            os.kill(os.getpid(), signal.SIGTERM)
        return True
"""


def test_a_command_interrupted_in_this_process_gives_the_signal_handlers_back(tmp_path: Path) -> None:
    """A command run from Python (a notebook, a test) and interrupted ignores further signals only until it ends:
    its caller can be stopped by Ctrl-C and SIGTERM again. (Left ignored, the next sweep in the same process once
    ran all its runs to the end through the SIGTERM meant to stop it.)"""
    from cli_support import run as run_cli

    (tmp_path / "stops.py").write_text(STOPS_ITSELF)
    (tmp_path / "run.yaml").write_text(
        ENDLESS.replace("beacon.py:Beacon", "stops.py:StopsItself").replace(
            "stop: {rounds: 1000000}", "stop: {rounds: 50}"
        )
    )
    found = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    result = run_cli("simulate", tmp_path / "run.yaml", "--out", tmp_path / "out", "--quiet")
    assert result.exit_code == 130, (result.output, result.exception)
    assert "interrupted: partial results written" in result.output
    assert {s: signal.getsignal(s) for s in found} == found
