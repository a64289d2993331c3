"""The checks that need the whole scenario, or a registry's verdict on a component it names.

Policies and algorithms are checked with their own parameter models; the
network's routes, the labels and devices a partition names, the
form of the engine the scenario needs, what the run would cost in memory and
work (:mod:`netfl.config.budget`) and how much its schedule would log and
evaluate (:mod:`netfl.config.schedule`) are checked before anything is built, so
a mistake is reported with its YAML path instead of failing mid-run.
"""

from __future__ import annotations

from pathlib import Path

from netfl.config.algorithm_choice import algorithm_problems
from netfl.config.budget import workload
from netfl.config.engine_form import check_engine
from netfl.config.schedule import check_buffer, check_schedule
from netfl.config.schema import Scenario
from netfl.config.server_checks import check_server_options
from netfl.errors import ScenarioError
from netfl.fleet_logs.levels import read_levels, too_few
from netfl.fleet_logs.records import LogError
from netfl.policies import BUILTIN_POLICIES, RoundPolicy, check_spec, policy_class
from netfl.policies.catalog import supports_population
from netfl.policies.population import POPULATION_MODELS
from netfl.registry.algorithms import ALGORITHMS, AlgorithmEntry
from netfl.registry.datasets import DATASETS, NUM_CLASSES
from netfl.registry.partitions import fit_problems


def check_scenario(scenario: Scenario, source: str | None = None) -> None:
    """The checks that need the whole scenario (policies, algorithm, network, partitions, engine), for one
    built in code from the schema's models; ScenarioError lists every problem."""
    problems = _check_references(scenario)
    if problems:
        raise ScenarioError(source or str(scenario.source or scenario.name), problems)


def _check_references(scenario: Scenario) -> list[tuple[str, str]]:
    """Second pass: parameters that belong to a named policy or algorithm."""
    problems: list[tuple[str, str]] = []
    base_dir = _source_dir(scenario)
    first = 0
    for i, group in enumerate(scenario.devices):
        devices = range(first, first + group.count)  # the group's scenario indices (a trace lists devices by them)
        first += group.count
        problems += [
            (f"devices[{i}].availability{p}", m) for p, m in check_spec(group.availability, base_dir, devices=devices)
        ]
        if group.battery is not None and group.battery.charging is not None:
            problems += [
                (f"devices[{i}].battery.charging{p}", m)
                for p, m in check_spec(group.battery.charging, base_dir, continuous_only=True, devices=devices)
            ]
    entry, found = algorithm_problems(scenario.server.algorithm, base_dir)
    problems += [(f"server.algorithm{p}", m) for p, m in found]
    if entry is not None:
        problems += [("server.algorithm", m) for m in _algorithm_fit(entry, scenario)]
    problems += _check_over_commit(scenario, entry)
    problems += check_server_options(scenario, entry, base_dir)
    problems += _check_network(scenario)
    problems += _check_partitions(scenario)
    problems += _check_usage(scenario, base_dir)
    problems += _check_levels(scenario, base_dir)
    problems += check_engine(scenario)
    work = workload(scenario)  # the budget's problems, and the job costs the schedule's estimate uses
    problems += work.problems + check_buffer(scenario, work)
    problems += check_schedule(scenario, work, idle=not problems)  # idle: the policies are built
    if scenario.server.mode == "async":
        for i, group in enumerate(scenario.devices):
            try:
                per_round = issubclass(policy_class(group.availability.policy, base_dir), RoundPolicy)
            except Exception:  # already reported above
                continue
            if per_round:
                problems.append(
                    (
                        f"devices[{i}].availability.policy",
                        f"{group.availability.policy!r} is per-round, but server.mode async has no rounds "
                        "for devices: use a continuous-time policy (always, sessions, daily, diurnal, ...)",
                    )
                )
        if any(n.ram is not None for n in scenario.network.nodes.values()):
            problems.append(("server.mode", "a RAM relay passes one update per synchronous round; use mode: sync"))
    return problems


def _source_dir(scenario: Scenario) -> Path | None:
    return scenario.source.parent if scenario.source is not None else None


def _check_usage(scenario: Scenario, base_dir: Path | None) -> list[tuple[str, str]]:
    """A group's own use: a continuous-time policy with a population form (it runs at every scale)."""
    problems: list[tuple[str, str]] = []
    first = 0
    for i, group in enumerate(scenario.devices):
        devices = range(first, first + group.count)  # a log set or trace must cover the group's devices
        first += group.count
        if group.usage is None:
            continue
        where = f"devices[{i}].usage.sessions"
        spec = group.usage.sessions
        found = [(f"{where}{p}", m) for p, m in check_spec(spec, base_dir, continuous_only=True, devices=devices)]
        if not found and not supports_population(spec, base_dir):
            accepted = ", ".join(n for n in POPULATION_MODELS if not issubclass(BUILTIN_POLICIES[n], RoundPolicy))
            found.append((f"{where}.policy", f"{spec.policy!r} has no population form; use one of {accepted}"))
        problems += found
    return problems


