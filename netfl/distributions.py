"""Values that are "a number or a distribution", for per-device draws and for session lengths alike.

A scenario can give a device group one compute speed for all (``2e9``,
``"2GFLOPS"``) or draw one per device: ``{uniform: [1e9, 4e9]}``,
``{normal: {mean: .., std: ..}}``, ``{lognormal: {median: .., sigma: ..}}``
or ``{choice: [a, b, c]}``. Session lengths are drawn afresh for every
session and add the exponential (memoryless sessions, ``{exponential:
{mean: 30min}}``) and the Weibull (``{weibull: {shape: 0.8, scale: 1h}}``,
heavy-tailed for shape < 1, as measured mobile sessions often are). Each
use names the kinds it accepts; one parser reads them all.

Draws are not clipped: a field that must stay positive (speeds, rates,
distances) or in [0, 1] rejects a distribution whose support leaves that
range, so the normal is refused there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

import numpy as np
from pydantic import BeforeValidator

from netfl.units import Unit, parse_quantity

#: The forms of a per-device value (drawn once per device).
PER_DEVICE_KINDS = ("uniform", "normal", "lognormal", "choice")
#: The forms of a session length (drawn afresh for every session).
DURATION_KINDS = ("exponential", "lognormal", "weibull", "uniform")

_FORMS = {
    "uniform": "{uniform: [low, high]}",
    "normal": "{normal: {mean: .., std: ..}}",
    "lognormal": "{lognormal: {median: .., sigma: ..}}",
    "choice": "{choice: [a, b, ...]}",
    "exponential": "{exponential: {mean: ..}}",
    "weibull": "{weibull: {shape: .., scale: ..}}",
}


@dataclass(frozen=True)
class Distribution:
    kind: str  # "constant" or one of the kinds above
    params: tuple[float, ...]  # (value,) (low, high) (mean, std) (median, sigma) (values...) (mean,) (shape, scale)

    def as_scenario_value(self) -> float | dict[str, object]:
        """The value as a topology file writes it (in SI units), so that parsing it gives this distribution."""
        k, p = self.kind, self.params
        if k == "constant":
            return p[0]
        if k in ("uniform", "choice"):
            return {k: list(p)}
        names = {
            "normal": ("mean", "std"),
            "lognormal": ("median", "sigma"),
            "exponential": ("mean",),
            "weibull": ("shape", "scale"),
        }[k]
        return {k: dict(zip(names, p))}

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` independent values (one per device)."""
        k, p = self.kind, self.params
        if k == "constant":
            return np.full(n, p[0])
        if k == "uniform":
            return rng.uniform(p[0], p[1], n)
        if k == "normal":
            return rng.normal(p[0], p[1], n)
        if k == "lognormal":
            return p[0] * np.exp(rng.normal(0.0, p[1], n))
        if k == "exponential":
            return rng.exponential(p[0], n)
        if k == "weibull":
            return p[1] * rng.weibull(p[0], n)
        return rng.choice(np.asarray(p), n)

    def draw(self, rng: np.random.Generator) -> float:
        """One value (a session's length), drawn as a scalar."""
        k, p = self.kind, self.params
        if k == "constant":
            return p[0]
        if k == "exponential":
            return float(rng.exponential(p[0]))
        if k == "lognormal":
            return p[0] * math.exp(p[1] * float(rng.standard_normal()))
        if k == "weibull":
            return p[1] * float(rng.weibull(p[0]))
        if k == "uniform":
            return float(rng.uniform(p[0], p[1]))
        return float(self.sample(rng, 1)[0])

    @property
    def mean(self) -> float:
        k, p = self.kind, self.params
        if k in ("constant", "exponential"):
            return p[0]
        if k == "lognormal":
            return p[0] * math.exp(p[1] ** 2 / 2)  # E[median * e^(sigma Z)] = median * e^(sigma^2 / 2)
        if k == "weibull":
            return p[1] * math.gamma(1 + 1 / p[0])
        if k == "choice":
            return float(np.mean(p))
        return (p[0] + p[1]) / 2  # uniform; normal's mean is p[0] too

    @property
    def support_min(self) -> float:
        """Smallest value a draw can take (-inf for the normal)."""
        if self.kind == "normal":
            return -np.inf
        if self.kind in ("lognormal", "exponential", "weibull"):
            return 0.0
        return min(self.params[:2] if self.kind == "uniform" else self.params)

    @property
    def support_max(self) -> float:
        """Largest value a draw can take (inf for the unbounded kinds)."""
        if self.kind in ("constant", "choice"):
            return max(self.params)
        if self.kind == "uniform":
            return max(self.params[:2])
        return math.inf

    @property
    def always_positive(self) -> bool:
        """Every draw is > 0: a log-normal's (e^x, never 0) or one whose smallest value is above 0."""
        return self.kind == "lognormal" or self.support_min > 0

    def describe(self) -> str:
        if self.kind == "constant":
            return f"{self.params[0]:g}"
        return f"{self.kind}({', '.join(f'{x:g}' for x in self.params)})"


