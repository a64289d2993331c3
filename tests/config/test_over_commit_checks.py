"""server.round.over_commit: what it accepts, the combinations it refuses (naming the field), the summary line."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from netfl.config import scenario_from_dict
from netfl.config.summary import describe_scenario
from netfl.errors import ScenarioError

DIGITS = {"dataset": {"name": "digits"}, "model": {"name": "logistic"}}


def data(round_: dict, *, server: dict | None = None, availability: dict | None = None, **extra: Any) -> dict:
    group = {"group": "phones", "count": 20, "compute": {"flops_per_s": "1GFLOPS"}, "link": {"uplink": "5Mbps"}}
    if availability is not None:
        group["availability"] = availability
    return {
        "name": "oc",
        "stop": {"rounds": 3},
        "task": copy.deepcopy(DIGITS),
        "devices": [group],
        "server": {"round": round_, **(server or {})},
        **extra,
    }


def problems(d: dict) -> dict[str, str]:
    with pytest.raises(ScenarioError) as info:
        scenario_from_dict(d)
    return dict(info.value.problems)


def test_over_commit_is_accepted_with_participants_and_any_sync_algorithm() -> None:
    for name in ("fedavg", "fedau", "mifa", "scaffold", "afa_cs", "fedbuff", "fed_cvar"):
        sc = scenario_from_dict(
            data({"participants": 10, "over_commit": "30%", "deadline": "2min"}, server={"algorithm": {"name": name}})
        )
        assert sc.server.round.asked == 13


@pytest.mark.parametrize(
    "round_,server,expect",
    [
        ({"over_commit": 0.3}, {}, "give server.round.participants"),
        ({"participants": 5, "over_commit": 0.3}, {"mode": "async"}, "server.mode: sync"),
        ({"participants": 5, "over_commit": 0.3}, {"algorithm": {"name": "fedavg_known"}}, "participation probability"),
        ({"participants": 5, "over_commit": 0.3}, {"algorithm": {"name": "umifa"}}, "participation probability"),
    ],
)
def test_combinations_that_make_no_sense_are_refused(round_: dict, server: dict, expect: str) -> None:
    found = problems(
        data(
            round_,
            server=server,
            availability={"policy": "bernoulli", "p": 0.5} if server.get("mode") != "async" else None,
        )
    )
    assert expect in found["server.round.over_commit"]


def test_over_commit_behind_a_ram_relay_is_refused() -> None:
    d = data(
        {"participants": 5, "over_commit": 0.3},
        network={
            "nodes": {"relay": {"kind": "relay", "ram": {"mode": "first"}}},
            "links": [{"from": "relay", "to": "server", "rate": "100Mbps"}],
        },
    )
    d["devices"][0]["link"]["to"] = "relay"
    assert "RAM relay" in problems(d)["server.round.over_commit"]


def test_over_commit_with_mmfl_is_refused() -> None:
    d = data({"participants": 5, "over_commit": 0.3}, server={"algorithm": {"name": "mmfl"}})
    d["tasks"] = [d.pop("task"), copy.deepcopy(DIGITS)]
    assert "mmfl weighs each update" in problems(d)["server.round.over_commit"]


@pytest.mark.parametrize("value,expect", [(-0.1, "must be >= 0"), ("lots", "fraction"), (True, "boolean")])
def test_bad_values_name_the_field(value: Any, expect: str) -> None:
    assert expect in problems(data({"participants": 5, "over_commit": value}))["server.round.over_commit"]


def test_zero_needs_nothing() -> None:
    """0 is the default and turns over-commit off: no participants needed, async mode allowed."""
    sync = scenario_from_dict(data({"over_commit": 0}))
    assert sync.server.round.over_commit == 0 and sync.server.round.asked is None  # every available device asked
    assert scenario_from_dict(data({"over_commit": 0}, server={"mode": "async"})).server.mode == "async"


def test_the_summary_says_how_many_are_asked_and_kept() -> None:
    text = describe_scenario(scenario_from_dict(data({"participants": 10, "over_commit": "30%"})))
    assert "sync rounds (13 asked, the first 10 updates aggregated)" in text
    assert "participants 10," in text and "over_commit 30%," in text
    assert "asked" not in describe_scenario(scenario_from_dict(data({"participants": 10})))
