"""Per-device parameters of the built-in models: a value each device draws once, from its own keyed stream.

Real fleets are heterogeneous: owners live in different time zones, some
use their phone four times as much as others, batteries have lost a share
of their capacity with age. A parameter declared here takes one value for
the whole group (``time_zone_offset: 3h``) or a distribution that each
device draws from once (``{uniform: [-5h, 3h]}``, ``{lognormal: {median: 1,
sigma: 0.5}}``, ``{choice: [-5h, 0h, 1h]}`` or a weighted choice
``{choice: {values: [-5h, 0h, 1h], weights: [2, 5, 3]}}``).

Device i's value is draw 0 of the stream (model's key, parameter's name) at
row i (:mod:`netfl.keyed_random`): it depends on the seed, the group, the
role (availability, charging, usage) and the device alone, never on the
engine's form or on the order in which devices are asked. A group whose
value is one number holds it as a read-only broadcast of length n (no memory
per device); only a heterogeneous parameter is an array of n float64.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

import numpy as np
from pydantic import BeforeValidator

from netfl import keyed_random
from netfl.distributions import PER_DEVICE_KINDS, Distribution, parse_distribution
from netfl.units import Unit, parse_quantity

__all__ = [
    "WeightedChoice",
    "PerDeviceTime",
    "PerDeviceScale",
    "parse_per_device",
    "device_values",
    "draw_rows",
    "constant_of",
    "reciprocal",
]

#: Devices drawn in one vectorised step: the draws' temporaries stay a few MB at ten million devices.
_CHUNK = 1 << 20


@dataclass(frozen=True)
class WeightedChoice(Distribution):
    """``{choice: {values: [...], weights: [...]}}``: one of ``params`` with probabilities proportional to
    ``weights`` (time zones by their share of the fleet)."""

    weights: tuple[float, ...] = ()

    @property
    def probabilities(self) -> np.ndarray:
        w = np.asarray(self.weights, dtype=float)
        return w / w.sum()

    @property
    def mean(self) -> float:
        return float(np.dot(self.probabilities, self.params))

    def as_scenario_value(self) -> dict[str, object]:
        return {"choice": {"values": list(self.params), "weights": list(self.weights)}}

    def describe(self) -> str:
        pairs = ", ".join(f"{v:g}: {w:g}" for v, w in zip(self.params, self.weights))
        return f"choice({pairs})"


def parse_per_device(value: object, unit_kind: str) -> Distribution:
    """A per-device parameter in ``unit_kind``: a quantity (one value for the group) or a distribution each
    device draws once from (uniform, normal, lognormal, choice, or a weighted choice); ValueError says what is
    accepted."""
    if isinstance(value, Mapping) and set(value) == {"choice"} and isinstance(value["choice"], Mapping):
        args = value["choice"]
        if set(args) != {"values", "weights"}:
            raise ValueError("a weighted choice takes {choice: {values: [a, b, ...], weights: [wa, wb, ...]}}")
        values, weights = args["values"], args["weights"]
        if not (isinstance(values, list) and isinstance(weights, list) and values and len(values) == len(weights)):
            raise ValueError("choice: values and weights must be non-empty lists of the same length")
        w = tuple(parse_quantity(x, "count") for x in weights)
        if min(w) < 0 or sum(w) <= 0:
            raise ValueError("choice: weights must be >= 0, and not all 0")
        return WeightedChoice("choice", tuple(parse_quantity(v, unit_kind) for v in values), w)
    return parse_distribution(value, unit_kind, PER_DEVICE_KINDS, constant=f"a {unit_kind} quantity")


def _positive_scale(value: object) -> Distribution:
    dist = parse_per_device(value, "count")
    if not dist.always_positive:
        raise ValueError(f"a scale must be > 0 for every device; {dist.describe()} can be <= 0")
    return dist


#: A time quantity per device (a time zone's offset): ``3h``, or a distribution in time units.
PerDeviceTime = Annotated[Distribution, BeforeValidator(lambda v: parse_per_device(v, "time")), Unit("time")]
#: A positive multiplier per device (1: the declared behaviour), e.g. ``{lognormal: {median: 1, sigma: 0.5}}``.
PerDeviceScale = Annotated[Distribution, BeforeValidator(_positive_scale), Unit("count")]


def draw_rows(dist: Distribution, key: int, rows: np.ndarray) -> np.ndarray:
    """The values of devices ``rows`` (float64): draw 0 of stream ``key`` at each row."""
    k, p = dist.kind, dist.params
    if k == "constant":
        return np.full(len(rows), p[0])
    if k in ("normal", "lognormal"):
        z = keyed_random.standard_normal(key, rows, 0)
        return p[0] + p[1] * z if k == "normal" else p[0] * np.exp(p[1] * z)
    u = keyed_random.uniform(key, rows, 0)
    if k == "uniform":
        return p[0] + (p[1] - p[0]) * u
    if k == "choice":
        cumulative = (
            np.cumsum(dist.probabilities) if isinstance(dist, WeightedChoice) else np.arange(1, len(p) + 1) / len(p)
        )
        pick = np.minimum(np.searchsorted(cumulative, u, side="right"), len(p) - 1)
        return np.asarray(p, dtype=float)[pick]
    raise ValueError(f"{dist.describe()} is not a per-device distribution (uniform, normal, lognormal, choice)")


def device_values(dist: Distribution, key: int, name: str, n: int) -> np.ndarray:
    """Each of ``n`` devices' value of the parameter ``name``: a read-only broadcast when ``dist`` is one number,
    else an array of n float64 drawn from the sub-stream ``name`` of ``key``."""
    if dist.kind == "constant":
        return np.broadcast_to(np.float64(dist.params[0]), (n,))
    sub = keyed_random.child_key(key, name)
    out = np.empty(n)
    for first in range(0, n, _CHUNK):
        rows = np.arange(first, min(first + _CHUNK, n))
        out[rows] = draw_rows(dist, sub, rows)
    return out


def reciprocal(values: np.ndarray) -> np.ndarray:
    """1 / ``values``, a broadcast kept a broadcast."""
    one = constant_of(values)
    return np.broadcast_to(np.float64(1.0 / one), values.shape) if one is not None else 1.0 / values


def constant_of(values: np.ndarray) -> float | None:
    """The one value of a broadcast (``device_values`` of a constant), else None."""
    if values.ndim == 1 and values.strides == (0,) and values.size:
        return float(values[0])
    return None
