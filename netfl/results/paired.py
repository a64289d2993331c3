"""Paired comparisons of cases: the runs of one seed share their world, so two cases are compared seed by seed.

A study's cases run the same seeds; with ``vary: seed`` (the default) a
seed fixes the world -- devices, availability, channels -- and the
training's randomness, so the difference between two cases *in one seed*
is free of the world-to-world spread that a mean ± std over seeds carries.
For each measure (time, energy and rounds to a target, final accuracy) the
per-seed differences A − B of the seeds both cases ran give a mean and a
95 % Student's t interval with n − 1 degrees of freedom (:data:`METHOD`);
with three seeds a bootstrap would resample three numbers, so t it is.

A time (or energy, or round) to a target is that of the first evaluation
at or above it: the true crossing lies somewhere after the evaluation
before. Unless the report interpolates, each bound of the interval moves
out by that bracket's mean width (the first case's on the low side, the
second's on the high side), so a lead of one evaluation interval is never
called a lead. A case is *ahead* only where the whole interval is on one
side of zero; otherwise the two are *tied*; one seed gives no interval and
no verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

CONFIDENCE = 0.95
METHOD = (
    "95 % paired t interval: Student's t with n − 1 degrees of freedom over the per-seed differences of the n "
    "seeds both cases ran"
)


@dataclass(frozen=True)
class Paired:
    """The per-seed differences A − B of one measure: how many seeds, their mean and the interval (NaN bounds for
    fewer than two seeds); ``widened``: how far each bound was moved out for the evaluation brackets."""

    n: int
    mean: float
    low: float
    high: float
    widened: tuple[float, float] = (0.0, 0.0)

    def flipped(self) -> Paired:
        """The same comparison the other way round (B − A)."""
        return Paired(self.n, -self.mean, -self.high, -self.low, self.widened[::-1])

    @property
    def verdict(self) -> str:
        """``lower`` or ``higher`` (A's value, where the interval is all on one side of zero), ``tie`` (it holds
        zero), or ``one seed`` / ``no seed in common`` (no interval: no verdict)."""
        if self.n < 2:
            return "one seed" if self.n == 1 else "no seed in common"
        if self.high < 0:
            return "lower"
        if self.low > 0:
            return "higher"
        return "tie"


def paired_interval(
    differences: Sequence[float], *, widen: tuple[float, float] = (0.0, 0.0), confidence: float = CONFIDENCE
) -> Paired:
    """Mean and Student's t interval of ``differences`` (n − 1 degrees of freedom), each bound moved out by
    ``widen`` (low, high)."""
    d = np.asarray(differences, dtype=float)
    if not d.size:
        return Paired(0, math.nan, math.nan, math.nan)
    mean = float(d.mean())
    if d.size < 2:
        return Paired(1, mean, math.nan, math.nan)
    from scipy.special import stdtrit  # Student's t quantile; scipy.stats would take a second to import

    half = float(stdtrit(d.size - 1, (1 + confidence) / 2) * d.std(ddof=1) / math.sqrt(d.size))
    return Paired(int(d.size), mean, mean - half - widen[0], mean + half + widen[1], widen)


def by_case(summary: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The run summary's rows of each case, indexed by seed (what :func:`compare` pairs; made once per report)."""
    return {case: rows.set_index("seed") for case, rows in summary.groupby("case", sort=False)}


def compare(
    summary: pd.DataFrame | dict[str, pd.DataFrame], case: str, reference: str, column: str, gap: str | None = None
) -> Paired:
    """``case`` − ``reference`` in ``column`` of the run summary (one row per run, or :func:`by_case` of it),
    over the seeds both have a value for; ``gap``: the column of each value's evaluation bracket, which widens
    the interval."""
    cases = by_case(summary) if isinstance(summary, pd.DataFrame) else summary
    a, b = cases[case], cases[reference]
    seeds = [
        s for s in a.index.intersection(b.index) if not (math.isnan(a.at[s, column]) or math.isnan(b.at[s, column]))
    ]
    differences = [a.at[s, column] - b.at[s, column] for s in seeds]
    widen = (0.0, 0.0)
    if gap is not None and seeds:
        widen = (float(np.mean([a.at[s, gap] for s in seeds])), float(np.mean([b.at[s, gap] for s in seeds])))
    return paired_interval(differences, widen=widen)