def _check_levels(scenario: Scenario, base_dir: Path | None) -> list[tuple[str, str]]:
    """A battery that follows logged levels: its log set there, its first devices (a sample, as device_logs reads
    them) read in full with a battery row each, and enough devices (counted, not read); a device past the sample
    without battery rows is refused, in the same line, when the run reads the set."""
    from netfl.policies.device_logs import SAMPLE_DEVICES, count_devices

    problems = []
    first = 0
    for i, group in enumerate(scenario.devices):
        spec = group.battery.levels if group.battery is not None else None
        devices = range(first, first + group.count)
        first += group.count
        if spec is None:
            continue
        where = f"devices[{i}].battery.levels.file"
        path = spec.file if spec.file.is_absolute() else (base_dir or Path.cwd()) / spec.file
        if not path.exists():
            problems.append((where, f"{path}: file not found (a relative path starts at the topology file's folder)"))
            continue
        try:
            read_levels(path, min(devices.stop, SAMPLE_DEVICES))
            count = count_devices(path, devices.stop) if spec.unlisted == "refuse" else devices.stop
        except LogError as exc:
            problems.append((where, str(exc)))
            continue
        if count < devices.stop:
            problems.append((where, too_few(path, count, devices)))
    return problems


def _check_partitions(scenario: Scenario) -> list[tuple[str, str]]:
    """Labels and devices a partition names must exist (before any data is loaded; the labels of a data set of
    the user's own are known once it is loaded, and checked then)."""
    problems: list[tuple[str, str]] = []
    for t, task in enumerate(scenario.tasks):
        where = "task" if len(scenario.tasks) == 1 else f"tasks[{t}]"
        part = task.dataset.partition
        if part.kind == "natural" and task.dataset.builtin and DATASETS[task.dataset.name].leaf is None:
            problems.append(
                (
                    f"{where}.dataset.partition.kind",
                    f"natural puts each real client's samples on one device, but {task.dataset.name} does not say "
                    "which client each sample came from; use one that does (shakespeare, sent140) or a data set of "
                    "your own with client ids (a LEAF folder, or `client` in a .npz/.pt file or a loader), or another "
                    "kind",
                )
            )
        labels = NUM_CLASSES[task.dataset.name] if task.dataset.builtin else None  # a user's: once loaded
        problems += [
            (f"{where}.dataset.partition{path}", message)
            for path, message in fit_problems(
                part, clients=scenario.num_devices, labels=labels, data=task.dataset.label
            )
        ]
    return problems


def _check_network(scenario: Scenario) -> list[tuple[str, str]]:
    """Node names, link endpoints, and a route from every node to the server."""
    nodes = scenario.network.nodes
    problems: list[tuple[str, str]] = []
    if "server" in nodes:
        problems.append(("network.nodes.server", "`server` is the name of the server itself; rename this node"))
    known = set(nodes) | {"server"}
    if nodes:  # routes matter between relay nodes only: networkx (0.15 s of every run's start) imported for them
        import networkx as nx

        graph = nx.Graph()
        graph.add_nodes_from(known)
    for k, link in enumerate(scenario.network.links):
        for end, name in (("from", link.source), ("to", link.to)):
            if name not in known:
                problems.append(
                    (f"network.links[{k}].{end}", f"unknown node {name!r}; nodes: {', '.join(sorted(known))}")
                )
        if nodes:
            graph.add_edge(link.source, link.to, latency=link.latency)
    for name in nodes:
        if name in graph and not nx.has_path(graph, name, "server"):
            problems.append((f"network.nodes.{name}", "no route to the server: add a link in network.links"))
    for i, group in enumerate(scenario.devices):
        to = group.link.to
        if to is not None and to not in nodes:
            problems.append(
                (f"devices[{i}].link.to", f"unknown node {to!r}; network.nodes: {', '.join(nodes) or 'none'}")
            )
    for i, group in enumerate(scenario.devices):
        node = nodes.get(group.link.to) if group.link.to is not None else None
        channel = group.link.channel
        if (
            channel is not None
            and "max_spectral_efficiency" in channel.model_fields_set
            and (channel.rate is not None or (node is not None and node.medium.kind == "slotted_aloha"))
        ):
            fixed = (
                "this channel has a fixed rate"
                if channel.rate is not None
                else f"under {group.link.to}'s slotted_aloha medium every packet uses the medium's fixed rate"
            )
            problems.append(
                (f"devices[{i}].link.channel.max_spectral_efficiency", f"caps adaptive rates, but {fixed}; remove it")
            )
        if node is not None and node.medium.kind == "slotted_aloha" and channel is not None:
            own = sorted(
                f
                for f in {"rate", "packet_size"} & channel.model_fields_set
                if getattr(channel, f) != getattr(node.medium, f)
            )
            if own:
                problems.append(
                    (
                        f"devices[{i}].link.channel.{own[0]}",
                        f"under {group.link.to}'s slotted_aloha medium every packet uses the medium's rate "
                        f"and packet_size; remove {' and '.join(own)} here",
                    )
                )
    for name, node in nodes.items():
        if node.ram is None:
            continue
        groups = [
            (i, g)
            for i, g in enumerate(scenario.devices)
            if g.link.to is not None
            and g.link.to in graph
            and nx.has_path(graph, g.link.to, "server")
            and name in nx.shortest_path(graph, g.link.to, "server", weight="latency")
        ]
        if isinstance(node.ram.rho, list):
            behind = sum(g.count for _, g in groups)
            if len(node.ram.rho) != behind:
                problems.append(
                    (
                        f"network.nodes.{name}.ram.rho",
                        f"gives {len(node.ram.rho)} weights for the {behind} devices behind this relay",
                    )
                )
            elif sum(node.ram.rho) <= 0:
                problems.append((f"network.nodes.{name}.ram.rho", "weights must not all be zero"))
        elif node.ram.rho == "channel_quality":
            wired = [g.group for _, g in groups if g.link.channel is None]
            if wired:
                problems.append(
                    (
                        f"network.nodes.{name}.ram.rho",
                        f"channel_quality weighs devices by their wireless channel's mean SNR, but group(s) "
                        f"{', '.join(wired)} have a fixed-rate link; give them a channel, or rho as a list "
                        "or uniform",
                    )
                )
    return problems


