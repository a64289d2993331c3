"""``netfl report``: compare runs and studies by case — tables, plots and one self-contained report.html.

Reads run folders only (summary.json, metrics.csv, devices.parquet), so a
report can be made again, or of other folders, without running anything.
The numbers' conventions are in report_tables.py.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from netfl.errors import NetflError
from netfl.results import report_plots as plots
from netfl.results.claim import claim_folder
from netfl.results.folders import REPORT
from netfl.results.paired import METHOD
from netfl.results.plots import time_axis
from netfl.results.report_html import display_tables, first_lines, paired_display, render
from netfl.results.report_load import Missing, find_run_folders, load_cases
from netfl.results.report_ranking import evaluation_spacing, paired_table, rank
from netfl.results.report_tables import cases_table, run_summary, runs_table
from netfl.results.report_verdict import Verdict
from netfl.results.report_world import device_timelines, world_over_time
from netfl.results.staging import check_out_dir, replace_folder

UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0}


@dataclass
class Report:
    out_dir: Path
    runs: int
    cases: int
    incomplete: int
    targets: list[float]
    unfinished: int = 0  # runs of a study whose sweep is still running them, left out
    notes: list[str] = field(default_factory=list)  # each study's runs left out, and why (report_load.Missing)
    verdict: Verdict | None = None  # who reached each target first, and the paired comparisons: for the terminal
    pairing: list[str] = field(default_factory=list)  # what the cases derived from scenarios differ in (report_cases)


def check_targets(targets: Sequence[float]) -> list[float]:
    bad = [t for t in targets if not 0 < t <= 1]
    if bad:
        hint = f"; for {bad[0]:g} % write --target {bad[0]:g}%" if 1 < bad[0] <= 100 else ""
        raise NetflError(
            f"--target {bad[0]:g}: a target is a test accuracy between 0 and 1, e.g. --target 0.8 or --target 80%"
            + hint
        )
    return sorted(set(targets))


def default_targets(best_accuracies: Sequence[float]) -> list[float]:
    """Without --target: the best accuracy every run reached, rounded down to a whole percent, so that every
    case has a time to it (none when a run never evaluated)."""
    best = [b for b in best_accuracies if not math.isnan(b)]
    if len(best) < len(best_accuracies) or not best or min(best) < 0.01:
        return []
    return [math.floor(100 * min(best) + 1e-9) / 100]


def write_report(
    dirs: Sequence[Path], *, targets: Sequence[float] = (), out_dir: Path | None = None, interpolate: bool = False
) -> Report:
    """Find every run under ``dirs``, and write the tables, plots and report.html into ``out_dir``
    (default ``<first dir>/report``), replacing an earlier report there in one rename. ``interpolate``: a time
    (energy, round) to a target where the line between two evaluations crosses it, not the evaluation's own."""
    dirs = [Path(d) for d in dirs]
    if not dirs:
        raise NetflError("name at least one run or study folder")
    out_dir = Path(out_dir) if out_dir is not None else dirs[0] / "report"
    targets = check_targets(targets)
    for folder in dirs:  # before the claim, which makes the folders above the report's
        if not folder.is_dir():
            raise NetflError(f"{folder}: no such folder")
    with claim_folder(out_dir, noun=REPORT):  # a run or sweep writing the folder meanwhile: refused at once
        return _write_report(dirs, targets, out_dir, interpolate)


