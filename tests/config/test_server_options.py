"""server.optimizer, server.round.partial_work, server.compression, fedasync and edges: what they accept and the
combinations they refuse, each with its path and reason."""

from __future__ import annotations

import copy

import pytest

from netfl.config import scenario_from_dict
from netfl.errors import ScenarioError

DIGITS = {"dataset": {"name": "digits"}, "model": {"name": "logistic"}}


def data(server: dict, *, network: dict | None = None, link: dict | None = None, engine: dict | None = None) -> dict:
    group = {"group": "phones", "count": 8, "compute": {"flops_per_s": "1GFLOPS"}, "link": link or {"uplink": "5Mbps"}}
    out = {"name": "opts", "stop": {"rounds": 3}, "task": copy.deepcopy(DIGITS), "devices": [group], "server": server}
    if network is not None:
        out["network"] = network
    if engine is not None:
        out["engine"] = engine
    return out


def problems(d: dict) -> dict[str, str]:
    with pytest.raises(ScenarioError) as info:
        scenario_from_dict(d)
    return dict(info.value.problems)


@pytest.mark.parametrize(
    "server, read",
    [
        ({"optimizer": {"name": "adam", "lr": 0.01, "tau": 1e-4, "bias_correction": True}}, None),
        ({"optimizer": {"name": "yogi", "lr": 0.01}, "algorithm": {"name": "fednova"}}, None),
        ({"optimizer": {"name": "momentum"}, "algorithm": {"name": "fedau"}}, None),
        ({"optimizer": {"name": "adagrad", "lr": 0.1}, "algorithm": {"name": "fedbuff"}, "mode": "async"}, None),
        (
            {"round": {"deadline": "3s", "partial_work": True}, "algorithm": {"name": "fednova"}},
            {"round": {"deadline": 3.0, "partial_work": True}, "algorithm": {"name": "fednova"}},
        ),
        (
            {"compression": {"uplink": {"topk": "1%", "error_feedback": True}, "downlink": {"qsgd": {"levels": 16}}}},
            {"compression": {"uplink": {"topk": 0.01, "error_feedback": True}, "downlink": {"qsgd": {"levels": 16}}}},
        ),
        (
            {
                "algorithm": {"name": "fedasync", "staleness": "hinge", "a": 10, "b": 4},
                "mode": "async",
                "async": {"buffer": 1},
            },
            None,
        ),
    ],
)
def test_accepted(server: dict, read: dict | None) -> None:
    """Accepted, and held as given (``read``: with its units read; None: exactly as given), nothing dropped."""
    scenario = scenario_from_dict(data(server))
    assert scenario.server.model_dump(by_alias=True, exclude_unset=True) == (read or server)


@pytest.mark.parametrize(
    "server, path, expect",
    [
        ({"optimizer": {"name": "adamw", "lr": 1}}, "server.optimizer.name", "accepted: sgd, momentum"),
        ({"optimizer": {"name": "adam"}}, "server.optimizer.lr", "required"),
        ({"optimizer": {"name": "sgd", "beta2": 0.9}}, "server.optimizer.beta2", "unknown key; accepted: lr"),
        ({"optimizer": {"name": "adagrad", "lr": 1, "beta2": 0.9}}, "server.optimizer.beta2", "unknown key"),
        ({"optimizer": {"name": "yogi", "lr": 1, "bias_correction": True}}, "server.optimizer", "Adam's"),
        ({"optimizer": {"name": "adam", "lr": 1, "beta1": 1.0}}, "server.optimizer.beta1", "must be < 1"),
        ({"optimizer": {"name": "adam", "lr": 1}, "algorithm": {"name": "mifam"}}, "server.optimizer", "memory"),
        ({"optimizer": {"name": "adam", "lr": 1}, "algorithm": {"name": "afa_cs"}}, "server.optimizer", "memory"),
        ({"optimizer": {"name": "sgd"}, "algorithm": {"name": "fed_cvar"}}, "server.optimizer", "adopts"),
        (
            {"optimizer": {"name": "sgd"}, "algorithm": {"name": "fedavg", "server_lr": 2}},
            "server.algorithm.server_lr",
            "both scale",
        ),
        ({"round": {"partial_work": True}}, "server.round.partial_work", "give server.round.deadline"),
        ({"round": {"partial_margin": 0.5}}, "server.round.partial_margin", "partial_work: true"),
        ({"round": {"partial_work": True, "deadline": "3s"}, "mode": "async"}, "server.round.partial_work", "async"),
        (
            {"compression": {"uplink": {"topk": 0.1}}, "algorithm": {"name": "scaffold"}},
            "server.compression",
            "control",
        ),
        ({"compression": {"downlink": {"topk": 0.1}}}, "server.compression", "use downlink: {qsgd"),
        ({"compression": {}}, "server.compression", "give uplink, downlink or both"),
        ({"compression": {"uplink": {"topk": 0}}}, "server.compression.uplink.topk", "must be > 0"),
        ({"algorithm": {"name": "fedasync"}}, "server.mode", "server.mode: async"),
        ({"algorithm": {"name": "fedasync"}, "mode": "async"}, "server.async.buffer", "buffer: 1"),
        ({"algorithm": {"name": "fedasync", "staleness": "constant", "a": 1}}, "server.algorithm", "constant has"),
        ({"algorithm": {"name": "fedasync", "b": 3}}, "server.algorithm", "hinge's"),
        ({"round": {"cloud_every": 2}}, "server.round.cloud_every", "add edge nodes"),
    ],
)
def test_refused_with_the_reason(server: dict, path: str, expect: str) -> None:
    found = problems(data(server))
    assert path in found, found
    assert expect in found[path]


