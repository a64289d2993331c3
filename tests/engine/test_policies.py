"""Built-in availability policies: the math, checked by hand or statistically.

Statistical checks use fixed seeds; each tolerance is 4 standard deviations
of the estimate for the sample size used (stated next to it), so a correct
implementation fails with probability below 1e-4 for any seed.
"""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from netfl.errors import PolicyError
from netfl.policies import BUILTIN_POLICIES, DeviceInfo, build_policy, check_spec, population
from netfl.policies.participation import DataProbability, resolve_probability
from netfl.policies.sessions import PRODUCTION_PROFILE, ClockParams, parse_duration
from netfl.policies.traces import fedscale_to_csv

HOUR, DAY = 3600.0, 86400.0


def info(index: int = 0, labels: Any = None, seed: int = 0, base_dir: Path | None = None) -> DeviceInfo:
    mix = np.full(10, 0.1) if labels is None else np.asarray(labels, dtype=float)
    return DeviceInfo(index, "g", 100, mix, seed, base_dir or Path.cwd())


def make(name: str, seed: int = 1, device: DeviceInfo | None = None, **params: Any):
    return build_policy(SimpleNamespace(policy=name, params=params), device or info(), np.random.default_rng(seed))


@dataclass
class State:
    charging: bool = True
    mains: bool = False
    battery_fraction: float = 1.0


def walk(policy, horizon: float, state: Any = None, extra: np.random.Generator | None = None) -> np.ndarray:
    """Online intervals in [0, horizon) found by asking only at the wake-ups the policy names.

    With ``extra``, also asks again at each instant and at random times in
    between (checking the answer cannot change before the wake-up) -- the
    engine's call pattern, which must not change the intervals.
    """
    state = state or State()
    t, out = 0.0, []
    while t < horizon:
        online = policy.online(t, state)
        at = policy.next_wakeup(t)
        assert at > t, (t, at)
        if extra is not None:
            assert policy.online(t, state) == online and policy.next_wakeup(t) == at
            for x in np.sort(extra.uniform(t, min(at, horizon), extra.integers(0, 3))):
                assert policy.online(x, state) == online and policy.next_wakeup(x) == at
        if online:
            end = min(at, horizon)
            if out and out[-1][1] == t:  # a wake-up at which nothing changed
                out[-1][1] = end
            else:
                out.append([t, end])
        t = at
    return np.array(out).reshape(-1, 2)


