"""Reading a scenario: a topology YAML file or a dict, validated into a :class:`~netfl.config.schema.Scenario`.

``load_scenario(path)`` returns the scenario or raises
:class:`~netfl.errors.ScenarioError` listing every problem with its YAML
path (``devices[1].battery.capacity: must be > 0``): first the schema's,
then (:mod:`netfl.config.checks`) the ones that need the whole scenario.
"""

from __future__ import annotations

import re
import stat
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from netfl.config.checks import check_scenario
from netfl.config.file_kinds import study_given_as_topology
from netfl.config.overrides import OverrideError, apply_overrides
from netfl.config.schema import AlgorithmSpec, DatasetSpec, Every, ModelSpec, Scenario
from netfl.distributions import Distribution
from netfl.errors import ScenarioError
from netfl.problems import describe_validation_error, field_keys
from netfl.user_code import reference_of


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.safe_load, except that a key given twice in one mapping is an error (not "the last one wins")."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, typing.Hashable):
                continue  # pydantic reports a non-string key later
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def load_scenario(path: str | Path, *, overrides: Sequence[str] = (), check_references: bool = True) -> Scenario:
    """Read and validate a topology file, after applying ``overrides`` (``path=value``, see
    :mod:`netfl.config.overrides`). Raises ScenarioError with every problem found."""
    path = Path(path)
    source = str(path)
    data = read_yaml(path)
    study = study_given_as_topology(data, path)
    if study is not None:
        raise ScenarioError(source, [("", study)])
    if overrides and isinstance(data, dict):
        try:
            data = apply_overrides(data, list(overrides))
        except OverrideError as exc:
            raise ScenarioError(source, [(f"--set {exc.path}", exc.problem)]) from None
    return scenario_from_dict(data, source=source, base_dir=path.parent, check_references=check_references)


#: A topology or study file is a few kilobytes; traces and data sets live in the files it names.
MAX_FILE_BYTES = 4 * 2**20
#: Values a file may hold once YAML aliases are expanded (a few hundred bytes of aliases can mean billions).
MAX_VALUES = 200_000
#: Mappings and lists inside each other; netfl's deepest schema path is under ten.
MAX_DEPTH = 64


def read_yaml(path: Path) -> Any:
    """The YAML document in ``path``; ScenarioError naming the file if it cannot be read, is not a regular file
    or is larger, deeper or (through aliases) bigger than any scenario, or repeats a key in one mapping."""
    source = str(path)
    try:
        info = Path(path).stat()
    except FileNotFoundError:
        raise ScenarioError(source, [("", "file not found")]) from None
    except OSError as exc:
        raise ScenarioError(source, [("", f"cannot read: {exc}")]) from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file (a device, pipe or socket)"
        raise ScenarioError(source, [("", f"is {kind}; give a YAML file")])
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(source, [("", f"cannot read: {exc}")]) from None
    if len(raw) > MAX_FILE_BYTES:
        raise ScenarioError(
            source,
            [
                (
                    "",
                    f"is larger than {MAX_FILE_BYTES // 2**20} MiB: too big for a scenario; "
                    "put traces and data in the files a topology names",
                )
            ],
        )
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(source, [("", f"malformed YAML: {where}{problem}")]) from None
    except RecursionError:
        raise ScenarioError(source, [("", f"nested deeper than netfl reads (at most {MAX_DEPTH} levels)")]) from None
    problem = _shape_problem(data)
    if problem:
        raise ScenarioError(source, [("", problem)])
    return data


