"""Experiment tracking: a run logged to TensorBoard and MLflow, read back from their files equal to metrics.csv
(TensorBoard's scalars: its values as float32; MLflow's: exactly).

TensorBoard's event files are read with TensorBoard's own reader (EventAccumulator), MLflow's store with
MLflow's client: what a user would see is what netfl wrote. Skipped where the tracking extra is not installed.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from cli_support import TINY, assert_user_error, run

from netfl.results.tracking import Tracking, flatten, mlflow_uri, tracking_of
from netfl.study import load_study, run_sweep
from netfl.study.execute import run_plan

TRACKED = (
    TINY.replace("stop: {rounds: 2}", "stop: {rounds: 3}") + "tracking: {tensorboard: tb, mlflow: sqlite:///ml.db}\n"
)

STUDY = """\
name: pair
base: tiny.yaml
cases:
  fedavg: {server.algorithm.name: fedavg}
  fedau: {server.algorithm: {name: fedau}}
seeds: [4]
"""


def _metrics_csv(folder: Path) -> dict[str, list[float]]:
    with (folder / "metrics.csv").open(newline="") as f:
        rows = list(csv.reader(f))
    return {name: [float(row[i]) for row in rows[1:]] for i, name in enumerate(rows[0])}


def _same(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b))


def _tensorboard(logdir: Path):
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    events = accumulator.EventAccumulator(str(logdir), size_guidance={accumulator.SCALARS: 0, accumulator.IMAGES: 0})
    events.Reload()
    return events


def _tensor_series(events, tag: str) -> tuple[list[int], list[float], list[float]]:
    found = events.Scalars(tag)
    return [e.step for e in found], [e.value for e in found], [e.wall_time for e in found]


def _float32(values: list[float]) -> list[float]:
    """What TensorBoard holds of a value: its float32 rounding."""
    return [float(np.float32(v)) for v in values]


def test_a_run_is_logged_to_tensorboard_with_the_values_of_metrics_csv(tmp_path: Path, monkeypatch):
    pytest.importorskip("tensorboardX")
    (tmp_path / "world").mkdir()
    topology = tmp_path / "world" / "tiny.yaml"
    topology.write_text(TINY.replace("stop: {rounds: 2}", "stop: {rounds: 3}") + "tracking: {tensorboard: tb}\n")
    monkeypatch.chdir(tmp_path)
    result = run("simulate", topology, "--out", "run", "-q")
    assert result.exit_code == 0, result.output
    logdir = tmp_path / "world" / "tb" / "run"  # relative to the topology file; a subfolder named like the run
    events = _tensorboard(logdir)
    expected = _metrics_csv(tmp_path / "run")
    assert len(expected["round"]) == 4  # round 0 and three rounds
    for name in ("test_accuracy", "test_loss", "participants", "energy_j", "work_energy_j", "class_0_accuracy"):
        steps, values, walls = _tensor_series(events, f"by_round/{name}")
        assert steps == [int(r) for r in expected["round"]]
        assert _same(values, _float32(expected[name])), name  # the file's values, as float32 (TensorBoard's scalars)
        assert walls == expected["sim_time_s"]  # TensorBoard's Relative axis reads simulated time
        steps, values, _ = _tensor_series(events, f"by_sim_time/{name}")
        assert steps == [round(t) for t in expected["sim_time_s"]]
        assert _same(values, _float32(expected[name])), name
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    _, energy, _ = _tensor_series(events, "summary/energy_j")
    assert energy == _float32([summary["energy_j"]])
    _, participated, _ = _tensor_series(events, "summary/devices_participated")
    assert participated[0] >= 1
    images = events.Images("figures/accuracy_vs_time")
    assert images[0].encoded_image_string == (tmp_path / "run" / "accuracy_vs_time.png").read_bytes()
    assert "scenario/text_summary" in events.Tags()["tensors"]
    assert "_hparams_/session_start_info" in events.summary_metadata
    assert "tracking" not in (tmp_path / "run" / "scenario.yaml").read_text()  # not part of the world

    # the same run written again replaces its event files (one curve, not two)
    result = run("simulate", topology, "--out", "run", "--overwrite", "-q")
    assert result.exit_code == 0, result.output
    assert len(list(logdir.glob("events.out.tfevents.*"))) == 1


def test_a_run_is_logged_to_mlflow_with_the_values_of_metrics_csv(tmp_path: Path, monkeypatch):
    pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    from mlflow.tracking import MlflowClient

    topology = tmp_path / "tiny.yaml"
    topology.write_text(TRACKED.replace("tensorboard: tb, ", ""))
    monkeypatch.chdir(tmp_path)
    result = run("simulate", topology, "--out", "run", "-q")
    assert result.exit_code == 0, result.output
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'ml.db'}")
    experiment = client.get_experiment_by_name("tiny")
    (logged,) = client.search_runs([experiment.experiment_id])
    assert logged.info.run_name == "run" and logged.info.status == "FINISHED"
    expected = _metrics_csv(tmp_path / "run")
    for name in ("sim_time_s", "test_accuracy", "test_loss", "participants", "energy_j", "work_energy_j"):
        history = client.get_metric_history(logged.info.run_id, name)
        assert [m.step for m in history] == [int(r) for r in expected["round"]]
        assert _same([m.value for m in history], expected[name]), name
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    data = logged.data
    assert data.metrics["summary/energy_j"] == summary["energy_j"]
    assert data.metrics["summary/updates_applied"] == summary["updates_applied"]
    assert data.params["devices.0.count"] == "4" and data.params["tasks.0.model.name"] == "logistic"
    artifacts = {a.path for a in client.list_artifacts(logged.info.run_id, "figures")}
    assert artifacts == {"figures/accuracy_vs_time.png", "figures/timeline.png"}
    assert (tmp_path / "ml-artifacts" / "tiny").is_dir()  # beside the database, not in ./mlruns
    assert not (tmp_path / "mlruns").exists()


def test_the_command_line_names_the_trackers_and_a_folder_is_mlflows_file_store(tmp_path: Path, monkeypatch):
    pytest.importorskip("mlflow")
    pytest.importorskip("tensorboardX")
    from mlflow.tracking import MlflowClient

    (tmp_path / "tiny.yaml").write_text(TRACKED)  # the options replace the topology's targets
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)  # restored after the test
    result = run("simulate", "tiny.yaml", "--out", "run", "--tensorboard", "boards", "--mlflow", "store", "-q")
    assert result.exit_code == 0, result.output
    assert list((tmp_path / "boards" / "run").glob("events.out.tfevents.*"))
    assert not (tmp_path / "tb").exists() and not (tmp_path / "ml.db").exists()
    (logged,) = MlflowClient(tracking_uri=(tmp_path / "store").as_uri()).search_runs(
        [MlflowClient(tracking_uri=(tmp_path / "store").as_uri()).get_experiment_by_name("tiny").experiment_id]
    )
    assert logged.data.metrics["test_accuracy"] == _metrics_csv(tmp_path / "run")["test_accuracy"][-1]


def test_a_sweep_logs_each_run_under_its_case_and_seed(tmp_path: Path):
    pytest.importorskip("mlflow")
    pytest.importorskip("tensorboardX")
    from mlflow.tracking import MlflowClient

    (tmp_path / "tiny.yaml").write_text(TINY)
    (tmp_path / "pair.yaml").write_text(STUDY)
    study = load_study(tmp_path / "pair.yaml", out=tmp_path / "study")
    tracking = Tracking(tmp_path / "tb", f"sqlite:///{tmp_path / 'ml.db'}")
    outcome = run_sweep(study, InProcess(), tracking={plan.folder: tracking for plan in study.runs})
    assert [r["status"] for r in outcome.records.values()] == ["complete", "complete"]
    client = MlflowClient(tracking_uri=tracking.mlflow)
    runs = client.search_runs([client.get_experiment_by_name("pair").experiment_id])
    assert sorted((r.info.run_name, r.data.tags["case"], r.data.tags["seed"], r.data.tags["study"]) for r in runs) == [
        ("fedau seed 4", "fedau", "4", "pair"),
        ("fedavg seed 4", "fedavg", "4", "pair"),
    ]
    for logged in runs:
        folder = tmp_path / "study" / "runs" / logged.data.tags["case"] / "seed4"
        assert logged.data.tags["run_folder"] == str(folder)
        history = client.get_metric_history(logged.info.run_id, "test_accuracy")
        assert _same([m.value for m in history], _metrics_csv(folder)["test_accuracy"])
        events = _tensorboard(tmp_path / "tb" / logged.data.tags["case"] / "seed4")
        assert _same(_tensor_series(events, "by_round/test_loss")[1], _float32(_metrics_csv(folder)["test_loss"]))

    again = run_sweep(study, InProcess(), tracking={plan.folder: tracking for plan in study.runs})
    assert {r["status"] for r in again.records.values()} == {"skipped"}  # done runs are not logged again
    assert len(client.search_runs([client.get_experiment_by_name("pair").experiment_id])) == 2


class InProcess:
    """A sweep runner that runs each run here, one after another (the driver's side of a sweep is under test)."""

    def describe(self) -> str:
        return "in process"

    def run(self, runs, on_done, tick, on_start=None):
        for plan, folder in runs:
            on_done(plan, run_plan(plan, folder, threads=1))


@pytest.mark.slow
def test_netfl_sweep_takes_the_tracking_options(tmp_path: Path, monkeypatch):
    pytest.importorskip("tensorboardX")
    (tmp_path / "tiny.yaml").write_text(TINY)
    (tmp_path / "pair.yaml").write_text(STUDY)
    monkeypatch.chdir(tmp_path)
    result = run("sweep", "pair.yaml", "--out", "study", "--jobs", "1", "--tensorboard", "tb", "-q")
    assert result.exit_code == 0, result.output
    for case in ("fedavg", "fedau"):
        assert len(list((tmp_path / "tb" / case / "seed4").glob("events.out.tfevents.*"))) == 1


def test_a_missing_tracker_is_one_message_naming_the_extra_before_the_run(tmp_path: Path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else real(name, *a))
    (tmp_path / "tiny.yaml").write_text(TINY)
    monkeypatch.chdir(tmp_path)
    result = run("simulate", "tiny.yaml", "--out", "run", "--mlflow", "sqlite:///ml.db")
    assert_user_error(result, "tiny.yaml: logging to MLflow sqlite:///", "needs mlflow-skinny", "[tracking]'")
    assert not (tmp_path / "run").exists()  # refused before the run
    (tmp_path / "tracked.yaml").write_text(TRACKED)
    assert_user_error(run("validate", "tracked.yaml"), "tracked.yaml: logging to", "pip install")
    (tmp_path / "pair.yaml").write_text(STUDY)
    assert_user_error(run("sweep", "pair.yaml", "--out", "study", "--mlflow", "ml"), "pair.yaml: logging to")
    assert not (tmp_path / "study").exists()


def test_a_tracking_uri_netfl_cannot_log_to_names_the_field(tmp_path: Path):
    (tmp_path / "tiny.yaml").write_text(TINY + "tracking: {mlflow: 'ftp://host/x', board: tb}\n")
    assert_user_error(run("validate", tmp_path / "tiny.yaml"), "tracking.mlflow", "sqlite:", "tracking.board")
    (tmp_path / "ok.yaml").write_text(TINY)
    assert_user_error(run("simulate", tmp_path / "ok.yaml", "--mlflow", "ftp://host/x"), "--mlflow ftp://host/x")


def test_targets_are_resolved_from_the_topology_file_and_the_command_line_from_here(tmp_path: Path, monkeypatch):
    from netfl.config import load_scenario

    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "t.yaml").write_text(TRACKED)
    monkeypatch.chdir(tmp_path)
    scenario = load_scenario("w/t.yaml")
    assert tracking_of(scenario) == Tracking(tmp_path / "w" / "tb", f"sqlite:///{tmp_path / 'w' / 'ml.db'}")
    assert tracking_of(scenario, tensorboard="x", mlflow="m") == Tracking(tmp_path / "x", (tmp_path / "m").as_uri())
    assert mlflow_uri("sqlite:////abs/ml.db", tmp_path) == "sqlite:////abs/ml.db"
    assert mlflow_uri("http://127.0.0.1:5000", tmp_path) == "http://127.0.0.1:5000"
    assert not Tracking() and not tracking_of(load_scenario(_write(tmp_path / "plain.yaml", TINY)))


