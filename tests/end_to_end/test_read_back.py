"""Every file netfl reads back, damaged field by field: one message naming the file and the field (worded as a
topology's errors), exit code 2, never a traceback -- for rerun (summary.json, scenario.yaml), resume (the
checkpoint), report (sweep.json; summary.json and metrics.csv in test_report.py) and sweep (is a run done?)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_support import TINY, assert_user_error, run

from netfl.backend import Evaluation
from netfl.checkpoint import Every, checkpoint_path
from netfl.config import load_scenario
from netfl.results.read_back import STUDY_MARKER
from netfl.runner import run_scenario
from netfl.signals import Interrupted
from netfl.study import load_study
from netfl.study.sweep import is_done


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder, and beside it the checkpoint of the same run interrupted after round 3 (one per round)."""
    here = tmp_path_factory.mktemp("made")
    (here / "tiny.yaml").write_text(TINY)
    scenario = load_scenario(here / "tiny.yaml", overrides=["stop.rounds=6"])
    run_scenario(scenario, out_dir=here / "run", threads=1)

    class StopAt3:
        def update(self, sim_time_s: float, rounds: int, accuracy: float | None) -> None:
            if rounds >= 3:
                raise KeyboardInterrupt

        def close(self) -> None:
            pass

    with pytest.raises(Interrupted):
        run_scenario(scenario, out_dir=here / "cut", threads=1, checkpoint_every=Every(rounds=1), progress=StopAt3())
    return here


def copy_of(made: Path, tmp_path: Path) -> Path:
    shutil.copy(made / "tiny.yaml", tmp_path / "tiny.yaml")
    shutil.copytree(made / "run", tmp_path / "run")
    shutil.copytree(made / "cut", tmp_path / "cut")
    shutil.copy(checkpoint_path(made / "cut"), checkpoint_path(tmp_path / "cut"))
    return tmp_path


@pytest.mark.parametrize(
    "change, field, words",
    [
        (lambda s: [1, 2], "", "not a JSON object (found a list)"),
        (lambda s: {**s, "topology": 3}, "topology", "3 is not the path of a topology file"),
        (lambda s: {**s, "versions": ["2.13"]}, "versions", "must map each package to its version"),
        (lambda s: {**s, "versions": {"torch": 2.13}}, "versions", "must map each package to its version"),
        (lambda s: {**s, "rounds": "many"}, "rounds", "'many' is not a number"),
        (lambda s: {**s, "sim_time_s": True}, "sim_time_s", "True is not a number"),
        (lambda s: {**s, "complete": "yes"}, "complete", "'yes' is not true or false"),
        (lambda s: {**s, "seed": "7"}, "seed", "'7' is not an integer"),
        (lambda s: {**s, "study": "fedavg"}, "study", "must be an object with case, seed and overrides"),
        (lambda s: {**s, "study": {"case": "", "seed": 1}}, "study.case", "'' is not a case name"),
        (lambda s: {**s, "study": {"case": "a", "seed": True}}, "study.seed", "True is not an integer"),
        (lambda s: {**s, "study": {"case": "a", "seed": 1, "overrides": []}}, "study.overrides", "must be an object"),
        (lambda s: {**s, "staleness": {"histogram": {"old": 1}}}, "staleness.histogram", "must map staleness"),
    ],
)
def test_a_summary_damaged_field_by_field(made: Path, tmp_path: Path, change: Any, field: str, words: str) -> None:
    folder = copy_of(made, tmp_path) / "run"
    summary = json.loads((folder / "summary.json").read_text())
    (folder / "summary.json").write_text(json.dumps(change(summary)))
    result = run("rerun", folder, "-q")
    assert_user_error(result, f"{folder / 'summary.json'}: 1 problem(s)\n  {field + ': ' if field else ''}{words}")
    assert not (tmp_path / "run-rerun").exists()


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"rounds": 3,', "not valid JSON"),
        (b"\xff\xfe".decode("latin-1"), "not valid JSON"),
        ("[" * 100_000 + "]" * 100_000, "not valid JSON"),
    ],
)
def test_a_summary_that_is_not_json(made: Path, tmp_path: Path, text: str, expected: str) -> None:
    folder = copy_of(made, tmp_path) / "run"
    (folder / "summary.json").write_text(text)
    assert_user_error(run("rerun", folder, "-q"), f"{folder / 'summary.json'}: 1 problem(s)", expected)