def on_time_before(intervals: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Total online time in [0, x) for each x (intervals sorted and disjoint)."""
    starts, ends = intervals[:, 0], intervals[:, 1]
    cum = np.concatenate([[0.0], np.cumsum(ends - starts)])
    i = np.searchsorted(starts, x, side="right")
    overhang = np.where(i > 0, np.maximum(0.0, ends[np.maximum(i - 1, 0)] - x), 0.0)
    return cum[i] - overhang


def test_registry_names() -> None:
    assert list(BUILTIN_POLICIES) == [
        "always",
        "bernoulli",
        "markov",
        "cyclic",
        "sessions",
        "daily",
        "diurnal",
        "eligible",
        "fedscale_trace",
        "trace_csv",
        "device_logs",
    ]


# ------------------------------------------------------------ round patterns


def test_bernoulli_long_run() -> None:
    p, n = 0.3, 20_000
    pol = make("bernoulli", p=p)
    rate = np.mean([pol.participates(t) for t in range(n)])
    assert abs(rate - p) < 4 * math.sqrt(p * (1 - p) / n)  # 4 sd of a binomial mean: 0.013


@pytest.mark.parametrize("p", [0.3, 0.03])
def test_markov_long_run(p: float) -> None:
    n = 100_000
    pol = make("markov", p=p, seed=5)
    a, b = pol.model.to_on[0], pol.model.to_off[0]  # the device's row of its population model
    if 0.05 * (1 / p - 1) > 1:  # p = 0.03: both rescaled so that P(on -> off) = 1
        assert b == 1.0 and a == pytest.approx(0.05 / (0.05 * (1 / p - 1)))
    else:
        assert (a, b) == pytest.approx((0.05, 0.05 * (1 / p - 1)))
    assert a / (a + b) == pytest.approx(p)
    rate = np.mean([pol.participates(t) for t in range(n)])
    lam = 1 - a - b  # autocorrelation per round; the mean's variance grows by (1 + lam) / (1 - lam)
    sd = math.sqrt(p * (1 - p) / n * (1 + lam) / (1 - lam))  # p=0.3: 0.0048; p=0.03: 0.0005
    assert abs(rate - p) < 4 * sd


def test_cyclic_exact_phases() -> None:
    pol = make("cyclic", p=0.3, period="100 rounds", seed=2)
    assert (pol.model.on[0], pol.model.off[0], pol.p) == (30, 70, 0.3)
    seq = np.array([pol.participates(t) for t in range(1000)])
    first_on = int(np.argmax(seq))
    assert 0 <= first_on < 70 and not seq[:first_on].any()
    changes = np.flatnonzero(np.diff(seq[first_on:].astype(int))) + 1
    runs = np.diff(np.concatenate([[0], changes]))  # whole runs from the first on round
    assert set(runs[0::2]) == {30} and set(runs[1::2]) == {70}  # on then off, exact lengths
    assert seq[first_on : first_on + 900].mean() == 0.3  # 9 whole cycles: exactly p


@pytest.mark.parametrize("period", [100, "100"])
def test_cyclic_period_is_refused_without_the_word_rounds(period: Any) -> None:
    message = check_spec(SimpleNamespace(policy="cyclic", params={"p": 0.3, "period": period}), Path.cwd())
    assert any(path == ".period" and "'100 rounds'" in text for path, text in message), message


def test_cyclic_offset_as_reference() -> None:
    # FedAU's reference: rounds_to_switch = randint(off) off rounds before the first on.
    firsts = set()
    for seed in range(1500):
        pol = make("cyclic", p=0.5, period="10 rounds", seed=seed)  # on = off = 5
        firsts.add(next(t for t in range(20) if pol.participates(t)))
    assert firsts == {0, 1, 2, 3, 4}
    tiny = make("cyclic", p=0.001, period="100 rounds")
    assert (tiny.model.on[0], tiny.model.off[0]) == (1, 99)
    full = make("cyclic", p=1.0, period="100 rounds")
    assert (full.model.on[0], full.model.off[0]) == (100, 1)


# ------------------------------------------------------- probability sources


class FakeDirichlet:
    def __init__(self, m: list[float]):
        self.m, self.calls = np.asarray(m), []

    def dirichlet(self, alpha):
        self.calls.append(np.asarray(alpha))
        return self.m


def test_fedau_data_rule_hand_computed(monkeypatch) -> None:
    fake = FakeDirichlet([0.6, 0.1, 0.29, 0.01])
    names = []
    monkeypatch.setattr(population, "shared_rng", lambda seed, name: names.append(name) or fake)  # a group's draw
    monkeypatch.setattr(DeviceInfo, "shared_rng", lambda self, name: fake)  # one device's (resolve_probability)
    rule = {"from": "data"}
    pol = make("bernoulli", p=rule, device=info(labels=[0.5, 0.5, 0, 0]))
    assert pol.p == pytest.approx(0.1 * 4 * (0.5 * 0.6 + 0.5 * 0.1))  # 0.14
    assert names == ["fedau-participation"] and np.allclose(fake.calls[0], [0.1] * 4)
    floored = resolve_probability(DataProbability.model_validate(rule), info(labels=[0, 0, 0, 1]))
    assert floored == 0.02  # 0.1 * 4 * 0.01 = 0.004, below the floor
    big = DataProbability.model_validate({"from": "data", "scale": 1.0, "floor": 0.05})
    assert resolve_probability(big, info(labels=[1, 0, 0, 0])) == 1.0  # 4 * 0.6 = 2.4, clipped


def test_fedau_data_rule_shares_one_draw() -> None:
    rule = DataProbability.model_validate({"from": "data", "floor": 0.0})
    m = info(seed=9).shared_rng("fedau-participation").dirichlet(0.1 * np.ones(10))
    for label in range(10):
        device = info(index=label * 7, labels=np.eye(10)[label], seed=9)
        assert resolve_probability(rule, device) == pytest.approx(min(1.0, 0.1 * 10 * m[label]))


def test_mifa_smallest_label_rule() -> None:
    rule = {"from": "smallest_label", "p_min": 0.1}
    two_classes = np.zeros(10)
    two_classes[[3, 7]] = 0.5
    assert make("bernoulli", p=rule, device=info(labels=two_classes)).p == pytest.approx(0.1 + 0.9 * 3 / 9)
    assert make("markov", p=rule, device=info(labels=np.eye(10)[0])).p == pytest.approx(0.1)
    assert make("cyclic", p=rule, device=info(labels=np.eye(10)[9])).p == pytest.approx(1.0)


def problems(name: str, **params: Any) -> dict[str, str]:
    return dict(check_spec(SimpleNamespace(policy=name, params=params), None))


def test_probability_errors_have_paths() -> None:
    assert "<= 1" in problems("markov", p=1.5)[".p"]
    assert "unknown key" in problems("cyclic", p={"from": "data", "flor": 0.1})[".p.flor"]
    assert "floor" in problems("cyclic", p={"from": "data", "flor": 0.1})[".p.flor"]
    assert "smallest_label" in problems("bernoulli", p={"from": "labels"})[".p.from"]
    assert "<= 1" in problems("bernoulli", p={"from": "smallest_label", "p_min": 2})[".p.p_min"]
    assert problems("bernoulli", p="30%") == {}


# ------------------------------------------------------------------ sessions


def gamma(x: float) -> float:
    return math.gamma(x)


DURATIONS = {  # spec, mean, standard deviation (seconds)
    "exponential": ({"exponential": {"mean": "30min"}}, 1800.0, 1800.0),
    "lognormal": (
        {"lognormal": {"median": "20min", "sigma": 1.0}},
        1200 * math.exp(0.5),
        1200 * math.exp(0.5) * math.sqrt(math.e - 1),
    ),
    "weibull": (
        {"weibull": {"shape": 0.8, "scale": "1h"}},
        3600 * gamma(1 + 1 / 0.8),
        3600 * math.sqrt(gamma(1 + 2 / 0.8) - gamma(1 + 1 / 0.8) ** 2),
    ),
}


@pytest.mark.parametrize("on,off", [("exponential", "weibull"), ("lognormal", "exponential"), ("weibull", "lognormal")])
def test_onoff_session_lengths_match_means(on: str, off: str) -> None:
    (on_spec, on_mean, on_sd), (off_spec, off_mean, off_sd) = DURATIONS[on], DURATIONS[off]
    assert parse_duration(on_spec).mean == pytest.approx(on_mean)
    pol = make("sessions", on=on_spec, off=off_spec, seed=3)
    assert pol.model.stationary == pytest.approx(on_mean / (on_mean + off_mean))
    runs = walk(pol, 15_000 * (on_mean + off_mean))
    ons = (runs[:, 1] - runs[:, 0])[1:-1]  # the first and last are cut by the start and the horizon
    offs = (runs[1:, 0] - runs[:-1, 1])[1:]
    for got, mean, sd in ((ons, on_mean, on_sd), (offs, off_mean, off_sd)):
        assert len(got) > 14_000
        assert abs(got.mean() - mean) < 4 * sd / math.sqrt(len(got))  # 4 sd of a mean of ~15000 sessions


def test_duration_forms_and_errors() -> None:
    assert parse_duration("45min").mean == 2700
    assert parse_duration({"uniform": ["10min", "30min"]}).mean == 1200
    assert problems("sessions", on="45min", off="1h") == {}
    assert "quantity" in problems("sessions", on="bogus", off="1h")[".on"]
    assert "weibull" in problems("sessions", on={"weibull": {"shape": 0.8}}, off="1h")[".on"]
    assert "exponential" in problems("sessions", on="1h", off={"gamma": {"k": 2}})[".off"]


SPECS = {
    "sessions": dict(on={"weibull": {"shape": 0.8, "scale": "1h"}}, off={"lognormal": {"median": "20min", "sigma": 1}}),
    "daily": dict(start="21:00", end="06:30", jitter="90min"),
    "diurnal": dict(preset="production", mixing="2min", time_zone_offset="-5h"),
    "eligible": dict(
        idle={"policy": "sessions", "on": {"exponential": {"mean": "40min"}}, "off": "20min"},
        wifi={"policy": "diurnal", "mixing": "5min"},
    ),
}


@pytest.mark.parametrize("name", list(SPECS))
def test_intervals_do_not_depend_on_call_pattern(name: str) -> None:
    plain = walk(make(name, seed=11, **SPECS[name]), 5 * DAY)
    busy = walk(make(name, seed=11, **SPECS[name]), 5 * DAY, extra=np.random.default_rng(0))
    assert len(plain) > 5 and np.array_equal(plain, busy)
    assert not np.array_equal(plain, walk(make(name, seed=12, **SPECS[name]), 5 * DAY))


def test_daily_window_wraps_past_midnight() -> None:
    pol = make("daily", start="22:00", end="07:00")
    s = State()
    assert pol.online(0.0, s) and pol.online(7 * HOUR - 1e-6, s)  # yesterday's window, still open
    assert not pol.online(7 * HOUR, s) and pol.next_wakeup(7 * HOUR) == 22 * HOUR
    assert not pol.online(12 * HOUR, s) and pol.next_wakeup(12 * HOUR) == 22 * HOUR
    assert pol.online(22 * HOUR, s) and pol.next_wakeup(22 * HOUR) == DAY + 7 * HOUR
    runs = walk(make("daily", start="22:00", end="07:00"), 10 * DAY)
    assert (runs[1:-1, 1] - runs[1:-1, 0] == 9 * HOUR).all() and runs[0].tolist() == [0.0, 7 * HOUR]
    day = walk(make("daily", start="09:00", end="17:30"), 3 * DAY)
    assert day.tolist() == [[d * DAY + 9 * HOUR, d * DAY + 17.5 * HOUR] for d in range(3)]


def test_daily_takes_local_times_with_the_time_zone_offset_of_diurnal() -> None:
    # 21:00-07:00 local with local = simulated + 8h is 13:00-23:00 simulated: the same windows, draw for draw
    local = walk(make("daily", start="21:00", end="07:00", jitter="2h", time_zone_offset="8h", seed=5), 30 * DAY)
    shifted = walk(make("daily", start="13:00", end="23:00", jitter="2h", seed=5), 30 * DAY)
    assert len(local) >= 30 and np.array_equal(local, shifted)
    # an offset past a day, or negative, is the same clock: 01:00-03:00 local at +20h is 05:00-07:00 simulated
    for offset in ("20h", "44h", "-4h"):
        runs = walk(make("daily", start="01:00", end="03:00", time_zone_offset=offset), 3 * DAY)
        assert runs.tolist() == [[d * DAY + 5 * HOUR, d * DAY + 7 * HOUR] for d in range(3)], offset
    assert all(issubclass(BUILTIN_POLICIES[name].Params, ClockParams) for name in ("daily", "diurnal"))


def test_daily_jitter_stays_within_bounds() -> None:
    runs = walk(make("daily", start="22:00", end="07:00", jitter="30min", seed=4), 200 * DAY)[1:-1]
    starts = (runs[:, 0] % DAY) - 22 * HOUR
    ends = ((runs[:, 1] + 12 * HOUR) % DAY) - 19 * HOUR  # 07:00 measured from 12:00 the day before
    assert np.abs(starts).max() <= 1800 and np.abs(ends).max() <= 1800
    # uniform on [-30min, 30min]: sd 1039 s; 4 sd of the mean of ~199 draws: 295 s
    assert abs(starts.mean()) < 295 and abs(ends.mean()) < 295 and starts.std() > 600


def test_daily_validation() -> None:
    assert "quotes" in problems("daily", start=1320, end="07:00")[".start"]  # YAML's reading of 22:00
    assert "always" in problems("daily", start="07:00", end="07:00")[""]
    assert "jitter" in problems("daily", start="22:00", end="23:00", jitter="40min")[""]
    assert problems("daily", start="21:00", end="06:30", jitter="90min") == {}


def test_diurnal_hourly_availability_follows_profile() -> None:
    profile = [0.1] * 6 + [0.9] * 6 + [0.5] * 6 + [0.3, 0.7] * 3
    mixing, days = 120.0, 400
    runs = walk(make("diurnal", profile=profile, mixing="2min", seed=6), days * DAY)
    edges = np.arange(days * 24 + 1) * HOUR
    per_hour = np.diff(on_time_before(runs, edges)).reshape(days, 24)[1:] / HOUR  # drop the start-up day
    got = per_hour.mean(axis=0)
    p, prev = np.array(profile), np.roll(profile, 1)
    # Within an hour the chain relaxes from the previous hour's level with time constant `mixing`:
    # mean = p + (prev - p) * mixing / 1h * (1 - exp(-1h / mixing)).
    expected = p + (prev - p) * mixing / HOUR * (1 - math.exp(-HOUR / mixing))
    # The hourly mean of a chain with correlation time `mixing` has variance ~ 2 * mixing * p(1-p) / 1h;
    # 4 sd over 399 days: 0.011 to 0.018.
    tol = 4 * np.sqrt(2 * mixing * p * (1 - p) / HOUR / (days - 1))
    assert (np.abs(got - expected) < tol).all(), (got - expected, tol)


def test_diurnal_offset_and_presets() -> None:
    assert max(PRODUCTION_PROFILE) == pytest.approx(0.4, abs=0.002)
    assert max(PRODUCTION_PROFILE) / min(PRODUCTION_PROFILE) == pytest.approx(4, rel=0.02)
    assert PRODUCTION_PROFILE.index(max(PRODUCTION_PROFILE)) in (2, 3)  # night peak, local time
    # A hard profile: online in local hours 0-11 only. With +5h local = sim + 5h, so sim hours 19-6.
    pol = make("diurnal", profile=[1.0] * 12 + [0.0] * 12, mixing="2min", time_zone_offset="5h")
    for day in range(3):
        for h in range(24):
            t = day * DAY + h * HOUR + 1800  # half an hour in: e^-15 from the profile's state
            assert pol.online(t, State()) == ((h + 5) % 24 < 12), (day, h)
    never = make("diurnal", profile=[0.0] * 24)
    assert not never.online(1e6, State()) and never.next_wakeup(1e6) == math.inf
    assert "either" in problems("diurnal", preset="production", profile=[0.5] * 24)[""]
    assert ".profile[3]" in problems("diurnal", profile=[0.5] * 3 + [1.5] + [0.5] * 20)


def test_eligible_composes_charging_idle_wifi() -> None:
    spec = dict(
        idle={"policy": "daily", "start": "00:00", "end": "12:00"},
        wifi={"policy": "daily", "start": "06:00", "end": "18:00"},
    )
    pol = make("eligible", **spec)
    plugged, unplugged = State(charging=True), State(charging=False)
    assert not pol.online(5 * HOUR, plugged) and pol.next_wakeup(5 * HOUR) == 6 * HOUR  # idle but no Wi-Fi
    assert pol.online(7 * HOUR, plugged) and not pol.online(7 * HOUR, unplugged)
    assert pol.next_wakeup(7 * HOUR) == 12 * HOUR
    assert not pol.online(13 * HOUR, plugged) and pol.next_wakeup(13 * HOUR) == 18 * HOUR  # Wi-Fi, in use
    assert make("eligible", charging=False, **spec).online(7 * HOUR, unplugged)
    assert make("eligible").online(123.0, plugged) and make("eligible").next_wakeup(0.0) == math.inf


def test_eligible_components_use_their_own_streams() -> None:
    idle = {"policy": "sessions", "on": {"exponential": {"mean": "1h"}}, "off": "30min"}
    alone = make("eligible", seed=8, charging=False, idle=idle)
    both = make("eligible", seed=8, charging=False, idle=idle, wifi={"policy": "diurnal"})
    for policy in (alone, both):
        walk(policy, DAY)  # each composite moves its idle component as far as it needs
        policy.model.components["idle"].advance(3 * DAY)
    a, b = alone.model.components["idle"], both.model.components["idle"]
    assert a.draws[0] > 10 and (a.state, a.since, a.change, a.draws) == (b.state, b.since, b.change, b.draws)


def test_eligible_nested_errors_have_paths() -> None:
    found = problems(
        "eligible", wifi={"policy": "sessions", "on": "bogus", "of": "1h"}, idle={"policy": "markov", "p": 0.3}
    )
    assert "quantity" in found[".wifi.on"]
    assert "accepted: on, off" in found[".wifi.of"] and "missing" in found[".wifi.off"]
    assert "per-round" in found[".idle.policy"]
    assert "sessions" in problems("eligible", idle={"policy": "sometimes"})[".idle.policy"]


# -------------------------------------------------------------------- traces


def write_pickle(path: Path, data: Any) -> Path:
    path.write_bytes(pickle.dumps(data))
    return path


FEDSCALE = {  # client ids deliberately unsorted; sorted: 3, 7, 10
    10: {"duration": 500, "active": [0, 900], "inactive": [100, 1000], "finish_time": 1000, "model": "x"},
    3: {"duration": 300, "active": [100, 500], "inactive": [200, 700], "finish_time": 1000, "model": "y"},
    7: {"duration": 50, "active": [250], "inactive": [300], "finish_time": 1000, "model": "z"},
}


def test_fedscale_trace_intervals_and_mapping(tmp_path: Path) -> None:
    write_pickle(tmp_path / "behave.pkl", FEDSCALE)
    device = lambda i: info(index=i, base_dir=tmp_path)  # noqa: E731
    pol = make("fedscale_trace", trust_pickle=True, file="behave.pkl", device=device(0))
    assert pol.client_id == 3
    s = State()
    for t, expected in [
        (99.999, False),
        (100, True),
        (199.999, True),
        (200, False),
        (500, True),
        (700, False),
        (3000 + 150, True),
        (3000 + 250, False),
        (7 * 1000 + 600, True),
    ]:
        assert pol.online(t, s) == expected, t
    fresh = make("fedscale_trace", trust_pickle=True, file="behave.pkl", device=device(0))  # asked in time order
    assert fresh.next_wakeup(0) == 100 and fresh.next_wakeup(150) == 200 and fresh.next_wakeup(800) == 1100
    assert make("fedscale_trace", trust_pickle=True, file="behave.pkl", device=device(4)).client_id == 7  # 4 mod 3 = 1
    offset = make(
        "fedscale_trace", trust_pickle=True, file=str(tmp_path / "behave.pkl"), client_offset=2, device=device(0)
    )
    assert offset.client_id == 10
    wrap = walk(make("fedscale_trace", trust_pickle=True, file="behave.pkl", device=device(2)), 3000)
    assert wrap.tolist() == [[0, 100], [900, 1100], [1900, 2100], [2900, 3000]]  # 900-1000 then 0-100: one session


def test_fedscale_trace_errors_name_file_and_problem(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="missing.pkl.*not found"):
        make("fedscale_trace", trust_pickle=True, file=str(tmp_path / "missing.pkl"))
    with pytest.raises(PolicyError, match="list.pkl.*dict.*got list"):
        make("fedscale_trace", trust_pickle=True, file=str(write_pickle(tmp_path / "list.pkl", [1, 2])))
    broken = {1: {"active": [0], "inactive": [5]}}
    with pytest.raises(PolicyError, match=r"broken.pkl: client 1: missing key\(s\) 'finish_time'"):
        make("fedscale_trace", trust_pickle=True, file=str(write_pickle(tmp_path / "broken.pkl", broken)))
    (tmp_path / "junk.pkl").write_bytes(b"not a pickle")
    with pytest.raises(PolicyError, match="junk.pkl"):
        make("fedscale_trace", trust_pickle=True, file=str(tmp_path / "junk.pkl"))


def write_csv(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_csv_trace_merges_and_repeats(tmp_path: Path) -> None:
    write_csv(tmp_path / "t.csv", "device,start_s,end_s\n0,50,80\n0,10,20\n0,15,30\n1,5,6\n0,80,90\n")
    device = lambda i: info(index=i, base_dir=tmp_path)  # noqa: E731
    once = make("trace_csv", file="t.csv", unlisted="offline", device=device(0))
    assert walk(once, 1000).tolist() == [[10, 30], [50, 90]]  # sorted, overlaps and touching rows merged
    assert not once.online(95, State()) and once.next_wakeup(95) == math.inf
    periodic = make("trace_csv", file="t.csv", period="100s", unlisted="offline", device=device(0))
    assert walk(periodic, 300).tolist() == [[10, 30], [50, 90], [110, 130], [150, 190], [210, 230], [250, 290]]
    never = make("trace_csv", file="t.csv", unlisted="offline", device=device(2))
    assert walk(never, 1000).size == 0  # no rows: never online, as asked


@pytest.mark.parametrize(
    "text,line,what",
    [
        ("device,start_s,end_s\n0,1,2\n0,abc,5\n", 3, "numbers"),
        ("device,start_s,end_s\n0,1,2\n\n-1,1,2\n", 4, "device index"),
        ("device,start_s,end_s\n0,5,5\n", 2, "start_s < end_s"),
        ("device,begin,end\n0,1,2\n", 1, "header"),
        ("device,start_s,end_s\n0,1,2,3\n", 2, "3 fields"),
    ],
)
def test_csv_trace_bad_rows_name_the_line(tmp_path: Path, text: str, line: int, what: str) -> None:
    path = write_csv(tmp_path / "bad.csv", text)
    with pytest.raises(PolicyError, match=rf"bad.csv:{line}: .*{what}"):
        make("trace_csv", file=str(path))


def test_csv_trace_interval_past_period(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "p.csv", "device,start_s,end_s\n0,10,20\n0,90,120\n")
    with pytest.raises(PolicyError, match=r"p.csv:3: end_s 120 is after the period"):
        make("trace_csv", file=str(path), period=100)


def test_fedscale_to_csv_round_trip(tmp_path: Path) -> None:
    pkl = write_pickle(tmp_path / "behave.pkl", FEDSCALE)
    period = fedscale_to_csv(pkl, tmp_path / "behave.csv", num_devices=7, allow_pickle=True)  # more devices
    assert period == 1000
    times = np.concatenate(
        [
            np.random.default_rng(1).uniform(0, 5000, 2000),
            [
                b + k * 1000 + e
                for b in (0, 100, 200, 250, 300, 500, 700, 900)
                for k in range(4)
                for e in (-1e-6, 0, 1e-6)
            ],
        ]
    )
    times.sort()  # a policy is asked in time order
    for n in range(7):
        device = info(index=n, base_dir=tmp_path)
        a = make("fedscale_trace", trust_pickle=True, file="behave.pkl", device=device)
        b = make("trace_csv", file="behave.csv", period=period, device=device)
        assert np.array_equal(walk(a, 5000), walk(b, 5000)), n
        a = make("fedscale_trace", trust_pickle=True, file="behave.pkl", device=device)
        b = make("trace_csv", file="behave.csv", period=period, device=device)
        answers = [a.online(t, State()) for t in times]
        assert answers == [b.online(t, State()) for t in times] and 0 < sum(answers) < len(times)


def test_fedscale_to_csv_tiles_shorter_cycles(tmp_path: Path) -> None:
    data = {
        1: {"active": [10], "inactive": [20], "finish_time": 50},
        2: {"active": [0], "inactive": [30], "finish_time": 100},
    }
    pkl = write_pickle(tmp_path / "mixed.pkl", data)
    assert fedscale_to_csv(pkl, tmp_path / "mixed.csv", allow_pickle=True) == 100
    a = make("fedscale_trace", trust_pickle=True, file=str(pkl))
    b = make("trace_csv", file=str(tmp_path / "mixed.csv"), period=100)
    assert np.array_equal(walk(a, 1000), walk(b, 1000))  # 50 divides 100: the same forever
