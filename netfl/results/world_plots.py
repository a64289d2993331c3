"""The world over time, drawn: device counts and batteries by group (timeline.parquet), and a Gantt of devices.

A run folder gets one figure, ``timeline.png`` (rendering is most of a
figure's cost, and a run writes several); the report draws the same counts
per case, mean over seeds, and a Gantt per case (report_world.py). Built on
``Figure``, never pyplot (see plots.py).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from netfl.results.plots import png, time_axis

DAY_S = 86400.0
UNIT_S = {"h": 3600.0, "min": 60.0, "s": 1.0}
#: The device counts a timeline plot draws, their colour and what they mean on the legend.
COUNTS = {
    "online": ("#1f77b4", "online"),
    "available": ("#2ca02c", "available (online, battery above min_level)"),
    "participated": ("#ff7f0e", "started work since the previous reading"),
    "dropped": ("#d62728", "dropped out since the previous reading"),
}
#: Gantt lanes of work: from which event to which (or a dropout), and the colour.
ACTIVITIES = {
    "download": ("download_start", "download_end", "#9467bd"),
    "train": ("train_start", "train_end", "#ff7f0e"),
    "upload": ("upload_start", "upload_end", "#d62728"),
}
#: Gantt lanes of state: from which event to which.
STATES = {
    "online": ("online", "offline"),
    "charging": ("charge_start", "charge_stop"),
    "off": ("battery_empty", "power_on"),
}
#: Each Gantt lane's colour and its vertical place in a device's row (offset from the row's centre, height).
LANES = {
    "online": ("#c6dbef", (-0.4, 0.8)),
    "off": ("0.55", (-0.4, 0.8)),
    "charging": ("#2ca02c", (-0.45, 0.12)),
    **{lane: (colour, (-0.25, 0.5)) for lane, (_, _, colour) in ACTIVITIES.items()},
}
LABELS = {"off": "battery empty"}
MAX_GANTT_DEVICES = 16


def timeline_figure(
    timeline: pd.DataFrame, events: pd.DataFrame | None, devices: pd.DataFrame | None, *, title: str
) -> bytes:
    """The run's world in one figure: for each device group a row with its device counts (left) and the battery
    levels of its battery-powered devices (right: mean, 10th-90th percentile band, lowest), then a Gantt of a
    sample of devices (when ``events`` and ``devices`` are given and some device has events)."""
    groups = list(dict.fromkeys(timeline["group"]))
    end = float(timeline["sim_time_s"].max())
    unit = time_axis([end])[1]
    frame = timeline.assign(t=timeline["sim_time_s"] / UNIT_S[unit])
    sample = gantt_sample(devices, _active(events)) if events is not None and devices is not None else []
    heights = [2.0] * len(groups) + ([0.26 * len(sample) + 0.4] if sample else [])
    gap, top, bottom = 0.75, 1.15, 0.5  # inches: between rows (ticks, labels, titles), above (title, legend), below
    tall = sum(heights) + gap * (len(heights) - 1) + top + bottom
    fig = Figure(figsize=(10.0, tall), dpi=110)  # laid out by hand: a layout engine would render it once more
    grid = fig.add_gridspec(
        len(heights),
        2,
        height_ratios=heights,
        left=0.09,
        right=0.86,
        top=1 - top / tall,
        bottom=bottom / tall,
        hspace=gap / (sum(heights) / len(heights)),
        wspace=0.22,
    )
    rows = [(fig.add_subplot(grid[i, 0]), fig.add_subplot(grid[i, 1])) for i in range(len(groups))]
    for (left, right), group in zip(rows, groups):
        readings = one_per_instant(frame[frame["group"] == group])
        draw_counts(left, readings, group)
        draw_battery(right, readings)
    rows[0][0].set_title("Devices", fontsize=10)
    rows[0][1].set_title("Battery: mean, 10th-90th percentile, lowest", fontsize=10)
    handles = rows[0][0].get_lines() + [h for _, right in rows[:1] for h in right.get_legend_handles_labels()[0]]
    fig.legend(
        handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.32 / tall), ncol=4, fontsize=7, frameon=False
    )
    for ax in rows[-1]:
        ax.set_xlabel(f"simulated time ({unit})")
    if sample:
        gantt = fig.add_subplot(grid[len(groups), :])
        draw_gantt(gantt, events, devices, sample, end, unit)
        gantt.set_title(f"{len(sample)} of {len(devices)} devices, spread over each group", fontsize=9)
        gantt_legend(gantt)
    fig.suptitle(title, fontsize=11, y=1 - 0.08 / tall, va="top")
    return png(fig, tight=False)


#: Timeline columns that count what happened since the previous reading (the others are states at the reading).
SINCE = ("participated", "dropped", "delivered")


def one_per_instant(rows: pd.DataFrame) -> pd.DataFrame:
    """One group's readings with those of one instant merged (the grid's evaluation and the final one at the stop
    share it): the states as the last of them read them, what happened since summed."""
    present = [c for c in rows.columns if c not in ("sim_time_s", "group")]
    how = {c: ("sum" if c in SINCE else "last") for c in present}
    return rows.groupby("sim_time_s", sort=False).agg(how).reset_index()


def drawstyle(column: str) -> str:
    """How a timeline column is drawn as steps: a state read at a reading holds until the next one
    (``steps-post``); a count of what happened since the previous reading is drawn over that interval, back to
    it (``steps-pre``), never over the interval after, in which it did not happen."""
    return "steps-pre" if column in SINCE else "steps-post"


def draw_counts(ax: Axes, rows: pd.DataFrame, group: str) -> None:
    """One group's device counts against ``rows["t"]`` (online shaded, each count a step line)."""
    size = int(rows["devices"].iloc[0]) if len(rows) else 0
    ax.fill_between(rows["t"], rows["online"], step="post", color=COUNTS["online"][0], alpha=0.25, linewidth=0)
    for column, (colour, label) in COUNTS.items():
        ax.plot(rows["t"], rows[column], color=colour, linewidth=1.2, drawstyle=drawstyle(column), label=label)
    ax.set_ylim(0, max(size, 1) * 1.05)
    ax.set_ylabel(f"{group}: devices (of {size})", fontsize=9)
    ax.grid(alpha=0.3)


