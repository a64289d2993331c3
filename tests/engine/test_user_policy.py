"""User-scripted policies: loading, validation, and errors that name the user's file and line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from netfl.cli.main import main
from netfl.config import load_scenario
from netfl.errors import PolicyError, ScenarioError
from netfl.policies import DeviceInfo, build_policy, policy_class

GOOD = """
from netfl.policies import PolicyParams, RoundPolicy

class EveryKth(RoundPolicy):
    class Params(PolicyParams):
        k: int = 2

    def participates(self, round_index):
        return round_index % self.params.k == 0
"""

TOPOLOGY = """
name: user-policy
seed: 3
stop: {{rounds: 4}}
task: {{dataset: {{name: digits}}, model: {{name: logistic}}, local: {{steps: 2}}}}
devices:
  - group: g
    count: 3
    compute: {{flops_per_s: 1e9}}
    availability: {{policy: "{ref}"{params}}}
    link: {{uplink: 1Mbps}}
"""


def write(tmp_path: Path, code: str, *, ref: str = "pol.py:EveryKth", params: str = "") -> Path:
    (tmp_path / "pol.py").write_text(textwrap.dedent(code))
    path = tmp_path / "topo.yaml"
    path.write_text(TOPOLOGY.format(ref=ref, params=params))
    return path


def info(tmp_path: Path) -> DeviceInfo:
    import numpy as np

    return DeviceInfo(0, "g", 10, np.full(10, 0.1), 0, tmp_path)


def test_user_policy_loads_relative_to_the_topology_and_runs(tmp_path):
    topo = write(tmp_path, GOOD, params=", k: 3")
    scenario = load_scenario(topo)
    import numpy as np

    policy = build_policy(scenario.devices[0].availability, info(tmp_path), np.random.default_rng(0))
    assert [policy.participates(r) for r in range(6)] == [True, False, False, True, False, False]
    result = CliRunner().invoke(main, ["simulate", str(topo), "--out", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 0, result.output
    events = __import__("pandas").read_parquet(tmp_path / "out" / "events.parquet")
    assert set(events[events.kind == "selected"]["round"]) == {0, 3}


def test_bad_parameter_of_a_user_policy_names_the_yaml_path(tmp_path):
    topo = write(tmp_path, GOOD, params=", k: many")
    with pytest.raises(ScenarioError) as err:
        load_scenario(topo)
    assert any(p == "devices[0].availability.k" for p, _ in err.value.problems)


@pytest.mark.parametrize(
    "code, ref, expect",
    [
        ("def broken(:\n    pass\n", "pol.py:EveryKth", "pol.py:1: syntax error"),
        (
            "import math\nraise RuntimeError('boom at import')\n",
            "pol.py:EveryKth",
            "pol.py:2: RuntimeError while importing",
        ),
        (GOOD, "pol.py:Missing", "no 'Missing' in this policy file; defined there: EveryKth"),
        (
            "class NotAPolicy:\n    pass\n",
            "pol.py:NotAPolicy",
            "must subclass netfl.policies.RoundPolicy or SessionPolicy",
        ),
        (
            "from netfl.policies import RoundPolicy\nclass Half(RoundPolicy):\n    pass\n",
            "pol.py:Half",
            "does not define participates",
        ),
        (GOOD, "nothere.py:EveryKth", "file not found"),
    ],
)
def test_load_errors_name_the_file_and_line(tmp_path, code, ref, expect):
    topo = write(tmp_path, code, ref=ref)
    result = CliRunner().invoke(main, ["validate", str(topo)])
    assert result.exit_code == 2
    assert expect in result.output and "Traceback" not in result.output


def test_exception_inside_the_policy_stops_the_run_with_file_and_line(tmp_path):
    code = """
    from netfl.policies import RoundPolicy

    class Flaky(RoundPolicy):
        def participates(self, round_index):
            if round_index == 2:
                return 1 / 0
            return True
    """
    topo = write(tmp_path, code, ref="pol.py:Flaky")
    result = CliRunner().invoke(main, ["simulate", str(topo), "--out", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 2
    assert "pol.py:7: ZeroDivisionError in Flaky.participates" in result.output
    assert "the run's results up to there are in" in result.output  # the two rounds before it, kept
    assert (tmp_path / "out" / "summary.json").exists()


def test_session_policy_answers_are_checked(tmp_path):
    code = """
    from netfl.policies import SessionPolicy

    class Stuck(SessionPolicy):
        def online(self, now, state):
            return True

        def next_wakeup(self, now):
            return now  # would loop forever at the same instant
    """
    topo = write(tmp_path, code, ref="pol.py:Stuck")
    result = CliRunner().invoke(main, ["simulate", str(topo), "--out", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 2
    assert "Stuck.next_wakeup(0) returned 0, which is not after now" in result.output


def test_policy_class_rejects_unknown_builtin():
    with pytest.raises(PolicyError, match="unknown policy 'nope'; built-ins: always"):
        policy_class("nope")


# ------------------------------------------- what a policy declares through the protocol

SETS_P = """
from netfl.policies import PolicyParams, RoundPolicy

class Half(RoundPolicy):
    def __init__(self, params, device, rng):
        super().__init__(params, device, rng)
        self.p = 0.5

    def participates(self, round_index):
        return bool(self.rng.random() < self.p)
"""


def test_a_user_policy_gives_its_p_to_algorithms_that_divide_by_it(tmp_path):
    """The guard once hid ``self.p``: now the protocol (participation_probability) carries it through."""
    topo = write(tmp_path, SETS_P, ref="pol.py:Half")
    topo.write_text(topo.read_text() + "server: {algorithm: {name: fedavg_known}}\n")
    result = CliRunner().invoke(main, ["simulate", str(topo), "--out", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 0, result.output
    import numpy as np

    policy = build_policy(load_scenario(topo).devices[0].availability, info(tmp_path), np.random.default_rng(0))
    assert policy.participation_probability() == 0.5


@pytest.mark.parametrize(
    "method,answer,expect",
    [
        ("participation_probability", "return 2.0", "participation probability 2.0"),
        ("battery_marks", "return ['half']", "battery fractions between 0 and 1"),
    ],
)
def test_declarations_are_checked(tmp_path, method, answer, expect):
    code = f"""
    from netfl.policies import SessionPolicy

    class Odd(SessionPolicy):
        def online(self, now, state):
            return True

        def {method}(self):
            {answer}
    """
    topo = write(tmp_path, code, ref="pol.py:Odd")
    import numpy as np

    policy = build_policy(load_scenario(topo).devices[0].availability, info(tmp_path), np.random.default_rng(0))
    with pytest.raises(PolicyError, match=expect) as err:
        getattr(policy, method)()
    assert "pol.py:" in str(err.value)


LEAVES = """
import math
from netfl.policies import SessionPolicy

class Leaves(SessionPolicy):
    def online(self, now, state):
        return now < 0.07

    def next_wakeup(self, now):
        return 0.07 if now < 0.07 else math.inf
"""


def test_an_offline_and_the_dropout_it_causes_name_the_scripted_policy(tmp_path):
    topo = write(tmp_path, LEAVES, ref="pol.py:Leaves")
    result = CliRunner().invoke(main, ["simulate", str(topo), "--out", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 0, result.output
    events = __import__("pandas").read_parquet(tmp_path / "out" / "events.parquet")
    assert set(events[events.kind == "offline"].cause) == {"policy:pol.py:Leaves"}
    assert set(events[events.kind == "dropout"].cause) == {"policy:pol.py:Leaves"}  # mid-task at 0.07 s
