"""User code fenced: whatever a policy file raises -- a BaseException of its own, SystemExit -- or calls --
os._exit -- becomes one message with the file and line and exit code 2; KeyboardInterrupt stays the interrupt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import TINY, assert_user_error, run

from netfl import user_code

NETFL = Path(sys.executable).parent / "netfl"

POLICY = """\
import os

from netfl.policies import RoundPolicy


class Doom(BaseException):
    '''Not an Exception: what `except Exception` lets through.'''


class Bad(RoundPolicy):
    def participates(self, round_index):
        if round_index == 1:
            {action}
        return True
"""


def topology(tmp_path: Path, action: str, *, at_import: bool = False) -> Path:
    code = POLICY.format(action=action)
    if at_import:
        code += f"\n{action}\n"
    (tmp_path / "bad.py").write_text(code)
    path = tmp_path / "run.yaml"
    path.write_text(
        TINY.replace(
            "    link: {uplink: 10Mbps}\n", "    link: {uplink: 10Mbps}\n    availability: {policy: bad.py:Bad}\n"
        )
    )
    return path


@pytest.mark.parametrize(
    "action, expected",
    [
        ("raise Doom('the end')", "bad.py:13: Doom in Bad.participates: the end"),
        ("raise SystemExit(0)", "bad.py:13: SystemExit in Bad.participates: 0"),
        ("raise GeneratorExit", "bad.py:13: GeneratorExit in Bad.participates"),
    ],
)
def test_a_base_exception_in_a_policy_is_one_message_with_file_and_line(
    tmp_path: Path, action: str, expected: str
) -> None:
    path = topology(tmp_path, action)
    result = run("simulate", path, "--out", tmp_path / "out", "-q")
    assert_user_error(result, expected, "the run's results up to there are in")
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["complete"] is False  # kept, and said


def test_a_base_exception_at_import_is_one_message_with_file_and_line(tmp_path: Path) -> None:
    path = topology(tmp_path, "raise Doom('at import')", at_import=True)
    assert_user_error(run("validate", path), "bad.py:16: Doom while importing this policy file: at import")


def test_keyboard_interrupt_in_a_policy_is_the_interrupt_it_is(tmp_path: Path) -> None:
    path = topology(tmp_path, "raise KeyboardInterrupt")
    result = run("simulate", path, "--out", tmp_path / "out", "-q")
    assert result.exit_code == 130, result.output
    assert "interrupted: partial results written to" in result.stderr
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["complete"] is False


def netfl(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    """netfl in a process of its own, whose exit code is the one to check."""
    return subprocess.run([NETFL, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_os_exit_at_import_is_refused_not_obeyed(tmp_path: Path) -> None:
    path = topology(tmp_path, "os._exit(0)", at_import=True)
    result = netfl("validate", path, cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    expected = "bad.py:16: os._exit(0) while importing this policy file, which would end netfl at once and write"
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_os_exit_in_a_running_policy_ends_the_run_with_exit_2_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In this process, made safe: a real os._exit here would end the test run itself, with success."""

    def not_here(status: int) -> None:
        raise AssertionError(f"os._exit({status}) reached the process")

    monkeypatch.setattr(os, "_exit", not_here)  # were the fence not installed
    monkeypatch.setattr(user_code, "_real_exit", not_here)  # were it installed, but not raising in user code
    path = topology(tmp_path, "os._exit(0)")
    result = run("simulate", path, "--out", tmp_path / "out", "-q")
    assert_user_error(
        result, "bad.py:13: os._exit(0) in Bad.participates, which would end netfl at once and write nothing"
    )
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["complete"] is False
