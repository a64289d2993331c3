"""One run of a study, in whatever process runs it: its results written, its outcome as a small record.

A run never raises: an error becomes a ``failed`` record with the message and
the traceback, so one bad run cannot stop the others. The record is plain
data (it crosses process and machine boundaries).
"""

from __future__ import annotations

import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from netfl.errors import NetflError
from netfl.results.tracking import Tracking
from netfl.results.writer import read_files
from netfl.study.spec import RunPlan
from netfl.user_code import sources_shipped


def run_plan(
    plan: RunPlan, out_dir: Path, *, threads: int, data_dir: Path | None = None, device: str = "cpu"
) -> dict[str, Any]:
    """Run ``plan`` into ``out_dir``; return ``{"status": "complete" | "failed", ...}`` (never raises on a run's
    own error)."""
    from netfl.runner import run_scenario  # torch is loaded here, in the run's process, not by the driver

    started = time.perf_counter()
    try:
        outcome = run_scenario(
            plan.scenario,
            out_dir=out_dir,
            data_dir=data_dir,
            device=device,
            threads=threads,
            extra_summary={"study": plan.study_record()},
            tracking=Tracking(),  # the sweep's driver logs the run once its folder is in the study (netfl.study.sweep)
        )
    except NetflError as exc:  # the user's to fix (a missing data set, an unwritable folder): no traceback
        return _failed(str(exc), None, started)
    except Exception as exc:  # noqa: BLE001 -- a bug in netfl or a user policy: kept in full for the report
        return _failed(f"{type(exc).__name__}: {exc}", traceback.format_exc(), started)
    s = outcome.summary
    return {
        "status": "complete",
        "wall_time_s": time.perf_counter() - started,
        "final_test_accuracy": s["final_test_accuracy"],
        "sim_time_s": s["sim_time_s"],
        "rounds": s["rounds"],
        "stopped_by": s["stopped_by"],
        "loss_explosion": s["loss_explosion"],
    }


def run_plan_packed(
    plan: RunPlan,
    *,
    threads: int,
    data_dir: Path | None = None,
    device: str = "cpu",
    sources: dict[str, bytes] | None = None,
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """:func:`run_plan` into a temporary folder, returned as its files: for a worker on another machine,
    whose disk the study folder is not on. ``sources``: the user's Python files the run names, as the driver
    read them (:mod:`netfl.study.travelling_code`), imported from that text rather than from this disk."""
    with tempfile.TemporaryDirectory(prefix="netfl-run-") as tmp, sources_shipped(sources or {}):
        record = run_plan(plan, Path(tmp) / "run", threads=threads, data_dir=data_dir, device=device)
        files = read_files(Path(tmp) / "run") if record["status"] == "complete" else {}
    return record, files


def _failed(error: str, trace: str | None, started: float) -> dict[str, Any]:
    return {"status": "failed", "error": error, "traceback": trace, "wall_time_s": time.perf_counter() - started}
