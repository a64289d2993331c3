"""Replacing a folder as a whole or not at all, so that a results folder is never half-written.

Everything is written into a hidden staging folder beside the target and
moved into place with one rename at the end; an older folder in the target is
replaced only then, and only a folder netfl wrote as the same kind of output
(:func:`check_out_dir`). A process killed between the two renames leaves a
marker, so that the next one into the folder puts things back
(:func:`clean_stale_staging`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
from pathlib import Path

from netfl.errors import NetflError
from netfl.results.folders import MARKERS, RUN, UNTYPED_MARKER, describe, kinds_of, write_marker


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
