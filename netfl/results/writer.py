"""Writing a run's results so that a results folder is never half-written.

Everything is written into a hidden staging folder beside the target and
moved into place with one rename at the end; an older run in the target is
replaced only then. A run stopped early (Ctrl-C) is still written, with
``"complete": false`` in summary.json.
"""

from __future__ import annotations

import contextlib
import csv
import glob
import json
import math
import os
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from netfl.errors import NetflError
from netfl.events import EVENT_FIELDS
from netfl.results.folders import MARKERS, RUN, UNTYPED_MARKER, describe, kinds_of, write_marker
from netfl.results.plots import plot_accuracy_vs_time, plot_staleness
from netfl.results.row_table import RowTable
from netfl.results.world_plots import timeline_figure

METRIC_COLUMNS = ("sim_time_s", "round", "test_accuracy", "test_loss", "participants", "energy_j", "work_energy_j")

_ARROW = {int: pa.int64(), float: pa.float64(), str: pa.string()}
EVENT_SCHEMA = pa.schema(
    [
        ("sim_time_s", pa.float64()),
        ("round", pa.int64()),
        ("device", pa.int64()),
        ("kind", pa.string()),
        *((name, _ARROW[t]) for name, t in EVENT_FIELDS.items()),
        ("detail", pa.string()),
    ]
)

#: Rows of a row group in devices.parquet and timeline.parquet: pyarrow's default, so that writing a row group at a
#: time gives the bytes of one whole-table write while only that group's columns are made.
ROW_GROUP_ROWS = 1024 * 1024
#: No statistics or creation metadata that could vary: the same run gives the same bytes.
_PARQUET = {"compression": "zstd", "write_statistics": False, "store_schema": True}


def events_frame(columns: dict[str, Any]) -> pd.DataFrame:
    """The event log (:meth:`EventRecorder.columns`) as a DataFrame: typed columns whole, integers as pandas'
    nullable ``Int64``, null floats NaN, null strings missing -- the dtypes ``pd.read_parquet`` gives for
    events.parquet (through the same Arrow table, so a string column with no value at all reads alike too)."""
    return _events_table(columns).to_pandas()


def _events_table(columns: dict[str, Any]) -> pa.Table:
    n = len(columns["kind"])
    data: dict[str, Any] = {name: columns[name] for name in ("sim_time_s", "round", "device", "kind")}
    for name, kind in EVENT_FIELDS.items():
        rows, values = columns[name]
        rows = np.asarray(rows, dtype=np.int64)
        if kind is str:
            full = np.full(n, None, dtype=object)
            full[rows] = values
            data[name] = full
        elif kind is int:
            full, mask = np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool)
            full[rows], mask[rows] = np.asarray(values, dtype=np.int64), False
            data[name] = pd.arrays.IntegerArray(full, mask)
        else:
            full = np.full(n, np.nan)
            full[rows] = np.asarray(values, dtype=np.float64)
            data[name] = full
    data["detail"] = columns["detail"]
    return pa.Table.from_pandas(pd.DataFrame(data), schema=EVENT_SCHEMA, preserve_index=False)


def write_events(path: Path, columns: dict[str, Any]) -> None:
    """events.parquet; with pandas' metadata, so ``pd.read_parquet`` gives back :func:`events_frame`'s dtypes."""
    pq.write_table(_events_table(columns), path, **_PARQUET)


def write_timeline(path: Path, columns: dict[str, Any]) -> None:
    """timeline.parquet: one row per reading and device group (netfl/sim/timeline.py); battery levels of a group
    on mains power are nulls."""
    write_devices(path, columns)


def write_devices(path: Path, columns: Mapping[str, Any]) -> None:
    """One row per device (devices.parquet); absent battery levels (mains power) are nulls. ``columns``: name -> one
    value per row; a :class:`~netfl.results.row_table.RowTable` is read a row group at a time, so that its
    derived columns are never made whole."""
    if isinstance(columns, RowTable):
        count, part = columns.count, columns.part
    else:
        whole = {name: v if isinstance(v, pd.Categorical) else np.asarray(v) for name, v in columns.items()}
        count = len(next(iter(whole.values()))) if whole else 0

        def part(start: int, stop: int) -> dict[str, Any]:
            return {name: values[start:stop] for name, values in whole.items()}

    if count <= ROW_GROUP_ROWS:
        pq.write_table(_arrow_table(part(0, count)), path, **_PARQUET)
        return
    first = _arrow_table(part(0, ROW_GROUP_ROWS))
    with pq.ParquetWriter(path, first.schema, **_PARQUET) as writer:
        writer.write_table(first)
        del first
        for start in range(ROW_GROUP_ROWS, count, ROW_GROUP_ROWS):
            writer.write_table(_arrow_table(part(start, min(count, start + ROW_GROUP_ROWS))))


