"""The schema's building blocks: the strict base model, and the distributions a device group's quantities are
drawn from, each parsed in its unit."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator

from netfl.distributions import Distribution, parse_distribution
from netfl.numbers import Strict

__all__ = [
    "CountDistribution",
    "DistanceDistribution",
    "FlopsDistribution",
    "FractionDistribution",
    "RateDistribution",
    "Strict",
    "positive_distribution",
]


def _dist(unit_kind: str):
    return BeforeValidator(lambda v: parse_distribution(v, unit_kind))


FlopsDistribution = Annotated[Distribution, _dist("flops")]
RateDistribution = Annotated[Distribution, _dist("rate")]
FractionDistribution = Annotated[Distribution, _dist("fraction")]
DistanceDistribution = Annotated[Distribution, _dist("distance")]
CountDistribution = Annotated[Distribution, _dist("count")]


def positive_distribution(d: Distribution) -> Distribution:
    if not d.always_positive:
        raise ValueError(f"must be > 0 for every device; {d.describe()} can be <= 0")
    return d
