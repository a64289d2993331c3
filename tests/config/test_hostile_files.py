"""Files no scenario can be are refused at once, by name and reason: never a hang, a RecursionError or gigabytes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from cli_support import assert_user_error, run

from netfl.config import load_scenario
from netfl.config.loading import MAX_DEPTH, MAX_FILE_BYTES, MAX_VALUES
from netfl.errors import ScenarioError

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = (REPO / "topologies" / "quickstart.yaml").read_text()

BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi")
)


def refused(tmp_path: Path, text: str) -> str:
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    started = time.perf_counter()
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    # a guard, not a speed target: expanding the bomb takes minutes and gigabytes; refusing it, well under a second
    assert time.perf_counter() - started < 30, "refusing took too long"
    return str(caught.value)


def test_an_alias_bomb_is_refused_without_expanding_it(tmp_path: Path) -> None:
    assert f"more than {MAX_VALUES:,} values once its YAML aliases are expanded" in refused(tmp_path, BILLION_LAUGHS)


def test_an_alias_inside_itself(tmp_path: Path) -> None:
    assert "a YAML alias refers to a mapping or list that contains it" in refused(tmp_path, "name: &x [*x]\n")
    assert "contains it" in refused(tmp_path, "name: &x {a: *x}\n")


def test_deep_nesting_in_flow_or_block_style(tmp_path: Path) -> None:
    assert f"at most {MAX_DEPTH} levels" in refused(tmp_path, "name: " + "[" * 2000 + "]" * 2000 + "\n")
    block = "".join("  " * i + f"k{i}:\n" for i in range(MAX_DEPTH + 2)) + "  " * (MAX_DEPTH + 2) + "v\n"
    assert f"at most {MAX_DEPTH} levels" in refused(tmp_path, block)


def test_shared_values_within_the_limits_are_read_once_and_accepted(tmp_path: Path) -> None:
    """Aliases are legitimate YAML: a shared link spec used by two groups still loads."""
    text = QUICKSTART.replace(
        "link: {uplink: 5Mbps, downlink: 20Mbps, latency: 30ms}",
        "link: &fast {uplink: 5Mbps, downlink: 20Mbps, latency: 30ms}",
    )
    text = text.replace("link: {uplink: 250kbps, downlink: 250kbps, latency: 20ms}", "link: *fast")
    path = tmp_path / "aliases.yaml"
    path.write_text(text)
    scenario = load_scenario(path)
    assert scenario.devices[0].link == scenario.devices[1].link


def test_a_file_larger_than_any_scenario(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"# " + b"x" * MAX_FILE_BYTES + b"\n")
    assert_user_error(run("validate", path), "big.yaml", "larger than 4 MiB")


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/null"])
def test_devices_and_folders_are_not_read(special: str, tmp_path: Path) -> None:
    if not os.path.exists(special):
        pytest.skip(f"no {special} here")
    assert_user_error(run("validate", special), special, "not a regular file")
    assert_user_error(run("validate", tmp_path), "is a folder")


def test_a_named_pipe_is_refused_without_blocking(tmp_path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes here")
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    assert_user_error(run("validate", fifo), "not a regular file")


@pytest.mark.parametrize(
    "override, path",
    [
        ("devices[0].count=true", "devices[0].count"),
        ("stop.rounds=yes", "stop.rounds"),
        ("server.algorithm.server_lr=true", "server.algorithm.server_lr"),
        ("devices[0].availability.p=false", "devices[0].availability.p"),
        ("devices[0].battery.capacity=true", "devices[0].battery.capacity"),
        ("task.local.lr=true", "task.local.lr"),
    ],
)
def test_booleans_are_not_numbers(override: str, path: str) -> None:
    value = override.partition("=")[2]
    word = {"yes": "true"}.get(value, value)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(REPO / "topologies" / "quickstart.yaml", overrides=[override])
    assert f"{path}: {word} is a boolean; give a number" in str(caught.value)
