"""The three kinds of folder netfl writes -- a run, a report, a study -- each marked as its kind.

A command writes only a folder of its own kind: a run (or a report) replaces its folder as a whole, so if the
kinds shared one mark, ``netfl report --out RUN`` would replace a finished run with a report, and ``netfl
simulate --out REPORT --overwrite`` a report with a run. Each kind has a marker file of its own; a folder netfl
wrote before the markers told kinds apart (one ``.netfl-output`` for runs and reports, or no marker at all) is
recognised by what it holds: a run's summary.json (or a failed run's error.txt), a report's report.html, a
study's sweep.json.
"""

from __future__ import annotations

from pathlib import Path

from netfl.results.read_back import STUDY_MARKER, is_study_folder

RUN, REPORT, STUDY = "run", "report", "study"
#: Each kind's marker, in every folder of that kind netfl wrote.
MARKERS = {RUN: ".netfl-run", REPORT: ".netfl-report", STUDY: STUDY_MARKER}
#: What netfl wrote into runs and reports alike before the markers told kinds apart.
UNTYPED_MARKER = ".netfl-output"
#: The file that tells each kind of folder apart when no typed marker says.
TELLTALE = {RUN: "summary.json", REPORT: "report.html", STUDY: "sweep.json"}


def write_marker(folder: Path, kind: str, what: str = "") -> None:
    """Mark ``folder`` as netfl's ``kind`` of folder (``what``: a word on what it holds, for a curious reader)."""
    (Path(folder) / MARKERS[kind]).write_text(f"a netfl {kind} folder{f' ({what})' if what else ''}\n")


def kinds_of(folder: Path) -> set[str]:
    """Which kinds of netfl folder ``folder`` is: one, none (missing, empty or not netfl's), or several (files of
    different kinds mixed by hand; no command writes there)."""
    folder = Path(folder)
    if not folder.is_dir():
        return set()
    marked = {kind for kind, marker in MARKERS.items() if (folder / marker).is_file()}
    if marked:
        return marked
    kinds = {STUDY} if is_study_folder(folder) else set()
    if (folder / TELLTALE[RUN]).is_file() or ((folder / UNTYPED_MARKER).is_file() and (folder / "error.txt").is_file()):
        kinds.add(RUN)
    if (folder / TELLTALE[REPORT]).is_file():
        kinds.add(REPORT)
    return kinds


def describe(kinds: set[str]) -> str:
    """``a netfl run``, ``a netfl run and a netfl report``: what a folder of ``kinds`` holds, for a message."""
    return " and ".join(f"a netfl {kind}" for kind in sorted(kinds))