def draw_battery(ax: Axes, rows: pd.DataFrame) -> None:
    """One group's battery levels against ``rows["t"]``, or a note that it runs on mains power."""
    if not rows["battery_mean"].notna().any():
        ax.text(0.5, 0.5, "mains power: no battery", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    band = (100 * rows["battery_p10"], 100 * rows["battery_p90"])
    ax.fill_between(rows["t"], *band, color="0.6", alpha=0.3, linewidth=0, label="10-90 %")
    ax.plot(rows["t"], 100 * rows["battery_mean"], color="black", linewidth=1.5, label="mean")
    ax.plot(rows["t"], 100 * rows["battery_min"], color="black", linewidth=0.8, linestyle=":", label="lowest")
    ax.set_ylim(0, 102)
    ax.set_ylabel("battery (%)", fontsize=9)
    ax.grid(alpha=0.3)


def _active(events: pd.DataFrame | None) -> set[int]:
    return set() if events is None else {int(d) for d in events.loc[events["device"] >= 0, "device"].unique()}


def gantt_sample(devices: pd.DataFrame, active: set[int], limit: int = MAX_GANTT_DEVICES) -> list[int]:
    """Up to ``limit`` devices spread evenly over each group (in proportion to its size, at least one each),
    among those with events (``active``; the array form logs working devices only)."""
    chosen: list[int] = []
    working = np.fromiter(active, dtype=np.int64, count=len(active))
    for group in pd.unique(devices["group"]):  # vectorised: ten million devices are ten million rows
        in_group = (devices["group"] == group).to_numpy()
        ids = devices["device"].to_numpy()[in_group]
        members = [int(d) for d in ids[np.isin(ids, working)]]
        share = max(1, round(limit * in_group.sum() / len(devices)))
        if len(members) > share:
            members = [members[i] for i in np.linspace(0, len(members) - 1, share).round().astype(int)]
        chosen += members
    return chosen


def intervals(events: pd.DataFrame, device: int, end: float) -> dict[str, list[tuple[float, float]]]:
    """When ``device`` was online, charging, off (battery empty) and downloading, training or uploading, as
    (start, length) pairs up to ``end`` (the run's end closes what is still open)."""
    rows = events[events["device"] == device]
    lanes: dict[str, list[tuple[float, float]]] = {name: [] for name in (*STATES, *ACTIVITIES)}
    opened: dict[str, float] = {}
    for time, kind in zip(rows["sim_time_s"], rows["kind"]):
        for lane, (start, stop) in STATES.items():
            if kind == start and lane not in opened:
                opened[lane] = time
            elif kind == stop and lane in opened:
                lanes[lane].append((opened[lane], time - opened.pop(lane)))
        for lane, (start, stop, _) in ACTIVITIES.items():
            if kind == start:
                opened[lane] = time
            elif kind in (stop, "dropout") and lane in opened:
                lanes[lane].append((opened[lane], time - opened.pop(lane)))
    for lane, since in opened.items():
        lanes[lane].append((since, end - since))
    return lanes


def draw_gantt(ax: Axes, events: pd.DataFrame, devices: pd.DataFrame, sample: list[int], end: float, unit: str) -> None:
    """One row per sampled device: online (light), battery empty (grey), charging (a line under), and its jobs'
    downloads, training and uploads -- each at least 1/400 of the axis wide, so a job of seconds in a day-long run
    still shows as a tick. One collection per lane (drawing cost grows with artists, not rectangles)."""
    factor = UNIT_S[unit]
    shortest = end / factor / 400
    bars: dict[str, list[tuple[float, float, float, float]]] = {lane: [] for lane in LANES}
    for row, device in enumerate(sample):
        y = len(sample) - 1 - row
        for lane, spans in intervals(events, device, end).items():
            low, height = LANES[lane][1]
            wide = shortest if lane in ACTIVITIES else 0.0
            bars[lane] += [(s / factor, max(w / factor, wide), y + low, height) for s, w in spans]
    for lane, (colour, _) in LANES.items():
        if bars[lane]:
            ax.add_collection(PolyCollection([_box(*b) for b in bars[lane]], facecolors=colour, linewidths=0))
    shown = devices[devices["device"].isin(sample)]
    group_of = dict(zip(shown["device"].astype(int), shown["group"]))
    ax.set_yticks(range(len(sample)), [f"{group_of[d]} {d}" for d in reversed(sample)], fontsize=7)
    ax.set_ylim(-0.7, len(sample) - 0.3)
    ax.set_xlim(0, end / factor if end > 0 else 1)
    ax.set_xlabel(f"simulated time ({unit})")
    ax.grid(alpha=0.3, axis="x")


def _box(x: float, width: float, y: float, height: float) -> list[tuple[float, float]]:
    return [(x, y), (x + width, y), (x + width, y + height), (x, y + height)]


def gantt_legend(ax: Axes) -> None:
    ax.legend(
        handles=[Patch(color=colour, label=LABELS.get(lane, lane)) for lane, (colour, _) in LANES.items()],
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        frameon=False,
    )


def spans_days(end_s: float) -> bool:
    """Whether a run is long enough (two days or more) to be drawn by time of day, its days folded together."""
    return math.isfinite(end_s) and end_s >= 2 * DAY_S
