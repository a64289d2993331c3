"""Reading back what netfl wrote -- summary.json, sweep.json, metrics.csv, devices.parquet -- every field checked.

A results folder is data on a disk: a file can be cut short by a full disk, edited by hand, or not netfl's at
all. Whatever a reader finds is one :class:`~netfl.errors.FileError` naming the file and the field, worded as a
topology's errors are, never a traceback halfway through a report, a rerun or a sweep. Each reader checks the
fields any of netfl's readers uses and leaves the others alone (a newer netfl may add keys).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from netfl.errors import FileError
from netfl.numbers import is_integer, is_number

#: A run's outcome in summary.json: how far it got, and at what cost (the first of the numbers read back).
OUTCOME_NUMBERS = ("rounds", "sim_time_s", "final_test_accuracy", "best_test_accuracy", "energy_j", "work_energy_j")
#: summary.json numbers that are read back (a report tabulates them); a missing one (an older run) is NaN.
SUMMARY_NUMBERS = (*OUTCOME_NUMBERS, "updates_received", "updates_applied", "updates_dropped", "bytes_up", "bytes_down")
#: metrics.csv columns a reader needs, and those it uses when present (energy_j: cumulative joules, newer runs).
METRICS_REQUIRED = ("sim_time_s", "round", "test_accuracy")
METRICS_OPTIONAL = ("test_loss", "participants", "energy_j", "work_energy_j")
#: A run's status in sweep.json.
RUN_STATUSES = ("pending", "complete", "skipped", "failed", "interrupted")
#: In every study folder a sweep made or took over: netfl's own, where it may write sweep.json and runs/.
STUDY_MARKER = ".netfl-study"


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def read_json_object(file: Path) -> dict[str, Any]:
    """The JSON object in ``file``; FileError if it cannot be read, is not JSON, or not an object."""
    try:
        data = json.loads(Path(file).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileError(str(file), [("", "missing")]) from None
    except OSError as exc:
        raise FileError(str(file), [("", f"cannot read it: {exc.strerror or exc}")]) from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError; nesting beyond reason
        raise FileError(str(file), [("", f"not valid JSON ({first_line(exc)})")]) from None
    if not isinstance(data, dict):
        raise FileError(str(file), [("", f"not a JSON object (found a {_json_type(data)})")])
    return data


def _json_type(value: Any) -> str:
    return {list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def read_summary(file: Path) -> dict[str, Any]:
    """A run's summary.json, each field netfl reads back checked: its numbers, ``complete``, ``seed`` (or
    ``study: {case, seed, overrides}``), ``topology``, ``versions`` and the staleness histogram."""
    summary = read_json_object(file)
    problems = []
    for key in SUMMARY_NUMBERS:
        if summary.get(key) is not None and not is_number(summary[key]):
            problems.append((key, f"{summary[key]!r} is not a number"))
    if not isinstance(summary.get("complete", True), bool):
        problems.append(("complete", f"{summary['complete']!r} is not true or false"))
    if "study" in summary:
        problems += _study_problems(summary["study"])
    elif not is_integer(summary.get("seed")):
        problems.append(("seed", f"{summary.get('seed')!r} is not an integer"))
    if summary.get("topology") is not None and not isinstance(summary["topology"], str):
        problems.append(("topology", f"{summary['topology']!r} is not the path of a topology file (a string)"))
    versions = summary.get("versions", {})
    if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
        problems.append(("versions", 'must map each package to its version (strings), e.g. {"torch": "2.13.0"}'))
    staleness = summary.get("staleness") or {}
    histogram = (staleness.get("histogram") or {}) if isinstance(staleness, dict) else None
    if not isinstance(histogram, dict) or not all(k.isdigit() and is_number(v) for k, v in histogram.items()):
        problems.append(("staleness.histogram", 'must map staleness ("0", "1", ...) to update counts'))
    if problems:
        raise FileError(str(file), problems)
    return summary


def _study_problems(study: Any) -> list[tuple[str, str]]:
    if not isinstance(study, dict):
        return [("study", "must be an object with case, seed and overrides")]
    problems = []
    if not isinstance(study.get("case"), str) or not study["case"]:
        problems.append(("study.case", f"{study.get('case')!r} is not a case name (a non-empty string)"))
    if not is_integer(study.get("seed")):
        problems.append(("study.seed", f"{study.get('seed')!r} is not an integer"))
    if not isinstance(study.get("overrides", {}), dict):
        problems.append(("study.overrides", "must be an object (field -> value)"))
    return problems


def read_sweep_status(file: Path) -> dict[str, Any]:
    """A study's sweep.json: ``study`` (its name) and ``runs``, each with ``case``, ``seed``, ``folder`` (a path
    inside the study folder) and ``status``."""
    status = read_json_object(file)
    problems = []
    if not isinstance(status.get("study"), str):
        problems.append(("study", f"{status.get('study')!r} is not a study's name (a string)"))
    runs = status.get("runs")
    if not isinstance(runs, list):
        problems.append(("runs", "must be a list of runs"))
        runs = []
    for i, run in enumerate(runs):
        where = f"runs[{i}]"
        if not isinstance(run, dict):
            problems.append((where, "must be an object with case, seed, folder and status"))
            continue
        if not isinstance(run.get("case"), str):
            problems.append((f"{where}.case", f"{run.get('case')!r} is not a case name (a string)"))
        if not is_integer(run.get("seed")):
            problems.append((f"{where}.seed", f"{run.get('seed')!r} is not an integer"))
        if not _inside_folder(run.get("folder")):
            problems.append((f"{where}.folder", f"{run.get('folder')!r} is not a folder inside the study folder"))
        if run.get("status") not in RUN_STATUSES:
            problems.append((f"{where}.status", f"{run.get('status')!r} is not one of {', '.join(RUN_STATUSES)}"))
    if problems:
        raise FileError(str(file), problems)
    return status


def is_study_folder(folder: Path) -> bool:
    """``folder`` is a netfl study folder: its marker says so, or (a study swept before the marker existed) its
    sweep.json is a sweep's status. A file merely named sweep.json does not make one."""
    folder = Path(folder)
    if (folder / STUDY_MARKER).is_file():
        return True
    if not (folder / "sweep.json").is_file():
        return False
    try:
        read_sweep_status(folder / "sweep.json")
    except FileError:
        return False
    return True