def parse_distribution(
    value: object, unit_kind: str, kinds: tuple[str, ...] = PER_DEVICE_KINDS, *, constant: str = "a number"
) -> Distribution:
    """A scenario value as a Distribution of one of ``kinds`` (or a constant, described to the user as
    ``constant``); ValueError says what is accepted."""
    if isinstance(value, Distribution):
        return value
    q = lambda v: parse_quantity(v, unit_kind)  # noqa: E731
    if not isinstance(value, Mapping):
        return Distribution("constant", (q(value),))
    if len(value) != 1 or next(iter(value)) not in kinds:
        raise ValueError(
            f"expected {constant} or one of {', '.join(_FORMS[k] for k in kinds)}; got keys {sorted(map(str, value))}"
        )
    kind, args = next(iter(value.items()))
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
    if kind == "exponential":
        if isinstance(args, Mapping) and set(args) != {"mean"}:
            raise ValueError("exponential takes {mean: ...}")
        mean = q(args["mean"] if isinstance(args, Mapping) else args)
        if mean <= 0:
            raise ValueError("exponential: mean must be > 0")
        return Distribution(kind, (mean,))
    if kind == "weibull":
        shape, scale = _keys(args, kind, ("shape", "scale"))
        shape, scale = _plain_number(shape, "weibull: shape"), q(scale)
        if shape <= 0 or scale <= 0:
            raise ValueError("weibull: shape and scale must be > 0")
        return Distribution(kind, (shape, scale))
    names = ("mean", "std") if kind == "normal" else ("median", "sigma")
    first, spread = _keys(args, kind, names)
    first = q(first)
    spread = _plain_number(spread, f"{kind}: {names[1]}") if kind == "lognormal" else q(spread)
    if spread < 0:
        raise ValueError(f"{kind}: {names[1]} must be >= 0")
    if kind == "lognormal" and first <= 0:
        raise ValueError("lognormal: median must be > 0")
    return Distribution(kind, (first, spread))


def parse_duration(value: object) -> Distribution:
    """A session length: a positive duration ('45min') or one of :data:`DURATION_KINDS` in time units."""
    dist = parse_distribution(value, "time", DURATION_KINDS, constant="a duration ('45min')")
    if dist.kind == "constant" and dist.params[0] <= 0:
        raise ValueError(f"a constant duration must be > 0, got {value!r}")
    if dist.kind == "uniform" and (dist.params[0] < 0 or dist.params[1] <= 0):
        raise ValueError(f"uniform: need 0 <= low <= high and high > 0, got [{dist.params[0]:g}, {dist.params[1]:g}]")
    return dist


def _keys(args: object, kind: str, names: tuple[str, str]) -> tuple[object, object]:
    if not (isinstance(args, Mapping) and set(args) == set(names)):
        raise ValueError(f"{kind} takes {{{names[0]}: ..., {names[1]}: ...}}")
    return args[names[0]], args[names[1]]


def _plain_number(value: object, what: str) -> float:
    """A unitless finite number (lognormal's sigma, Weibull's shape: not quantities)."""
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise ValueError(f"{what} must be a plain finite number (e.g. 0.5), got {value!r}")
    return number


def _per_device(unit_kind: str) -> BeforeValidator:
    return BeforeValidator(lambda v: parse_distribution(v, unit_kind))


#: Per-device values of a declared parameter, each parsed in its unit (as :mod:`netfl.units`' quantities).
FlopsDistribution = Annotated[Distribution, _per_device("flops"), Unit("flops")]
RateDistribution = Annotated[Distribution, _per_device("rate"), Unit("rate")]
FractionDistribution = Annotated[Distribution, _per_device("fraction"), Unit("fraction")]
DistanceDistribution = Annotated[Distribution, _per_device("distance"), Unit("distance")]
CountDistribution = Annotated[Distribution, _per_device("count"), Unit("count")]


def positive_distribution(d: Distribution) -> Distribution:
    """``d`` if every draw is > 0 (a field validator's check for speeds, rates, distances)."""
    if not d.always_positive:
        raise ValueError(f"must be > 0 for every device; {d.describe()} can be <= 0")
    return d
