"""Without Flower (the optional ``flower`` extra), a scenario naming a Flower strategy gets one line saying how to
install it, with or without Flower in this environment (its modules are hidden for the test)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cli_support import TINY, assert_user_error, run


def test_without_flower_one_line_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "flwr" or m.startswith("flwr.")] + ["flwr"]:
        monkeypatch.setitem(sys.modules, name, None)  # as if flwr were not installed: importing it fails
    topology = tmp_path / "tiny.yaml"
    topology.write_text(TINY + "server:\n  algorithm: {flower: flwr.serverapp.strategy.FedAdam, eta: 0.1}\n")
    result = run("validate", topology)
    assert_user_error(
        result,
        "server.algorithm.flower: a Flower strategy needs Flower, which is not installed: "
        'pip install "netfl-sim[flower]"',
    )
    assert len(result.stderr.strip().splitlines()) == 2  # the file's line, then that one problem