def _check_over_commit(scenario: Scenario, entry: AlgorithmEntry | None) -> list[tuple[str, str]]:
    """Over-commit closes a synchronous round at the first K = participants updates: it needs a K, rounds, a
    server that hears every update, and an algorithm whose rule does not rely on who was asked."""
    server = scenario.server
    if not server.round.over_commit:
        return []
    if server.mode != "sync":
        message = (
            "over-commit closes synchronous rounds; server.mode async aggregates every async.buffer "
            "arrivals already: remove over_commit or use server.mode: sync"
        )
        return [("server.round.over_commit", message)]
    problems = []
    if server.round.participants is None:
        problems.append(
            "over-commit asks ceil((1 + over_commit) x participants) devices and aggregates the first "
            "participants updates: give server.round.participants"
        )
    if any(n.ram is not None for n in scenario.network.nodes.values()):
        problems.append(
            "a RAM relay passes one update per round, so there is no first K to keep: remove "
            "over_commit or network.nodes.*.ram"
        )
    if entry is not None and entry.needs_participation:
        problems.append(
            f"{entry.name} divides each update by its client's participation probability p to stay "
            "unbiased, but over-commit keeps the fastest devices' updates, which p does not describe: "
            "remove over_commit or use an algorithm that needs no p"
        )
    if entry is not None and entry.multi_task:
        problems.append(
            f"{entry.name} weighs each update by the probability that its client was picked; dropping "
            "the slowest picked clients breaks those weights: remove over_commit"
        )
    return [("server.round.over_commit", m) for m in problems]


def _algorithm_fit(entry: AlgorithmEntry, scenario: Scenario) -> list[str]:
    """What the algorithm needs from the rest of the scenario: each client's p, one model or several, the mode."""
    return (_participation_problems(entry.name, scenario) if entry.needs_participation else []) + _mode_problems(
        entry, scenario
    )


def _participation_problems(name: str, scenario: Scenario) -> list[str]:
    """Device groups whose built-in availability policy has no ``p`` (for algorithms that divide by it).

    A user's policy class may set ``self.p`` without a ``p`` parameter, so only built-ins are
    checked here; the strategy itself refuses a client without p when it is built.
    """
    problems = []
    for i, group in enumerate(scenario.devices):
        policy = BUILTIN_POLICIES.get(group.availability.policy)
        if policy is not None and "p" not in policy.Params.model_fields:
            problems.append(
                f"{name} divides each update by its client's participation probability p, but "
                f"devices[{i}] (group {group.group!r}) uses availability policy "
                f"{group.availability.policy!r}, which has no p; use bernoulli, markov or "
                f"cyclic there, or an algorithm that needs no p (fedau, mifa, fedavg)"
            )
    return problems


def _mode_problems(entry: AlgorithmEntry, scenario: Scenario) -> list[str]:
    """An algorithm that cannot run with the scenario's tasks or server mode."""
    name = entry.name
    if len(scenario.tasks) > 1 and not entry.multi_task:
        multi = ", ".join(n for n, e in ALGORITHMS.items() if e.multi_task)
        return [
            f"{name} trains one model, but the scenario lists {len(scenario.tasks)} tasks; "
            f"algorithms that train several: {multi}"
        ]
    if entry.multi_task and scenario.server.mode == "async":
        return [f"{name} plans synchronous rounds (who trains which model); use server.mode: sync"]
    if entry.multi_task and any(n.ram is not None for n in scenario.network.nodes.values()):
        return [
            f"{name} needs every selected update (and the clients' reports), but a RAM relay passes "
            "only one per round; remove network.nodes.*.ram or use a single-model algorithm"
        ]
    return []
