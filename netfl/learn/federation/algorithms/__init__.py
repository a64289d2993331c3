"""FL algorithms as strategies, selectable by name in ``server.algorithm``.

Names, parameters and papers live in :mod:`netfl.registry.algorithms` (no
torch); this package holds the strategies that implement them.
"""

from __future__ import annotations

from collections.abc import Mapping

from netfl.learn.federation.algorithms.base import ClientInfo, ClientUpdate, Strategy, StrategyParams
from netfl.learn.federation.algorithms.fedau import IntervalWeights
from netfl.registry import algorithms as registry

#: name -> strategy class, for code that uses the implementations directly (tests, examples)
ALGORITHMS: dict[str, type[Strategy]] = {name: entry.load() for name, entry in registry.ALGORITHMS.items()}

__all__ = [
    "ALGORITHMS",
    "ClientInfo",
    "ClientUpdate",
    "IntervalWeights",
    "Strategy",
    "StrategyParams",
    "build_strategy",
]


def build_strategy(name: str, params: Mapping[str, object], clients: ClientInfo) -> Strategy:
    """The strategy of algorithm ``name`` (``server.algorithm``), with ``params`` validated against its Params."""
    entry = registry.ALGORITHMS.get(name)
    if entry is None:
        raise ValueError(f"unknown algorithm {name!r}; accepted: {', '.join(registry.ALGORITHMS)}")
    cls = entry.load()
    return cls(entry.params.model_validate(dict(params)), clients)
