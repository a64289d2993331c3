"""A one-screen, human-readable description of a scenario (``netfl validate``).

It reads a validated :class:`~netfl.config.schema.Scenario`, in which every
optional part may be absent (a wireless link has no ``uplink``, a network
may have no nodes), so each line is built from what is there.
"""

from __future__ import annotations

import math
from typing import Any

from netfl.config import Scenario
from netfl.config.engine_form import engine_choice
from netfl.config.schedule import estimate_schedule
from netfl.config.schema import DeviceGroupSpec, LinkSpec, NodeSpec
from netfl.distributions import Distribution
from netfl.units import format_duration
from netfl.units import format_si as _si

_MAX_VALUE_CHARS = 80  # a 24-value profile or a long rho list is cut, not allowed to wrap the screen


def _dist(d: Distribution, unit: str) -> str:
    """A per-device value: a constant, or its distribution with the unit on each bound."""
    if d.kind == "constant":
        return _si(d.params[0], unit)
    if d.kind == "normal":
        return f"normal(mean {_si(d.params[0], unit)}, std {_si(d.params[1], unit)})"
    if d.kind == "lognormal":
        return f"lognormal(median {_si(d.params[0], unit)}, sigma {d.params[1]:g})"
    return f"{d.kind}({', '.join(_si(x, unit) for x in d.params)})"


def _flow(value: Any) -> str:
    """A parameter as the user wrote it, in YAML flow style (``{exponential: {mean: 5min}}``)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _call(name: str, params: dict[str, Any]) -> str:
    args = ", ".join(f"{k}={_flow(v)}" for k, v in params.items())
    if len(args) > _MAX_VALUE_CHARS:
        args = args[: _MAX_VALUE_CHARS - 3] + "..."
    return f"{name}({args})" if args else name


def _link(link: LinkSpec) -> str:
    where = f"to {link.to}" if link.to else "to the server"
    latency = f", latency {format_duration(link.latency)}" if link.latency else ""
    if link.channel is not None:
        c = link.channel
        rate = (
            f"fixed {_si(c.rate, 'bit/s')}"
            if c.rate is not None
            else "adaptive (Shannon) rate, uncapped"
            if math.isinf(c.max_spectral_efficiency)
            else f"adaptive (Shannon) rate up to {c.max_spectral_efficiency:g} bit/s/Hz"
        )
        article = "an" if c.kind[0] in "aeiou" else "a"
        return f"{where} by {article} {c.kind} channel at {_dist(c.distance_m, 'm')}, {rate}{latency}"
    down = (
        _dist(link.downlink, "bit/s")
        if link.downlink is not None
        else ("the node's broadcast" if link.to else "= uplink")
    )
    up = _dist(link.uplink, "bit/s") if link.uplink is not None else "none"
    return f"{where}: uplink {up}, downlink {down}{latency}"


def _group(g: DeviceGroupSpec) -> str:
    b = g.battery
    if b is None:
        battery = "mains"
    else:
        battery = f"battery {_si(b.capacity, 'J')} (min {b.min_level:.0%})"
        if b.charging is not None:
            battery += f", charging {_call(b.charging.policy, b.charging.params)}"
    if g.usage is not None:
        u = g.usage
        sessions = _call(u.sessions.policy, {k: v for k, v in u.sessions.params.items() if k != "profile"})
        idle = "trains while in use" if u.train_while_in_use else "not asked while in use"
        battery += f"; its owner's use {sessions} at {_si(u.power, 'W')} ({idle})"
    w = g.power
    power = f"power {_si(w.compute, 'W')} training, {_si(w.transmit, 'W')} sending, {_si(w.idle, 'W')} idle"
    return (
        f"  {g.group:<10} x{g.count}: compute {_dist(g.compute.flops_per_s, 'FLOP/s')}; {battery}\n"
        f"  {'':<10} {power}\n"
        f"  {'':<10} availability {_call(g.availability.policy, g.availability.params)}; link {_link(g.link)}"
    )


def _node(name: str, n: NodeSpec) -> str:
    m = n.medium
    medium = f", {m.kind} ({_si(m.bandwidth, 'Hz')}"  # how wireless devices share the node's band
    medium += f", {_si(m.rate, 'bit/s')}, q={m.q:g})" if m.kind == "slotted_aloha" else ")"
    down = f", downlink {_si(n.downlink, 'bit/s')}" if n.downlink else ""
    ram = ""
    if n.ram is not None:
        rho = f"{len(n.ram.rho)} weights" if isinstance(n.ram.rho, list) else n.ram.rho
        draw = (
            "drawn among all users, nothing passing when the drawn user's update is missing"
            if n.ram.draw == "all"
            else "drawn among the users whose update arrived"
        )
        ram = f"; RAM {n.ram.mode}" + (
            f" (rho: {rho}; {draw})" if n.ram.mode == "abstract" else " (the first update to arrive passes)"
        )
    up = f"; up by {_call(n.availability.policy, n.availability.params)}" if n.availability is not None else ""
    return f"  {name:<10} {n.kind.replace('_', ' ')}{medium}{down}{ram}{up}"


def _server(s: Scenario) -> str:
    server = s.server
    algo = _call(server.algorithm.name, server.algorithm.params)
    if server.mode == "async":
        a = server.async_
        steps = _dist(a.local_steps, "") if a.local_steps is not None else "the task's"
        pause = f"; pause {format_duration(a.pause)}" if a.pause else ""
        return f"server     {algo}, async: aggregate every {a.buffer} updates; local steps {steps}{pause}{_options(s)}"
    r = server.round
    deadline = "none" if math.isinf(r.deadline) else format_duration(r.deadline)
    interval = f"; a round at most every {format_duration(r.interval)}" if r.interval else ""
    over = (
        f" (over-commit {100 * r.over_commit:g}%: {r.asked} asked, the first {r.participants} updates aggregated)"
        if r.over_commit
        else ""
    )
    partial = "; partial work at the deadline" if r.partial_work else ""
    partial += f" (uploads planned {100 * r.partial_margin:g}% longer)" if r.partial_margin else ""
    edges = any(n.kind == "edge" for n in s.network.nodes.values())
    cloud = f"; the cloud averages the edges every {r.cloud_every} round(s)" if edges else ""
    return (
        f"server     {algo}, sync rounds; {r.participants or 'all available'} participants per round{over}; "
        f"deadline {deadline}{interval}{partial}{cloud}{_options(s)}"
    )


def _options(s: Scenario) -> str:
    """The server optimiser and compression, as the summary's server line ends."""
    out = ""
    if s.server.optimizer is not None:
        out += f"; server optimizer {_call(s.server.optimizer.name, s.server.optimizer.params)}"
    compression = s.server.compression
    if compression is not None:
        for direction in ("uplink", "downlink"):
            c = getattr(compression, direction)
            if c is None:
                continue
            what = f"top-{100 * c.topk:g}%" if c.topk is not None else f"qsgd({c.qsgd.levels} levels)"
            out += f"; {direction} {what}" + (" with error feedback" if c.error_feedback else "")
    return out


