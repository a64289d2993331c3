"""What the server's options need from the rest of the scenario: a server optimiser that fits the algorithm's
step, partial work's deadline, compression that fits what travels, the mode an algorithm needs, and edges
(hierarchical aggregation) that every device reaches.

Each check returns (YAML path, message) pairs; :mod:`netfl.config.checks` runs them with the others.
"""

from __future__ import annotations

import math
from pathlib import Path

from netfl.config.schema import Scenario
from netfl.policies import check_spec
from netfl.registry.algorithms import ALGORITHMS, AlgorithmEntry
from netfl.registry.server_optimizers import validate_server_optimizer

Problems = list[tuple[str, str]]


def check_server_options(scenario: Scenario, entry: AlgorithmEntry | None, base_dir: Path | None) -> Problems:
    return (
        _check_mode(scenario, entry)
        + _check_other_mode_keys(scenario)
        + _check_optimizer(scenario, entry)
        + _check_partial_work(scenario)
        + _check_compression(scenario, entry)
        + _check_edges(scenario, entry, base_dir)
    )


def _check_mode(scenario: Scenario, entry: AlgorithmEntry | None) -> Problems:
    """An algorithm that needs one server mode; FedAsync mixes one update at a time."""
    if entry is None or entry.mode is None:
        return []
    mode, why = entry.mode
    if scenario.server.mode != mode:
        return [("server.mode", why)]
    if entry.name == "fedasync" and scenario.server.async_.buffer != 1:
        return [
            (
                "server.async.buffer",
                f"fedasync mixes each update into the model as it arrives, a new model version per update: "
                f"give server.async.buffer: 1 (got {scenario.server.async_.buffer})",
            )
        ]
    return []


def _check_other_mode_keys(scenario: Scenario) -> Problems:
    """``server.round`` keys in async mode, or ``server.async`` keys in sync mode: the other mode's server never
    reads them, so a run would silently ignore them. Keys another check refuses with a reason of its own
    (over-commit, partial work, cloud_every without edges) are left to it."""
    server = scenario.server
    if server.mode == "async":
        spec, block, other = server.round, "round", "sync rounds"
        skip = {"over_commit", "partial_work"} | (set() if edge_nodes(scenario) else {"cloud_every"})
        why = "the asynchronous server aggregates every async.buffer arrivals and reads no round"
    else:
        spec, block, other = server.async_, "async", "asynchronous arrivals"
        skip = set()
        why = "the synchronous server runs rounds and reads no async block"
    given = sorted(spec.model_fields_set - skip)
    if not given:
        return []
    keys = ", ".join(given)
    return [
        (
            f"server.{block}.{given[0]}",
            f"{keys} appl{'ies' if len(given) == 1 else 'y'} to {other} only (server.mode is {server.mode}: {why}); "
            f"remove server.{block} (in a study's case: server.{block}: {{}}) or change server.mode",
        )
    ]


def _check_optimizer(scenario: Scenario, entry: AlgorithmEntry | None) -> Problems:
    """The optimiser's name and parameters, and whether the algorithm's step is one it can take."""
    spec = scenario.server.optimizer
    if spec is None:
        return []
    problems = [(f"server.optimizer{p}", m) for p, m in validate_server_optimizer(spec)]
    if entry is None:
        return problems
    if entry.own_server_step:
        problems.append(
            (
                "server.optimizer",
                f"a server optimiser takes the step x + Delta of an algorithm that averages updates, but "
                f"{entry.own_server_step}; remove server.optimizer or use fedavg, fedprox, fednova, fedbuff, ...",
            )
        )
    server_lr = scenario.server.algorithm.params.get("server_lr")
    if server_lr is not None and server_lr != 1:
        problems.append(
            (
                "server.algorithm.server_lr",
                f"server_lr ({server_lr}) and server.optimizer.lr would both scale the server's step: leave "
                "server_lr at 1 and give the step size as server.optimizer.lr",
            )
        )
    return problems


def _check_partial_work(scenario: Scenario) -> Problems:
    server = scenario.server
    if not server.round.partial_work:
        if server.round.partial_margin and server.mode == "sync":  # async: a round key, refused as such
            return [("server.round.partial_margin", "the margin of partial work: add server.round.partial_work: true")]
        return []
    if server.mode != "sync":
        return [
            (
                "server.round.partial_work",
                "partial work cuts a job at a synchronous round's deadline; server.mode async has none",
            )
        ]
    if math.isinf(server.round.deadline):
        return [
            (
                "server.round.partial_work",
                "partial work trains the steps that fit before the deadline: give server.round.deadline",
            )
        ]
    return []