@pytest.mark.parametrize(
    "text, words",
    [
        ("[1, 2]\n", "expected a mapping of keys"),
        (TINY.replace("stop: {rounds: 2}", "stop: {rounds: -1}"), "stop.rounds: "),
        (TINY + "colour: blue\n", "colour: unknown key"),
        ("stop: {rounds: [\n", "malformed YAML"),
    ],
)
def test_a_scenario_yaml_damaged_is_named_as_itself(made: Path, tmp_path: Path, text: str, words: str) -> None:
    """Not after the topology it was read from once: that file is fine, this one is not."""
    folder = copy_of(made, tmp_path) / "run"
    (folder / "scenario.yaml").write_text(text)
    result = run("rerun", folder, "-q")
    assert_user_error(result, f"{folder / 'scenario.yaml'}: ", words)
    assert "tiny.yaml" not in result.stderr


def test_events_that_cannot_be_read_are_a_difference_not_a_traceback(made: Path, tmp_path: Path) -> None:
    folder = copy_of(made, tmp_path) / "run"
    (folder / "events.parquet").unlink()
    (folder / "events.parquet").mkdir()  # not even a file
    (folder / "metrics.csv").write_text("garbage")
    result = run("rerun", folder, "-q")
    assert result.exit_code == 1, result.output
    assert "DIFFERENT: events.parquet, metrics.csv; identical: devices.parquet" in result.stdout


def edit_checkpoint(folder: Path, change: Any) -> Path:
    path = checkpoint_path(folder)
    data = torch.load(path, weights_only=False)
    change(data)
    torch.save(data, path)
    return path


def some_answer(name: str) -> Any:
    return lambda data: data["log"].__setitem__(
        next(i for i, (asked, _) in enumerate(data["log"]) if asked == name),
        (name, {"aggregate": "3", "evaluate": Evaluation(0.5, "low"), "plan_round": [1, 2]}[name]),
    )


@pytest.mark.parametrize(
    "change, field, words",
    [
        (lambda d: d.update(scenario=[]), "scenario", "must be a topology mapping, got list []"),
        (lambda d: d.update(scenario={}), "scenario.stop", "required key is missing"),
        (lambda d: d["scenario"]["stop"].update(rounds=0), "scenario.stop.rounds", "must be > 0 (got 0)"),
        (lambda d: d.update(source=3), "source", "must be the topology's path, or null, got int 3"),
        (lambda d: d.update(options=None), "options", "must be a mapping"),
        (lambda d: d["options"].update(data_dir=5), "options.data_dir", "must be a folder's path or null"),
        (lambda d: d.update(every={"rounds": 0, "seconds": None}), "every", "one of them > 0"),
        (lambda d: d.update(log={}), "log", "must be a list"),
        (lambda d: d["log"].append(("train", None)), "log[", "must be (question, answer)"),
        (lambda d: d["log"].append((["evaluate"], None)), "log[", "must be (question, answer)"),  # unhashable
        (some_answer("aggregate"), "log[", "the answer to aggregate must be a count of applied updates"),
        (some_answer("evaluate"), "log[", "the answer to evaluate must be an Evaluation"),
        (lambda d: d["log"].append(("cancel", 1)), "log[", "the answer to cancel must be None, got int 1"),
        (some_answer("plan_round"), "log[", "the answer to plan_round must be a RoundPlan, got list [1, 2]"),
        (lambda d: d.update(state=[]), "state", "must be the learner's state (a mapping)"),
        (lambda d: d.update(state={}), "state", "does not fit this run's learner"),
        (lambda d: d.update(rounds=-1), "rounds", "must be an integer >= 0, got int -1"),
        (lambda d: d.update(sim_time_s=float("nan")), "sim_time_s", "must be a time >= 0"),
        (lambda d: d.update(versions="2.13"), "versions", "must be a mapping"),
        (lambda d: d.update(extra=1), "extra", "not a field of a netfl checkpoint"),
        (lambda d: d.pop("log"), "log", "missing"),
    ],
)
def test_a_checkpoint_edited_field_by_field(made: Path, tmp_path: Path, change: Any, field: str, words: str) -> None:
    folder = copy_of(made, tmp_path) / "cut"
    path = edit_checkpoint(folder, change)
    result = run("resume", folder, "-q")
    assert_user_error(result, f"{path}: ", f"\n  {field}", words)
    assert json.loads((folder / "summary.json").read_text())["complete"] is False  # the partial run, untouched


