"""Cases of the runs no sweep named: the runs of one scenario are one case, whatever wrote them.

A sweep names each run's case and seed in its summary.json. ``netfl simulate`` by hand, or a user's own loop of
``netfl.run``, names neither; but each run folder holds its scenario.yaml, the scenario as run (overrides
applied, defaults left out), so two runs of one setting have the same document once the keys that are not the
compared world are set aside (:data:`NOT_COMPARED`: the seeds, which a report pairs on, the scenario's name, the
output folder). Runs with the same rest are one case, its seeds those of its runs; cases are named by the keys
in which their scenarios differ (``fedavg``, ``fedau``; ``name=fedau, rounds=5`` where two keys differ), and
the report says which keys those are. Where two cases differ in more than one key, and the cases do not cross
those keys as a grid does, it says which pairs and keys: their paired difference is not one key's effect.

A run without scenario.yaml (made by hand, or by a netfl that did not write one) is a case of its own, as before.
"""

from __future__ import annotations

import itertools
import json
import math
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from netfl.config.loading import read_yaml
from netfl.config.schema import Scenario
from netfl.errors import FileError, NetflError
from netfl.numbers import is_integer

#: The seed fields of a scenario: what a report pairs runs on, never what it compares.
SEED_FIELDS = ("seed", "world_seed", "training_seed")
#: Top-level keys of scenario.yaml that are not the world a report compares: the seeds, the scenario's name,
#: where its results and logs went.
NOT_COMPARED = ("name", *SEED_FIELDS, "output", "tracking")

#: The keys that say which component a mapping is (an algorithm's name or user file, a policy, a partition's kind):
#: where they differ, the component's other keys are its own parameters, not separate keys of the comparison.
IDENTITY = ("name", "path", "factory", "flower", "policy", "kind")

_ABSENT = object()  # a key one scenario gives and another does not (left out: its default)


@dataclass
class Pairing:
    """What the report says of the cases it derived from scenarios: ``lines`` (which keys the cases differ in,
    and what the runs are paired by), ``warnings`` (cases that differ in more than one key), and per case the
    values of those keys (``values``)."""

    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    values: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class _Group:
    """The runs of one scenario (its seeds aside): its document without :data:`NOT_COMPARED`, flattened."""

    document: dict[str, Any]
    flat: dict[tuple, Any]
    runs: list[Any] = field(default_factory=list)


def scenario_of(folder: Path) -> dict[str, Any] | None:
    """The run's scenario.yaml as a mapping; None where the folder has none."""
    file = Path(folder) / "scenario.yaml"
    if not file.exists():
        return None
    document = read_yaml(file)  # a file that cannot be read: one message naming it
    if not isinstance(document, dict):
        raise FileError(str(file), [("", "not a scenario (a mapping of keys such as name, seed, devices, server)")])
    return document


def derive_cases(runs: Sequence[Any], taken: set[str]) -> Pairing:
    """Set the case and seed of each of ``runs`` (no sweep's) that holds a scenario.yaml, and say what the
    cases differ in; ``taken``: case names already used (a sweep's), which a derived case does not reuse. A run
    left alone in its case and in the report keeps ``case`` empty (it is named after its folder)."""
    groups: dict[str, _Group] = {}
    for run in runs:
        document = scenario_of(run.path)
        if document is None:
            continue
        compared = {k: v for k, v in document.items() if k not in NOT_COMPARED}
        key = json.dumps(compared, sort_keys=True, default=str)
        groups.setdefault(key, _Group(compared, _flatten(compared))).runs.append(run)
    derived = [run for group in groups.values() for run in group.runs]
    if not derived:
        return Pairing()
    field_name = _seed_field(derived)
    for run in derived:
        run.seed = _seeds(run)[field_name]
    cases = list(groups.values())
    if len(cases) == 1:
        (group,) = cases
        if len(group.runs) > 1:  # one scenario, several seeds: one case, named after the scenario
            names = {str(run.summary.get("scenario") or "") for run in group.runs}
            name = names.pop() if len(names) == 1 else ""
            _name_group(group, name or group.runs[0].path.parent.name, taken)
        return Pairing()
    keys = _differing_keys(cases)
    if not keys:  # documents that differ in form only (an empty mapping against none): cases of their own
        return Pairing()
    labels = _labels(keys)
    components = {key for key in keys if _is_component(key, cases)}
    values = [[_value_text(group.document, key, key in components) for key in keys] for group in cases]
    single = len(keys) == 1 and (
        keys[0] in components or all(isinstance(_lookup(g.document, keys[0]), str) for g in cases)
    )
    pairing = Pairing(keys=[_path_text(k) for k in keys])
    for group, row in zip(cases, values):
        name = row[0] if single else ", ".join(f"{label}={value}" for label, value in zip(labels, row))
        case = _name_group(group, name, taken)
        pairing.values[case] = dict(zip(pairing.keys, row))
        for run in group.runs:
            run.overrides = dict(zip(pairing.keys, row))
    by = f"paired by {field_name}"
    if len(keys) == 1:
        pairing.lines.append(f"cases differ in {pairing.keys[0]}: {', '.join(r[0] for r in values)}; {by}")
        return pairing
    columns = [list(dict.fromkeys(r[i] for r in values)) for i in range(len(keys))]
    listed = " and ".join(f"{k} ({', '.join(c)})" for k, c in zip(pairing.keys, columns))
    crossed = len(cases) == math.prod(len(c) for c in columns)  # every combination: each key's effect separable
    pairing.lines.append(f"cases differ in {len(keys)} keys, {listed}{', crossed' if crossed else ''}; {by}")
    if not crossed:
        pairing.warnings = _mixed_pairs(list(pairing.values), values, pairing.keys)
    return pairing


