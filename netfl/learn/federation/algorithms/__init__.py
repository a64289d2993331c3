"""FL algorithms as strategies, selectable by name in ``server.algorithm``.

Names, parameters and papers live in :mod:`netfl.registry.algorithms` (no
torch); this package holds the strategies that implement them, one module
per algorithm or family. Each strategy class names its entry (``name``);
:data:`ALGORITHMS` gathers them from every module of the package, so a new
algorithm is its registry entry and its module, nothing else to list.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping

from netfl.learn.federation.algorithms.fedau import IntervalWeights
from netfl.learn.federation.strategy import (
    Aggregate,
    ClientInfo,
    ClientUpdate,
    Strategy,
    StrategyParams,
    as_aggregate,
)
from netfl.registry import algorithms as registry
from netfl.registry import implementations

#: name -> strategy class, in the registry's order: the class of this package's modules that names the entry
ALGORITHMS: dict[str, type[Strategy]] = implementations(
    Strategy,
    registry.ALGORITHMS,
    [importlib.import_module(f"{__name__}.{module.name}") for module in pkgutil.iter_modules(__path__)],
)

__all__ = [
    "ALGORITHMS",
    "Aggregate",
    "ClientInfo",
    "ClientUpdate",
    "IntervalWeights",
    "Strategy",
    "StrategyParams",
    "as_aggregate",
    "build_strategy",
]


def build_strategy(name: str, params: Mapping[str, object], clients: ClientInfo) -> Strategy:
    """The strategy of the built-in algorithm ``name``, with ``params`` validated against its Params."""
    cls = ALGORITHMS.get(name)
    if cls is None:
        raise ValueError(f"unknown algorithm {name!r}; accepted: {', '.join(registry.ALGORITHMS)}")
    return cls(cls.Params.model_validate(dict(params)), clients)
