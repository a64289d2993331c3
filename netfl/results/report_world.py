"""The report's world over time: per case, device counts and batteries (mean over seeds, band from the lowest to
the highest seed), by simulated time -- or by time of day when the runs span days -- and a Gantt per case.

Reads each run's timeline.parquet (runs made before netfl wrote one are
left out, and said so) and, for the Gantt, one run's events.parquet per case.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from netfl.results.plots import png, time_axis
from netfl.results.report_load import Run, read_activity
from netfl.results.report_tables import mean_curve
from netfl.results.world_plots import (
    COUNTS,
    DAY_S,
    SINCE,
    UNIT_S,
    draw_gantt,
    drawstyle,
    gantt_legend,
    gantt_sample,
    one_per_instant,
    spans_days,
)

#: The counts the report draws per case (summed over the device groups).
DRAWN = ("online", "available", "participated", "dropped")
GROUP_STYLES = ("-", "--", ":", "-.")
MAX_GANTT_CASES = 6
GANTT_DEVICES = 12


def _per_reading(run: Run) -> pd.DataFrame:
    """The run's counts summed over groups, one row per instant (readings that share one merged)."""
    timeline = run.timeline
    reading = np.arange(len(timeline)) // timeline["group"].nunique()
    summed = timeline.groupby(reading)[["devices", *DRAWN]].sum()
    return one_per_instant(summed.assign(sim_time_s=timeline.groupby(reading)["sim_time_s"].first(), group=""))


def _by_hour(times: np.ndarray, values: np.ndarray, since: bool = False) -> np.ndarray:
    """The mean of ``values`` in each hour of the (simulated) day, over all days (NaN for an hour never read).

    ``since``: each value counts what happened since the previous reading, and belongs to the hour holding the
    middle of that interval (a reading at 08:00 of what happened since 07:00 is 07:00-08:00's, not 08:00-09:00's);
    the first reading, of its own instant, to its own hour."""
    times = np.asarray(times, dtype=float)
    if since and len(times) > 1:
        times = np.concatenate([times[:1], (times[:-1] + times[1:]) / 2])
    hours = np.floor((times % DAY_S) / 3600).astype(int)
    sums, counts = np.bincount(hours, values, 24), np.bincount(hours, minlength=24)
    with np.errstate(invalid="ignore"):
        return sums / counts


def _curve(members: Sequence[tuple[np.ndarray, np.ndarray]], by_day: bool, factor: float, since: bool = False):
    """x, mean, low, high over the seeds: a step curve on the union of reading times (``since``: of counts since
    the previous reading, drawn back to it), or 24 hourly means (each drawn over its hour)."""
    if by_day:
        hourly = np.array([_by_hour(t, v, since) for t, v in members])
        return np.arange(25), *(np.append(a, a[-1]) for a in (hourly.mean(0), hourly.min(0), hourly.max(0)))
    grid, mean, low, high = mean_curve(members, since=since)
    return grid / factor, mean, low, high


