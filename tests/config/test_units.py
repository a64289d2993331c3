"""Quantities with units ("6h", "55kJ", "20Mbps") and per-device distributions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from netfl.distributions import PER_DEVICE_KINDS as KINDS
from netfl.distributions import Distribution, parse_distribution
from netfl.units import UNITS, format_si, parse_quantity

# ------------------------------------------------------------------------- quantities


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("6h", "time", 6 * 3600.0),
        ("90min", "time", 5400.0),
        ("5ms", "time", 0.005),
        ("30s", "time", 30.0),
        ("2d", "time", 172800.0),
        ("250us", "time", 250e-6),
        ("55kJ", "energy", 55e3),
        ("3.7Wh", "energy", 3.7 * 3600.0),
        ("500mWh", "energy", 1800.0),
        ("1MJ", "energy", 1e6),
        ("50mW", "power", 0.05),
        ("2W", "power", 2.0),
        ("20Mbps", "rate", 20e6),
        ("1.5Gbps", "rate", 1.5e9),
        ("250kbps", "rate", 250e3),
        ("10Mbit/s", "rate", 10e6),
        ("1MB", "bytes", 1e6),
        ("1MiB", "bytes", 1024.0**2),
        ("2GFLOPS", "flops", 2e9),
        ("3TFLOP/s", "flops", 3e12),
        ("30%", "fraction", 0.3),
        ("100%", "fraction", 1.0),
    ],
)
def test_parse_quantity_with_unit(text: str, kind: str, expected: float) -> None:
    assert parse_quantity(text, kind) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("kind", sorted(UNITS))
def test_bare_numbers_are_in_the_base_unit(kind: str) -> None:
    assert parse_quantity(7, kind) == 7.0
    assert parse_quantity(0.25, kind) == 0.25
    assert parse_quantity("12", kind) == 12.0  # a quoted number is still a number
    assert isinstance(parse_quantity(7, kind), float)


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        ("2e9", "flops", 2e9),
        (2e9, "flops", 2e9),
        ("0.5e9FLOPS", "flops", 0.5e9),
        ("1.5E3bps", "rate", 1500.0),
        ("2.5e-3s", "time", 0.0025),
        (".5h", "time", 1800.0),
        ("+3W", "power", 3.0),
    ],
)
def test_scientific_notation_and_signs(value: object, kind: str, expected: float) -> None:
    assert parse_quantity(value, kind) == pytest.approx(expected)


def test_whitespace_between_number_and_unit_is_allowed() -> None:
    assert parse_quantity(" 20 Mbps ", "rate") == 20e6


def test_negative_quantities_parse_so_the_field_can_say_what_is_wrong() -> None:
    # the sign is kept; the scenario's field constraints (gt=0) reject it with a path
    assert parse_quantity("-5Mbps", "rate") == -5e6


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("5Mbs", "rate"),
        ("10 parsecs", "time"),
        ("55KJ", "energy"),
        ("2 watts", "power"),
        ("3kbps", "time"),
        ("fast", "flops"),
        ("", "time"),
        ("1.2.3s", "time"),
        ("50 %", "energy"),
    ],
)
def test_unknown_suffix_lists_accepted_units(value: str, kind: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_quantity(value, kind)
    msg = str(info.value)
    assert repr(value) in msg
    assert kind in msg
    for suffix in (s for s in UNITS[kind] if s):
        assert suffix in msg


@pytest.mark.parametrize("value", [True, False])
def test_booleans_are_rejected(value: bool) -> None:
    # YAML turns `yes`/`no`/`on`/`off` into booleans; never read them as 1/0
    with pytest.raises(ValueError, match="boolean") as info:
        parse_quantity(value, "energy")
    assert "kJ" in str(info.value) and "Wh" in str(info.value)


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, "1e999", "1e999kJ"])
def test_non_finite_values_are_rejected(value: object) -> None:
    with pytest.raises(ValueError, match="not finite") as info:
        parse_quantity(value, "energy")
    assert "kJ" in str(info.value)


@pytest.mark.parametrize("value", ["inf", "nan", "infinity"])
def test_inf_strings_are_not_numbers(value: str) -> None:
    with pytest.raises(ValueError, match="not an energy quantity") as info:
        parse_quantity(value, "energy")
    assert "kJ" in str(info.value)


@pytest.mark.parametrize("value", [None, [1, 2], {"a": 1}])
def test_other_types_are_rejected_with_accepted_units(value: object) -> None:
    with pytest.raises(ValueError, match="expected a rate quantity") as info:
        parse_quantity(value, "rate")
    assert "Mbps" in str(info.value)


# ---------------------------------------------------------------------- distributions


def test_a_number_or_string_is_a_constant() -> None:
    assert parse_distribution(2e9, "flops") == Distribution("constant", (2e9,))
    assert parse_distribution("2GFLOPS", "flops") == Distribution("constant", (2e9,))
    assert parse_distribution("5Mbps", "rate").describe() == "5e+06"


def test_parse_uniform_with_units() -> None:
    d = parse_distribution({"uniform": ["1Mbps", "4Mbps"]}, "rate")
    assert d == Distribution("uniform", (1e6, 4e6))
    assert d.support_min == 1e6
    assert d.describe() == "uniform(1e+06, 4e+06)"


def test_uniform_with_equal_bounds_is_allowed() -> None:
    assert parse_distribution({"uniform": [3, 3]}, "flops").params == (3.0, 3.0)


def test_parse_normal() -> None:
    d = parse_distribution({"normal": {"mean": "2GFLOPS", "std": 1e8}}, "flops")
    assert d == Distribution("normal", (2e9, 1e8))
    assert d.support_min == -math.inf


def test_parse_lognormal_sigma_is_unitless() -> None:
    d = parse_distribution({"lognormal": {"median": "10Mbps", "sigma": 0.5}}, "rate")
    assert d == Distribution("lognormal", (10e6, 0.5))
    assert d.support_min == 0.0


def test_parse_choice() -> None:
    d = parse_distribution({"choice": ["1GFLOPS", 2e9, "4GFLOPS"]}, "flops")
    assert d == Distribution("choice", (1e9, 2e9, 4e9))
    assert d.support_min == 1e9


def test_a_distribution_passes_through() -> None:
    d = Distribution("uniform", (1.0, 2.0))
    assert parse_distribution(d, "flops") is d


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"uniform": [4e9, 1e9]}, r"low \(4e\+09\) must be <= high \(1e\+09\)"),
        ({"uniform": [1]}, r"uniform takes \[low, high\]"),
        ({"uniform": "1-2"}, r"uniform takes \[low, high\]"),
        ({"uniform": [1, "5Mbps"]}, "not a flops quantity"),
        ({"normal": {"mean": 1e9}}, r"normal takes \{mean: \.\.\., std: \.\.\.\}"),
        ({"normal": {"mean": 1e9, "sd": 1}}, r"normal takes \{mean: \.\.\., std: \.\.\.\}"),
        ({"normal": [1e9, 1e8]}, r"normal takes \{mean"),
        ({"normal": {"mean": 1e9, "std": -1}}, "std must be >= 0"),
        ({"lognormal": {"median": 1e9}}, r"lognormal takes \{median: \.\.\., sigma: \.\.\.\}"),
        ({"lognormal": {"median": 0, "sigma": 1}}, "median must be > 0"),
        ({"lognormal": {"median": 1e9, "sigma": -0.1}}, "sigma must be >= 0"),
        ({"lognormal": {"median": 1e9, "sigma": None}}, "sigma must be a plain finite number"),
        ({"lognormal": {"median": 1e9, "sigma": [1]}}, "sigma must be a plain finite number"),
        ({"lognormal": {"median": 1e9, "sigma": True}}, "sigma must be a plain finite number"),
        ({"choice": []}, "non-empty list"),
        ({"choice": 5}, "non-empty list"),
        ({"gamma": {"k": 1}}, "expected a number or one of"),
        ({"uniform": [1, 2], "choice": [1]}, "expected a number or one of"),
        ({}, "expected a number or one of"),
    ],
)
def test_distribution_errors(value: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_distribution(value, "flops")


def test_unknown_kind_lists_accepted_kinds() -> None:
    with pytest.raises(ValueError) as info:
        parse_distribution({"poisson": 3}, "flops")
    msg = str(info.value)
    for kind in KINDS:
        assert kind in msg
    assert "poisson" in msg


# ------------------------------------------------------------------------- sampling

ALL = [
    Distribution("constant", (5.0,)),
    Distribution("uniform", (1.0, 3.0)),
    Distribution("normal", (10.0, 2.0)),
    Distribution("lognormal", (4.0, 0.5)),
    Distribution("choice", (1.0, 2.0, 4.0)),
]


@pytest.mark.parametrize("dist", ALL, ids=lambda d: d.kind)
def test_sample_is_deterministic_for_a_seeded_generator(dist: Distribution) -> None:
    a = dist.sample(np.random.default_rng(123), 50)
    b = dist.sample(np.random.default_rng(123), 50)
    assert a.shape == (50,)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dist", ALL[1:], ids=lambda d: d.kind)
def test_different_seeds_give_different_draws(dist: Distribution) -> None:
    a = dist.sample(np.random.default_rng(1), 50)
    b = dist.sample(np.random.default_rng(2), 50)
    assert not np.array_equal(a, b)


def test_samples_stay_in_range() -> None:
    rng = np.random.default_rng(0)
    assert np.all(ALL[0].sample(rng, 100) == 5.0)
    u = ALL[1].sample(rng, 2000)
    assert u.min() >= 1.0 and u.max() <= 3.0
    assert u.min() < 1.1 and u.max() > 2.9  # it spans the interval
    n = ALL[2].sample(rng, 4000)
    assert abs(n.mean() - 10.0) < 0.2 and abs(n.std() - 2.0) < 0.2
    ln = ALL[3].sample(rng, 4000)
    assert ln.min() > 0.0
    assert abs(np.median(ln) - 4.0) < 0.2
    c = ALL[4].sample(rng, 300)
    assert set(c.tolist()) == {1.0, 2.0, 4.0}


def test_zero_spread_is_a_constant_in_disguise() -> None:
    rng = np.random.default_rng(0)
    assert np.all(Distribution("normal", (3.0, 0.0)).sample(rng, 10) == 3.0)
    assert np.all(Distribution("lognormal", (3.0, 0.0)).sample(rng, 10) == 3.0)


def test_sample_of_zero_devices_is_empty() -> None:
    assert Distribution("uniform", (1.0, 2.0)).sample(np.random.default_rng(0), 0).shape == (0,)


def test_a_log_normal_speed_is_positive_but_a_normal_may_be_zero() -> None:
    """Speeds and rates must be > 0 for every device: e^x never is 0, a normal draw can be."""
    assert parse_distribution({"lognormal": {"median": "300MFLOPS", "sigma": 1.2}}, "flops").always_positive
    assert parse_distribution({"uniform": ["1MFLOPS", "2MFLOPS"]}, "flops").always_positive
    assert not parse_distribution({"normal": {"mean": "1MFLOPS", "std": "1kFLOPS"}}, "flops").always_positive


@pytest.mark.parametrize(
    "value, digits, text",
    [
        (1310445.0, 3, "1.31 MJ"),
        (21412.7, 3, "21.4 kJ"),
        (280.4, 3, "280 J"),
        (0.5, 3, "0.5 J"),
        (55000.0, None, "55 kJ"),
    ],
)
def test_energies_read_with_an_si_prefix(value: float, digits: int | None, text: str) -> None:
    assert format_si(value, "J", digits) == text