def _mixed_pairs(names: list[str], values: list[list[str]], keys: list[str], most: int = 5) -> list[str]:
    """One warning per pair of cases that differ in more than one key (the first ``most``, then how many more)."""
    out = []
    for (a, row_a), (b, row_b) in itertools.combinations(zip(names, values), 2):
        apart = [k for k, x, y in zip(keys, row_a, row_b) if x != y]
        if len(apart) > 1:
            both = "both" if len(apart) == 2 else f"all {len(apart)}"
            out.append(
                f"cases {a!r} and {b!r} differ in {len(apart)} keys of their scenarios, not one: "
                f"{', '.join(apart[:-1])} and {apart[-1]}; their paired differences mix the effects of {both}"
            )
    if len(out) > most:
        more = len(out) - most
        pairs = "pair of cases differs" if more == 1 else "pairs of cases differ"
        out[most:] = [f"{more} more {pairs} in more than one key of their scenarios"]
    return out


def _name_group(group: _Group, name: str, taken: set[str]) -> str:
    """Give ``group``'s runs the case ``name`` (numbered where a sweep's case or another group has it)."""
    case, n = name, 1
    while case in taken:
        n += 1
        case = f"{name} ({n})"
    taken.add(case)
    for run in group.runs:
        run.case = case
    return case


def _seeds(run: Any) -> dict[str, int]:
    """The run's seed, world_seed and training_seed in effect, from its summary.json."""
    summary = run.summary
    seeds = {"seed": summary["seed"]}
    for name in SEED_FIELDS[1:]:
        value = summary.get(name)
        if value is None:
            value = summary["seed"]
        elif not is_integer(value):
            raise FileError(str(run.path / "summary.json"), [(name, f"{value!r} is not an integer")])
        seeds[name] = value
    return seeds


def _seed_field(runs: Sequence[Any]) -> str:
    """The seed field that tells the runs' worlds apart: ``seed`` where world_seed and training_seed follow it
    (the usual case), else world_seed or training_seed where only that one varies. Runs of one world and
    training seeds have one number; where no field does, the runs cannot be paired by one seed: refused."""
    seeds = [_seeds(run) for run in runs]
    worlds = [(s["world_seed"], s["training_seed"]) for s in seeds]
    for name in SEED_FIELDS:
        number_to_world: dict[int, set] = {}
        world_to_number: dict[tuple, set] = {}
        for s, world in zip(seeds, worlds):
            number_to_world.setdefault(s[name], set()).add(world)
            world_to_number.setdefault(world, set()).add(s[name])
        if all(len(v) == 1 for v in [*number_to_world.values(), *world_to_number.values()]):
            return name
    a, b = next(
        (a, b)
        for a, b in itertools.combinations(range(len(runs)), 2)
        if (seeds[a]["seed"] == seeds[b]["seed"]) != (worlds[a] == worlds[b])
    )
    shown = [f"{runs[i].path} ({', '.join(f'{k} {v}' for k, v in seeds[i].items())})" for i in (a, b)]
    raise NetflError(
        f"{shown[0]} and {shown[1]}: a report pairs runs by one seed number, and no seed field tells these runs' "
        "worlds apart (vary seed, or world_seed or training_seed alone); report them separately"
    )


def _flatten(value: Any, prefix: tuple = ()) -> dict[tuple, Any]:
    """Each leaf of a scenario document by its path: mappings and lists of mappings are walked (``devices[0]``),
    anything else (a number, a name, a list of numbers) is a leaf."""
    if isinstance(value, dict) and value:
        return {p: v for k, sub in value.items() for p, v in _flatten(sub, (*prefix, k)).items()}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return {p: v for i, sub in enumerate(value) for p, v in _flatten(sub, (*prefix, i)).items()}
    return {prefix: value}


def _differing_keys(groups: Sequence[_Group]) -> list[tuple]:
    """The paths whose values are not the same in every group, in the order the documents give them; a path
    that is a leaf in one group and holds more keys in another (a number or a distribution) is one key."""
    paths = list(dict.fromkeys(p for g in groups for p in g.flat))
    apart = [p for p in paths if len({json.dumps(g.flat.get(p, "\0absent"), default=str) for g in groups}) > 1]
    out: list[tuple] = []
    for path in apart:
        leaf = next((path[:n] for n in range(1, len(path)) if any(path[:n] in g.flat for g in groups)), path)
        leaf = _component_above(leaf, apart) or leaf
        if leaf not in out:
            out.append(leaf)
    return out