def _arrow_table(columns: dict[str, Any]) -> pa.Table:
    """Columns as Arrow: a categorical as its strings, NaN in a float column as null."""
    arrays = {}
    for name, values in columns.items():
        if isinstance(values, pd.Categorical):  # written as the strings: devices.parquet's group column
            codes = pa.array(values.codes, type=pa.int32())
            arrays[name] = pa.DictionaryArray.from_arrays(codes, list(values.categories)).dictionary_decode()
            continue
        values = np.asarray(values)
        arrays[name] = pa.array(values, mask=np.isnan(values)) if values.dtype.kind == "f" else pa.array(values)
    return pa.table(arrays)


def metrics_columns(rows: Sequence[Any], num_classes: Sequence[int]) -> dict[str, list]:
    """One column per metric, one value per evaluation. One task: ``class_<k>_accuracy`` columns; several
    (``num_classes`` per task): ``test_accuracy``/``test_loss`` are their means, then ``task<s>_accuracy``,
    ``task<s>_loss`` and ``task<s>_class_<k>_accuracy`` for each."""
    columns: dict[str, list] = {name: [getattr(row, name) for row in rows] for name in METRIC_COLUMNS}

    def add(prefix: str, per_class: Sequence[Sequence[float]], classes: int) -> None:
        for k in range(classes):
            columns[f"{prefix}class_{k}_accuracy"] = [list(p)[k] if k < len(p) else math.nan for p in per_class]

    if len(num_classes) == 1:
        add("", [row.per_class_accuracy for row in rows], num_classes[0])
    else:
        for s, classes in enumerate(num_classes):
            columns[f"task{s}_accuracy"] = [row.tasks[s].accuracy for row in rows]
            columns[f"task{s}_loss"] = [row.tasks[s].loss for row in rows]
            add(f"task{s}_", [row.tasks[s].per_class_accuracy for row in rows], classes)
    return columns


def write_metrics(path: Path, rows: Sequence[Any], num_classes: Sequence[int]) -> None:
    """metrics.csv: :func:`metrics_columns`, floats with 6 decimals."""
    columns = metrics_columns(rows, num_classes)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        counts = [name in ("round", "participants") for name in columns]
        for values in zip(*columns.values()):
            writer.writerow([int(v) if count else f"{float(v):.6f}" for v, count in zip(values, counts)])


def write_staleness(path: Path, staleness: Sequence[int]) -> None:
    counts = Counter(staleness)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["staleness", "updates"])
        for value in range(max(staleness) + 1):
            writer.writerow([value, counts.get(value, 0)])


