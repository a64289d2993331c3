"""Population (vectorised) availability models against the closed forms of the per-device policies."""

from __future__ import annotations

import math

import numpy as np
import pytest

from netfl.policies.builtin import BUILTIN_POLICIES
from netfl.policies.population import build_population_model
from netfl.policies.sessions import DAY, HOUR


def model(policy: str, n: int = 20_000, key: int = 7, labels: np.ndarray | None = None, **params):
    cls = BUILTIN_POLICIES[policy]
    mix = labels if labels is not None else np.full((n, 4), 0.25)
    return build_population_model(policy, cls.Params.model_validate(params), n, key, mix, seed=3)


def test_sessions_online_fraction_and_mean_lengths() -> None:
    m = model("sessions", on={"exponential": {"mean": "30min"}}, off={"exponential": {"mean": "90min"}})
    lengths = {True: [], False: []}

    def record(devices, since, at, was_on):
        for state in (True, False):
            keep = was_on == state
            lengths[state].append((at - since)[keep & (since > 0) & (since < 2 * DAY)])  # whole sessions that
            # started early enough to have ended by the last advance (long ones are not cut off)

    fractions = []
    for t in np.arange(0, 4 * DAY, HOUR):
        m.advance(t, record)
        fractions.append(m.state.mean())
    assert np.mean(fractions) == pytest.approx(0.25, abs=0.01)  # 30 / (30 + 90)
    assert np.concatenate(lengths[True]).mean() == pytest.approx(1800, rel=0.03)
    assert np.concatenate(lengths[False]).mean() == pytest.approx(5400, rel=0.03)


def test_sessions_lognormal_and_weibull_means() -> None:
    m = model(
        "sessions",
        n=50_000,
        on={"lognormal": {"median": "10min", "sigma": 0.8}},
        off={"weibull": {"shape": 0.7, "scale": "20min"}},
    )
    on_mean = 600 * math.exp(0.8**2 / 2)
    off_mean = 1200 * math.gamma(1 + 1 / 0.7)
    m.advance(10 * DAY)
    assert m.state.mean() == pytest.approx(on_mean / (on_mean + off_mean), abs=0.01)


def test_the_realisation_does_not_depend_on_when_the_engine_asks() -> None:
    spec = dict(on={"exponential": {"mean": "20min"}}, off={"uniform": ["5min", "1h"]})
    often, once, one_by_one = (
        model("sessions", n=500, **spec),
        model("sessions", n=500, **spec),
        model("sessions", n=500, **spec),
    )
    times = np.arange(0, 6 * HOUR, 77.0)
    for t in times:
        often.advance(t)
    last = float(times[-1])
    once.advance(last)
    states = [one_by_one.advance_one(j, last) for j in range(500)]
    assert np.array_equal(often.state, once.state) and np.array_equal(often.change, once.change)
    assert np.array_equal(often.state, np.array(states)) and np.array_equal(often.change, one_by_one.change)
    other_key = model("sessions", n=500, key=8, **spec)
    other_key.advance(last)
    assert not np.array_equal(other_key.change, often.change)


def test_diurnal_follows_the_profile_hour_by_hour() -> None:
    profile = [0.1] * 6 + [0.6] * 12 + [0.3] * 6
    m = model("diurnal", profile=profile, mixing="2min")
    for hour in (2, 9, 15, 21):
        m.advance(DAY + hour * HOUR + 0.5 * HOUR)
        assert m.state.mean() == pytest.approx(profile[hour], abs=0.015)


def test_diurnal_time_zone_shifts_the_profile() -> None:
    profile = [0.0] * 12 + [1.0] * 12
    m = model("diurnal", n=2000, profile=profile, mixing="1s", time_zone_offset="12h")
    m.advance(6 * HOUR)  # local 18:00
    assert m.state.mean() == pytest.approx(1.0, abs=0.01)
    m.advance(18 * HOUR)  # local 06:00
    assert m.state.mean() == pytest.approx(0.0, abs=0.01)


