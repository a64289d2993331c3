"""The world-over-time figures draw each count over the interval it counts, read back from the plotted lines.

A timeline reading holds states at its instant (online, available), which hold until the next reading, and
counts of what happened since the previous reading (started work, dropped out), which belong to the interval
before it: drawn after it, a count shows devices starting work in an interval in which they did not (in a 48-hour
run, 7 devices starting between 7.5 h and 8 h while none was available). The run's timeline.png, the report's
figure by simulated time and the report's figure by hour of the day are each checked.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from netfl.results import report_world, world_plots
from netfl.results.report_load import Run
from netfl.results.world_plots import COUNTS, UNIT_S, draw_counts

HOUR = 3600.0
LABEL = {column: label for column, (_, label) in COUNTS.items()}


def flats(ax: Axes, column: str, level: float) -> list[tuple[float, float]]:
    """Where the plotted line of ``column`` lies at ``level``: its horizontal stretches (from, to), read from the
    drawn path (steps included), touching stretches joined."""
    (line,) = [line for line in ax.get_lines() if line.get_label() == LABEL[column]]
    points = line.get_path().vertices
    found: list[tuple[float, float]] = []
    for (x0, y0), (x1, y1) in zip(points[:-1], points[1:]):
        if y0 == y1 == level and x1 > x0:
            if found and found[-1][1] == x0:
                found[-1] = (found[-1][0], x1)
            else:
                found.append((x0, x1))
    return found


def timeline(times_h: list[float], **columns: list[float]) -> pd.DataFrame:
    n = len(times_h)
    frame = pd.DataFrame(
        {
            "sim_time_s": np.array(times_h) * HOUR,
            "group": "phones",
            "devices": 10,
            "online": [5] * n,
            "available": [0] * n,
            "participated": [0] * n,
            "dropped": [0] * n,
            "battery_mean": np.nan,
            "battery_p10": np.nan,
            "battery_p90": np.nan,
            "battery_min": np.nan,
        }
    )
    for name, values in columns.items():
        frame[name] = values
    return frame


#: Readings every half hour from 7 h to 9 h: 7 devices started work in (8.0 h, 8.5 h], after the 3 that became
#: available at 8 h; 2 dropped out in (7.0 h, 7.5 h].
TIMES = [7.0, 7.5, 8.0, 8.5, 9.0]
STARTED = [0, 0, 0, 7, 0]
AVAILABLE = [0, 0, 3, 3, 0]
DROPPED = [0, 2, 0, 0, 0]


def test_a_run_s_figure_draws_counts_over_the_interval_they_count() -> None:
    ax = Figure().add_subplot()
    draw_counts(
        ax, timeline(TIMES, participated=STARTED, available=AVAILABLE, dropped=DROPPED).assign(t=TIMES), "phones"
    )
    assert flats(ax, "participated", 7) == [(8.0, 8.5)]  # not (8.5, 9.0): nobody started work then
    assert flats(ax, "dropped", 2) == [(7.0, 7.5)]
    assert flats(ax, "available", 3) == [(8.0, 9.0)]  # a state: from its reading to the next, so work starts
    # only where some device is available


def captured(monkeypatch: pytest.MonkeyPatch, module) -> list[Figure]:
    """The figures ``module`` renders, kept instead of rendered."""
    figures: list[Figure] = []
    monkeypatch.setattr(module, "png", lambda fig, **options: figures.append(fig) or b"")
    return figures


def test_timeline_png_draws_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    figures = captured(monkeypatch, world_plots)
    world_plots.timeline_figure(
        timeline(TIMES, participated=STARTED, available=AVAILABLE, dropped=DROPPED), None, None, title="t"
    )
    counts = figures[0].axes[0]
    assert counts.get_xlabel() == "simulated time (h)"
    assert flats(counts, "participated", 7) == [(8.0, 8.5)] and flats(counts, "dropped", 2) == [(7.0, 7.5)]


def run_of(seed: int, frame: pd.DataFrame) -> Run:
    return Run(Path(f"seed{seed}"), {"seed": seed}, pd.DataFrame(), None, case="case", seed=seed, timeline=frame)


def test_the_report_draws_counts_over_the_interval_they_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two seeds read at different times: each seed's count holds back to its previous reading, so the mean over
    the seeds is drawn where the devices started work."""
    figures = captured(monkeypatch, report_world)
    one = timeline(TIMES, participated=STARTED, available=AVAILABLE, dropped=DROPPED)
    other = timeline([7.0, 8.0, 8.25, 9.0], participated=[0, 0, 3, 0])  # 3 started in (8.0 h, 8.25 h]
    report_world.world_over_time([run_of(1, one), run_of(2, other)], ["case"], {"case": "C0"})
    ax = figures[0].axes[0]
    factor = UNIT_S[ax.get_xlabel().split("(")[1].rstrip(")")] / HOUR
    stretches = {level: flats(ax, "participated", level) for level in (5.0, 3.5)}
    # (8.0, 8.25]: seed 1's 7 and seed 2's 3; (8.25, 8.5]: seed 1's 7 and seed 2's 0
    assert [(lo * factor, hi * factor) for lo, hi in stretches[5.0]] == [(8.0, 8.25)]
    assert [(lo * factor, hi * factor) for lo, hi in stretches[3.5]] == [(8.25, 8.5)]
    assert [(lo * factor, hi * factor) for lo, hi in flats(ax, "dropped", 1.0)] == [(7.0, 7.5)]


def test_the_hour_of_day_figure_puts_a_count_in_the_hour_it_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two days read hourly: 7 devices start work every day between 07:00 and 08:00 (the 08:00 reading's count),
    and 2 drop out between 12:00 and 13:00: drawn over 7-8 h and 12-13 h of the day, not an hour late."""
    figures = captured(monkeypatch, report_world)
    hours = [float(h) for h in range(49)]
    started = [7 if h % 24 == 8 else 0 for h in range(49)]
    dropped = [2 if h % 24 == 13 else 0 for h in range(49)]
    frame = timeline(hours, participated=started, dropped=dropped)
    report_world.world_over_time([run_of(1, frame)], ["case"], {"case": "C0"})
    ax = figures[0].axes[0]
    assert ax.get_xlabel().startswith("hour of the simulated day")
    assert flats(ax, "participated", 7) == [(7.0, 8.0)]
    assert flats(ax, "dropped", 2) == [(12.0, 13.0)]
    assert flats(ax, "online", 5) == [(0.0, 24.0)]


def test_hourly_bins_of_counts_and_of_states() -> None:
    """A count is binned by the middle of the interval it counts (the first reading, of its own instant, by its
    time); a state by its reading's time, as before."""
    times = np.array([0.0, 1800.0, 3600.0, 7200.0, 86400 + 3600.0])
    values = np.array([1.0, 3.0, 5.0, 7.0, 9.0])
    states = report_world._by_hour(times, values)
    counts = report_world._by_hour(times, values, since=True)
    assert states[0] == 2.0 and states[1] == 7.0 and states[2] == 7.0  # 0 h: 1, 3; 1 h: 5, 9; 2 h: 7
    # 0 h: 1 (its instant), 3 ((0, 0.5 h]), 5 ((0.5 h, 1 h]); 1 h: 7 ((1 h, 2 h]); the last ((2 h, 25 h]) mid 13.5 h
    assert counts[0] == 3.0 and counts[1] == 7.0 and counts[13] == 9.0 and np.isnan(counts[2])