def _shape_problem(data: Any) -> str | None:
    """Why ``data`` cannot be a scenario, by shape alone: a YAML alias inside itself, too deep, or too many values
    once aliases are expanded. Shared subtrees are counted once per use but visited once."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()

    def size(node: Any, depth: int) -> int:
        if not isinstance(node, (dict, list)):
            return 1
        if depth > MAX_DEPTH:
            raise _Refused(f"nested deeper than netfl reads (at most {MAX_DEPTH} levels)")
        key = id(node)
        if key in on_path:
            raise _Refused("a YAML alias refers to a mapping or list that contains it")
        if key not in sizes:
            on_path.add(key)
            children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
            total = 1
            for child in children:
                total += size(child, depth + 1)
                if total > MAX_VALUES:
                    raise _Refused(
                        f"holds more than {MAX_VALUES:,} values once its YAML aliases are expanded; "
                        "a scenario is far smaller"
                    )
            on_path.discard(key)
            sizes[key] = total
        return sizes[key]

    try:
        size(data, 0)
    except _Refused as refused:
        return str(refused)
    return None


class _Refused(Exception):
    pass


def scenario_from_dict(
    data: Any, *, source: str = "<scenario>", base_dir: Path | None = None, check_references: bool = True
) -> Scenario:
    if not isinstance(data, dict):
        raise ScenarioError(
            source,
            [("", f"expected a mapping of keys (name, seed, stop, task, devices, ...), got {type(data).__name__}")],
        )
    data = _yaml11_on_off_keys(data)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        written = {**data, "tasks": [data["task"]]} if "task" in data else data  # as the schema reads it
        problems = [_describe(err, written) for err in exc.errors()]
        if "task" in data:  # the user wrote one `task:`; speak of it, not of tasks[0]
            problems = [(re.sub(r"^tasks\[0\]", "task", path), msg) for path, msg in problems]
        raise ScenarioError(source, problems) from None
    scenario = scenario.model_copy(update={"source": Path(source) if base_dir is not None else None})
    if check_references:
        check_scenario(scenario, source)
    return scenario


def _yaml11_on_off_keys(value: Any) -> Any:
    """YAML 1.1 reads the keys ``on:`` / ``off:`` (session lengths) as booleans; no netfl key is a boolean."""
    if isinstance(value, dict):
        return {
            ({True: "on", False: "off"}[k] if isinstance(k, bool) else k): _yaml11_on_off_keys(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_yaml11_on_off_keys(v) for v in value]
    return value


def _describe(err: dict[str, Any], data: Any) -> tuple[str, str]:
    return describe_validation_error(err, Scenario, keys_of=_scenario_keys, data=data)


def _scenario_keys(model: type[BaseModel]) -> list[str]:
    """Accepted keys of a (nested) model; the scenario itself takes ``task`` (one) or ``tasks`` (a list)."""
    names = field_keys(model)
    if model is Scenario:
        names = ["task" if n == "tasks" else n for n in names] + ["tasks"]
    return names


def scenario_document(scenario: Scenario) -> dict[str, Any]:
    """The scenario as a topology file's mapping, quantities in SI units and defaults left out (as a file
    would): loading it gives the same scenario (a run folder's scenario.yaml, to repeat the run as it was).
    ``tracking`` is left out: where a run is logged is no part of the world it simulates, and repeating a run
    (netfl rerun, a sweep's check of what is done) does not depend on it."""
    document = _plain(scenario)
    document.pop("tracking", None)
    return document


def _plain(value: Any) -> Any:
    """A schema value as YAML writes it: models by their keys (aliases such as ``async``) without the values
    that equal their defaults, a component's parameters as given, distributions in their scenario form."""
    if isinstance(value, BaseModel):
        out = {
            (info.alias or name): _plain(getattr(value, name))
            for name, info in type(value).model_fields.items()
            if not info.exclude
            and (info.is_required() or getattr(value, name) != info.get_default(call_default_factory=True))
        }
        out.update({k: _plain(v) for k, v in (value.model_extra or {}).items()})
        given = getattr(value, "loader", None) if isinstance(value, DatasetSpec) else getattr(value, "factory", None)
        if isinstance(value, (ModelSpec, DatasetSpec, AlgorithmSpec)) and given is not None:  # given in Python
            out["path"] = reference_of(given)
        return out
    if isinstance(value, (Distribution, Every)):
        return value.as_scenario_value()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value
