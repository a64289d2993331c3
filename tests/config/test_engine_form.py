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
    assert "engine: {devices: arrays} logs the same events" in line
    assert "arrays (chosen" in _engine_line(quickstart, "--set", "events.idle_devices=false")
    assert "their events" not in _engine_line(quickstart, "--set", "events.idle_devices=false")


def test_the_array_form_logs_idle_devices_when_asked_at_any_size() -> None:
    quickstart = str(ROOT / "topologies" / "quickstart.yaml")
    arrays = ["--set", "engine.devices=arrays"]
    assert "their events" not in _engine_line(quickstart, *arrays)  # their default with arrays: not logged
    line = _engine_line(quickstart, *arrays, "--set", "events.idle_devices=true")
    assert "arrays (asked for): idle devices kept as rows; their events logged from the rows" in line
    scenario = load_scenario(
        ROOT / "topologies" / "quickstart.yaml", overrides=["engine.devices=arrays", "events.idle_devices=true"]
    )
    choice = engine_choice(scenario)
    assert choice.form == "arrays" and choice.idle_events and not choice.needs_actors


def test_a_large_world_that_asks_for_idle_devices_events_keeps_them_in_rows() -> None:
    """10 000 devices or more: the rows log them (before, every device became an actor for them)."""
    million = ROOT / "topologies" / "million-phones.yaml"
    for idle, logged in (("true", True), ("false", False)):
        scenario = load_scenario(million, overrides=["engine.devices=auto", f"events.idle_devices={idle}"])
        choice = engine_choice(scenario)
        assert choice.form == "arrays" and choice.idle_events == logged and not choice.needs_actors
    line = _engine_line(str(million), "--set", "engine.devices=auto", "--set", "events.idle_devices=true")
    assert "arrays (chosen" in line and "their events logged from the rows" in line
    small = load_scenario(
        million, overrides=["engine.devices=auto", "events.idle_devices=true", "devices[0].count=9999"]
    )
    assert engine_choice(small).form == "actors"
    assert [path for path, _ in engine_choice(small).needs_actors] == ["events.idle_devices"]


def test_every_large_shipped_world_runs_on_arrays() -> None:
    for name in ("million-phones.yaml", "ten-million-phones.yaml"):
        choice = engine_choice(load_scenario(ROOT / "topologies" / name))
        assert choice.form == "arrays" and not choice.needs_actors, name


def test_a_per_device_policy_of_ones_own_keeps_actors_and_is_named() -> None:
    choice = engine_choice(load_scenario(ROOT / "examples" / "custom_policy.yaml"))
    assert choice.form == "actors"
    assert any("custom_policy.py" in reason and "per device" in reason for _, reason in choice.needs_actors)