def _component_above(path: tuple, apart: Sequence[tuple]) -> tuple | None:
    """The component holding ``path`` (``server.algorithm`` for ``server.algorithm.trim``) where the groups
    differ in which component it is and in more than that (its parameters, which belong to the component: one
    key, ``TrimmedMean (trim=0.2)`` against ``fedavg``); None elsewhere."""
    for n in range(len(path) - 1, 0, -1):
        prefix = path[:n]
        under = [p for p in apart if p[:n] == prefix]
        if len(under) > 1 and any(p == (*prefix, ident) for p in under for ident in IDENTITY):
            return prefix
    return None


def _is_component(key: tuple, groups: Sequence[_Group]) -> bool:
    """Whether ``key`` is a component collapsed by :func:`_component_above` (not a leaf of any group)."""
    return not any(key in g.flat for g in groups) and any((*key, ident) in g.flat for g in groups for ident in IDENTITY)


def _value_text(document: dict[str, Any], key: tuple, component: bool) -> str:
    """A key's value in a case name: the value, or a component by its name and its own parameters."""
    if not component:
        return _text(_lookup(document, key))
    found = _lookup(document, key)
    mapping = found if isinstance(found, dict) else {}
    ident = next((mapping[i] for i in IDENTITY if i in mapping), None)
    if ident is None:  # the component left out: the schema's default one (fedavg)
        ident = next((v for i in IDENTITY if (v := _schema_default((*key, i))) is not _ABSENT), "default")
    name = str(ident).rsplit(":", 1)[-1] if ":" in str(ident) else str(ident)  # file.py:Class -> Class
    params = [f"{k}={_text(v)}" for k, v in mapping.items() if k not in IDENTITY and k != "label"]
    return f"{name} ({', '.join(params)})" if params else name


def _lookup(document: Any, path: tuple) -> Any:
    """The value at ``path`` in a scenario document; where the document leaves it out, the schema's default
    (a plain value: a name, a number), else :data:`_ABSENT`."""
    value = document
    for key in path:
        if isinstance(key, int):
            if not isinstance(value, list) or key >= len(value):
                return _schema_default(path)
        elif not isinstance(value, dict) or key not in value:
            return _schema_default(path)
        value = value[key]
    return value


def _schema_default(path: tuple) -> Any:
    """The default the scenario schema gives the key at ``path`` (``server.algorithm.name``: fedavg), found by
    walking its models and their default values; :data:`_ABSENT` where it has none or it is not a plain value
    (a component's own parameter, a mapping)."""
    value: Any = Scenario  # a model class until a default value is reached, then that value
    for key in path:
        if isinstance(value, type) and issubclass(value, BaseModel):
            info = next((f for n, f in value.model_fields.items() if key in (n, f.alias)), None)
            if info is None:
                return _ABSENT
            value = _model_of(info.annotation) if info.is_required() else info.get_default(call_default_factory=True)
        elif isinstance(value, BaseModel):
            name = next((n for n, f in type(value).model_fields.items() if key in (n, f.alias)), None)
            value = getattr(value, name) if name is not None else _ABSENT
        elif isinstance(value, _Items) and isinstance(key, int):
            value = value.model
        elif isinstance(value, (list, tuple)) and isinstance(key, int) and key < len(value):
            value = value[key]
        else:
            return _ABSENT
    return value if isinstance(value, (str, int, float, bool)) else _ABSENT  # None: not set, said as default


def _model_of(annotation: Any) -> Any:
    """The model class a required field holds (its items' for a list; the one model of ``X | None``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    models = [a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
    if typing.get_origin(annotation) in (list, tuple) and len(models) == 1:
        return _Items(models[0])  # a list of that model: the walk goes on in its item
    return models[0] if len(models) == 1 else _ABSENT


@dataclass(frozen=True)
class _Items:
    """A list field's item model, in :func:`_schema_default`'s walk."""

    model: type


def _labels(keys: Sequence[tuple]) -> list[str]:
    """Each key's short name in a case name, as a sweep's grid names its axes: the last key, or the whole path
    where two keys end alike."""
    last = [next((k for k in reversed(key) if isinstance(k, str)), _path_text(key)) for key in keys]
    return [name if last.count(name) == 1 else _path_text(key) for name, key in zip(last, keys)]


def _path_text(path: tuple) -> str:
    """``('devices', 0, 'availability', 'p')`` -> ``devices[0].availability.p``, as ``--set`` writes it."""
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
    return out


def _text(value: Any) -> str:
    """A value as the scenario's YAML writes it (``default`` where the scenario leaves the key out)."""
    if value is _ABSENT:
        return "default"
    if isinstance(value, str):
        return value
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10**6, allow_unicode=True)
    return text.strip().removesuffix("...").strip()