EDGES = {
    "nodes": {"east": {"kind": "edge"}, "west": {"kind": "edge", "availability": {"policy": "bernoulli", "p": 0.8}}},
    "links": [{"from": "east", "to": "server", "rate": "1Gbps"}, {"from": "west", "to": "server", "rate": "1Gbps"}],
}


def under_edges(server: dict, *, network: dict | None = None, link: dict | None = None, **extra) -> dict:
    return data(
        server, network=network or copy.deepcopy(EDGES), link=link or {"to": "east", "uplink": "5Mbps"}, **extra
    )


def test_edges_accepted_with_the_other_options() -> None:
    sc = scenario_from_dict(
        under_edges(
            {
                "algorithm": {"name": "fednova"},
                "round": {"deadline": "3s", "partial_work": True, "cloud_every": 4},
                "optimizer": {"name": "adam", "lr": 0.01},
                "compression": {"uplink": {"qsgd": {"levels": 4}}},
            }
        )
    )
    assert sc.server.round.cloud_every == 4


@pytest.mark.parametrize(
    "server, network, link, engine, path, expect",
    [
        ({}, None, {"uplink": "5Mbps"}, None, "devices[0].link", "through an edge"),
        (
            {},
            {
                "nodes": {"ap": {"kind": "access_point"}, "east": {"kind": "edge"}},
                "links": [{"from": "ap", "to": "server", "rate": 1e9}, {"from": "east", "to": "server", "rate": 1e9}],
            },
            {"to": "ap", "uplink": "5Mbps"},
            None,
            "devices[0].link.to",
            "crosses none",
        ),
        (
            {},
            {
                "nodes": {"low": {"kind": "edge"}, "high": {"kind": "edge"}},
                "links": [{"from": "low", "to": "high", "rate": 1e9}, {"from": "high", "to": "server", "rate": 1e9}],
            },
            {"to": "low", "uplink": "5Mbps"},
            None,
            "network.nodes.low",
            "two tiers",
        ),
        ({"algorithm": {"name": "fedau"}}, None, None, None, "network.nodes", "fedavg, fedprox, fednova, not fedau"),
        ({"mode": "async"}, None, None, None, "network.nodes", "server.mode: sync"),
        ({}, None, None, {"devices": "lazy"}, "network.nodes", "edge servers (hierarchical aggregation) run on actors"),
        (
            {},
            {**EDGES, "nodes": {**EDGES["nodes"], "west": {"kind": "edge", "availability": {"policy": "markov"}}}},
            None,
            None,
            "network.nodes.west.availability.p",
            "required",
        ),
        (
            {},
            {
                "nodes": {"ap": {"kind": "access_point", "availability": {"policy": "always"}}},
                "links": [{"from": "ap", "to": "server", "rate": 1e9}],
            },
            {"to": "ap", "uplink": "5Mbps"},
            None,
            "network.nodes.ap",
            "kind edge",
        ),
    ],
)
def test_edges_refused_with_the_reason(server, network, link, engine, path, expect) -> None:
    found = problems(under_edges(server, network=network, link=link, engine=engine))
    assert path in found, found
    assert expect in found[path]