def _inside_folder(folder: Any) -> bool:
    """A relative path that stays inside the folder it is relative to (no ``..``, not absolute)."""
    if not isinstance(folder, str) or not folder or "\\" in folder:
        return False
    path = PurePosixPath(folder)
    return not path.is_absolute() and ".." not in path.parts


def read_metrics(file: Path) -> pd.DataFrame:
    """metrics.csv, its required and known columns numbers, and time never going back."""
    if not file.is_file():
        raise FileError(str(file), [("", "missing (every run folder holds one)")])
    try:
        metrics = pd.read_csv(file)
    except (OSError, ValueError) as exc:  # ParserError, EmptyDataError, UnicodeDecodeError are ValueErrors
        raise FileError(str(file), [("", f"cannot be read as CSV ({first_line(exc)})")]) from None
    missing = [c for c in METRICS_REQUIRED if c not in metrics.columns]
    if missing:
        found = ", ".join(map(str, metrics.columns))
        raise FileError(str(file), [(c, f"no such column (found: {found})") for c in missing])
    problems = numeric_columns(metrics, METRICS_REQUIRED, METRICS_OPTIONAL, first_row=2)
    if problems:
        raise FileError(str(file), problems)
    return metrics


def numeric_columns(
    frame: pd.DataFrame, required: Sequence[str], optional: Sequence[str] = (), *, first_row: int = 0
) -> list[tuple[str, str]]:
    """Make ``frame``'s ``required`` and present ``optional`` columns numbers (in place; optional ones may be
    empty) and check that ``sim_time_s`` never goes back; the problems, rows counted from ``first_row``."""
    problems = []
    for name in (*required, *optional):
        if name in frame.columns:
            values = pd.to_numeric(frame[name], errors="coerce")
            bad = values.isna() & (frame[name].notna() | (name in required))
            if bad.any():
                row = int(bad.to_numpy().argmax())
                problems.append((f"row {row + first_row}, column {name}", f"{frame[name].iloc[row]!r} is not a number"))
            frame[name] = values
    if not problems and "sim_time_s" in frame.columns and (frame["sim_time_s"].diff() < 0).any():
        row = int((frame["sim_time_s"].diff() < 0).to_numpy().argmax())
        problems.append((f"row {row + first_row}, column sim_time_s", "goes back in time"))
    return problems


def read_parquet_columns(file: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """Those of ``columns`` that ``file`` (a Parquet file netfl wrote) holds."""
    try:
        names = pq.read_schema(file).names
        return pq.read_table(file, columns=[c for c in columns if c in names]).to_pandas()
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise FileError(str(file), [("", f"cannot be read as Parquet ({first_line(exc)})")]) from None
