"""Plots of a run (matplotlib, no display needed).

Figures are built with ``matplotlib.figure.Figure`` directly, not pyplot:
no global backend is switched (a notebook that imports netfl keeps its
own) and nothing is left open between plots.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator


def time_axis(seconds: Sequence[float]) -> tuple[list[float], str]:
    """Scale simulated seconds to the unit that reads best."""
    top = max(seconds, default=0.0)
    for unit, factor in (("h", 3600.0), ("min", 60.0)):
        if top >= 2 * factor:
            return [s / factor for s in seconds], unit
    return list(seconds), "s"


def png(fig: Figure, tight: bool = True) -> bytes:
    """``fig`` laid out (``tight``: by matplotlib, which renders it once more) and rendered as PNG bytes (written to
    a file, or embedded in report.html)."""
    FigureCanvasAgg(fig)
    if tight:
        fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


#: The margins matplotlib's ``tight_layout`` finds for a 6.4 x 4 inch plot of one title line, axis labels and
#: tick labels of up to three digits, given by hand: ``tight_layout`` lays the figure out by drawing it once
#: more before ``savefig`` draws it (a third of a small run's plotting time).
SMALL_PLOT_MARGINS = {"left": 0.1, "right": 0.975, "bottom": 0.145, "top": 0.91}


def plot_accuracy_vs_time(path: Path, metrics: Sequence[Any], *, title: str) -> None:
    times, unit = time_axis([m.sim_time_s for m in metrics])
    fig = Figure(figsize=(6.4, 4.0), dpi=120)
    ax = fig.subplots()
    tasks = len(getattr(metrics[0], "tasks", ())) if metrics else 0
    for s in range(tasks):  # several models: each one thin, their mean bold
        ax.plot(times, [100 * m.tasks[s].accuracy for m in metrics], linewidth=0.9, alpha=0.7, label=f"task {s}")
    ax.plot(
        times,
        [100 * m.test_accuracy for m in metrics],
        marker="o",
        markersize=2.5,
        linewidth=2.0 if tasks else 1.2,
        color="black" if tasks else None,
        label="mean" if tasks else None,
    )
    if tasks:
        ax.legend(fontsize=8, loc="lower right")
    ax.set_xlabel(f"simulated wall-clock time ({unit})")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.subplots_adjust(**SMALL_PLOT_MARGINS)
    fig.savefig(path)


def plot_staleness(path: Path, staleness: Sequence[int], *, title: str) -> None:
    """Histogram of how many rounds old each applied update was (asynchronous runs)."""
    top = max(staleness)
    tally = Counter(staleness)
    counts = [tally.get(v, 0) for v in range(top + 1)]
    fig = Figure(figsize=(6.4, 4.0), dpi=120)
    ax = fig.subplots()
    ax.bar(range(top + 1), counts, width=0.8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # versions behind are whole numbers
    ax.set_xlim(-0.6, top + 0.6)
    ax.set_xlabel("staleness (global model versions behind)")
    ax.set_ylabel("updates applied")
    ax.set_title(title)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path)
