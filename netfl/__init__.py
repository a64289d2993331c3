"""netfl: a discrete-event network simulator for federated learning.

SimPy simulates devices, batteries, availability and links in simulated
seconds; those events trigger real PyTorch local training and server
aggregation. Start with ``netfl simulate topologies/quickstart.yaml``, or
from Python with ``netfl.run(...)`` (:mod:`netfl.api`).
"""

from __future__ import annotations

from typing import Any

from netfl.version import __version__

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
