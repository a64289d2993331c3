"""Per-device values that are "a number or a distribution".

A scenario can give a device group one compute speed for all (``2e9``,
``"2GFLOPS"``) or draw one per device: ``{uniform: [1e9, 4e9]}``,
``{normal: {mean: .., std: ..}}``, ``{lognormal: {median: .., sigma: ..}}``
or ``{choice: [a, b, c]}``. Draws are not clipped: a field that must stay
positive (speeds, rates, distances) or in [0, 1] rejects a distribution
whose support leaves that range, so the normal is refused there.
Draws come from a seeded stream, one value per device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netfl.units import parse_quantity

KINDS = ("uniform", "normal", "lognormal", "choice")


@dataclass(frozen=True)
class Distribution:
    kind: str  # "constant" or one of KINDS
    params: tuple[float, ...]

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        p = self.params
        if self.kind == "constant":
            return np.full(n, p[0])
        if self.kind == "uniform":
            return rng.uniform(p[0], p[1], n)
        if self.kind == "normal":
            return rng.normal(p[0], p[1], n)
        if self.kind == "lognormal":
            return p[0] * np.exp(rng.normal(0.0, p[1], n))
        return rng.choice(np.asarray(p), n)

    @property
    def support_min(self) -> float:
        """Smallest value a draw can take (-inf for the normal)."""
        if self.kind == "normal":
            return -np.inf
        if self.kind == "lognormal":
            return 0.0
        return min(self.params[:2] if self.kind == "uniform" else self.params)

    def describe(self) -> str:
        if self.kind == "constant":
            return f"{self.params[0]:g}"
        return f"{self.kind}({', '.join(f'{x:g}' for x in self.params)})"


def parse_distribution(value: object, unit_kind: str) -> Distribution:
    """Parse a scenario value into a Distribution (ValueError explains what is accepted)."""
    if isinstance(value, Distribution):
        return value
    if not isinstance(value, dict):
        return Distribution("constant", (parse_quantity(value, unit_kind),))
    if len(value) != 1 or next(iter(value)) not in KINDS:
        raise ValueError(f"expected a number or one of {{{', '.join(k + ': ...' for k in KINDS)}}}, got keys {sorted(map(str, value))}")
    kind, args = next(iter(value.items()))
    q = lambda v: parse_quantity(v, unit_kind)  # noqa: E731
    if kind == "uniform":
        if not (isinstance(args, list) and len(args) == 2):
            raise ValueError("uniform takes [low, high]")
        low, high = q(args[0]), q(args[1])
        if not low <= high:
            raise ValueError(f"uniform: low ({low:g}) must be <= high ({high:g})")
        return Distribution(kind, (low, high))
    if kind == "choice":
        if not (isinstance(args, list) and args):
            raise ValueError("choice takes a non-empty list of values")
        return Distribution(kind, tuple(q(a) for a in args))
    names = ("mean", "std") if kind == "normal" else ("median", "sigma")
    if not (isinstance(args, dict) and set(args) == set(names)):
        raise ValueError(f"{kind} takes {{{names[0]}: ..., {names[1]}: ...}}")
    first = q(args[names[0]])
    spread = _plain_number(args[names[1]], f"{kind}: {names[1]}") if kind == "lognormal" else q(args[names[1]])
    if spread < 0:
        raise ValueError(f"{kind}: {names[1]} must be >= 0")
    if kind == "lognormal" and first <= 0:
        raise ValueError("lognormal: median must be > 0")
    return Distribution(kind, (first, spread))


def _plain_number(value: object, what: str) -> float:
    """A unitless finite number (lognormal's sigma is a spread in log space, not a quantity)."""
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise ValueError(f"{what} must be a plain finite number (e.g. 0.5), got {value!r}")
    return number
