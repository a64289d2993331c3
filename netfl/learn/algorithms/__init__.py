"""FL algorithms as strategies, selectable by name in ``server.algorithm``.

Names, parameters and papers live in :mod:`netfl.registry.algorithms` (no
torch); this package holds the strategies that implement them.
"""

from __future__ import annotations

from typing import Any

from netfl.learn.algorithms.base import ClientInfo, ClientUpdate, Strategy, StrategyParams
from netfl.learn.algorithms.fedau import IntervalWeights
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


def build_strategy(spec: Any, clients: ClientInfo) -> Strategy:
    """The strategy an AlgorithmSpec names, with its validated parameters."""
    entry = registry.ALGORITHMS.get(spec.name)
    if entry is None:
        raise ValueError(f"unknown algorithm {spec.name!r}; accepted: {', '.join(registry.ALGORITHMS)}")
    cls = entry.load()
    return cls(entry.params.model_validate(spec.params), clients)
