"""Messages that help: a fraction written as a percentage number is told how to write it, keys are listed as the
file spells them, a study file given for a topology (and the reverse) names the right command, a missing model
file names the topology and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import TINY, assert_user_error, run

from netfl.config import load_scenario
from netfl.config.file_kinds import STUDY_KEYS, topology_keys
from netfl.errors import ScenarioError
from netfl.problems import field_keys

ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, change: dict[str, Any] | None = None, name: str = "tiny.yaml") -> Path:
    data = yaml.safe_load(TINY)
    for key, value in (change or {}).items():
        data[key] = value
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def _problems(tmp_path: Path, *overrides: str) -> dict[str, str]:
    with pytest.raises(ScenarioError) as err:
        load_scenario(_write(tmp_path), overrides=overrides)
    return dict(err.value.problems)


# ------------------------------------------------------------------ a fraction as a percentage number


@pytest.mark.parametrize(
    "override, path, hint",
    [
        # netfl.units.Fraction fields read 20%
        ("devices[0].battery={capacity: 10kJ, min_level: 20}", "devices[0].battery.min_level", "for 20 % write 20%"),
        ("stop.accuracy=90", "stop.accuracy", "for 90 % write 90%"),
        ("server.compression={uplink: {topk: 5}}", "server.compression.uplink.topk", "for 5 % write 5%"),
        # a policy's participation probability reads 30% too
        ("devices[0].availability={policy: bernoulli, p: 30}", "devices[0].availability.p", "for 30 % write 30%"),
        # a plain probability does not: the number it means
        (
            "devices[0].availability={policy: markov, p: 0.3, transition: 5}",
            "devices[0].availability.transition",
            "a fraction between 0 and 1: for 5 % write 0.05",
        ),
    ],
)
def test_a_percentage_number_is_told_how_to_write_it(tmp_path: Path, override: str, path: str, hint: str) -> None:
    problems = _problems(tmp_path, override)
    assert hint in problems[path], problems


def test_what_the_suggestion_says_is_accepted(tmp_path: Path) -> None:
    for override in ("devices[0].battery={capacity: 10kJ, min_level: 20%}", "stop.accuracy=90%"):
        load_scenario(_write(tmp_path), overrides=[override])
    scenario = load_scenario(
        _write(tmp_path), overrides=["devices[0].availability={policy: markov, p: 0.3, transition: 0.05}"]
    )
    assert scenario.devices[0].availability.params["transition"] == 0.05


@pytest.mark.parametrize(
    "override, path",
    [
        ("devices[0].battery={capacity: 10kJ, min_level: 2000%}", "devices[0].battery.min_level"),  # written as %
        ("devices[0].battery={capacity: 10kJ, min_level: 250}", "devices[0].battery.min_level"),  # no percentage
        ("server.round.over_commit=20000%", "server.round.over_commit"),  # a bound other than 1
    ],
)
def test_no_suggestion_where_the_number_is_not_a_percentage_number(tmp_path: Path, override: str, path: str) -> None:
    problems = _problems(tmp_path, override)
    assert problems[path].startswith("must be <=") and "write" not in problems[path], problems


# ------------------------------------------------------------------ keys as the file spells them


def test_accepted_keys_are_listed_as_the_file_writes_them(tmp_path: Path) -> None:
    problems = _problems(tmp_path, "server={mode: async, async: {buffer: 2, bufer: 3}, asynch: 1}")
    assert problems["server.asynch"].startswith("unknown key; accepted: algorithm, ")
    assert ", async, " in problems["server.asynch"] and "async_" not in problems["server.asynch"]
    # below an aliased key, its own keys (the path was not followed through the alias before: no list at all)
    assert problems["server.async.bufer"] == "unknown key; accepted: buffer, local_steps, pause"


def test_field_keys_are_the_aliases() -> None:
    from netfl.config.schema import ServerSpec

    assert "async" in field_keys(ServerSpec) and "async_" not in field_keys(ServerSpec)


# ------------------------------------------------------------------ a study file for a topology, and the reverse


def test_a_study_file_given_to_simulate_or_validate_names_netfl_sweep(tmp_path: Path) -> None:
    study = ROOT / "examples" / "quickstart_study.yaml"
    for command in (["simulate", study, "--out", tmp_path / "out"], ["validate", study]):
        result = run(*command)
        assert_user_error(
            result,
            f"{study}: 1 problem(s)",
            f"this is a study file (it has base, set, cases, grid, "
            f"seeds), not a topology: run its cases with netfl sweep {study}",
        )
        assert len(result.stderr.strip().splitlines()) == 2  # the file, then the one message
    assert not (tmp_path / "out").exists()


def test_a_topology_given_to_sweep_names_netfl_simulate(tmp_path: Path) -> None:
    topology = _write(tmp_path)
    result = run("sweep", topology, "--out", tmp_path / "out")
    assert_user_error(
        result,
        f"this is a topology (it has devices, seed, stop, task), not a study file: run it "
        f"with netfl simulate {topology}; a study file names it as its base (base: tiny.yaml)",
    )
    assert len(result.stderr.strip().splitlines()) == 2
    assert not (tmp_path / "out").exists()


def test_a_file_with_a_stray_key_of_the_other_kind_gets_the_field_by_field_message(tmp_path: Path) -> None:
    topology = _write(tmp_path, {"seeds": 3})  # a topology with one study key: still a topology
    assert_user_error(run("validate", topology), "seeds: unknown key; accepted: name, seed")
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump({"base": "tiny.yaml", "seeds": 2, "seed": 4}))  # a study with a topology key
    assert_user_error(run("sweep", study, "--dry-run"), "seed: unknown key; accepted: name, base")


def test_the_study_keys_are_those_of_the_study_schema() -> None:
    from netfl.config.schema import Scenario
    from netfl.study.spec import StudyFile

    assert STUDY_KEYS == set(StudyFile.model_fields) - set(field_keys(Scenario))
    assert not STUDY_KEYS & topology_keys() and {"devices", "task", "tasks", "stop"} <= topology_keys()


# ------------------------------------------------------------------ a missing file of the user's


def test_a_missing_model_file_names_the_topology_and_the_field(tmp_path: Path) -> None:
    topology = _write(tmp_path, {"task": {**yaml.safe_load(TINY)["task"], "model": {"path": "models/net.py:Net"}}})
    expected = (
        f"{topology}: 1 problem(s)",
        f"task.model.path: models/net.py:Net: file not found: "
        f"{tmp_path / 'models' / 'net.py'} (a relative path starts at the topology file's folder)",
    )
    assert_user_error(run("validate", topology), *expected)
    assert_user_error(run("simulate", topology, "--out", tmp_path / "out", "-q"), *expected)
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump({"base": "tiny.yaml", "cases": {"a": {"seed": 2}}}))
    assert_user_error(run("sweep", study, "--dry-run"), "task.model.path: models/net.py:Net: file not found")