def finite_json(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None (JSON null): JSON has no such numbers, and a
    run whose simulated time or energy overflowed must still be written rather than lost."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def write_scenario(path: Path, scenario: dict[str, Any], source: str | None) -> None:
    """The scenario as run, loadable as a topology file (``netfl simulate scenario.yaml``; file paths in it are
    relative to ``source``'s folder, so copy the run folder beside the original topology to run it there)."""
    header = ["# The scenario of this run as netfl ran it: overrides applied, defaults left out, SI units."]
    if source is not None:
        header.append(f"# Read from {source}; file paths below are relative to its folder.")
    path.write_text("\n".join(header) + "\n" + yaml.safe_dump(scenario, sort_keys=False, allow_unicode=True))


def check_out_dir(out_dir: Path, *, kind: str = RUN) -> None:
    """Refuse a folder whose replacement would destroy something netfl did not write, or another kind of output.

    A run (or a report: ``kind``) replaces its folder as a whole, so ``--out .``
    or ``--out ~/thesis`` would delete the user's files, and ``--out`` a
    finished run a report would delete the run: only a new or empty folder,
    or one netfl wrote as the same kind (:func:`~netfl.results.folders.kinds_of`),
    may be replaced.
    """
    out_dir = Path(out_dir)
    target, here = out_dir.resolve(), Path.cwd().resolve()
    if target == here or target in here.parents:
        raise NetflError(
            f"{out_dir}: is the current folder or one of its parents; name a {kind} folder of its own (--out DIR)"
        )
    if out_dir.exists() and not out_dir.is_dir():  # never rename a user's file out of the way
        raise NetflError(f"{out_dir}: exists and is not a folder; choose another {kind} folder (--out DIR)")
    if not target.is_dir() or not any(target.iterdir()):
        return
    kinds = kinds_of(target)
    if not kinds:
        raise NetflError(
            f"{out_dir}: exists and holds files that are not a netfl {kind} (no {MARKERS[kind]}); a {kind} "
            "replaces its folder as a whole, so choose a new or empty folder (--out DIR)"
        )
    if kinds != {kind}:
        raise NetflError(
            f"{out_dir}: holds {describe(kinds)}, which a {kind} may not replace; choose a new or empty folder "
            "(--out DIR)"
        )


def write_run(
    out_dir: Path,
    *,
    summary: dict[str, Any],
    metrics: Sequence[Any],
    num_classes: Sequence[int],
    events: dict[str, list],
    devices: Mapping[str, Any],
    title: str,
    staleness: Sequence[int] = (),
    scenario: dict[str, Any] | None = None,
    source: str | None = None,
    timeline: dict[str, Any] | None = None,
) -> Path:
    """Write summary.json, metrics.csv, events.parquet, devices.parquet and accuracy_vs_time.png into
    ``out_dir`` atomically.

    ``timeline`` (netfl/sim/timeline.py's columns) adds timeline.parquet and timeline.png.
    ``scenario`` (the resolved scenario as a topology mapping; ``source``: the file it came from) adds
    scenario.yaml; ``staleness`` (asynchronous runs: each received update's staleness) adds staleness.csv
    and staleness.png.
    """
    out_dir = Path(out_dir)

    def fill(staging: Path) -> None:
        if scenario is not None:
            write_scenario(staging / "scenario.yaml", scenario, source)
        write_metrics(staging / "metrics.csv", metrics, num_classes)
        write_events(staging / "events.parquet", events)
        write_devices(staging / "devices.parquet", devices)
        plot_accuracy_vs_time(staging / "accuracy_vs_time.png", metrics, title=title)
        if timeline is not None and timeline["sim_time_s"]:
            write_world_over_time(staging, timeline, events, devices, title)
        if staleness:  # asynchronous runs: how old the applied updates were
            write_staleness(staging / "staleness.csv", staleness)
            plot_staleness(staging / "staleness.png", staleness, title=title)
        # summary last: its presence with complete=true is what marks a finished run
        (staging / "summary.json").write_text(json.dumps(finite_json(summary), indent=2, allow_nan=False) + "\n")

    return replace_folder(out_dir, fill)


def write_world_over_time(
    folder: Path, timeline: dict[str, Any], events: dict[str, Any], devices: Mapping[str, Any], title: str
) -> None:
    """timeline.parquet and its figure, with a Gantt of a sample of devices from the event log."""
    write_timeline(folder / "timeline.parquet", timeline)
    log = pd.DataFrame({name: events[name] for name in ("sim_time_s", "device", "kind")})
    fleet = pd.DataFrame({k: devices[k] for k in ("device", "group")})
    (folder / "timeline.png").write_bytes(timeline_figure(pd.DataFrame(timeline), log, fleet, title=title))


def write_files(out_dir: Path, files: dict[str, bytes]) -> Path:
    """Write ``files`` (path inside the folder -> content) as the whole of ``out_dir``, atomically: a run
    made elsewhere (a Ray worker) lands as if written here."""

    def fill(staging: Path) -> None:
        for name, content in sorted(files.items(), key=lambda item: item[0] == "summary.json"):  # summary last
            target = (staging / name).resolve()
            if staging.resolve() not in target.parents:
                raise NetflError(f"{out_dir}: refusing to write {name!r} outside the results folder")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)

    return replace_folder(Path(out_dir), fill)


def read_files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (path inside it -> content): a run folder to send back from a worker."""
    folder = Path(folder)
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def staging_folders(out_dir: Path, pid: int) -> tuple[Path, Path]:
    """Where process ``pid`` stages ``out_dir``'s new content and parks its old one while swapping them."""
    return (out_dir.parent / f".{out_dir.name}.partial-{pid}", out_dir.parent / f".{out_dir.name}.previous-{pid}")


