"""The report's figures, as PNG bytes (written beside report.html and embedded in it).

Built on ``Figure`` + ``FigureCanvasAgg``, never pyplot (see plots.py). Each
case keeps one colour in every figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from netfl.results.plots import png as _png
from netfl.results.report_load import Run
from netfl.results.report_tables import mean_curve, target_label

#: At most this many devices per case in the participation scatter (a million-device run would bury the plot).
MAX_SCATTER_POINTS = 3000


def case_colours(cases: Sequence[str]) -> dict[str, tuple]:
    palette = colormaps["tab10" if len(cases) <= 10 else "tab20"].colors
    return {case: palette[i % len(palette)] for i, case in enumerate(cases)}


def accuracy_vs_time(
    runs: Sequence[Run],
    cases: Sequence[str],
    targets: Sequence[float],
    colours: dict[str, tuple],
    unit: tuple[str, float],
) -> bytes:
    """Per case, the mean test accuracy over seeds (step-wise) and its min-max band against simulated time."""
    name, factor = unit
    fig = Figure(figsize=(9.0, 4.6), dpi=110)
    ax = fig.subplots()
    for case in cases:
        members = [r for r in runs if r.case == case]
        grid, mean, low, high = mean_curve([(r.metrics["sim_time_s"], r.metrics["test_accuracy"]) for r in members])
        if not len(grid):
            continue
        label = seeds_label(case, members)
        if len(members) > 1:
            ax.fill_between(
                grid / factor, 100 * low, 100 * high, step="post", color=colours[case], alpha=0.18, linewidth=0
            )
        ax.plot(grid / factor, 100 * mean, drawstyle="steps-post", color=colours[case], linewidth=1.8, label=label)
    for target in targets:
        ax.axhline(100 * target, color="0.45", linestyle="--", linewidth=0.8)
        ax.annotate(
            f"{100 * target:g} %",
            (0.0, 100 * target),
            xycoords=("axes fraction", "data"),
            xytext=(3, 2),
            textcoords="offset points",
            fontsize=8,
            color="0.35",
        )
    ax.set_xlabel(f"simulated wall-clock time ({name})")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("Test accuracy: mean over seeds, band from min to max")
    ax.grid(alpha=0.3)
    ax.set_xlim(left=0)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return _png(fig)


def to_target_bars(
    cases_table: pd.DataFrame,
    targets: Sequence[float],
    colours: dict[str, tuple],
    *,
    key: str,
    ylabel: str,
    title: str,
    scale: float = 1.0,
) -> bytes:
    """One group of bars per target, one bar per case: the mean over the seeds that reached it, ± std,
    with how many seeds reached it on top ("never" where none did).

    ``key``: the cases-table column stem with ``{t}`` for the target, e.g. ``time_to_{t}_s``."""
    fig = Figure(figsize=(9.0, 4.2), dpi=110)
    ax = fig.subplots()
    rows = cases_table.to_dict("records")
    width = 0.8 / max(len(rows), 1)
    tops = [
        (r[f"{key.format(t=target_label(t))}_mean"] + np.nan_to_num(r[f"{key.format(t=target_label(t))}_std"])) / scale
        for r in rows
        for t in targets
    ]
    top = max([v for v in tops if not math.isnan(v)], default=0.0) or 1.0
    for i, row in enumerate(rows):
        x0 = (i - (len(rows) - 1) / 2) * width
        for j, target in enumerate(targets):
            t = target_label(target)
            mean, std = row[f"{key.format(t=t)}_mean"] / scale, row[f"{key.format(t=t)}_std"] / scale
            if math.isnan(mean):  # never reached, or a seed that reached it has no such number
                ax.text(
                    j + x0,
                    0.02 * top,
                    "never" if row[f"reached_{t}"] == 0 else "n/a",
                    ha="center",
                    va="bottom",
                    rotation=90,
                    fontsize=8,
                    color=colours[row["case"]],
                )
                continue
            ax.bar(
                j + x0,
                mean,
                width * 0.9,
                color=colours[row["case"]],
                yerr=None if math.isnan(std) else std,
                capsize=3,
                error_kw={"linewidth": 0.9},
            )
            ax.annotate(
                f"{row[f'reached_{t}']}/{row['seeds']}",
                (j + x0, mean + np.nan_to_num(std)),
                xytext=(0, 2),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=8,
            )
    ax.set_xticks(range(len(targets)), [f"accuracy ≥ {100 * t:g} %" for t in targets])
    ax.set_xlim(-0.5, len(targets) - 0.5)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.12 * top)
    ax.set_title(title)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(
        handles=[Patch(color=colours[r["case"]], label=r["case"]) for r in rows],
        fontsize=8,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        frameon=False,
    )
    return _png(fig)


def seeds_label(case: str, members: Sequence[Run]) -> str:
    """``fedavg (100 devices × 3 seeds)``: a case's runs counted as a reader counts them."""
    sizes = sorted({len(r.devices) for r in members if r.devices is not None})
    devices = f"{sizes[0]} devices" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]} devices" if sizes else ""
    seeds = f"{len(members)} seed{'s' if len(members) != 1 else ''}"
    return f"{case} ({devices} × {seeds})" if devices else f"{case} ({seeds})"