def describe_scenario(s: Scenario) -> str:
    stop = []
    if s.stop.rounds:
        stop.append(f"{s.stop.rounds} rounds")
    if s.stop.sim_time:
        stop.append(f"{format_duration(s.stop.sim_time)} simulated")
    if s.stop.accuracy:
        stop.append(f"{100 * s.stop.accuracy:g}% test accuracy")
    first = ", whichever comes first" if len(stop) > 1 else ""
    seeds = (
        f"seed {s.seed}"
        if s.seeds == (s.seed, s.seed)
        else f"world seed {s.seeds.world}, training seed {s.seeds.training}"
    )
    lines = [f"scenario   {s.name} ({seeds}); stop after {' or '.join(stop)}{first}"]
    for i, t in enumerate(s.tasks):
        p = t.dataset.partition
        part = (
            p.kind
            + (f"(alpha={p.alpha:g})" if p.kind == "dirichlet" else "")
            + (f"({p.classes_per_client} classes each)" if p.kind == "classes" else "")
        )
        part += " partition"
        if p.kind == "natural":
            part += f" (pick: {p.pick})"
        if p.samples_per_client is not None:
            part += f" ({p.samples_per_client} samples drawn per device)"
        if p.quantity_skew is not None:
            part += f" ({p.quantity_skew.clients:.0%} of the devices hold {p.quantity_skew.share:.1%} of the data)"
        for group in p.exclusive or []:
            part += (
                f" (devices {', '.join(map(str, group.clients))} alone hold labels {', '.join(map(str, group.labels))})"
            )
        subset = f" ({t.dataset.max_train_samples} samples)" if t.dataset.max_train_samples else ""
        work = f"{t.local.steps} steps" if t.local.steps else f"{t.local.epochs:g} epochs"
        lines.append(
            f"task {i}     {t.dataset.label}{subset}, {part}; model {t.model.label}; "
            f"local {work} of batch {t.local.batch_size} at lr {t.local.lr:g}"
        )
    lines.append(f"devices    {s.num_devices} in {len(s.devices)} group(s)")
    lines += [_group(g) for g in s.devices]
    nodes = s.network.nodes
    if nodes or s.network.links:
        lines.append(f"network    {len(nodes)} node(s), {len(s.network.links)} wired link(s)")
        lines += [_node(name, n) for name, n in nodes.items()]
        lines += [
            f"  {w.source} -> {w.to}: {_si(w.rate, 'bit/s')}"
            + (f", latency {format_duration(w.latency)}" if w.latency else "")
            for w in s.network.links
        ]
    lines.append(_server(s))
    every = s.eval.every
    lines.append(
        f"eval       every {every.rounds} round(s)"
        if every.rounds is not None
        else f"eval       every {format_duration(every.seconds)} simulated"
    )
    lines.append(f"estimate   {estimate_schedule(s).describe()}")
    lines.append(f"engine     {engine_choice(s).describe()}")
    return "\n".join(lines)
