"""metrics.csv (one row per evaluation) and staleness.csv (asynchronous runs: how old the applied updates were)."""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

METRIC_COLUMNS = ("sim_time_s", "round", "test_accuracy", "test_loss", "participants", "energy_j", "work_energy_j")


def metrics_columns(
    rows: Sequence[Any], num_classes: Sequence[int], class_names: Sequence[Sequence[str] | None] = ()
) -> dict[str, list]:
    """One column per metric, one value per evaluation. One task: ``class_<k>_accuracy`` columns; several
    (``num_classes`` per task): ``test_accuracy``/``test_loss`` are their means, then ``task<s>_accuracy``,
    ``task<s>_loss`` and ``task<s>_class_<k>_accuracy`` for each. Where a task's data names its classes
    (``class_names``: LEAF's characters) a column carries the name instead of k (:func:`class_label`:
    ``class_'e'_accuracy``, ``class_' '_accuracy``, ``class_'\\n'_accuracy``)."""
    columns: dict[str, list] = {name: [getattr(row, name) for row in rows] for name in METRIC_COLUMNS}

    def add(prefix: str, per_class: Sequence[Sequence[float]], classes: int, names: Sequence[str] | None) -> None:
        labels = [class_label(n) for n in names] if names is not None and len(names) == classes else None
        for k in range(classes):
            name = labels[k] if labels is not None else k
            columns[f"{prefix}class_{name}_accuracy"] = [list(p)[k] if k < len(p) else math.nan for p in per_class]

    names = list(class_names) + [None] * (len(num_classes) - len(class_names))
    if len(num_classes) == 1:
        add("", [row.per_class_accuracy for row in rows], num_classes[0], names[0])
    else:
        for s, classes in enumerate(num_classes):
            columns[f"task{s}_accuracy"] = [row.tasks[s].accuracy for row in rows]
            columns[f"task{s}_loss"] = [row.tasks[s].loss for row in rows]
            add(f"task{s}_", [row.tasks[s].per_class_accuracy for row in rows], classes, names[s])
    return columns


def write_metrics(
    path: Path, rows: Sequence[Any], num_classes: Sequence[int], class_names: Sequence[Sequence[str] | None] = ()
) -> None:
    """metrics.csv: :func:`metrics_columns`, floats with 6 decimals."""
    columns = metrics_columns(rows, num_classes, class_names)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        counts = [name in ("round", "participants") for name in columns]
        for values in zip(*columns.values()):
            writer.writerow([int(v) if count else f"{float(v):.6f}" for v, count in zip(values, counts)])


def class_label(name: str) -> str:
    """How a column names a class the data names: in single quotes, with JSON's escapes (``'e'``, ``' '``,
    ``'\\n'``, ``'0'``), so that it is never read as a class number."""
    return "'" + json.dumps(name, ensure_ascii=False)[1:-1] + "'"


def write_staleness(path: Path, staleness: Sequence[int]) -> None:
    counts = Counter(staleness)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["staleness", "updates"])
        for value in range(max(staleness) + 1):
            writer.writerow([value, counts.get(value, 0)])
