"""A study file: one base topology, the settings that vary, the seeds -- expanded into the runs it means.

    name: fedau-vs-fedavg
    base: ../topologies/quickstart.yaml        # or an inline topology mapping
    set: {stop.rounds: 100}                    # every run
    cases:                                     # named variants (optional)
      fedavg: {server.algorithm.name: fedavg}
      fedau:  {server.algorithm: {name: fedau}}
    grid:                                      # crossed with the cases and with each other (optional)
      devices[0].availability.p: [0.2, 0.5]
      server.round.deadline: {tight: 1s, loose: 10s}   # a mapping names its values
    seeds: 3                                   # or a list: [0, 4, 9]
    vary: seed                                 # or world_seed / training_seed: vary one, hold the other

Keys of ``set``, ``cases`` and ``grid`` are the YAML paths ``netfl simulate
--set`` takes. A run applies, in order: ``set``, its case, its grid point,
its seed. Every run is validated before any starts, and a problem names the
study file, the run and the topology path.

A study's size is counted before it is expanded (cases x grid points x
seeds: a few lines can mean 10^10 runs) and refused past ``max_runs``
(:data:`MAX_RUNS` unless raised), and so is its cost once its runs are
known: their estimated engine events together (:mod:`netfl.config.schedule`)
past ``max_runs`` runs of :data:`RUN_EVENTS_ALLOWANCE` events each.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from netfl.config import Scenario, scenario_document, scenario_from_dict
from netfl.config.data import data_problems
from netfl.config.file_kinds import topology_given_as_study
from netfl.config.loading import read_yaml
from netfl.config.overrides import OverrideError, apply_overrides, apply_settings, parse_path
from netfl.config.schedule import estimate_schedule
from netfl.errors import ScenarioError
from netfl.problems import describe_validation_error

__all__ = ["MAX_RUNS", "RUN_EVENTS_ALLOWANCE", "RunPlan", "Study", "load_study"]

#: Runs of one study, unless the sweep raises it (--max-runs): each is validated and listed before any starts.
MAX_RUNS = 10_000
#: Engine events a study may log per run it is allowed (a run of 10^7 events takes minutes of engine time).
RUN_EVENTS_ALLOWANCE = 10**7


class StudyFile(BaseModel):
    """The keys of a study file (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, description="the study's name [default: the file's name without .yaml]")
    base: str | dict[str, Any] = Field(
        description="the topology every run starts from: a path (relative to the "
        "study file) or an inline topology mapping"
    )
    set: dict[str, Any] = Field(default_factory=dict, description="YAML path -> value, for every run")
    cases: dict[str, dict[str, Any]] = Field(default_factory=dict, description="case name -> {YAML path: value}")
    grid: dict[str, list[Any] | dict[str, Any]] = Field(
        default_factory=dict, description="YAML path -> the values it takes (a list, or a mapping of names to values)"
    )
    seeds: int | list[int] = Field(1, description="how many seeds (counting up from the scenario's own), or which")
    vary: Literal["seed", "world_seed", "training_seed"] = Field(
        "seed", description="the seed field the seeds go to: seed (both), world_seed or training_seed"
    )
    out: str | None = Field(
        None,
        description="the study folder (relative to the study file) [default: results/<name>/ in the current folder]",
    )

    @field_validator("name")
    @classmethod
    def _plain_name(cls, name: str | None) -> str | None:
        if name is not None and not _SAFE_NAME.fullmatch(name):
            raise ValueError("use letters, digits, '.', '_' and '-' only (it names a folder)")
        return name

    @field_validator("cases")
    @classmethod
    def _case_names(cls, cases: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name in cases:
            if not _SAFE_NAME.fullmatch(str(name)):
                raise ValueError(f"case {name!r}: use letters, digits, '.', '_' and '-' only (it names a folder)")
        return cases

    @field_validator("grid")
    @classmethod
    def _grid_values(cls, grid: dict[str, Any]) -> dict[str, Any]:
        for path, values in grid.items():
            if not values:
                raise ValueError(f"{path}: give at least one value")
            if isinstance(values, list) and any(isinstance(v, (list, dict)) for v in values):
                raise ValueError(
                    f"{path}: a list of plain values; to vary a mapping or a list, name each value "
                    "(path: {name1: value1, name2: value2})"
                )
        return grid

    @field_validator("seeds", mode="before")
    @classmethod
    def _no_booleans(cls, seeds: Any) -> Any:
        if isinstance(seeds, bool) or (isinstance(seeds, list) and any(isinstance(s, bool) for s in seeds)):
            raise ValueError("a count (seeds: 3) or a list of seeds (seeds: [0, 4, 9]), not true/false")
        return seeds

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, seeds: int | list[int]) -> int | list[int]:
        if isinstance(seeds, int) and seeds < 1:
            raise ValueError("at least 1")
        if isinstance(seeds, list):
            if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) < len(seeds):
                raise ValueError("a non-empty list of distinct integers >= 0")
        return seeds


