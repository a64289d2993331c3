"""Simulated time that stops advancing ends the run with a clear error naming the culprit, never a hang.

Two guards: a policy's ``next_wakeup(now)`` at or before ``now`` is refused
at once (for every policy, built in code or scripted), and the watchdog
(netfl/sim/watchdog.py) stops a run once 10^5 + 100 per device events
pass within one microsecond of simulated time, naming the process that
kept resuming.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from engine_support import FakeBackend, NeverRound, info

from netfl.cli.main import main
from netfl.errors import PolicyError
from netfl.policies import SessionPolicy
from netfl.registry.device_params import LinkSpec
from netfl.registry.run_params import Every, StopSpec
from netfl.registry.server_params import RoundSpec
from netfl.rng import RandomStreams
from netfl.sim.device_table import DeviceTable
from netfl.sim.simulation import Simulation
from netfl.sim.watchdog import SimulationStuck, event_limit
from netfl.sim.world import World

TOPOLOGY = """\
name: stuck
seed: 1
stop: {{sim_time: 1h}}
task: {{dataset: {{name: digits}}, model: {{name: logistic}}, local: {{steps: 1}}}}
devices:
  - group: g
    count: 2
    compute: {{flops_per_s: 1e9}}
    availability: {{policy: "{availability}"}}
{battery}    link: {{uplink: 1Mbps}}
"""

CREEP = """\
import math
from netfl.policies import SessionPolicy


class Creep(SessionPolicy):
    def online(self, now, state):
        return False

    def next_wakeup(self, now):
        return math.nextafter(now, math.inf)  # "after now", by one rounding step
"""

SAME_INSTANT = """\
from netfl.policies import SessionPolicy


class Plug(SessionPolicy):
    def online(self, now, state):
        return True

    def next_wakeup(self, now):
        return now
"""


def simulate(tmp_path: Path, code: str, *, availability: str, battery: str = ""):
    (tmp_path / "pol.py").write_text(code)
    topo = tmp_path / "topo.yaml"
    topo.write_text(TOPOLOGY.format(availability=availability, battery=battery))
    started = time.perf_counter()
    result = CliRunner().invoke(main, ["simulate", str(topo), "--out", str(tmp_path / "out"), "-q"])
    return result, time.perf_counter() - started


#: A guard against a hang, not a speed target: the work is bounded by the events the messages count (a shared
#: machine has taken 5.9 s for what takes 1 s alone).
HANG_S = 60


def test_a_user_policy_whose_clock_creeps_is_stopped_by_the_watchdog_and_named(tmp_path):
    result, seconds = simulate(tmp_path, CREEP, availability="pol.py:Creep")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "simulated time stopped advancing at 0 s" in result.output
    assert f"over {event_limit(2):,} events within 1 us" in result.output
    assert f"availability policy Creep ({tmp_path / 'pol.py'})" in result.output
    assert not (tmp_path / "out").exists()
    assert seconds < HANG_S


def test_a_user_charger_that_wakes_at_now_is_refused_at_once(tmp_path):
    battery = "    battery: {capacity: 1kJ, charging: {policy: pol.py:Plug}}\n"
    result, seconds = simulate(tmp_path, SAME_INSTANT, availability="always", battery=battery)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "pol.py" in result.output and "Plug.next_wakeup(0) returned 0, which is not after now" in result.output
    assert seconds < HANG_S


# ------------------------------------------------------------ worlds built in code (no user script, no guard)


class WakeAtNow(SessionPolicy):
    """Not scripted, so not guarded by the script loader: the engine itself must refuse the answer."""

    def online(self, now, state):
        return True

    def next_wakeup(self, now):
        return now


def _world(policy_cls, *, server: RoundSpec | None = None, chargers=None, n: int = 2) -> World:
    server = server or RoundSpec()
    streams = RandomStreams(0)
    table = DeviceTable(
        group=np.zeros(n, dtype=np.int32),
        group_names=["g"],
        flops_per_s=np.full(n, 1e9),
        compute_w=np.full(n, 2.0),
        transmit_w=np.full(n, 0.2),
        receive_w=np.full(n, 0.1),
        idle_w=np.full(n, 0.05),
        capacity_j=np.full(n, 1e4 if chargers else math.inf),
        initial_j=np.full(n, 1e4 if chargers else math.inf),
        min_level=np.zeros(n),
        charge_w=np.full(n, 10.0),
        uplink_bps=np.full(n, 1e6),
        downlink_bps=np.full(n, 1e6),
        distance_m=np.full(n, math.nan),
    )
    policies = [policy_cls(policy_cls.Params(), info(i), streams.numpy("a", i)) for i in range(n)]
    return World(
        devices=table,
        links=[LinkSpec(uplink=1e6)],
        streams=streams,
        server=server,
        stop=StopSpec(sim_time=60.0),
        evaluate=Every(rounds=10**9),
        policies=policies,
        chargers=[c(c.Params(), info(i), streams.numpy("c", i)) for i, c in enumerate(chargers)] if chargers else None,
    )


def test_next_wakeup_at_now_is_an_immediate_error_naming_class_and_file():
    with pytest.raises(PolicyError) as err:
        Simulation(_world(WakeAtNow), FakeBackend()).run()
    message = str(err.value)
    assert f"WakeAtNow ({__file__})" in message
    assert "next_wakeup(0) returned 0, which is not after now" in message and "device 0" in message


def test_a_charger_waking_at_now_is_an_immediate_error_too():
    with pytest.raises(PolicyError, match=r"WakeAtNow \(.*test_watchdog.py\).*charging policy of device 0"):
        Simulation(_world(NeverRound, chargers=[WakeAtNow, WakeAtNow]), FakeBackend()).run()


def test_rounds_that_take_no_time_are_stopped_and_the_server_named():
    """Nobody is ever available and idle rounds wait 0 s: rounds would repeat at t = 0 forever."""
    started = time.perf_counter()
    with pytest.raises(SimulationStuck) as err:
        Simulation(_world(NeverRound, server=RoundSpec.model_construct(idle_wait=0.0)), FakeBackend()).run()
    assert "simulated time stopped advancing at 0 s" in str(err.value)
    assert "the server's rounds" in str(err.value)
    assert time.perf_counter() - started < HANG_S