def _write_report(dirs: list[Path], targets: list[float], out_dir: Path, interpolate: bool) -> Report:
    check_out_dir(out_dir, kind=REPORT)
    missing: list[Missing] = []
    runs, pairing = load_cases(find_run_folders(dirs, skip=out_dir, missing=missing))
    given = bool(targets)
    targets = targets or default_targets([float(r.summary.get("best_test_accuracy") or math.nan) for r in runs])

    tidy, summary = runs_table(runs), run_summary(runs, targets, interpolate)
    cases = cases_table(summary, targets)
    names = list(cases["case"])
    rankings = [rank(summary, cases, target, widen=not interpolate) for target in targets]
    paired = paired_table(summary, names, targets, widen=not interpolate)
    colours = plots.case_colours(names)
    unit_name = time_axis([float(tidy["sim_time_s"].max() if len(tidy) else 0.0)])[1]
    unit = (unit_name, UNITS[unit_name])

    figures: list[tuple[str, str, str, bytes]] = [
        (
            "accuracy_vs_time.png",
            "Test accuracy against simulated time",
            "Mean over seeds, each seed's accuracy held from one evaluation to the next, on the union of their "
            "evaluation times while every seed is running; the band spans the lowest to the highest seed. Dashed: "
            "the targets.",
            plots.accuracy_vs_time(runs, names, targets, colours, unit),
        )
    ]
    if targets:
        figures.append(
            (
                "time_to_target.png",
                "Simulated time to reach each target",
                "Mean over the seeds that reached the target, ± std; on top, seeds that reached it / seeds.",
                plots.to_target_bars(
                    cases,
                    targets,
                    colours,
                    key="time_to_{t}_s",
                    scale=unit[1],
                    ylabel=f"simulated time ({unit[0]})",
                    title="Time to target accuracy",
                ),
            )
        )
    energy_missing = [r for r in runs if "energy_j" not in r.metrics.columns]
    if targets and len(energy_missing) < len(runs):
        work = all("work_energy_j" in r.metrics.columns for r in runs if r not in energy_missing)
        figures.append(
            (
                "energy_to_target.png",
                "Energy to reach each target",
                (
                    "Energy the devices spent on training and the radio (idle draw left out: it is spent with or "
                    "without federated learning)"
                    if work
                    else "Energy spent by all devices"
                )
                + " until the first evaluation at the target; mean over the seeds that reached it, ± std; "
                "n/a where a seed has no energy in metrics.csv.",
                plots.to_target_bars(
                    cases,
                    targets,
                    colours,
                    key="work_energy_to_{t}_j" if work else "energy_to_{t}_j",
                    ylabel="training + radio energy (J)" if work else "energy (J)",
                    title="Energy to target accuracy",
                ),
            )
        )
    world = world_over_time(runs, names, colours)
    if world is not None:
        figures.append(("world_over_time.png", "The world over time", world[1], world[0]))
    gantt = device_timelines(runs, names)
    if gantt is not None:
        figures.append(("device_timeline.png", "Device timelines", gantt[1], gantt[0]))
    participation = plots.participation(runs, names, colours)
    if participation is not None:
        png, caption = participation
        figures.append(("participation.png", "Participation per device", caption, png))
    histograms = _staleness_by_case(runs)
    if histograms:
        fresh = [name for name in names if name not in histograms]
        figures.append(
            (
                "staleness.png",
                "Staleness",
                "Share of the updates received (applied or not) by how many global model versions behind they were, "
                "summed over seeds"
                + (
                    f"; not drawn: {html.escape(', '.join(fresh))}, whose updates were all fresh (0 versions behind)."
                    if fresh
                    else "."
                ),
                plots.staleness(histograms, colours),
            )
        )

    notes = [line for gap in missing for line in gap.lines()] + pairing.warnings
    warnings = [html.escape(line) for line in notes] + _warnings(runs, energy_missing, bool(targets))
    shown = ", ".join(f"{100 * t:g} %" for t in targets) or "none"
    meta = (
        f"{len(runs)} run{'s' if len(runs) != 1 else ''} in {len(names)} case{'s' if len(names) != 1 else ''} "
        f"from {html.escape(', '.join(map(str, dirs)))}. Target accuracy: {shown}"
        + (
            ""
            if given
            else " (default: the best accuracy every run reached, rounded down to a whole percent; "
            "choose with --target)"
        )
        + "."
        + "".join(f" {html.escape(line[0].upper() + line[1:])}." for line in pairing.lines)
        + (
            " Times, rounds and energies to a target interpolated between evaluations (--interpolate)."
            if interpolate
            else ""
        )
    )
    comparisons = paired_display(paired, rankings, unit)
    page = render(
        title="netfl report",
        meta=meta,
        warnings=warnings,
        lines=first_lines(rankings, cases, unit),
        how=_how_first(runs, interpolate, unit) if targets else "",
        comparisons=[("Paired comparisons", PAIRED_CAPTION.format(method=METHOD), comparisons, 3)]
        if comparisons is not None
        else [],
        tables=display_tables(cases, summary, targets, unit),
        figures=[(heading, caption, png) for _, heading, caption, png in figures],
    )

    def write(staging: Path) -> None:
        for name, frame in (("runs", tidy), ("run_summary", summary), ("cases", cases), ("paired", paired)):
            frame.to_parquet(staging / f"{name}.parquet", index=False)
            frame.to_csv(staging / f"{name}.csv", index=False)
        for file, _, _, png in figures:
            (staging / file).write_bytes(png)
        (staging / "report.html").write_text(page, encoding="utf-8")

    replace_folder(out_dir, write, kind=REPORT)
    return Report(
        out_dir,
        len(runs),
        len(names),
        sum(not r.complete for r in runs),
        targets,
        unfinished=sum(gap.unfinished() for gap in missing if gap.pid is not None),
        notes=notes,
        verdict=Verdict(rankings, cases, paired, unit, widened=not interpolate),
        pairing=pairing.lines,
    )


