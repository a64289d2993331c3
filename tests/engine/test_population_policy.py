"""A user's population policy: the shipped example's statistics, draws that do not depend on when the engine
asks, and answers fenced and checked with the user's file and line."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from netfl.cli.main import main
from netfl.errors import PolicyError
from netfl.policies import DeviceInfo, build_policy
from netfl.policies.catalog import population_model, supports_population

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HOUR, DAY = 3600.0, 86400.0


def spec(policy: str, **params) -> SimpleNamespace:
    return SimpleNamespace(policy=policy, params=params)


def build(policy: str, n: int, base_dir: Path, key: int = 9, **params):
    return population_model(spec(policy, **params), n, key, np.full((n, 4), 0.25), 3, base_dir=base_dir)


def test_the_example_evening_wifi_statistics() -> None:
    """Arrivals fall within each phone's evening window, stays average stay_h, and the share online at 22:00 is
    P(arrived by 22:00 and not yet left) = E[exp(-(22:00 - arrival) / stay)] over the arrival's distribution."""
    n = 20_000
    model = build("population_policy.py:EveningWifi", n, EXAMPLES, arrive_from_h=17, arrive_to_h=20, stay_h=4)
    arrivals, stays = [], []

    def record(devices, since, at, was_on):
        arrivals.append(at[~was_on] % DAY)
        done = was_on & (since < 2 * DAY)  # stays begun early enough to have ended by the last advance
        stays.append((at - since)[done])

    shares = []
    for day in range(4):
        model.advance(day * DAY + 22 * HOUR, record)
        shares.append(model.state.mean())
    model.advance(8 * DAY, record)
    arrivals, stays = np.concatenate(arrivals), np.concatenate(stays)
    assert arrivals.min() >= 16.5 * HOUR and arrivals.max() <= 20.5 * HOUR
    assert stays.mean() == pytest.approx(4 * HOUR, rel=0.03)  # 4 sd of a mean of ~40 000 exponentials: 2 %
    usual, jitter = np.meshgrid(17 + 3 * (np.arange(300) + 0.5) / 300, -0.5 + (np.arange(100) + 0.5) / 100)
    expected = np.exp(-(22 - usual - jitter) / 4).mean()  # about 0.44; a stay past the next evening: < 0.2 %
    assert np.mean(shares) == pytest.approx(expected, abs=0.01)  # 4 sd of the mean of four shares of 20 000
    assert model.state.dtype == bool and model.policy == "population_policy.py:EveningWifi"


def test_the_realisation_does_not_depend_on_when_the_engine_asks() -> None:
    params = dict(arrive_from_h=17, arrive_to_h=20, stay_h=2)
    often, once = (build("population_policy.py:EveningWifi", 300, EXAMPLES, **params) for _ in range(2))
    one_by_one = build("population_policy.py:EveningWifi", 300, EXAMPLES, **params)
    for t in np.arange(0, 3 * DAY, 1234.5):
        often.advance(t)
    last = float(np.arange(0, 3 * DAY, 1234.5)[-1])
    once.advance(last)
    states = [one_by_one.advance_one(j, last) for j in range(300)]
    assert np.array_equal(often.state, once.state) and np.array_equal(often.change, once.change)
    assert np.array_equal(often.state, states) and np.array_equal(often.change, one_by_one.change)
    other = build("population_policy.py:EveningWifi", 300, EXAMPLES, key=10, **params)
    other.advance(last)
    assert not np.array_equal(other.change, often.change)


def test_a_device_built_on_its_own_is_a_row_of_a_model_of_one() -> None:
    info = DeviceInfo(0, "g", 10, np.full(10, 0.1), 0, EXAMPLES)
    policy = build_policy(spec("population_policy.py:EveningWifi"), info, np.random.default_rng(1))
    wake = policy.next_wakeup(0.0)
    assert 16.5 * HOUR <= wake <= 20.5 * HOUR and not policy.online(wake - 1, None) and policy.online(wake, None)
    assert supports_population(spec("population_policy.py:EveningWifi"), EXAMPLES)
    assert not supports_population(spec("custom_policy.py:PluggedInAtNight"), EXAMPLES)  # one object per device


POLICY = """
import numpy as np
from netfl.policies import PopulationPolicy


class Odd(PopulationPolicy):
    def start(self, devices):
        return np.zeros(len(devices), dtype=bool), np.full(len(devices), 10.0)

    def next_change(self, devices, at, online):
        {body}
"""


@pytest.mark.parametrize(
    "body, expect",
    [
        ("return 1 / 0", r"pol.py:11: ZeroDivisionError in Odd.next_change: division by zero"),
        (
            "return at",
            r"pol.py:10: Odd.next_change gave device 0 its next change at 10\.0, which is not a later time than",
        ),
        ("return at[:1] + 1", r"pol.py:10: Odd.next_change gave the times of change as shape \(1,\); expected one"),
        ("return ['soon'] * len(devices)", r"pol.py:10: Odd.next_change gave the times of change as list"),
        ("return at + self.uniform(devices + 1)", r"pol.py:11: ValueError in Odd.next_change: devices must be"),
    ],
)
def test_errors_and_wrong_answers_name_the_users_file_and_line(tmp_path: Path, body: str, expect: str) -> None:
    (tmp_path / "pol.py").write_text(POLICY.format(body=body))
    model = build("pol.py:Odd", 2, tmp_path)
    with pytest.raises(PolicyError, match=expect):
        model.advance(100.0)


def test_a_wrong_start_and_a_missing_method_are_refused(tmp_path: Path) -> None:
    (tmp_path / "pol.py").write_text(POLICY.format(body="return at + 1").replace("10.0)", "-1.0)"))
    with pytest.raises(
        PolicyError,
        match=r"pol.py:7: Odd.start gave device 0 its next change at -1\.0, which is not a later time than its last",
    ):
        build("pol.py:Odd", 2, tmp_path)
    (tmp_path / "half.py").write_text(
        "from netfl.policies import PopulationPolicy\nclass Half(PopulationPolicy):\n"
        "    def start(self, devices):\n        return None\n"
    )
    with pytest.raises(PolicyError, match="half.py: Half does not define next_change"):
        build("half.py:Half", 2, tmp_path)


def test_an_error_in_the_users_policy_stops_a_run_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "pol.py").write_text(POLICY.format(body="return at + 1 / 0"))
    topology = textwrap.dedent(
        """
        name: user-population-policy
        stop: {rounds: 3}
        task: {dataset: {name: digits}, model: {name: logistic}, local: {steps: 1}}
        devices:
          - {group: g, count: 3, compute: {flops_per_s: 1e9}, link: {uplink: 1Mbps}, availability: {policy: pol.py:Odd}}
        engine: {devices: lazy}
        """
    )
    (tmp_path / "t.yaml").write_text(topology)
    result = CliRunner().invoke(main, ["simulate", str(tmp_path / "t.yaml"), "--out", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 2, result.output
    assert "pol.py:11: ZeroDivisionError in Odd.next_change" in result.output and "Traceback" not in result.output
