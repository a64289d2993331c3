"""The user's Python files a run names, carried with it to a machine that may not have them.

A run on a Ray cluster runs on a worker whose disk need not hold the user's strategy, model, policy or data-loader
file. The driver reads each file the run's scenario names (``file.py:Name``, wherever it appears) and sends its
text with the run; the worker imports that text under the same path (:func:`netfl.user_code.sources_shipped`), so
every worker runs the driver's version of the code and messages name the user's file and line as on the driver.

Only the named files travel: a module they import in turn, and data files (``.npz``, traces, LEAF folders), must
be on the workers as on the driver.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from netfl.errors import NetflError
from netfl.user_code import is_user_reference, parse_reference

__all__ = ["users_sources"]


def users_sources(document: dict[str, Any], base_dir: Path | None) -> dict[str, bytes]:
    """Path (as the run resolves it) -> text of every user's Python file the scenario ``document`` names."""
    sources: dict[str, bytes] = {}
    for reference in _references(document):
        path = parse_reference(reference, base_dir).path
        if str(path) in sources:
            continue
        try:
            sources[str(path)] = path.read_bytes()
        except OSError as exc:
            raise NetflError(f"{reference}: cannot read {path} to send it with the run: {exc.strerror}") from None
    return sources


def _references(value: Any) -> Iterator[str]:
    """Every ``file.py:Name`` string in a scenario document, at any depth."""
    if is_user_reference(value):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _references(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _references(item)
