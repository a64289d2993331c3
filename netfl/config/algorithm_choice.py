"""The algorithm a scenario's ``server.algorithm`` names: a built-in's registry entry (no torch), or the entry a
user's strategy class declares -- its ``Params`` and flags (:func:`netfl.registry.algorithms.declared_entry`) --,
the class imported from the user's file behind netfl's fence (:mod:`netfl.user_code`) or given from Python.

Everything that checks a scenario against its algorithm (the parameters, participation probabilities, the server
mode, several models, a server optimiser, edges, the memory budget) reads the entry from here, so a user's
algorithm is checked exactly as a built-in is, before anything runs. Importing a user's strategy file imports
torch (the file subclasses :class:`netfl.algorithms.Strategy`); nothing here does. The building layer takes the
class from here (a built-in's from the learning layer's own list).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from netfl import user_code
from netfl.config.flower_choice import flower_class, flower_kwargs_problems
from netfl.errors import StrategyError
from netfl.problems import params_problems
from netfl.registry.algorithms import ALGORITHMS, AlgorithmEntry
from netfl.registry.flower import flower_entry

__all__ = ["algorithm_entry", "algorithm_problems", "scenario_algorithm", "users_strategy"]

_EXPECTED = "a subclass of netfl.algorithms.Strategy (an FL algorithm; the docs' page 'Your own algorithm')"


def users_strategy(spec: Any, base_dir: Path | None) -> type:
    """The user's strategy class ``spec`` names (``path``, or ``factory`` from Python): StrategyError naming the
    file when it cannot be imported or holds no usable class. A strategy class is known by the entry that
    :class:`netfl.algorithms.Strategy` gives every subclass, so this layer needs no torch of its own (the user's
    file imports it)."""
    if spec.factory is not None:
        cls, where = spec.factory, getattr(spec.factory, "__qualname__", repr(spec.factory))
    else:
        ref = user_code.parse_reference(spec.path, base_dir)
        cls = user_code.load_attribute(ref, what="algorithm", error=StrategyError)
        where = f"{ref.path}: {ref.name}"
    if not (inspect.isclass(cls) and isinstance(getattr(cls, "entry", None), AlgorithmEntry)):
        raise StrategyError(f"{where} is not {_EXPECTED}")
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise StrategyError(f"{where} does not define {missing} (what {_EXPECTED} must define)")
    return cls


def algorithm_entry(spec: Any, base_dir: Path | None) -> AlgorithmEntry:
    """The entry of the algorithm ``spec`` names (StrategyError when it names none)."""
    if spec.name is not None:
        entry = ALGORITHMS.get(spec.name)
        if entry is None:
            raise StrategyError(f"unknown algorithm {spec.name!r}; accepted: {', '.join(ALGORITHMS)}")
        return entry
    if spec.flower is not None:
        found = flower_class(spec.flower, base_dir)
        doc = (found.cls.__doc__ or "").strip().splitlines()
        return flower_entry(spec.label, doc[0] if doc else "")
    return users_strategy(spec, base_dir).entry


def algorithm_problems(spec: Any, base_dir: Path | None) -> tuple[AlgorithmEntry | None, list[tuple[str, str]]]:
    """The algorithm's entry (None if it cannot be had) and the problems of ``spec``: the name or file, then its
    parameters against the algorithm's ``Params``, as (sub-path, message) pairs."""
    try:
        entry = algorithm_entry(spec, base_dir)
    except StrategyError as exc:
        return None, [("." + next((k for k in ("name", "flower") if getattr(spec, k) is not None), "path"), str(exc))]
    if spec.flower is not None:
        return entry, flower_kwargs_problems(flower_class(spec.flower, base_dir), spec.params)
    return entry, params_problems(entry.params, spec.params)


def scenario_algorithm(scenario: Any) -> AlgorithmEntry | None:
    """The entry of the scenario's algorithm, None where it names none (a problem the checks report)."""
    base_dir = scenario.source.parent if scenario.source is not None else None
    try:
        return algorithm_entry(scenario.server.algorithm, base_dir)
    except StrategyError:
        return None
