"""The report's numbers: runs, one row per run, one row per case (mean and spread over seeds).

Conventions, stated once so every table and plot agrees:

- a target is reached at the first evaluation whose test accuracy is >= the
  target; its time, round and energy are that row's (energy from
  metrics.csv's cumulative ``energy_j``, all the devices drew, and
  ``work_energy_j``, what training and the radio drew; NaN when the run has
  no such column) -- or, when the report interpolates, the straight line
  between the evaluation before and that one, where accuracy crosses the
  target; either way ``*_gap`` is how much the value grew since the
  evaluation before (the bracket the true crossing lies in);
- a case's "to target" means and stds are over the seeds that reached it
  (``reached_<t>`` counts them);
- a mean is NaN when one of its seeds lacks the number (say, energy in a run
  without the column): no mean covers a subset of the seeds silently;
- std is the sample standard deviation (ddof=1), NaN for one seed: one
  value says nothing about the spread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from netfl.results.read_back import OUTCOME_NUMBERS, SUMMARY_NUMBERS
from netfl.results.report_load import Run

#: Per-run numbers averaged per case: summary.json's, plus updates_sent (devices.parquet's updates_delivered summed).
CASE_NUMBERS = (
    *OUTCOME_NUMBERS,
    "updates_sent",
    "updates_received",
    "updates_dropped",
    "updates_applied",
    "bytes_up",
    "bytes_down",
)


def target_label(target: float) -> str:
    return f"{target:g}"


#: run_summary's columns for reaching a target: ``<stem>_to_<t><unit>`` (and ``<stem>_to_<t>_gap<unit>``).
TO_TARGET = {
    "time": ("time", "_s"),
    "round": ("rounds", ""),
    "energy": ("energy", "_j"),
    "work_energy": ("work_energy", "_j"),
}
#: What reaching a target is measured in: run_summary's column stem and metrics.csv's column.
REACH = {"time": "sim_time_s", "round": "round", "energy": "energy_j", "work_energy": "work_energy_j"}


def reach(metrics: pd.DataFrame, target: float, interpolate: bool = False) -> dict[str, float]:
    """Simulated time, round and cumulative energies at the first evaluation with accuracy >= ``target`` (NaN if
    never), or where the line from the evaluation before crosses it (``interpolate``); and, as ``<key>_gap``, how
    much each grew since the evaluation before (0 when the first evaluation already reached it)."""
    accuracy = metrics["test_accuracy"].to_numpy()
    hits = np.flatnonzero(accuracy >= target)
    if not len(hits):
        return {k: math.nan for key in REACH for k in (key, f"{key}_gap")}
    i = int(hits[0])
    before = max(i - 1, 0)
    share = (target - accuracy[before]) / (accuracy[i] - accuracy[before]) if interpolate and i > 0 else 1.0
    out = {}
    for key, column in REACH.items():
        if column not in metrics.columns:
            out[key] = out[f"{key}_gap"] = math.nan
            continue
        start, end = float(metrics[column].iloc[before]), float(metrics[column].iloc[i])
        out[key] = start + share * (end - start) if share < 1.0 else end
        out[f"{key}_gap"] = end - start
    return out


def runs_table(runs: Sequence[Run]) -> pd.DataFrame:
    """Tidy: one row per run and evaluation."""
    columns = ["sim_time_s", "round", "test_accuracy", "test_loss", "participants", "energy_j", "work_energy_j"]
    present = [c for c in columns if any(c in r.metrics.columns for r in runs)]
    frames = []
    for run in runs:
        frame = run.metrics.reindex(columns=present).astype(float)
        frame.insert(0, "complete", run.complete)
        frame.insert(0, "run", str(run.path))
        frame.insert(0, "seed", run.seed)
        frame.insert(0, "case", run.case)
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    return table.astype({"round": "int64"}) if table["round"].notna().all() else table


def run_summary(runs: Sequence[Run], targets: Sequence[float], interpolate: bool = False) -> pd.DataFrame:
    """One row per run: summary.json's numbers and, for every target, whether, when, at which round and energy
    (``interpolate``: between evaluations), with the evaluation brackets (``*_gap``)."""
    rows = []
    for run in runs:
        s = run.summary
        row = {
            "case": run.case,
            "seed": run.seed,
            "run": str(run.path),
            "complete": run.complete,
            "scenario": s.get("scenario"),
            "algorithm": s.get("algorithm"),
            "overrides": ", ".join(f"{k}={v}" for k, v in run.overrides.items()),
            "energy_recorded": "energy_j" in run.metrics.columns,
        }
        row |= {key: float(s[key]) if s.get(key) is not None else math.nan for key in SUMMARY_NUMBERS}
        devices = run.devices
        row["updates_sent"] = (
            float(devices["updates_delivered"].sum())
            if devices is not None and "updates_delivered" in devices.columns
            else math.nan
        )
        for target in targets:
            t, hit = target_label(target), reach(run.metrics, target, interpolate)
            row[f"reached_{t}"] = not math.isnan(hit["time"])
            for key, (stem, unit) in TO_TARGET.items():
                row[f"{stem}_to_{t}{unit}"] = hit[key]
            for key, (stem, unit) in TO_TARGET.items():
                row[f"{stem}_to_{t}_gap{unit}"] = hit[f"{key}_gap"]
        rows.append(row)
    return pd.DataFrame(rows)


def cases_table(summary: pd.DataFrame, targets: Sequence[float]) -> pd.DataFrame:
    """One row per case (in order of first appearance): seeds, mean and std of each number, targets reached."""
    rows = []
    for case, group in summary.groupby("case", sort=False):
        row = {
            "case": case,
            "seeds": len(group),
            "incomplete": int((~group["complete"]).sum()),
            "overrides": group["overrides"].iloc[0],
        }
        for key in CASE_NUMBERS:
            row |= _mean_std(key, group[key])
        for target in targets:
            t = target_label(target)
            reached = group[group[f"reached_{t}"]]
            row[f"reached_{t}"] = len(reached)
            row |= _mean_std(f"time_to_{t}_s", reached[f"time_to_{t}_s"])
            row |= _mean_std(f"rounds_to_{t}", reached[f"rounds_to_{t}"])
            row |= _mean_std(f"energy_to_{t}_j", reached[f"energy_to_{t}_j"])
            row |= _mean_std(f"work_energy_to_{t}_j", reached[f"work_energy_to_{t}_j"])
        rows.append(row)
    return pd.DataFrame(rows)


def _mean_std(name: str, values: pd.Series) -> dict[str, float]:
    values = values.astype(float)
    if values.isna().any():  # one seed lacking the number: no mean over the others
        return {f"{name}_mean": math.nan, f"{name}_std": math.nan}
    return {
        f"{name}_mean": float(values.mean()) if len(values) else math.nan,
        f"{name}_std": float(values.std(ddof=1)) if len(values) > 1 else math.nan,
    }


def mean_curve(curves: Sequence[tuple[np.ndarray, np.ndarray]], *, since: bool = False) -> tuple[np.ndarray, ...]:
    """Mean, min and max over seeds of step-wise curves (each value holds until the next evaluation; ``since``:
    each value counts what happened since the previous one, so it holds back to it -- draw it ``steps-pre``).

    The grid is the union of the seeds' evaluation times where every seed has a value: from the latest
    first evaluation to the earliest last one (after a run ends there is nothing to average).
    """
    curves = [(np.asarray(t, float), np.asarray(v, float)) for t, v in curves if len(t)]
    if not curves:
        return (np.array([]),) * 4
    start, end = max(t[0] for t, _ in curves), min(t[-1] for t, _ in curves)
    grid = np.unique(np.concatenate([t for t, _ in curves]))
    grid = grid[(grid >= start) & (grid <= end)]
    # at each grid time, a seed's value is its first reading at or after it (since), or its last at or before it
    stacked = np.array(
        [
            v[np.searchsorted(t, grid, side="left") if since else np.searchsorted(t, grid, side="right") - 1]
            for t, v in curves
        ]
    )
    return grid, stacked.mean(axis=0), stacked.min(axis=0), stacked.max(axis=0)