def _check_compression(scenario: Scenario, entry: AlgorithmEntry | None) -> Problems:
    if scenario.server.compression is None or entry is None:
        return []
    if entry.name == "scaffold":
        return [
            (
                "server.compression",
                "scaffold sends its control variates beside the model, and netfl compresses the model and its "
                "update only: remove server.compression or use another algorithm",
            )
        ]
    return []


def edge_nodes(scenario: Scenario) -> list[str]:
    """The edge servers (``network.nodes`` of kind edge), in the file's order."""
    return [name for name, node in scenario.network.nodes.items() if node.kind == "edge"]


def _route(scenario: Scenario, node: str) -> list[str]:
    """The nodes from ``node`` to the server by the shortest route (by latency), as the engine routes; empty
    when there is none."""
    import networkx as nx  # only for scenarios with relay nodes (0.15 s of every run's start otherwise)

    graph = nx.Graph()
    graph.add_nodes_from([*scenario.network.nodes, "server"])
    for link in scenario.network.links:
        graph.add_edge(link.source, link.to, latency=link.latency)
    if node not in graph or not nx.has_path(graph, node, "server"):
        return []
    return nx.shortest_path(graph, node, "server", weight="latency")


def device_edges(scenario: Scenario) -> list[str | None]:
    """Each device group's edge: the first edge node on its route to the server (None: none, or no route)."""
    edges = set(edge_nodes(scenario))
    return [
        next((n for n in _route(scenario, g.link.to) if n in edges), None) if edges and g.link.to else None
        for g in scenario.devices
    ]


def _check_edges(scenario: Scenario, entry: AlgorithmEntry | None, base_dir: Path | None) -> Problems:
    """Hierarchical aggregation: every device under an edge, edges behind no other edge, synchronous rounds, an
    algorithm an edge can run, and an availability policy for an edge that may go down."""
    edges = edge_nodes(scenario)
    server = scenario.server
    if not edges:
        if "cloud_every" in server.round.model_fields_set:
            return [
                (
                    "server.round.cloud_every",
                    "cloud_every paces the cloud's aggregation of edge models: add edge nodes "
                    "(network.nodes.NAME: {kind: edge, ...}) or remove it",
                )
            ]
        return []
    problems: Problems = []
    for i, edge in enumerate(device_edges(scenario)):
        if edge is None and scenario.devices[i].link.to in scenario.network.nodes:
            problems.append(
                (
                    f"devices[{i}].link.to",
                    f"with edge nodes ({', '.join(edges)}) every device reaches the server through an edge; "
                    f"{scenario.devices[i].link.to!r}'s route to the server crosses none",
                )
            )
        elif edge is None and scenario.devices[i].link.to is None:
            problems.append(
                (
                    f"devices[{i}].link",
                    f"with edge nodes ({', '.join(edges)}) every device reaches the server through an edge: "
                    "give link.to an edge (or a node behind one)",
                )
            )
    for name in edges:
        behind = next((n for n in _route(scenario, name)[1:] if n in edges), None)
        if behind:
            problems.append(
                (
                    f"network.nodes.{name}",
                    f"edge {name}'s route to the server crosses edge {behind}; HierFAVG has two tiers, devices "
                    "under edges under the cloud",
                )
            )
    reasons = []
    if server.mode != "sync":
        reasons.append("edges aggregate synchronous rounds (HierFAVG): use server.mode: sync")
    if entry is not None and not entry.edge_rule:
        accepted = ", ".join(n for n, e in ALGORITHMS.items() if e.edge_rule)
        reasons.append(
            f"an edge runs the algorithm's rule on its own devices' updates every round, which needs a rule "
            f"without memory across rounds that trains one model: {accepted}, not {entry.name}"
        )
    if any(node.ram is not None for node in scenario.network.nodes.values()):
        reasons.append("a RAM relay passes one update per round to the cloud; it cannot sit with edges")
    problems += [("network.nodes", reason) for reason in reasons]
    for name in edges:
        spec = scenario.network.nodes[name].availability
        if spec is not None:
            problems += [(f"network.nodes.{name}.availability{p}", m) for p, m in check_spec(spec, base_dir)]
    return problems
