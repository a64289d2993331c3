"""The study's answer in the terminal: who reached each target first, the ties and the paired differences with
their intervals -- the facts report.html opens with, from the same rankings and paired table, as text or JSON.

The text is the page's own sentences (:func:`~netfl.results.report_html.first_lines` with plain case names) and
its comparison table (:func:`~netfl.results.report_html.paired_display`) in aligned columns. The JSON holds the
same facts as numbers: times in seconds, energy in joules, accuracy as a fraction; intervals as ``low`` and
``high``; NaN as null.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from netfl.results.paired import CONFIDENCE, METHOD, Paired
from netfl.results.report_html import comparisons, first_lines, paired_display
from netfl.results.report_ranking import Ranking
from netfl.results.report_tables import target_label


@dataclass
class Verdict:
    """What ``netfl report`` prints: the rankings, the cases table, the paired table and the time unit the page
    uses; ``widened``: whether the to-target intervals were widened by the evaluation brackets."""

    rankings: list[Ranking]
    cases: pd.DataFrame
    paired: pd.DataFrame
    unit: tuple[str, float]
    widened: bool

    def lines(self) -> list[str]:
        """One sentence per target, as on the page."""
        return first_lines(self.rankings, self.cases, self.unit, mark=str)

    def table(self) -> pd.DataFrame | None:
        """The paired comparisons, as on the page (None when no case reached a target in every seed)."""
        return paired_display(self.paired, self.rankings, self.unit)

    def text(self) -> str:
        """The lines, then the table in aligned columns ('' without a target)."""
        if not self.rankings:
            return ""
        brackets = ", widened by the evaluation interval" if self.widened else ""
        out = [
            "Who reached each target first (simulated time; first only where its paired interval against every "
            "other case that reached it in every seed excludes 0):"
        ]
        out += [f"  {line}" for line in self.lines()]
        table = self.table()
        if table is not None:
            out += [
                "",
                f"Paired comparisons: case − against, mean over the seeds both ran [{100 * CONFIDENCE:g} % paired t "
                f"interval{brackets}]: verdict",
            ]
            out += aligned(table)
        return "\n".join(out)

    def as_dict(self) -> dict[str, Any]:
        """The same facts for scripts, in SI units."""
        records = {r["case"]: r for r in self.cases.to_dict("records")}
        found = comparisons(self.paired, self.rankings)
        targets = []
        for ranking in self.rankings:
            t = target_label(ranking.target)

            def reached(case: str, t: str = t) -> dict[str, Any]:
                r = records[case]
                return {
                    "case": case,
                    "seeds": int(r["seeds"]),
                    "seeds_reached": int(r[f"reached_{t}"]),
                    "time_to_target_s": {
                        "mean": _number(r[f"time_to_{t}_s_mean"]),
                        "std": _number(r[f"time_to_{t}_s_std"]),
                    },
                }

            def compared(case: str, p: Paired) -> dict[str, Any]:
                return {"case": case, **_paired(p)}

            targets.append(
                {
                    "target": ranking.target,
                    "first": ranking.first if ranking.alone else None,  # only where the intervals say so
                    "fastest_by_mean_time": ranking.first,
                    "reached_in_every_seed": [reached(c) for c in self._full(ranking)],
                    "tied": [compared(c, p) for c, p in ranking.tied],
                    "not_compared": [compared(c, p) for c, p in ranking.uncompared],
                    "later": [compared(c, p) for c, p in ranking.later],
                    "reached_in_some_seeds_only": [reached(c) for c in ranking.some],
                    "never": list(ranking.never),
                    "comparisons": [
                        {
                            "case": c.case,
                            "against": c.against,
                            "seeds": c.seeds,
                            **{m: (None if p is None else _paired(p)) for m, p in c.measures.items()},
                        }
                        for c in found
                        if c.target == ranking.target
                    ],
                }
            )
        return {
            "method": METHOD,
            "widened_by_evaluation_interval": self.widened,
            "units": {"time": "s", "energy": "J", "accuracy": "fraction"},
            "targets": targets,
        }

    @staticmethod
    def _full(ranking: Ranking) -> list[str]:
        """The cases that reached the target in every seed: the first, then the others by mean time."""
        others = [c for c, _ in [*ranking.tied, *ranking.uncompared, *ranking.later]]
        return ([ranking.first] if ranking.first is not None else []) + others


def _number(value: Any) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value


def _paired(p: Paired) -> dict[str, Any]:
    """A comparison as numbers (case − reference): seeds paired, mean difference, interval, verdict."""
    return {
        "seeds": p.n,
        "difference": _number(p.mean),
        "low": _number(p.low),
        "high": _number(p.high),
        "verdict": p.verdict,
    }


def aligned(frame: pd.DataFrame, indent: str = "  ") -> list[str]:
    """``frame`` as left-aligned text columns, two spaces apart."""
    rows = [list(map(str, frame.columns))] + [[str(v) for v in row] for row in frame.itertuples(index=False)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(frame.columns))]
    return [indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