@pytest.mark.parametrize(
    "status, field, words",
    [
        ({"study": "s", "runs": {}}, "runs", "must be a list of runs"),
        ({"study": 5, "runs": []}, "study", "5 is not a study's name"),
        ({"study": "s", "runs": [3]}, "runs[0]", "must be an object with case, seed, folder and status"),
        (
            {"study": "s", "runs": [{"case": "a", "seed": 1, "folder": "../../etc", "status": "complete"}]},
            "runs[0].folder",
            "'../../etc' is not a folder inside the study folder",
        ),  # noqa: E501
        (
            {"study": "s", "runs": [{"case": "a", "seed": 1, "folder": "/etc", "status": "complete"}]},
            "runs[0].folder",
            "'/etc' is not a folder inside",
        ),  # noqa: E501
        (
            {"study": "s", "runs": [{"case": "a", "seed": "1", "folder": "r", "status": "complete"}]},
            "runs[0].seed",
            "'1' is not an integer",
        ),  # noqa: E501
        (
            {"study": "s", "runs": [{"case": None, "seed": 1, "folder": "r", "status": "complete"}]},
            "runs[0].case",
            "None is not a case name",
        ),  # noqa: E501
        (
            {"study": "s", "runs": [{"case": "a", "seed": 1, "folder": "r", "status": "done"}]},
            "runs[0].status",
            "'done' is not one of pending",
        ),  # noqa: E501
    ],
)
def test_a_sweep_status_damaged_field_by_field(tmp_path: Path, status: dict, field: str, words: str) -> None:
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / STUDY_MARKER).write_text("a netfl study folder\n")
    (tmp_path / "study" / "sweep.json").write_text(json.dumps(status))
    result = run("report", tmp_path / "study")
    assert_user_error(result, f"{tmp_path / 'study' / 'sweep.json'}: 1 problem(s)\n  {field}: {words}")


def test_a_damaged_run_of_a_study_is_not_done_and_runs_again(tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(TINY)
    (tmp_path / "study.yaml").write_text("base: tiny.yaml\n")
    plan = load_study(tmp_path / "study.yaml", out=tmp_path / "out").runs[0]
    folder = tmp_path / "out" / plan.folder
    run_scenario(plan.scenario, out_dir=folder, threads=1, extra_summary={"study": plan.study_record()})
    assert is_done(plan, folder)
    summary = json.loads((folder / "summary.json").read_text())
    for damaged in ({**summary, "complete": "yes"}, {**summary, "study": "x"}, [summary]):
        (folder / "summary.json").write_text(json.dumps(damaged))
        assert not is_done(plan, folder)
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "scenario.yaml").write_text("a: &a [*a]\n")  # an alias inside itself
    assert not is_done(plan, folder)


@pytest.mark.parametrize(
    "file, change, words",
    [
        ("timeline.parquet", lambda t: t.iloc[:0], "no rows"),
        ("timeline.parquet", lambda t: t.assign(sim_time_s="noon"), "column sim_time_s: 'noon' is not a number"),
        ("timeline.parquet", lambda t: t.drop(columns="online"), "online: missing"),
        ("events.parquet", lambda e: e.drop(columns="kind"), "kind: missing"),
    ],
)
def test_a_run_s_tables_damaged_are_one_message_in_a_report(
    made: Path, tmp_path: Path, file: str, change: Any, words: str
) -> None:
    import pandas as pd

    folder = copy_of(made, tmp_path) / "run"
    change(pd.read_parquet(folder / file)).to_parquet(folder / file)
    result = run("report", folder, "--out", tmp_path / "report")
    assert_user_error(result, f"{folder / file}: ", words)


def test_two_studies_with_a_case_of_one_name_are_refused_not_mixed(made: Path, tmp_path: Path) -> None:
    folders = []
    for name in ("a", "b"):
        folder = tmp_path / name
        shutil.copytree(made / "run", folder)
        summary = json.loads((folder / "summary.json").read_text())
        summary["study"] = {"case": "fedavg", "seed": 1, "overrides": {}}
        (folder / "summary.json").write_text(json.dumps(summary))
        folders.append(folder)
    result = run("report", *folders, "--out", tmp_path / "report")
    assert_user_error(result, "are both case 'fedavg', seed 1", "report the studies separately")