def staging_marker(out_dir: Path, pid: int) -> Path:
    """The file, beside ``out_dir``, that says process ``pid`` is replacing it: only the staging folders such a
    marker names are netfl's to clean up (a user's folder that happens to be named like them is not)."""
    return out_dir.parent / f".{out_dir.name}.staging-{pid}"


def _marker_text(out_dir: Path, pid: int) -> str:
    return f"netfl process {pid} is replacing {out_dir.name} (.{out_dir.name}.partial-{pid}, .previous-{pid})\n"


def _is_staging_marker(out_dir: Path, pid: int) -> bool:
    try:
        return staging_marker(out_dir, pid).read_text() == _marker_text(out_dir, pid)
    except (OSError, UnicodeDecodeError):
        return False


def recover_folder(out_dir: Path, pid: int) -> None:
    """After process ``pid`` was killed while replacing ``out_dir``: drop its half-written staging folder, and
    put the earlier content back if the kill came between the two renames. Nothing is touched unless netfl's
    marker says that process was replacing ``out_dir``."""
    out_dir = Path(out_dir)
    if not _is_staging_marker(out_dir, pid):
        return
    staging, previous = staging_folders(out_dir, pid)
    shutil.rmtree(staging, ignore_errors=True)
    try:
        if previous.exists():
            if out_dir.exists():
                shutil.rmtree(previous)
            else:
                previous.rename(out_dir)
        staging_marker(out_dir, pid).unlink(missing_ok=True)
    except OSError:
        pass  # best effort: what is left stays marked, for the next run into this folder to finish


def clean_stale_staging(out_dir: Path) -> None:
    """Staging folders of ``out_dir`` left by processes that no longer exist (killed mid-write, SIGKILL or a
    power cut): removed, and an earlier run parked aside put back if nothing replaced it."""
    if not out_dir.parent.is_dir():
        return
    for entry in out_dir.parent.glob(f".{glob.escape(out_dir.name)}.staging-*"):
        pid = entry.name.rpartition("-")[2]
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
            recover_folder(out_dir, int(pid))


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def replace_folder(out_dir: Path, fill, *, kind: str = RUN) -> Path:
    """Make ``out_dir`` hold exactly what ``fill(staging)`` writes, marked as netfl's ``kind`` of folder, or leave
    it as it was: ``fill`` writes into a hidden staging folder beside it, which replaces ``out_dir`` with one
    rename at the end (only a folder :func:`check_out_dir` lets ``kind`` replace)."""
    check_out_dir(out_dir, kind=kind)
    pid = os.getpid()
    staging, previous = staging_folders(out_dir, pid)
    clean_stale_staging(out_dir)
    for path in (staging, previous):
        if path.exists():  # never netfl's: this process removes its own before it returns
            raise NetflError(
                f"{path}: is in the way of writing {out_dir} (named like netfl's staging, but netfl did not make "
                "it); move it elsewhere"
            )
    marker = staging_marker(out_dir, pid)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(_marker_text(out_dir, pid))
        staging.mkdir()
    except OSError as exc:
        with contextlib.suppress(OSError):
            marker.unlink(missing_ok=True)
        raise NetflError(f"{out_dir}: cannot create the results folder: {exc}") from None
    try:
        fill(staging)
        for name in (*MARKERS.values(), UNTYPED_MARKER):  # one marker, this kind's (write_files: whatever
            (staging / name).unlink(missing_ok=True)  # a worker's netfl marked its run with)
        write_marker(staging, kind, "written by netfl, which may replace it as a whole")
        if out_dir.exists():
            out_dir.rename(previous)
        staging.rename(out_dir)
        if previous.exists():
            shutil.rmtree(previous)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if previous.exists() and not out_dir.exists():
            previous.rename(out_dir)  # the earlier run back in place
        if isinstance(exc, OSError):  # disk full, permissions: the user's to fix, and nothing half-written is left
            raise NetflError(f"{out_dir}: cannot write the results: {exc}") from None
        raise
    finally:
        if not previous.exists():  # else it stays marked, for the next run into this folder to finish
            marker.unlink(missing_ok=True)
    return out_dir
