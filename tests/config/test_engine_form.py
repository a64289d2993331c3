"""Which form of the engine a scenario gets, and why, as netfl validate says it (netfl/config/engine_form.py)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from netfl.cli.main import main
from netfl.config import load_scenario
from netfl.config.engine_form import engine_choice

ROOT = Path(__file__).resolve().parents[2]


def _engine_line(*args: str) -> str:
    result = CliRunner().invoke(main, ["validate", *args])
    assert result.exit_code == 0, result.output
    return next(line for line in result.output.splitlines() if line.startswith("engine "))


def test_a_small_world_logs_its_idle_devices_on_actors_unless_told_otherwise() -> None:
    quickstart = str(ROOT / "topologies" / "quickstart.yaml")
    line = _engine_line(quickstart)
    assert "actors" in line and "events.idle_devices" in line and "idle_devices: false" in line
    assert "arrays (chosen" in _engine_line(quickstart, "--set", "events.idle_devices=false")


def test_every_large_shipped_world_runs_on_arrays() -> None:
    for name in ("million-phones.yaml", "ten-million-phones.yaml"):
        choice = engine_choice(load_scenario(ROOT / "topologies" / name))
        assert choice.form == "arrays" and not choice.needs_actors, name


def test_a_per_device_policy_of_ones_own_keeps_actors_and_is_named() -> None:
    choice = engine_choice(load_scenario(ROOT / "examples" / "custom_policy.yaml"))
    assert choice.form == "actors"
    assert any("custom_policy.py" in reason and "per device" in reason for _, reason in choice.needs_actors)
