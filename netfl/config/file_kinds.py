"""A topology and a study file told apart by their keys, so that one given to the other's command is one message
naming the right command, not a list of every key the command did not expect.

A topology has ``devices``, ``task``, ``stop``...; a study file has ``base``, ``cases``, ``grid``, ``seeds``...
(both may have ``name``). A file is taken for the other kind only when it has more of that kind's keys than of
the kind expected, so a topology or study file with a stray key still gets the usual field-by-field message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from netfl.config.schema import Scenario
from netfl.problems import field_keys

#: The keys of a study file (netfl.study.spec.StudyFile) that no topology has; tests/config/test_file_kinds.py
#: keeps them in step with the study's schema (this layer may not import the study's).
STUDY_KEYS = frozenset({"base", "set", "cases", "grid", "seeds", "vary", "out"})


def topology_keys() -> frozenset[str]:
    """The keys of a topology that no study file has (``task`` as well as ``tasks``)."""
    return frozenset([*field_keys(Scenario), "task"]) - {"name"} - STUDY_KEYS


def _counts(data: dict[str, Any]) -> tuple[list[str], list[str]]:
    keys = [k for k in data if isinstance(k, str)]
    return [k for k in keys if k in STUDY_KEYS], [k for k in keys if k in topology_keys()]


def study_given_as_topology(data: Any, path: Path) -> str | None:
    """Why ``data`` (read from ``path``, where a topology was expected) is a study file, or None."""
    if not isinstance(data, dict):
        return None
    study, topology = _counts(data)
    if len(study) <= len(topology):
        return None
    return (
        f"this is a study file (it has {', '.join(study)}), not a topology: run its cases with netfl sweep {path} "
        "(--dry-run lists them)"
    )


def topology_given_as_study(data: Any, path: Path) -> str | None:
    """Why ``data`` (read from ``path``, where a study file was expected) is a topology, or None."""
    if not isinstance(data, dict):
        return None
    study, topology = _counts(data)
    if len(topology) <= len(study):
        return None
    return (
        f"this is a topology (it has {', '.join(topology)}), not a study file: run it with netfl simulate {path}; "
        f"a study file names it as its base (base: {path.name}) and says what varies (cases, grid, seeds)"
    )
