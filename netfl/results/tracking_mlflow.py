"""A run as an MLflow run (with mlflow-skinny, MLflow's client without its server and UI).

- the experiment: the scenario's name (a sweep's: the study's); the run's name and tags from its
  :class:`~netfl.results.tracking.Label` (a sweep's: ``study``, ``case``, ``seed``);
- metrics: every metrics.csv column with step = the round, simulated time as the metric ``sim_time_s``;
  the energy and participation summary as ``summary/<name>`` (step = the last round);
- params: the scenario flattened (``devices.0.battery.capacity``: MLflow's names take no brackets);
- artifacts: the figures under ``figures/``, and metrics.csv, summary.json and scenario.yaml under ``run/``.

A ``sqlite:`` store keeps its artifacts in ``<database>-artifacts/<experiment>/`` beside the database file (not
in ``./mlruns`` of whatever folder netfl ran from). A folder is MLflow's file store, which MLflow 3 keeps only
for those who opt in (``MLFLOW_ALLOW_FILE_STORE``): naming a folder is that opt-in.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from urllib.parse import unquote

from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from netfl.errors import NetflError
from netfl.results.tracking_record import Label, RunRecord

#: MLflow's limits on one log_batch call.
_BATCH_METRICS, _BATCH_PARAMS = 1000, 100
#: MLflow's longest param value (MLflow 2 takes 6000 characters; longer values are cut there).
#: A class column named by the data (netfl.results.metrics_file.class_label): prefix, JSON-escaped name, suffix.
_NAMED_CLASS = re.compile(r"^(.*class_)'(.*)'(_accuracy)$")
_PARAM_CHARS = 6000


def log_mlflow(record: RunRecord, uri: str, label: Label) -> None:
    try:
        with _quiet():
            _log(_client(uri), uri, record, label)
    except (MlflowException, OSError) as exc:
        raise NetflError(f"MLflow {uri}: cannot log {record.folder}: {exc}") from None


def _log(client: MlflowClient, uri: str, record: RunRecord, label: Label) -> None:
    experiment = client.get_experiment_by_name(label.experiment)
    experiment_id = (
        experiment.experiment_id
        if experiment is not None
        else client.create_experiment(label.experiment, artifact_location=_artifact_location(uri, label.experiment))
    )
    run = client.create_run(experiment_id, run_name=label.run_name, tags=dict(label.tags))
    run_id, now = run.info.run_id, int(time.time() * 1000)
    metrics = []
    for i, step in enumerate(record.rounds):
        metrics.append(Metric("sim_time_s", record.metrics["sim_time_s"][i], now, step))
        metrics += [Metric(_metric_name(name), record.metrics[name][i], now, step) for name in record.series]
    for step, _, values in record.algorithm:  # the strategy's own metrics, one point per aggregation
        metrics += [Metric(f"algorithm/{_metric_name(name)}", value, now, step) for name, value in values.items()]
    last = record.rounds[-1] if record.rounds else 0
    metrics += [Metric(f"summary/{name}", value, now, last) for name, value in record.summary.items()]
    params = [Param(_param_name(k), str(v)[:_PARAM_CHARS]) for k, v in record.params.items()]
    for start in range(0, len(metrics), _BATCH_METRICS):
        client.log_batch(run_id, metrics=metrics[start : start + _BATCH_METRICS])
    for start in range(0, len(params), _BATCH_PARAMS):
        client.log_batch(run_id, params=params[start : start + _BATCH_PARAMS])
    client.log_batch(run_id, tags=[RunTag("stopped_by", str(record.stopped_by))])
    for figure in record.figures:
        client.log_artifact(run_id, str(figure), artifact_path="figures")
    for name in ("metrics.csv", "algorithm.csv", "summary.json", "scenario.yaml"):
        if (record.folder / name).is_file():
            client.log_artifact(run_id, str(record.folder / name), artifact_path="run")
    client.set_terminated(run_id, "FINISHED")


@cache
def _client(uri: str) -> MlflowClient:
    """One client per store for the whole process (a sweep logs every run through it; sqlite sets up its tables
    once)."""
    if uri.startswith("file:"):
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # a folder was asked for: MLflow 3's opt-in
    return MlflowClient(tracking_uri=uri)


def _artifact_location(uri: str, experiment: str) -> str | None:
    """Beside a sqlite database; elsewhere the store's own choice."""
    if not uri.startswith("sqlite:///"):
        return None
    database = Path(unquote(uri.removeprefix("sqlite:///").partition("?")[0]))  # made absolute by mlflow_uri
    return (database.parent / f"{database.stem}-artifacts" / experiment).as_uri()


def _metric_name(column: str) -> str:
    """A metrics.csv column as MLflow takes a metric's name (letters, digits, ``_ . - : /`` and spaces): a class
    named by its character (``class_'!'_accuracy``) becomes ``class_char_u0021_accuracy`` (``class_char_e_...``
    for a letter or digit)."""
    named = _NAMED_CLASS.match(column)
    if named is None:
        return column
    label = json.loads(f'"{named.group(2)}"')
    text = "".join(c if c.isascii() and c.isalnum() else f"u{ord(c):04x}" for c in label)
    return f"{named.group(1)}char_{text}{named.group(3)}"


def _param_name(key: str) -> str:
    return re.sub(r"\[(\d+)\]", r".\1", key)


@contextmanager
def _quiet():
    """MLflow and alembic announce at INFO level each database they set up; netfl's output stays netfl's."""
    loggers = [logging.getLogger(name) for name in ("mlflow", "alembic")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