def test_a_scenario_flattens_to_tracker_params():
    assert flatten({"a": {"b": 1, "c": [{"d": "x"}, 2.5]}, "e": None, "f": [], "g": True}) == {
        "a.b": 1,
        "a.c[0].d": "x",
        "a.c[1]": 2.5,
        "e": "null",
        "f": "[]",
        "g": True,
    }


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_resumed_run_is_logged_where_the_interrupted_one_was_to_be(tmp_path: Path):
    pytest.importorskip("tensorboardX")
    from netfl.checkpoint import Checkpoint, Every, checkpoint_path
    from netfl.config import load_scenario
    from netfl.runner import run_scenario
    from netfl.signals import Interrupted

    class StopAt:  # a progress bar that presses Ctrl-C at round 2
        def update(self, sim_time_s, rounds, accuracy):
            if rounds >= 2:
                raise KeyboardInterrupt

        def close(self):
            pass

    scenario = load_scenario(_write(tmp_path / "tiny.yaml", TINY.replace("{rounds: 2}", "{rounds: 4}")))
    tracking = Tracking(tmp_path / "tb")
    with pytest.raises(Interrupted):
        run_scenario(scenario, out_dir=tmp_path / "run", checkpoint_every=Every(rounds=1), progress=StopAt(),
                     tracking=tracking)  # fmt: skip
    assert not (tmp_path / "tb").exists()  # an interrupted run is not logged
    run_scenario(scenario, out_dir=tmp_path / "run", resume=Checkpoint.load(checkpoint_path(tmp_path / "run")))
    steps, values, _ = _tensor_series(_tensorboard(tmp_path / "tb" / "run"), "by_round/test_accuracy")
    assert steps == [0, 1, 2, 3, 4] and _same(values, _float32(_metrics_csv(tmp_path / "run")["test_accuracy"]))
