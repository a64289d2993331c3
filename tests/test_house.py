"""The house: the whole tree is linted and formatted as pyproject.toml configures ruff (CI runs this)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    found = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (it is in the test extra: pip install -e '.[test]')")
    return [found]


@pytest.mark.parametrize("command", [["check", "."], ["format", "--check", "."]], ids=["lint", "format"])
def test_the_tree_passes_ruff(command: list[str]) -> None:
    done = subprocess.run(_ruff() + command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"ruff {' '.join(command)} found problems:\n{done.stdout}{done.stderr}"
