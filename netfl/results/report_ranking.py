"""Who reached each target first -- said only where the paired interval says so -- and every paired comparison.

For a target, the cases that reached it in every seed are ordered by their
mean time; the first of them is compared seed by seed with each of the
others (:mod:`netfl.results.paired`). A case whose interval against it
holds zero is *tied* with it, and "first" is said of a case only when no
other is tied with it. The comparisons go into the report's table and, for
every pair of cases and every measure, into ``paired.parquet``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from netfl.results.paired import METHOD, Paired, by_case, compare
from netfl.results.report_tables import target_label

#: The measures compared per target, by run_summary's column stem and unit: ``<stem>_to_<t><unit>``, bracketed by
#: ``<stem>_to_<t>_gap<unit>``.
TARGET_MEASURES = {
    "time_to_target_s": ("time", "_s"),
    "rounds_to_target": ("rounds", ""),
    "work_energy_to_target_j": ("work_energy", "_j"),
    "energy_to_target_j": ("energy", "_j"),
}
RUN_MEASURES = ("final_test_accuracy", "best_test_accuracy")


@dataclass
class Ranking:
    """One target: the case first by mean time (None if no case reached it in every seed); the cases tied with it,
    those that share fewer than two seeds with it (no interval: not compared) and those later, each with its
    comparison against the first; then the cases that reached it in some seeds only and those that never did."""

    target: float
    first: str | None
    tied: list[tuple[str, Paired]] = field(default_factory=list)
    uncompared: list[tuple[str, Paired]] = field(default_factory=list)
    later: list[tuple[str, Paired]] = field(default_factory=list)
    some: list[str] = field(default_factory=list)
    never: list[str] = field(default_factory=list)

    @property
    def alone(self) -> bool:
        """Whether the first case is first on its own: every other case that reached the target is later."""
        return self.first is not None and not self.tied and not self.uncompared


def rank(summary: pd.DataFrame, cases: pd.DataFrame, target: float, widen: bool) -> Ranking:
    """``widen``: move the intervals out by the evaluation brackets (the report does not interpolate)."""
    t = target_label(target)
    rows = cases.to_dict("records")
    full = sorted((r for r in rows if r[f"reached_{t}"] == r["seeds"] > 0), key=lambda r: r[f"time_to_{t}_s_mean"])
    ranking = Ranking(
        target,
        full[0]["case"] if full else None,
        some=[r["case"] for r in rows if 0 < r[f"reached_{t}"] < r["seeds"]],
        never=[r["case"] for r in rows if r[f"reached_{t}"] == 0],
    )
    gap = f"time_to_{t}_gap_s" if widen else None
    per_case = by_case(summary)
    for row in full[1:]:
        paired = compare(per_case, row["case"], ranking.first, f"time_to_{t}_s", gap)
        side = {"higher": ranking.later, "tie": ranking.tied, "lower": ranking.tied}.get(paired.verdict)
        (ranking.uncompared if side is None else side).append((row["case"], paired))
    return ranking


def paired_table(summary: pd.DataFrame, names: Sequence[str], targets: Sequence[float], widen: bool) -> pd.DataFrame:
    """Every pair of cases (each against every case before it), every measure: seeds paired, the mean difference
    (case − reference), its interval, how far the bounds were widened and the verdict."""
    rows = []
    pairs = [(b, a) for i, a in enumerate(names) for b in names[i + 1 :]]
    measures = [
        (target, m, f"{stem}_to_{t}{unit}", f"{stem}_to_{t}_gap{unit}" if widen else None)
        for target in targets
        for t in [target_label(target)]
        for m, (stem, unit) in TARGET_MEASURES.items()
    ]
    measures += [(math.nan, m, m, None) for m in RUN_MEASURES]
    cases = by_case(summary)
    for target, measure, column, gap in measures:
        for case, reference in pairs:
            p = compare(cases, case, reference, column, gap)
            rows.append(
                {
                    "target": target,
                    "measure": measure,
                    "case": case,
                    "reference": reference,
                    "seeds": p.n,
                    "difference": p.mean,
                    "low": p.low,
                    "high": p.high,
                    "widened_low": p.widened[0],
                    "widened_high": p.widened[1],
                    "verdict": p.verdict,
                    "method": METHOD,
                }
            )
    return pd.DataFrame(rows)


def evaluation_spacing(runs_metrics: Sequence[pd.DataFrame]) -> tuple[float, float, float]:
    """The simulated time between consecutive evaluations over all runs: median, shortest and longest (NaN if no
    run evaluated twice) -- the resolution of a time to target. A run's last gap, to the evaluation at its stop
    (off a time grid), counts only when it is the run's one gap."""
    spacing = [np.diff(m["sim_time_s"].to_numpy(dtype=float)) for m in runs_metrics]
    gaps = np.concatenate([g[:-1] if len(g) > 1 else g for g in spacing] or [np.array([])])
    gaps = gaps[gaps > 0]
    if not gaps.size:
        return math.nan, math.nan, math.nan
    return float(np.median(gaps)), float(gaps.min()), float(gaps.max())