def world_over_time(runs: Sequence[Run], cases: Sequence[str], colours: dict) -> tuple[bytes, str] | None:
    """One row per case: devices online, available, starting work and dropping out (summed over groups; mean over
    seeds, band from the lowest to the highest seed) and each group's mean battery level; and the figure's
    caption."""
    shown = [(c, [r for r in runs if r.case == c and r.timeline is not None]) for c in cases]
    shown = [(c, m) for c, m in shown if m]
    if not shown:
        return None
    end = max(float(r.timeline["sim_time_s"].max()) for _, m in shown for r in m)
    by_day = spans_days(end)
    unit = time_axis([end])[1]
    factor = UNIT_S[unit]
    batteries = any(r.timeline["battery_mean"].notna().any() for _, m in shown for r in m)
    fig = Figure(figsize=(10.0, 2.3 * len(shown) + 0.9), dpi=110)
    axes = np.atleast_2d(fig.subplots(len(shown), 2 if batteries else 1, sharex=True, squeeze=False))
    for row, (case, members) in zip(axes, shown):
        frames = [_per_reading(r) for r in members]
        for column in DRAWN:
            since = column in SINCE
            x, mean, low, high = _curve(
                [(f["sim_time_s"].to_numpy(), f[column].to_numpy()) for f in frames], by_day, factor, since
            )
            style = "steps-post" if by_day else drawstyle(column)  # by hour: each hour's mean over its hour
            colour = COUNTS[column][0]
            row[0].fill_between(x, low, high, step=style[6:], color=colour, alpha=0.15, linewidth=0)
            row[0].plot(x, mean, drawstyle=style, color=colour, linewidth=1.3, label=COUNTS[column][1])
        size = int(frames[0]["devices"].iloc[0])
        row[0].set_ylim(0, size * 1.05)
        row[0].set_ylabel(f"devices (of {size})", fontsize=8)
        row[0].set_title(f"{case} ({len(members)} seed{'s' if len(members) != 1 else ''})", fontsize=9, loc="left")
        row[0].grid(alpha=0.3)
        if batteries:
            groups = list(dict.fromkeys(members[0].timeline["group"]))
            for style, group in zip(GROUP_STYLES * 4, groups):
                readings = [one_per_instant(r.timeline[r.timeline["group"] == group]) for r in members]
                if not any(g["battery_mean"].notna().any() for g in readings):
                    continue
                x, mean, low, high = _curve(
                    [(g["sim_time_s"].to_numpy(), 100 * g["battery_mean"].to_numpy()) for g in readings], by_day, factor
                )
                row[1].fill_between(x, low, high, step="post", color=colours[case], alpha=0.2, linewidth=0)
                row[1].plot(x, mean, drawstyle="steps-post", color=colours[case], linestyle=style, label=group)
            row[1].set_ylim(0, 102)
            row[1].set_ylabel("mean battery (%)", fontsize=8)
            row[1].grid(alpha=0.3)
            row[1].legend(fontsize=7, loc="lower left")
    axes[0][0].legend(fontsize=7, loc="upper right")
    for ax in axes[-1]:
        ax.set_xlabel("hour of the simulated day (0 h = the runs' start)" if by_day else f"simulated time ({unit})")
        if by_day:
            ax.set_xlim(0, 24)
            ax.set_xticks(range(0, 25, 3))
    fig.suptitle("The world over time" + (", by hour of the day" if by_day else ""), fontsize=11)
    caption = (
        "Per case, from each run's timeline.parquet (read at every evaluation): devices online, available (online "
        "and above the battery's min_level), starting work and dropping out since the previous reading, summed over "
        "the device groups; on the right each group's mean battery level. Line: mean over seeds; band: lowest to "
        "highest seed."
        + (" The runs span days, so each hour of the day is the mean of its readings over all days." if by_day else "")
    )
    left_out = [r for r in runs if r.timeline is None]
    if left_out:
        caption += f" {len(left_out)} run(s) have no timeline.parquet (made before netfl wrote it): left out."
    return png(fig), caption


def device_timelines(runs: Sequence[Run], cases: Sequence[str]) -> tuple[bytes, str] | None:
    """A Gantt per case (the first few cases), of its first seed's run: the same sampled devices in each, so the
    rows compare what the algorithms had the same devices do (runs made before netfl wrote a timeline are left
    out)."""
    drawable = [r for r in runs if r.timeline is not None and r.devices is not None and "group" in r.devices.columns]
    firsts = [
        min((r for r in drawable if r.case == c), key=lambda r: r.seed)
        for c in cases
        if any(r.case == c for r in drawable)
    ][:MAX_GANTT_CASES]
    if not firsts:
        return None
    logs = [read_activity(r) for r in firsts]
    fleets = [pd.DataFrame({"device": np.arange(len(r.devices)), "group": r.devices["group"]}) for r in firsts]
    active = {int(d) for log in logs for d in log.loc[log["device"] >= 0, "device"].unique()}
    sample = gantt_sample(fleets[0], active, GANTT_DEVICES)
    if not sample:
        return None
    end = max(float(log["sim_time_s"].max()) for log in logs)
    unit = time_axis([end])[1]
    fig = Figure(figsize=(10.0, (0.24 * len(sample) + 0.7) * len(firsts) + 0.6), dpi=110)
    axes = np.atleast_1d(fig.subplots(len(firsts), 1, sharex=True, squeeze=False)).ravel()
    for ax, run, log, fleet in zip(axes, firsts, logs, fleets):
        draw_gantt(ax, log, fleet, [d for d in sample if d < len(fleet)], end, unit)
        ax.set_title(f"{run.case}, seed {run.seed}", fontsize=9, loc="left")
        if ax is not axes[-1]:
            ax.set_xlabel("")
    gantt_legend(axes[0])
    fig.suptitle("What the same devices did in each case", fontsize=11)
    caption = (
        f"{len(sample)} devices spread over each group, in the first seed's run of "
        + (f"each case ({len(firsts)} of {len(cases)} shown)" if len(cases) > len(firsts) else "each case")
        + ": online, battery empty, charging, and each job's download, training and upload (drawn at least 1/400 "
        "of the axis wide, so a job of seconds in a long run shows as a tick). From events.parquet."
    )
    return png(fig), caption
