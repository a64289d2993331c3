"""report.html: one self-contained page (inline CSS, plots as data URIs, no script, nothing fetched), so it
can be mailed or opened from a laptop without the run folders or a server."""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from netfl.results.paired import Paired
from netfl.results.report_ranking import Ranking
from netfl.results.report_tables import target_label

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2em auto; max-width: 1150px;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
p.meta { color: #555; margin-top: 0; } ul { padding-left: 1.3em; } li { margin: 0.25em 0; }
.warn { background: #fff4e0; border-left: 4px solid #e69500; padding: 0.4em 0.8em; }
div.table { overflow-x: auto; }
table.data { border-collapse: collapse; font-size: 0.86em; margin: 0.6em 0 1em; }
table.data th, table.data td { padding: 0.25em 0.7em; border-bottom: 1px solid #e4e4e4; text-align: right;
                               white-space: nowrap; }
table.data th { background: #f3f3f3; white-space: normal; vertical-align: bottom; }
table.data th:first-child, table.data td:first-child, table.labels2 td:nth-child(2),
table.labels2 th:nth-child(2), table.labels3 td:nth-child(-n+3), table.labels3 th:nth-child(-n+3) { text-align: left; }
table.data tr:nth-child(even) td { background: #fafafa; }
figure { margin: 1em 0 1.6em; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; } p.how { color: #444; font-size: 0.9em; }
"""


def pm(mean: float, std: float = math.nan, digits: int | None = None, scale: float = 1.0) -> str:
    """``mean ± std``; the mean alone with one seed (std NaN); an em dash when there is no mean.

    ``digits``: decimals (default: enough for 3 significant digits of the mean); whole numbers (rounds,
    update counts, an exact std of 0) are written without decimals."""
    if mean is None or math.isnan(mean):
        return "—"
    mean, std = mean * scale, std * scale
    if digits is None:
        digits = max(0, 2 - math.floor(math.log10(abs(mean)))) if mean else 0
    if float(mean).is_integer() and (math.isnan(std) or float(std).is_integer()):
        digits = 0
    text = f"{mean:,.{digits}f}"
    return text if math.isnan(std) else f"{text} ± {std:,.{digits}f}"


def signed(value: float, digits: int) -> str:
    """``+1.25`` / ``−0.50`` (a true minus sign), ``0`` for zero."""
    if value == 0:
        return "0"
    return f"{'+' if value > 0 else '−'}{abs(value):,.{digits}f}"


def interval(p: Paired, scale: float = 1.0, digits: int | None = None) -> str:
    """``+0.50 [−0.74, +1.74]``: a paired mean difference and its interval; the mean alone for one seed."""
    if math.isnan(p.mean):
        return "— (no seed in common)"
    values = [abs(v * scale) for v in (p.mean, p.low, p.high) if not math.isnan(v) and v != 0]
    if digits is None:
        digits = max(0, 2 - math.floor(math.log10(max(values)))) if values else 0
    text = signed(p.mean * scale, digits)
    if math.isnan(p.low):
        return f"{text} (one seed: no interval)"
    return f"{text} [{signed(p.low * scale, digits)}, {signed(p.high * scale, digits)}]"


def bold(case: str) -> str:
    """A case's name on the page: escaped, in bold."""
    return f"<b>{html.escape(case)}</b>"


def first_lines(
    rankings: Sequence[Ranking], cases: pd.DataFrame, unit: tuple[str, float], mark: Callable[[str], str] = bold
) -> list[str]:
    """Per target, in words: which case got there first in simulated time -- only when its paired interval
    against every other case that reached the target in every seed excludes zero; otherwise which are tied -- then
    the later ones, each with its paired difference, then the cases that reached it in some seeds only (a mean
    over the lucky seeds would flatter them) and those that never did. ``mark`` writes a case's name (the page's
    bold; ``str`` for the terminal)."""
    name, factor = unit
    records = {r["case"]: r for r in cases.to_dict("records")}
    lines = []
    for ranking in rankings:
        t = target_label(ranking.target)

        def when(case: str, t: str = t) -> str:
            r = records[case]
            mean = pm(r[f"time_to_{t}_s_mean"], r[f"time_to_{t}_s_std"], scale=1 / factor)
            return f"{mark(case)} at {mean} {name} ({r[f'reached_{t}']}/{r['seeds']} seeds)"

        def against(case: str, p: Paired) -> str:
            return f"{mark(case)} {interval(p, 1 / factor)} {name}"

        def apart(case: str, p: Paired) -> str:
            return f"{mark(case)} ({'one seed' if p.n == 1 else 'no seed'} in common)"

        parts = []
        if ranking.first is None:
            parts.append("No case reached it in every seed")
        elif ranking.alone:
            parts.append(f"First {when(ranking.first)}")
        else:
            text = f"No case is first: {when(ranking.first)}"
            if ranking.tied:
                text += "; tied with it: " + ", ".join(against(case, p) for case, p in ranking.tied)
            if ranking.uncompared:
                text += "; not compared with it: " + ", ".join(apart(case, p) for case, p in ranking.uncompared)
            parts.append(text)
        if ranking.later:
            parts.append(f"Later than {mark(ranking.first)}: " + "; ".join(against(c, p) for c, p in ranking.later))
        if ranking.some:
            parts.append("In some seeds only: " + "; ".join(when(c) for c in ranking.some))
        if ranking.never:
            parts.append("Never: " + ", ".join(mark(c) for c in ranking.never))
        lines.append(f"accuracy ≥ {100 * ranking.target:g} %: " + ". ".join(parts) + ".")
    return lines


#: The measures a reader compares each case in (paired.csv's measure names), with the words for lower and higher.
COMPARED = {
    "time_to_target_s": ("sooner", "later"),
    "work_energy_to_target_j": ("less", "more"),
    "final_test_accuracy": ("lower", "higher"),
}


@dataclass(frozen=True)
class Comparison:
    """One case against the first to reach a target (or the case it is tied with): its paired difference in each
    of :data:`COMPARED` (None where paired.csv has no such pair), as paired.csv holds it, signed case − first."""

    target: float
    case: str
    against: str
    measures: dict[str, Paired | None]

    @property
    def seeds(self) -> int:
        """The seeds paired: those of the first measure compared at all."""
        return next((p.n for p in self.measures.values() if p is not None and p.n), 0)


def comparisons(paired: pd.DataFrame, rankings: Sequence[Ranking]) -> list[Comparison]:
    """The comparisons a reader wants: per target, each case against the first (or against the case it is
    tied with), then the cases that reached it in some seeds only; read from the paired table."""
    out = []
    for ranking in rankings:
        if ranking.first is None:
            continue
        for case, _ in [*ranking.tied, *ranking.uncompared, *ranking.later] + [(c, None) for c in ranking.some]:
            pair = _pair(paired, case, ranking.first)
            measures = {m: pair(m, math.nan if m == "final_test_accuracy" else ranking.target) for m in COMPARED}
            out.append(Comparison(ranking.target, case, ranking.first, measures))
    return out


def paired_display(paired: pd.DataFrame, rankings: Sequence[Ranking], unit: tuple[str, float]) -> pd.DataFrame | None:
    """:func:`comparisons` as a table: in time, training-and-radio energy and final accuracy, with their
    verdicts."""
    name, factor = unit
    rows = []
    for c in comparisons(paired, rankings):
        row = {"target": f"≥ {100 * c.target:g} %", "case": c.case, "against": c.against, "seeds": c.seeds}
        for measure, label, scale in (
            ("time_to_target_s", f"time ({name})", 1 / factor),
            ("work_energy_to_target_j", "training + radio energy (J)", 1.0),
            ("final_test_accuracy", "final accuracy (points)", 100.0),
        ):
            p = c.measures[measure]
            if p is None:
                row[label] = "—"
            elif p.n < 2:  # the interval's own words say why there is no verdict
                row[label] = interval(p, scale)
            else:
                row[label] = f"{interval(p, scale)}: {verdict_words(p, measure)}"
        rows.append(row)
    return pd.DataFrame(rows) if rows else None


def verdict_words(p: Paired, measure: str) -> str:
    """The verdict in the measure's words (``sooner``/``later``, ``less``/``more``...); ``tie`` and no-interval
    verdicts as they are."""
    words = COMPARED[measure]
    return {"lower": words[0], "higher": words[1]}.get(p.verdict, p.verdict)


def _pair(paired: pd.DataFrame, case: str, reference: str):
    """A lookup of ``case`` − ``reference`` in the paired table (stored once per pair, maybe the other way round:
    then the sign flips)."""

    def lookup(measure: str, target: float) -> Paired | None:
        same_target = paired["target"].isna() if math.isnan(target) else paired["target"] == target
        rows = paired[same_target & (paired["measure"] == measure)]
        for a, b in ((case, reference), (reference, case)):
            hit = rows[(rows["case"] == a) & (rows["reference"] == b)]
            if len(hit):
                r = hit.iloc[0]
                found = Paired(
                    int(r["seeds"]), r["difference"], r["low"], r["high"], (r["widened_low"], r["widened_high"])
                )
                return found if a == case else found.flipped()
        return None

    return lookup


def render(
    *,
    title: str,
    meta: str,
    warnings: Sequence[str],
    lines: Sequence[str],
    tables: Sequence[tuple[str, str, pd.DataFrame, int]],
    figures: Sequence[tuple[str, str, bytes]],
    how: str = "",
    comparisons: Sequence[tuple[str, str, pd.DataFrame, int]] = (),
) -> str:
    """The page: title, one line about the inputs, warnings, the per-target lines (``how``: how they are decided)
    and the ``comparisons`` behind them, figures, then tables.

    ``lines`` and ``warnings`` are trusted HTML fragments built by this package (names already escaped);
    table cells are escaped here."""
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="meta">{meta}</p>',
    ]
    out += [f'<p class="warn">{w}</p>' for w in warnings]
    if lines:
        out += ["<h2>Who reached each target first (simulated time)</h2>", "<ul>"]
        out += [f"<li>{line}</li>" for line in lines] + ["</ul>"]
        if how:
            out.append(f'<p class="how">{html.escape(how)}</p>')
    out += _tables(comparisons)
    for heading, caption, png in figures:
        data = base64.b64encode(png).decode("ascii")
        out += [
            f"<h2>{html.escape(heading)}</h2>",
            "<figure>",
            f'<img alt="{html.escape(heading)}" src="data:image/png;base64,{data}">',
            f"<figcaption>{caption}</figcaption>",
            "</figure>",
        ]
    out += _tables(tables)
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _tables(tables: Sequence[tuple[str, str, pd.DataFrame, int]]) -> list[str]:
    out = []
    for heading, caption, frame, labels in tables:  # labels: how many leading columns are text (left-aligned)
        table = frame.to_html(index=False, border=0, classes=["data", f"labels{labels}"], escape=True, na_rep="—")
        out += [f"<h2>{html.escape(heading)}</h2>", f"<p>{caption}</p>", f'<div class="table">{table}</div>']
    return out


def display_tables(
    cases: pd.DataFrame, summary: pd.DataFrame, targets: Sequence[float], unit: tuple[str, float]
) -> list[tuple[str, str, pd.DataFrame, int]]:
    """The tables as a reader wants them: percentages, one time unit, mean ± std in one cell."""
    name, factor = unit
    records = cases.to_dict("records")

    def columns(spec) -> pd.DataFrame:
        frame = pd.DataFrame({"case": cases["case"], "seeds": cases["seeds"]})
        for key, label, scale in spec:
            frame[label] = [pm(r[f"{key}_mean"], r[f"{key}_std"], 1 if scale == 100 else None, scale) for r in records]
        return frame

    overview = columns(
        (
            ("final_test_accuracy", "final accuracy (%)", 100),
            ("best_test_accuracy", "best accuracy (%)", 100),
            ("rounds", "rounds", 1),
            ("sim_time_s", f"simulated time ({name})", 1 / factor),
            ("energy_j", "energy, all (J)", 1),
            ("work_energy_j", "training + radio (J)", 1),
        )
    )
    overview["incomplete runs"] = cases["incomplete"]
    traffic = columns(
        (
            ("updates_sent", "updates sent", 1),
            ("updates_received", "received", 1),
            ("updates_dropped", "dropped", 1),
            ("updates_applied", "applied", 1),
            ("bytes_up", "MB up", 1e-6),
            ("bytes_down", "MB down", 1e-6),
        )
    )
    reach_rows = []
    for target in targets:
        t = target_label(target)
        for r in records:
            reach_rows.append(
                {
                    "target": f"≥ {100 * target:g} %",
                    "case": r["case"],
                    "seeds reached": f"{r[f'reached_{t}']}/{r['seeds']}",
                    f"time ({name})": pm(r[f"time_to_{t}_s_mean"], r[f"time_to_{t}_s_std"], scale=1 / factor),
                    "rounds": pm(r[f"rounds_to_{t}_mean"], r[f"rounds_to_{t}_std"]),
                    "training + radio (J)": pm(r[f"work_energy_to_{t}_j_mean"], r[f"work_energy_to_{t}_j_std"]),
                    "energy, all (J)": pm(r[f"energy_to_{t}_j_mean"], r[f"energy_to_{t}_j_std"]),
                }
            )
    runs = pd.DataFrame(
        {
            "case": summary["case"],
            "seed": summary["seed"],
            "complete": ["yes" if c else "NO (interrupted)" for c in summary["complete"]],
            "rounds": summary["rounds"].map(pm),
            f"simulated time ({name})": (summary["sim_time_s"] / factor).map(pm),
            "final accuracy (%)": (100 * summary["final_test_accuracy"]).map(lambda v: pm(v, digits=1)),
            "best accuracy (%)": (100 * summary["best_test_accuracy"]).map(lambda v: pm(v, digits=1)),
            "energy, all (J)": summary["energy_j"].map(pm),
            "training + radio (J)": summary["work_energy_j"].map(pm),
        }
    )
    for target in targets:
        t = target_label(target)
        runs[f"time to {100 * target:g} % ({name})"] = (summary[f"time_to_{t}_s"] / factor).map(pm)
    runs["folder"] = summary["run"]
    tables = [
        (
            "Cases",
            "Mean ± standard deviation over seeds (sample std, ddof = 1; a lone seed shows its value alone).",
            overview,
            1,
        ),
        (
            "Updates and traffic",
            "Mean ± std over seeds. Updates sent: those that left the devices "
            "(devices.parquet); received, dropped and applied: counted at the server (summary.json).",
            traffic,
            1,
        ),
    ]
    if reach_rows:
        tables.append(
            (
                "Reaching the targets",
                "First evaluation with test accuracy ≥ the target; means and stds "
                "over the seeds that reached it. Energy until then: on training and the radio, and all the "
                "devices drew, idle included (— where metrics.csv does not record it).",
                pd.DataFrame(reach_rows),
                2,
            )
        )
    tables.append(
        (
            "Runs",
            "One row per run; every evaluation of every run is in runs.csv / runs.parquet beside this page.",
            runs,
            1,
        )
    )
    return tables
