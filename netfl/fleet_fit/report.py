"""The fit report: the logs against the fitted world simulated, side by side, in the terminal and as one HTML page.

The page is self-contained (inline CSS, figures as data URIs) like ``netfl report``'s, and uses its style.
"""

from __future__ import annotations

import base64
import html

import numpy as np
from matplotlib.figure import Figure

from netfl.fleet_fit.estimate import FittedGroup
from netfl.fleet_fit.fragment import _clock
from netfl.fleet_fit.goodness import Goodness
from netfl.fleet_fit.statistics import LENGTH_EDGES, FleetStats
from netfl.results.plots import png
from netfl.results.report_html import STYLE

__all__ = ["terminal_table", "html_report"]

LOGGED, SIMULATED = ("#1f77b4", "logged"), ("#d62728", "fitted world, simulated")


def terminal_table(groups: list[FittedGroup], fit: Goodness, logged: FleetStats, simulated: FleetStats) -> str:
    """The compact table: the groups' parameters, then the goodness of fit."""
    head = f"{'group':<12}{'devices':>8}{'avail.':>8}{'use h/d':>8}{'session':>9}{'charger':>13}{'jitter':>8}"
    head += f"{'idle W':>8}{'use W':>7}{'charge W':>9}"
    lines = [head]
    for g in groups:
        use_h = 24 * float(np.mean(g.use_profile)) if g.use_profile is not None else 0.0
        window = f"{_clock(g.window[0])}-{_clock(g.window[1])}" if g.window else "none"
        jitter = f"{g.window[2] / 60:.0f}min" if g.window else "-"
        session = g.use_mixing / max(1e-9, 1 - float(np.mean(g.use_profile or [0]))) / 60
        lines.append(
            f"{g.name:<12}{len(g.devices):>8}{np.mean(g.availability_profile):>8.3f}{use_h:>8.2f}"
            f"{session:>7.1f}m{window:>13}{jitter:>8}{g.idle_power:>8.3f}{g.use_power:>7.2f}{g.charge_power:>9.2f}"
        )
    lines += ["", f"goodness of fit ({logged.devices} logged devices against {simulated.devices} simulated):"]
    lines += [f"  {what:<28}{measure:<30}{value}" for what, measure, value in fit.rows()]
    return "\n".join(lines)


def _figure(title: str, xlabel: str, ylabel: str):
    fig = Figure(figsize=(6.2, 3.4), dpi=100)
    ax = fig.subplots()
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    return fig, ax


def _hourly(title: str, ylabel: str, logged: np.ndarray, simulated: np.ndarray) -> bytes:
    fig, ax = _figure(title, "hour of the day", ylabel)
    hours = np.arange(25)
    for values, (colour, label) in ((logged, LOGGED), (simulated, SIMULATED)):
        ax.step(hours, np.append(values, values[-1]), where="post", color=colour, label=label)
    ax.set_xlim(0, 24)
    ax.set_xticks(range(0, 25, 3))
    ax.legend(fontsize=8)
    return png(fig)


def _cdf(title: str, edges: np.ndarray, logged: np.ndarray, simulated: np.ndarray, xlabel: str, log: bool) -> bytes:
    fig, ax = _figure(title, xlabel, "fraction at most")
    for counts, (colour, label) in ((logged, LOGGED), (simulated, SIMULATED)):
        if counts.sum() > 0:
            ax.step(
                edges,
                np.concatenate(([0.0], np.cumsum(counts) / counts.sum())),
                where="post",
                color=colour,
                label=label,
            )
    if log:
        ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    return png(fig)


def _times_of_day(title: str, logged: np.ndarray, simulated: np.ndarray) -> bytes:
    """Densities by 15 minutes, hours on the axis."""
    fig, ax = _figure(title, "time of day (h)", "share per 15 min")
    centres = (np.arange(96) + 0.5) / 4
    for counts, (colour, label) in ((logged, LOGGED), (simulated, SIMULATED)):
        if counts.sum() > 0:
            quarter = counts.reshape(96, 15).sum(axis=1)
            ax.plot(centres, quarter / quarter.sum(), color=colour, label=label)
    ax.set_xlim(0, 24)
    ax.set_xticks(range(0, 25, 3))
    ax.legend(fontsize=8)
    return png(fig)


def html_report(
    groups: list[FittedGroup],
    fit: Goodness,
    logged: FleetStats,
    simulated: FleetStats,
    source: str,
) -> str:
    """The page: what was fitted, the goodness of fit, the figures, the groups' parameters."""
    figures = [
        (
            "Eligible fraction by hour",
            "locked, charging and on Wi-Fi (logged); online (simulated)",
            _hourly(
                "Eligible fraction by hour", "fraction eligible", logged.eligible_by_hour, simulated.eligible_by_hour
            ),
        ),
        (
            "In use by hour",
            "screen on (logged); in a use session (simulated)",
            _hourly("In use by hour", "fraction in use", logged.use_by_hour, simulated.use_by_hour),
        ),
        (
            "Session lengths",
            "completed sessions, cumulative",
            _cdf("Session lengths", LENGTH_EDGES, logged.lengths, simulated.lengths, "seconds", True),
        ),
        (
            "Charge start times",
            "charges of an hour or more",
            _times_of_day("Charge start times", logged.plug_ins, simulated.plug_ins),
        ),
        (
            "Charge end times",
            "charges of an hour or more",
            _times_of_day("Charge end times", logged.plug_outs, simulated.plug_outs),
        ),
        (
            "Battery level by hour",
            "mean percent, read every 10 minutes along the samples",
            _hourly("Battery level by hour", "percent", logged.level_by_hour, simulated.level_by_hour),
        ),
    ]
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>netfl fit: {html.escape(source)}</title><style>{STYLE}"
        ".grid { display: grid; grid-template-columns: 1fr 1fr; gap: 0 1.2em; }</style></head><body>",
        f"<h1>A fleet from its logs: {html.escape(source)}</h1>",
        f'<p class="meta">{logged.devices} devices over {logged.days / max(logged.devices, 1):.1f} days of logs, '
        f"fitted as {len(groups)} group(s); the fitted world simulated with {simulated.devices} devices for "
        f"{simulated.days / max(simulated.devices, 1):.0f} days.</p>",
        "<h2>Goodness of fit</h2>",
        '<div class="table"><table class="data"><tr><th>statistic</th><th>measure</th><th>value</th></tr>',
    ]
    out += [
        f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td><td>{html.escape(c)}</td></tr>"
        for a, b, c in fit.rows()
    ]
    out += ["</table></div>", '<div class="grid">']
    for heading, caption, image in figures:
        data = base64.b64encode(image).decode("ascii")
        out += [
            f'<figure><img alt="{html.escape(heading)}" src="data:image/png;base64,{data}">',
            f"<figcaption>{html.escape(caption)}</figcaption></figure>",
        ]
    out += [
        "</div>",
        "<h2>Fitted groups</h2>",
        "<pre>",
        html.escape(terminal_table(groups, fit, logged, simulated)),
        "</pre>",
        "</body></html>",
    ]
    return "\n".join(out) + "\n"
