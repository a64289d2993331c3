"""A one-screen, human-readable description of a scenario (``netfl validate``).

It reads a validated :class:`~netfl.config.schema.Scenario`, in which every
optional part may be absent (a wireless link has no ``uplink``, a network
may have no nodes), so each line is built from what is there. A device
group's and the server's lines are read off their declarations: every field
by its key, in the unit its type carries (:func:`netfl.units.unit_of`), so
a field added to a declaration shows here without an edit.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

from netfl.component_spec import WithParams
from netfl.config import Scenario
from netfl.config.engine_form import engine_choice
from netfl.config.schedule import estimate_schedule
from netfl.config.schema import DeviceGroupSpec, NodeSpec
from netfl.distributions import Distribution
from netfl.units import Unit, format_duration, unit_of
from netfl.units import format_si as _si

_MAX_VALUE_CHARS = 80  # a 24-value profile or a long rho list is cut, not allowed to wrap the screen
_WIDTH = 118  # a line of declared values wraps here, between two values


def _dist(d: Distribution, unit: Unit | None) -> str:
    """A per-device value: a constant, or its distribution with the unit on each bound."""
    q = unit.format if unit is not None else (lambda x: f"{x:g}")
    if d.kind == "constant":
        return q(d.params[0])
    if d.kind == "normal":
        return f"normal(mean {q(d.params[0])}, std {q(d.params[1])})"
    if d.kind == "lognormal":
        return f"lognormal(median {q(d.params[0])}, sigma {d.params[1]:g})"
    return f"{d.kind}({', '.join(q(x) for x in d.params)})"


def _flow(value: Any) -> str:
    """A parameter as the user wrote it, in YAML flow style (``{exponential: {mean: 5min}}``)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        text = "[" + ", ".join(_flow(v) for v in value) + "]"
        if len(text) > _MAX_VALUE_CHARS:  # a long list (rho, a usage profile): its first values and its length
            text = text[: _MAX_VALUE_CHARS - 20].rsplit(", ", 1)[0] + f", ... ({len(value)} values)]"
        return text
    return f"{value:g}" if isinstance(value, float) else str(value)


def _call(name: str, params: dict[str, Any]) -> str:
    """``name(key=value, ...)``; past the width, whole parameters are left out (``, ...``), never cut mid-value.
    Lists (a 24-value profile) come last, so that the parameters that fit -- a per-device distribution among
    them -- are shown first."""
    args = ""
    for k, v in sorted(params.items(), key=lambda item: isinstance(item[1], (list, tuple))):
        arg = f"{k}={_flow(v)}"
        if args and len(args) + len(arg) > _WIDTH - 2:
            args += ", ..."
            break
        args = f"{args}, {arg}" if args else arg
    return f"{name}({args})" if args else name


def _value(value: Any, unit: Unit | None) -> str:
    """A declared field's value in its unit (``5 Mbit/s``, ``20%``), a policy as a call, anything else as written."""
    if isinstance(value, Distribution):
        return _dist(value, unit)
    if isinstance(value, WithParams):  # {policy: NAME, ...}: its declared field (or its label) names the component
        label = getattr(value, "label", None)
        return _call(label if label is not None else getattr(value, next(iter(type(value).model_fields))), value.params)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and math.isinf(value):
        return "none (inf)"  # no deadline, no cap
    if unit is not None and isinstance(value, (int, float)):
        return unit.format(value)
    return _flow(value)  # a long list (a rho list): its first values and its length


def _declared(spec: BaseModel, label: str = "", skip: tuple[str, ...] = ()) -> list[tuple[str, list[str]]]:
    """``spec``'s fields as their declarations name them (``key value``, each in its unit): its own values under
    ``label``, then each nested mapping's under its key (``link.channel``). A field left out (None), or one its
    spec says does not apply (``not_applicable``: slotted ALOHA's keys on another medium), is not shown; so a
    field added to a declaration shows here without a line of its own."""
    own: list[str] = []
    nested: list[tuple[str, list[str]]] = []
    skip = (*skip, *getattr(spec, "not_applicable", ()))
    for name, field in type(spec).model_fields.items():
        value = getattr(spec, name)
        if value is None or field.exclude or name in skip:
            continue
        key = field.alias or name
        if isinstance(value, BaseModel) and not isinstance(value, WithParams):
            nested += _declared(value, f"{label}.{key}" if label else key)
        else:
            own.append(f"{key} {_value(value, unit_of(field.annotation, field.metadata))}")
    return [(label, own), *nested]


def _lines(first: str, items: list[str]) -> list[str]:
    """``first`` then ``items`` joined by commas, wrapped between two items at the summary's width (the next line
    starts under the first item)."""
    lines, line = [], first
    for i, item in enumerate(items):
        text = item + ("," if i < len(items) - 1 else "")
        if i and len(line) + 1 + len(text) > _WIDTH:
            lines.append(line)
            line = " " * len(first) + " " + text
        else:
            line = f"{line} {text}"
    return [*lines, line]


def _group(g: DeviceGroupSpec) -> str:
    """A device group: its size and policies, then each of its declared mappings (compute, power, battery, use,
    link) on a line of its own."""
    (_, top), *parts = _declared(g, skip=("group", "count"))
    return "\n".join(_lines(f"  {g.group:<10} x{g.count}" + (":" if top else ""), top) + _parts(parts))


def _parts(parts: list[tuple[str, list[str]]], indent: int = 13) -> list[str]:
    """Each declared mapping's line, indented under the one it belongs to, its values in a column."""
    parts = [(label, items) for label, items in parts if items]  # a mapping of mappings (compression) has none
    width = max((len(label) for label, _ in parts), default=0)
    return [line for label, items in parts for line in _lines(f"{'':<{indent}}{label:<{width}}", items)]


def _node(name: str, n: NodeSpec) -> str:
    """A network node: its kind, then its declared values (downlink, availability) and mappings (medium, ram), each
    field that applies by its key in its unit."""
    (_, top), *parts = _declared(n, skip=("kind",))
    head = f"  {name:<10} {n.kind.replace('_', ' ')}" + (":" if top else "")
    return "\n".join(_lines(head, top) + _parts(parts))


def _server(s: Scenario) -> str:
    """The algorithm and the mode, then the server's declared values: its round's (or its asynchronous mode's),
    the compression's, the server optimiser."""
    server = s.server
    mode = "async" if server.mode == "async" else "sync rounds"
    r = server.round
    if server.mode == "sync" and r.goal is not None:  # over-commit: what its fraction comes to
        mode += f" ({r.asked} asked, the first {r.goal} updates aggregated)"
    idle = "round" if server.mode == "async" else "async_"
    (_, top), *parts = _declared(server, skip=("algorithm", "mode", idle))
    head = f"server     {_value(server.algorithm, None)}, {mode}" + (";" if top else "")
    return "\n".join(_lines(head, top) + _parts(parts, indent=11))


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
