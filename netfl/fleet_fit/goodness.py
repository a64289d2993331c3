"""How close the fitted world's statistics are to the logs': Kolmogorov-Smirnov distances of the distributions,
and the errors of the hourly profiles.

The distributions are kept binned (session lengths on log-spaced bins of about 21 %, times of day by the
minute), so a KS distance here is the largest gap between the two empirical CDFs at the bins' edges: it
misses at most the gap inside one bin, and is exact for the times of day to the minute.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netfl.fleet_fit.statistics import FleetStats

__all__ = ["Goodness", "goodness", "ks_binned", "circular_ks_binned"]


def ks_binned(a: np.ndarray, b: np.ndarray) -> float:
    """KS distance of two histograms on the same bins (nan where either is empty)."""
    if a.sum() <= 0 or b.sum() <= 0:
        return float("nan")
    return float(np.abs(np.cumsum(a) / a.sum() - np.cumsum(b) / b.sum()).max())


def circular_ks_binned(a: np.ndarray, b: np.ndarray) -> float:
    """KS distance of two times-of-day histograms, the day cut (at a bin edge) where they are closest: on a circle
    the CDFs depend on where the day starts, and midnight is no better a cut than any other."""
    if a.sum() <= 0 or b.sum() <= 0:
        return float("nan")
    gap = np.cumsum(a) / a.sum() - np.cumsum(b) / b.sum()  # a cut after bin k subtracts gap[k] throughout
    return float(np.abs(gap[None, :] - gap[:, None]).max(axis=1).min())


@dataclass(frozen=True)
class Goodness:
    """The report's numbers: KS distances (0 = the same, 1 = disjoint) and hourly errors (max |error|, RMS)."""

    eligible_max: float
    eligible_rms: float
    use_max: float
    use_rms: float
    level_max: float  # percent points
    level_rms: float
    ks_lengths: float
    ks_plug_in: float
    ks_plug_out: float

    def rows(self) -> list[tuple[str, str, str]]:
        """(what, measure, value) for the tables."""
        return [
            ("eligible fraction by hour", "max |error|, RMS", f"{self.eligible_max:.3f}, {self.eligible_rms:.3f}"),
            ("in-use fraction by hour", "max |error|, RMS", f"{self.use_max:.3f}, {self.use_rms:.3f}"),
            ("battery level by hour", "max |error|, RMS (% points)", f"{self.level_max:.1f}, {self.level_rms:.1f}"),
            ("session lengths", "KS distance", f"{self.ks_lengths:.3f}"),
            ("charge start (time of day)", "KS distance", f"{self.ks_plug_in:.3f}"),
            ("charge end (time of day)", "KS distance", f"{self.ks_plug_out:.3f}"),
        ]


def _errors(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    d = np.asarray(a) - np.asarray(b)
    d = d[np.isfinite(d)]
    return (float(np.abs(d).max()), float(np.sqrt(np.mean(d**2)))) if len(d) else (float("nan"), float("nan"))


def goodness(logged: FleetStats, simulated: FleetStats) -> Goodness:
    """The fitted world's (``simulated``) distance from the logs."""
    return Goodness(
        *_errors(logged.eligible_by_hour, simulated.eligible_by_hour),
        *_errors(logged.use_by_hour, simulated.use_by_hour),
        *_errors(logged.level_by_hour, simulated.level_by_hour),
        ks_binned(logged.lengths, simulated.lengths),
        circular_ks_binned(logged.plug_ins, simulated.plug_ins),
        circular_ks_binned(logged.plug_outs, simulated.plug_outs),
    )