PAIRED_CAPTION = (
    "Each case against the first to reach the target (by mean time), seed by seed: runs of one seed share their "
    "world, so the difference in one seed is free of the spread between worlds. Difference case − first, mean "
    "over the seeds both ran, and the {method}; then the verdict, given only where the interval is all on one side "
    "of zero (otherwise: tie). paired.csv / paired.parquet beside this page hold every pair of cases and every "
    "measure, rounds and all-device energy too."
)


def _duration(seconds: float) -> str:
    """``10 min``, ``12 s``, ``2 h``: a simulated duration in the unit that reads best."""
    name = time_axis([seconds])[1]
    return f"{seconds / UNITS[name]:.3g} {name}"


def _how_first(runs, interpolate: bool, unit: tuple[str, float]) -> str:
    """How the first case is decided, and the resolution of a time to target, in one paragraph."""
    name = unit[0]
    median, shortest, longest = evaluation_spacing([r.metrics for r in runs])
    if median != median:  # NaN: no run evaluated twice
        spacing = "the runs evaluated once"
    elif abs(longest - shortest) <= 1e-6 * longest:
        spacing = f"the runs evaluated every {_duration(median)}"
    else:
        spacing = (
            f"the runs evaluated every {_duration(median)} (median; from {_duration(shortest)} to {_duration(longest)})"
        )
    if interpolate:
        resolution = (
            f"Times, rounds and energies to a target are interpolated: where the straight line between the "
            f"evaluation before the target and the first at or above it crosses the target ({spacing}; accuracy is "
            "assumed to change linearly in between)."
        )
    else:
        resolution = (
            f"A time to a target is that of the first evaluation at or above it, so it is known only to within "
            f"the evaluation interval: {spacing}. The intervals below are widened by it (each bound by the mean "
            "interval before the evaluation that reached the target), so a lead of one evaluation is not called a "
            "lead; netfl report --interpolate estimates the crossing between evaluations instead."
        )
    return (
        f"{resolution} A case is named first only where its paired interval (the {METHOD}) against every other "
        "case that reached the target in every seed excludes 0; otherwise the cases are tied. Differences are "
        f"in {name}, later − first."
    )


def _staleness_by_case(runs) -> dict[str, dict[int, int]]:
    """Each case's staleness histogram summed over seeds, for the cases in which some update was stale: a
    synchronous case's updates are all 0 versions behind, a panel that says nothing."""
    by_case: dict[str, dict[int, int]] = {}
    for run in runs:
        for value, count in run.staleness_histogram.items():
            by_case.setdefault(run.case, {})
            by_case[run.case][value] = by_case[run.case].get(value, 0) + count
    return {case: h for case, h in by_case.items() if any(v > 0 and c > 0 for v, c in h.items())}


def _warnings(runs, energy_missing, have_targets: bool) -> list[str]:
    out = []
    incomplete = [r for r in runs if not r.complete]
    if incomplete:
        out.append(
            f"{len(incomplete)} run(s) stopped before the end (complete: false, flagged in the tables): "
            + ", ".join(html.escape(f"{r.case} seed {r.seed}") for r in incomplete)
            + "."
        )
    if energy_missing and have_targets:
        out.append(
            f"Energy to target not recorded for {len(energy_missing)} of {len(runs)} run(s): their "
            "metrics.csv has no energy_j column (made before netfl recorded it); those cells are empty, "
            "not estimated."
        )
    return out