def grid_of(
    panels: int, xlabel: str, ylabel: str, columns: int = 3, width: float = 9.0, height: float = 2.7
) -> tuple[Figure, list]:
    """A figure of ``panels`` small multiples, ``columns`` to a row (shared axes), labelled on the outer edges:
    the x axis under the lowest panel of each column (above a spare cell too), the y axis on the left."""
    cols = min(columns, panels)
    rows = math.ceil(panels / cols)
    fig = Figure(figsize=(width, height * rows + 0.5), dpi=110)
    axes = list(np.atleast_1d(fig.subplots(rows, cols, sharex=True, sharey=True, squeeze=False)).ravel())
    for ax in axes[panels:]:
        ax.set_visible(False)
    for i, ax in enumerate(axes[:panels]):
        if i + cols >= panels:  # nothing drawn below it
            ax.xaxis.set_tick_params(labelbottom=True)
            ax.set_xlabel(xlabel)
        if i % cols == 0:
            ax.set_ylabel(ylabel)
    return fig, axes[:panels]


def participation(runs: Sequence[Run], cases: Sequence[str], colours: dict[str, tuple]) -> tuple[bytes, str] | None:
    """One panel per case (overlaid, the cases' dots would hide each other): updates each device delivered against
    the share of the run it was online, every seed; and the figure's caption."""
    rng = np.random.default_rng(0)  # which devices are shown when there are too many: the same every time
    shown = []
    for case in cases:
        members = [r for r in runs if r.case == case]
        frames = [
            r.devices
            for r in members
            if r.devices is not None and {"online_fraction", "updates_delivered"} <= set(r.devices.columns)
        ]
        if frames:
            shown.append((case, members, pd.concat(frames, ignore_index=True)))
    if not shown:
        return None
    online = np.concatenate([devices["online_fraction"].to_numpy(dtype=float) for _, _, devices in shown])
    if np.ptp(online) < 1e-9:  # every device online for the same share of its run (the whole run, say): a histogram
        return _updates_histograms(shown, colours, float(online[0]))
    fig, axes = grid_of(len(shown), "time online (% of the run)", "updates delivered")
    for ax, (case, members, devices) in zip(axes, shown):
        note = ""
        if len(devices) > MAX_SCATTER_POINTS:
            devices = devices.iloc[np.sort(rng.choice(len(devices), MAX_SCATTER_POINTS, replace=False))]
            note = f", {MAX_SCATTER_POINTS} shown"
        ax.scatter(
            100 * devices["online_fraction"],
            devices["updates_delivered"],
            s=12,
            alpha=0.5,
            color=colours[case],
            edgecolors="none",
        )
        ax.set_title(seeds_label(case, members) + note, fontsize=8)
        ax.set_xlim(-3, 103)  # a share of the run: never past 100 %
        ax.grid(alpha=0.3)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle("Participation per device: one dot per device and seed", fontsize=11)
    return _png(fig), (
        "One panel per case, one dot per device and seed (devices.parquet): updates it delivered against the share "
        "of the run it was online."
    )


def _updates_histograms(shown: list, colours: dict[str, tuple], online: float) -> tuple[bytes, str]:
    """Where every device was online for the same share of the run, online time tells the devices nothing apart:
    one panel per case of how many devices (every seed) delivered each number of updates."""
    fig, axes = grid_of(len(shown), "updates delivered", "devices")
    most = max(int(devices["updates_delivered"].max()) for _, _, devices in shown)
    bins = np.arange(-0.5, most + 1.5, max(1, math.ceil((most + 1) / 40)))  # whole numbers, at most 40 bars
    for ax, (case, members, devices) in zip(axes, shown):
        ax.hist(devices["updates_delivered"], bins=bins, color=colours[case], alpha=0.8)
        ax.set_title(seeds_label(case, members), fontsize=8)
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(
        f"Participation per device: every device was online {100 * online:.0f} % of the run; updates each delivered",
        fontsize=11,
    )
    return _png(fig), (
        f"One panel per case (devices.parquet, every seed): how many devices delivered each number of updates. Every "
        f"device was online {100 * online:.0f} % of its run, so online time tells none apart."
    )


def staleness(histograms: dict[str, dict[int, int]], colours: dict[str, tuple]) -> bytes:
    """One panel per case: the share of applied updates by staleness, summed over its seeds."""
    cases = list(histograms)
    fig, axes = grid_of(len(cases), "staleness (versions behind)", "updates applied (%)", height=2.6)
    top = max(max(h) for h in histograms.values())
    for ax, case in zip(axes, cases):
        counts = np.array([histograms[case].get(v, 0) for v in range(top + 1)], float)
        bars = ax.bar(range(top + 1), 100 * counts / counts.sum(), width=0.8, color=colours[case])
        if top <= 12:  # counts on the bars: a handful of very stale updates is otherwise an invisible sliver
            ax.bar_label(bars, labels=[f"{c:.0f}" if c else "" for c in counts], fontsize=7, padding=1)
        ax.set_title(case, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0].set_ylim(0, 112)  # room for the count on a 100 % bar
    fig.suptitle("Staleness of applied updates", fontsize=11)
    return _png(fig)