def test_daily_window_exact_and_jittered() -> None:
    m = model("daily", n=1000, start="22:00", end="07:00")
    assert m.state.all()  # at 0:00 yesterday's window is open
    m.advance(12 * HOUR)
    assert not m.state.any() and np.all(m.change == 22 * HOUR)
    m.advance(23 * HOUR)
    assert m.state.all() and np.all(m.change == DAY + 7 * HOUR)
    jittered = model("daily", n=20_000, start="08:00", end="18:00", jitter="1h")
    jittered.advance(DAY + 8 * HOUR)
    assert jittered.state.mean() == pytest.approx(0.5, abs=0.02)  # day 1's opening time is uniform in 07:00-09:00
    jittered.advance(DAY + 8.5 * HOUR)
    assert jittered.state.mean() == pytest.approx(0.75, abs=0.02)


def test_daily_local_window_with_a_time_zone_offset() -> None:
    # 01:00-03:00 local at +20h is 05:00-07:00 simulated: day 0's window in local terms ended before time 0
    m = model("daily", n=50, start="01:00", end="03:00", time_zone_offset="20h")
    assert not m.state.any() and np.all(m.change == 5 * HOUR)
    m.advance(6 * HOUR)
    assert m.state.all() and np.all(m.change == 7 * HOUR)
    night = model("daily", n=50, start="21:00", end="07:00", time_zone_offset="8h")  # 13:00-23:00 simulated
    assert not night.state.any() and np.all(night.change == 13 * HOUR)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_bernoulli_rounds_are_independent_with_probability_p(p: float) -> None:
    m = model("bernoulli", p=p)
    rows = []
    for r in range(60):
        m.advance(r)
        rows.append(m.state.copy())
    on = np.array(rows)
    assert on.mean() == pytest.approx(p, abs=0.01)
    both = (on[1:] & on[:-1]).mean()
    assert both == pytest.approx(p * p, abs=0.01)  # consecutive rounds independent


def test_markov_rounds_have_stationary_p_and_the_transition_rate() -> None:
    m = model("markov", p=0.2, transition=0.1)  # P(off->on) 0.1, P(on->off) 0.4
    rows = []
    for r in range(200):
        m.advance(r)
        rows.append(m.state.copy())
    on = np.array(rows)
    assert on.mean() == pytest.approx(0.2, abs=0.01)
    leave = (on[:-1] & ~on[1:]).sum() / on[:-1].sum()
    enter = (~on[:-1] & on[1:]).sum() / (~on[:-1]).sum()
    assert leave == pytest.approx(0.4, abs=0.01) and enter == pytest.approx(0.1, abs=0.005)


def test_markov_small_p_is_rescaled_like_the_per_device_policy() -> None:
    m = model("markov", p=0.01, transition=0.05)  # to_off would be 4.95: both divided by it
    assert np.allclose(m.to_off, 1.0) and np.allclose(m.to_on, 0.05 / 4.95)


def test_cyclic_pattern_matches_the_formula() -> None:
    m = model("cyclic", n=300, p=0.3, period="10 rounds")
    assert np.all(m.on == 3) and np.all(m.off == 7)
    for r in range(35):
        m.advance(r)
        expected = (m.offset + r) % (m.on + m.off) >= m.off
        assert np.array_equal(m.state, expected)
    assert set(np.unique(m.offset)) <= set(range(1, 8))


def test_probability_from_data_is_resolved_per_device() -> None:
    mix = np.zeros((4, 4))
    mix[np.arange(4), np.arange(4)] = 1.0  # device i holds label i only
    m = model("bernoulli", n=4, labels=mix, p={"from": "smallest_label", "p_min": 0.1})
    assert np.allclose(m.participation, [0.1, 0.4, 0.7, 1.0])


def test_always_is_always_on() -> None:
    m = model("always", n=10)
    m.advance(1e9)
    assert m.state.all() and np.all(np.isinf(m.change)) and m.participation is None
