"""The RAM relay's draw: the paper's fixed-rho erasure rule (``draw: all``) against rho renormalised over arrivals.

Fed-CVaR-Avg's RAM is a stationary erasure channel: each round it picks
user i ~ rho among all users; if i's update did not arrive, nothing passes.
Frequencies are checked against their binomial expectations within 4
standard deviations, with fixed seeds (so the test is deterministic; the
tolerance says how far a correct rule could stray).
"""

from __future__ import annotations

import math

import numpy as np
from engine_support import AlwaysRound, FakeBackend, NeverRound, events, info, network_scenario

from netfl.assemble import build_world
from netfl.rng import RandomStreams
from netfl.sim.relay import RamRelay
from netfl.sim.simulation import Simulation

RHO = [0.5, 0.3, 0.15, 0.05]
ROUNDS = 4000


def within_binomial(count: int, n: int, p: float) -> bool:
    return abs(count - n * p) <= 4 * math.sqrt(n * p * (1 - p))


def run_relay(draw: str, seed: int = 7) -> tuple[np.ndarray, RamRelay]:
    """Users 0 and 1 arrive every round, user 2 in even rounds, user 3 never. Returns the passes per user."""
    relay = RamRelay(
        "r", "abstract", dict(enumerate(RHO)), RandomStreams(seed).numpy("relay", "r"), lambda *a, **k: None, draw=draw
    )
    passed = np.zeros(len(RHO), dtype=int)
    for r in range(ROUNDS):
        for device in (0, 1, 2) if r % 2 == 0 else (0, 1):
            relay.hold(job=10 * r + device, device=device, size_bytes=1000)
        job = relay.release()
        if job is not None:
            passed[job % 10] += 1
    return passed, relay


def test_the_papers_rule_passes_user_i_with_probability_rho_i_and_erases_the_rest():
    passed, relay = run_relay("all")
    # user 2 passes when drawn (0.15) in an even round (1/2); an erasure when 3 (0.05) or 2 in an odd round is drawn
    expected = {0: 0.5, 1: 0.3, 2: 0.15 / 2, 3: 0.0}
    for user, p in expected.items():
        assert within_binomial(int(passed[user]), ROUNDS, p), (user, passed, p)
    assert passed[3] == 0
    erasure = 0.05 + 0.15 / 2
    assert relay.erasures == ROUNDS - passed.sum()
    assert within_binomial(relay.erasures, ROUNDS, erasure), (relay.erasures, ROUNDS * erasure)
    assert relay.passed + relay.dropped == ROUNDS * 2.5  # every held update passes or is dropped


def test_the_renormalised_rule_always_passes_one_of_those_that_arrived():
    passed, relay = run_relay("arrived")
    assert relay.erasures == 0 and passed.sum() == ROUNDS
    half = ROUNDS // 2
    even = np.array(RHO[:3]) / sum(RHO[:3])  # users 0, 1, 2 arrived
    odd = np.array(RHO[:2]) / sum(RHO[:2])  # users 0, 1
    for user in range(3):
        p_even, p_odd = even[user], odd[user] if user < 2 else 0.0
        mean = half * (p_even + p_odd)
        std = math.sqrt(half * (p_even * (1 - p_even) + p_odd * (1 - p_odd)))
        assert abs(passed[user] - mean) <= 4 * std, (user, passed[user], mean)


def test_when_every_update_arrives_both_rules_draw_the_same_users():
    picks = {}
    for draw in ("all", "arrived"):
        relay = RamRelay(
            "r", "abstract", dict(enumerate(RHO)), RandomStreams(3).numpy("relay", "r"), lambda *a, **k: None, draw=draw
        )
        picks[draw] = []
        for r in range(500):
            for device in range(4):
                relay.hold(job=4 * r + device, device=device, size_bytes=1000)
            picks[draw].append(relay.release())
    assert picks["all"] == picks["arrived"] and None not in picks["all"]


def test_an_erasure_in_a_simulated_round_aggregates_nothing_and_names_the_user_drawn():
    """Four users behind a relay, user 3 never available: rounds whose draw is user 3 pass nothing."""
    rounds = 400

    def run(draw: str, never: tuple[int, ...] = (3,)):
        sc = network_scenario(
            [{"group": "u", "count": 4, "compute": {"flops_per_s": 1e12}, "link": {"to": "relay", "uplink": 1e9}}],
            network={
                "nodes": {"relay": {"kind": "relay", "ram": {"mode": "abstract", "rho": RHO, "draw": draw}}},
                "links": [{"from": "relay", "to": "server", "rate": 1e9}],
            },
            stop={"rounds": rounds},
        )
        streams = RandomStreams(sc.seed)
        policies = [
            (NeverRound if i in never else AlwaysRound)(AlwaysRound.Params(), info(i), streams.numpy("a", i))
            for i in range(4)
        ]
        backend = FakeBackend(model_bytes=1000, flops=1.0)
        sim = Simulation(build_world(sc, streams, policies=policies), backend)
        return sim, sim.run(), backend

    sim, result, backend = run("all")
    erased = [c for c in backend.contexts if not c.delivered]
    assert len(erased) == result.relays["relay"]["erasures"] > 0
    assert within_binomial(len(erased), rounds, RHO[3])
    assert {e.values.get("picked") for e in events(sim, "relay_drop")} == {3, None}  # named in erasures only
    assert sum(1 for e in events(sim, "relay_drop") if "picked" in e.values) == 3 * len(erased)
    assert sum(1 for e in events(sim, "aggregate") if e.field("received") == 0) == len(erased)

    _, result, backend = run("arrived")
    assert result.relays["relay"]["erasures"] == 0 and all(len(c.delivered) == 1 for c in backend.contexts)

    # a round in which no user is available is an erasure too (the paper's stationary erasure channel)
    sim, result, backend = run("all", never=(0, 1, 2, 3))
    assert result.relays["relay"]["erasures"] == rounds == len(backend.contexts)
    assert not events(sim, "relay_drop") and not any(c.delivered for c in backend.contexts)
    _, result, _ = run("arrived", never=(0, 1, 2, 3))
    assert result.relays["relay"]["erasures"] == 0  # draw: arrived has no erasures by definition
