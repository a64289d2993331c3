"""FL algorithms as strategies, selectable by name in ``server.algorithm``."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from netfl.learn.algorithms.base import ClientInfo, ClientUpdate, Strategy, StrategyParams
from netfl.learn.algorithms.fedavg import FedAvg

ALGORITHMS: dict[str, type[Strategy]] = {cls.name: cls for cls in (FedAvg,)}

__all__ = ["ALGORITHMS", "ClientInfo", "ClientUpdate", "Strategy", "StrategyParams", "build_strategy", "validate_algorithm"]


def validate_algorithm(spec: Any, scenario: Any = None) -> list[tuple[str, str]]:
    """Problems with an AlgorithmSpec as (sub-path, message) pairs; empty when valid."""
    from netfl.scenario import describe_validation_error

    cls = ALGORITHMS.get(spec.name)
    if cls is None:
        return [(".name", f"unknown algorithm {spec.name!r}; accepted: {', '.join(ALGORITHMS)}")]
    problems = []
    try:
        cls.Params.model_validate(spec.params)
    except ValidationError as exc:
        for err in exc.errors():
            path, msg = describe_validation_error(err, cls.Params)
            problems.append(("." + path if path else "", msg))
    if scenario is not None and len(scenario.tasks) > 1:
        problems.append(("", f"{spec.name} trains one model, but the scenario lists {len(scenario.tasks)} tasks"))
    return problems


def build_strategy(spec: Any, clients: ClientInfo) -> Strategy:
    cls = ALGORITHMS[spec.name]
    return cls(cls.Params.model_validate(spec.params), clients)