_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class RunPlan:
    """One run of a study: its case (e.g. ``fedau, p=0.2``), seed, the settings that make it, its folder below
    the study folder, and its validated scenario."""

    case: str
    seed: int
    settings: dict[str, Any]
    folder: Path
    scenario: Scenario = field(compare=False)

    @property
    def label(self) -> str:
        return f"{self.case}, seed {self.seed}"

    def document(self) -> dict[str, Any]:
        """The scenario as its run folder's scenario.yaml holds it (what "unchanged" compares)."""
        return scenario_document(self.scenario)

    def study_record(self) -> dict[str, Any]:
        """summary.json's ``study`` key, which ``netfl report`` groups runs by."""
        return {"case": self.case, "seed": self.seed, "overrides": self.settings}


@dataclass(frozen=True)
class Study:
    name: str
    file: Path
    out: Path
    runs: list[RunPlan]

    @property
    def cases(self) -> list[str]:
        return list(dict.fromkeys(run.case for run in self.runs))


def load_study(
    path: str | Path,
    *,
    out: Path | None = None,
    overrides: Sequence[str] = (),
    seeds: int | None = None,
    data_dir: Path | None = None,
    max_runs: int | None = None,
) -> Study:
    """Read and expand a study file; ScenarioError (naming the file, the run and the path) on any problem.

    ``overrides`` (``path=value``, as ``netfl simulate --set``) apply to every run after its case and grid point
    (a smaller or quicker version of a study without editing it); ``seeds`` replaces the file's count; every
    run's data set must be where it will be read (``data_dir``: the sweep's --data-dir); ``max_runs`` bounds
    the study's size (:data:`MAX_RUNS` by default; see the module docstring)."""
    path = Path(path)
    source = str(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ScenarioError(source, [("", "a study file is a mapping with keys base, set, cases, grid, seeds, vary")])
    topology = topology_given_as_study(data, path)
    if topology is not None:
        raise ScenarioError(source, [("", topology)])
    try:
        spec = StudyFile.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(source, [describe_validation_error(err, StudyFile) for err in exc.errors()]) from None
    if seeds is not None:
        spec = spec.model_copy(update={"seeds": seeds})
    name = spec.name or path.name.removesuffix(".yaml").removesuffix(".yml").removesuffix(".study")
    max_runs = max_runs or MAX_RUNS
    _check_size(spec, source, max_runs)  # before anything is expanded, or even the base topology read
    base, base_source, base_dir = _base_topology(spec, path)
    _check_paths(spec, source)
    folder = out if out is not None else (path.parent / spec.out if spec.out else Path("results") / name)
    runs = _expand(spec, name, base, base_source, base_dir, source, list(overrides), data_dir)
    _check_cost(runs, source, max_runs)
    return Study(name, path, folder, runs)


def _check_size(spec: StudyFile, source: str, max_runs: int) -> None:
    """Refuse a study of more than ``max_runs`` runs, counted (not expanded): cases x grid points x seeds."""
    factors = {
        "cases": max(1, len(spec.cases)),
        "grid": math.prod(len(values) for values in spec.grid.values()),
        "seeds": len(spec.seeds) if isinstance(spec.seeds, list) else spec.seeds,
    }
    runs = math.prod(factors.values())
    if runs > max_runs:
        largest = max(factors, key=factors.get)
        raise ScenarioError(
            source,
            [
                (
                    largest,
                    f"the study has {runs:,} runs ({factors['cases']:,} case(s) x {factors['grid']:,} grid point(s) "
                    f"x {factors['seeds']:,} seed(s)); a sweep refuses more than {max_runs:,} (each is validated "
                    "and listed before any starts): fewer cases, grid values or seeds, or allow more with "
                    f"--max-runs {runs}",
                )
            ],
        )


def _check_cost(runs: list[RunPlan], source: str, max_runs: int) -> None:
    """Refuse a study whose runs together would log more engine events than ``max_runs`` runs of
    :data:`RUN_EVENTS_ALLOWANCE` each."""
    events = [(estimate_schedule(run.scenario).events or 0.0, run.label) for run in runs]
    total, bound = sum(e for e, _ in events), max_runs * RUN_EVENTS_ALLOWANCE
    if total > bound:
        most, label = max(events, key=lambda e: e[0])  # the first of the largest
        raise ScenarioError(
            source,
            [
                (
                    "",
                    f"the study's {len(runs):,} runs would log about {total:.2g} engine events in all (up to "
                    f"{most:.2g} for one run: {label}); a sweep refuses more than {bound:.2g} ({max_runs:,} runs of "
                    f"{RUN_EVENTS_ALLOWANCE:.0e}): shorten its runs (stop.rounds, stop.sim_time), or allow more "
                    f"with --max-runs {math.ceil(total / RUN_EVENTS_ALLOWANCE)}",
                )
            ],
        )


def _base_topology(spec: StudyFile, path: Path) -> tuple[dict[str, Any], str, Path]:
    """The base topology's mapping, the source to name it by, and the folder its relative paths start from."""
    if isinstance(spec.base, dict):
        return spec.base, f"{path} (base)", path.parent
    base_path = path.parent / spec.base
    data = read_yaml(base_path)
    if not isinstance(data, dict):
        raise ScenarioError(str(base_path), [("", "expected a topology: a mapping of keys (name, seed, stop, ...)")])
    return data, str(base_path), base_path.parent


def _check_paths(spec: StudyFile, source: str) -> None:
    problems = []
    for where, paths in [
        ("set", spec.set),
        ("grid", spec.grid),
        *((f"cases.{name}", settings) for name, settings in spec.cases.items()),
    ]:
        for p in paths:
            try:
                parse_path(p)
            except OverrideError as exc:
                problems.append((f"{where}.{p}", exc.problem))
            if where == "grid" and p == spec.vary:
                problems.append((f"grid.{p}", f"seeds already sets {spec.vary}: write seeds: [...] to choose them"))
    if problems:
        raise ScenarioError(source, problems)


def _expand(
    spec: StudyFile,
    name: str,
    base: dict[str, Any],
    base_source: str,
    base_dir: Path,
    source: str,
    overrides: list[str],
    data_dir: Path | None = None,
) -> list[RunPlan]:
    cases = list(spec.cases.items()) or [(None, {})]
    missing_data: set[tuple[str, str]] = set()  # each missing data set is reported once, at its first run
    axes = [_axis(path, values, spec.grid) for path, values in spec.grid.items()]
    runs, problems = [], []
    for (case_name, case_settings), point in itertools.product(cases, itertools.product(*axes)):
        labels = ([case_name] if case_name else []) + [label for label, _, _ in point]
        case = ", ".join(labels) or name
        settings = {**case_settings, **{p: value for _, p, value in point}}
        try:
            data = apply_settings(base, {**spec.set, **settings})
        except OverrideError as exc:
            problems.append((f"{case}: {exc.path}", exc.problem))
            continue
        try:
            data = apply_overrides(data, overrides)
        except OverrideError as exc:
            problems.append((f"{case}: --set {exc.path}", exc.problem))
            continue
        for seed in _seeds(spec, data):
            seeded = apply_settings(data, {spec.vary: seed})
            try:
                scenario = scenario_from_dict(seeded, source=base_source, base_dir=base_dir)
            except ScenarioError as exc:
                problems += [(f"{case}, seed {seed}: {p}" if p else f"{case}, seed {seed}", m) for p, m in exc.problems]
                continue
            for p, m in data_problems(scenario, data_dir):
                if (p, m) not in missing_data:
                    missing_data.add((p, m))
                    problems.append((f"{case}, seed {seed}: {p}", m))
            folder = Path("runs", *(_folder_name(label) for label in labels), f"seed{seed}")
            runs.append(RunPlan(case, seed, {**settings, spec.vary: seed}, folder, scenario))
    folders = Counter(run.folder for run in runs)
    problems += [
        (
            str(f),
            "two runs would share this folder: give their cases or grid values names that differ in letters or digits",
        )
        for f, n in folders.items()
        if n > 1
    ]
    if problems:
        raise ScenarioError(source, problems)
    return runs


def _axis(path: str, values: list[Any] | dict[str, Any], grid: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(label, path, value) per value of one grid axis; the label names the last key (the whole path when two
    axes end in the same key) and the value (its name, or the value itself)."""
    last = [k for k in parse_path(path) if isinstance(k, str)][-1]
    clash = sum(1 for other in grid if [k for k in parse_path(other) if isinstance(k, str)][-1] == last) > 1
    key = path if clash else last
    named = values.items() if isinstance(values, dict) else ((_yaml_text(v), v) for v in values)
    return [(f"{key}={value_name}", path, value) for value_name, value in named]


def _seeds(spec: StudyFile, data: dict[str, Any]) -> list[int]:
    if isinstance(spec.seeds, list):
        return list(spec.seeds)
    first = data.get(spec.vary, data.get("seed", 0))
    first = first if isinstance(first, int) and not isinstance(first, bool) and first >= 0 else 0
    return [first + i for i in range(spec.seeds)]


def _yaml_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def _folder_name(label: str) -> str:
    """A case label as one folder name: anything but letters, digits, ``._=+-`` becomes ``_``."""
    return re.sub(r"[^A-Za-z0-9._=+-]", "_", label).strip(".") or "_"
