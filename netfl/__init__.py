"""netfl: a discrete-event network simulator for federated learning.

SimPy simulates devices, batteries, availability and links in simulated
seconds; those events trigger real PyTorch local training and server
aggregation. Start with ``netfl simulate topologies/quickstart.yaml``, or
from Python with ``netfl.run(...)`` (:mod:`netfl.api`).
"""

from __future__ import annotations

from typing import Any

#: The one place the version is written: pyproject.toml reads it (setuptools dynamic), netfl --version prints
#: it and summary.json records it. CHANGELOG.md says what each version changed.
__version__ = "0.2.0"
#: The name netfl is installed under (pip install netfl-sim): "netfl" on PyPI is another project.
DISTRIBUTION = "netfl-sim"

_API = ("run", "load", "from_dict", "with_own", "Result")
__all__ = [*_API, "ScenarioError", "__version__"]


def __getattr__(name: str) -> Any:
    """``netfl.run`` and friends load on first use: ``import netfl`` (and ``netfl validate``) stays free of torch."""
    if name in _API:
        from netfl import api

        return getattr(api, name)
    if name == "ScenarioError":
        from netfl.errors import ScenarioError

        return ScenarioError
    raise AttributeError(f"module 'netfl' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The API, for ``dir(netfl)`` and tab completion: its names load lazily, so they are not globals yet."""
    return sorted(__all__)
