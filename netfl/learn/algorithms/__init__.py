"""FL algorithms as strategies, selectable by name in ``server.algorithm``."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from netfl.learn.algorithms.anarchic import AFACD, AFACS
from netfl.learn.algorithms.base import ClientInfo, ClientUpdate, Strategy, StrategyParams
from netfl.learn.algorithms.fedau import FedAU, IntervalWeights
from netfl.learn.algorithms.fedavg import FedAvg, FedAvgAll, FedAvgKnown, FedAvgUnbiased
from netfl.learn.algorithms.fedcvar import FedCVaR
from netfl.learn.algorithms.mifa import MIFA, UMIFA, MIFAm, UMIFAm
from netfl.learn.algorithms.mmfl import MMFL

ALGORITHMS: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (FedAvg, FedAvgAll, FedAvgKnown, FedAvgUnbiased, FedAU, MIFA, UMIFA, MIFAm, UMIFAm,
                              AFACD, AFACS, FedCVaR, MMFL)}

__all__ = ["ALGORITHMS", "ClientInfo", "ClientUpdate", "IntervalWeights", "Strategy", "StrategyParams",
           "build_strategy", "describe_algorithms", "validate_algorithm"]


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if getattr(annotation, "__args__", None) is None else None
    text = text or str(annotation).replace("typing.", "")
    return text.replace("NoneType", "None")


def describe_algorithms() -> list[dict[str, Any]]:
    """One entry per registered algorithm, for listings such as ``netfl algorithms``.

    Each: ``name``, ``summary``, ``paper``, ``needs_participation`` and ``params``, a
    list of ``{name, type, default, required, description}`` from the Params fields.
    """
    out = []
    for name, cls in ALGORITHMS.items():
        params = [{"name": field, "type": _type_name(info.annotation), "default": info.default,
                   "required": info.is_required(), "description": info.description or ""}
                  for field, info in cls.Params.model_fields.items()]
        out.append({"name": name, "summary": cls.summary, "paper": cls.paper,
                    "needs_participation": cls.needs_participation, "params": params})
    return out


def _participation_problems(name: str, scenario: Any) -> list[tuple[str, str]]:
    """Device groups whose built-in availability policy has no ``p`` (for algorithms that divide by it).

    A user's policy class may set ``self.p`` without a ``p`` parameter, so only built-ins are
    checked here; the strategy itself refuses a client without p when it is built.
    """
    from netfl.policies import BUILTIN_POLICIES

    problems = []
    for i, group in enumerate(getattr(scenario, "devices", [])):
        policy = BUILTIN_POLICIES.get(getattr(group.availability, "policy", None))
        if policy is not None and "p" not in policy.Params.model_fields:
            problems.append(("", f"{name} divides each update by its client's participation probability p, but "
                                 f"devices[{i}] (group {group.group!r}) uses availability policy "
                                 f"{group.availability.policy!r}, which has no p; use bernoulli, markov or "
                                 f"cyclic there, or an algorithm that needs no p (fedau, mifa, fedavg)"))
    return problems


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
    if scenario is not None and cls.needs_participation:
        problems += _participation_problems(spec.name, scenario)
    if scenario is not None:
        problems += _mode_problems(spec.name, cls, scenario)
    return problems


def _mode_problems(name: str, cls: type[Strategy], scenario: Any) -> list[tuple[str, str]]:
    """An algorithm that cannot run with the scenario's tasks or server mode."""
    if len(scenario.tasks) > 1 and not cls.multi_task:
        multi = ", ".join(n for n, c in ALGORITHMS.items() if c.multi_task)
        return [("", f"{name} trains one model, but the scenario lists {len(scenario.tasks)} tasks; "
                     f"algorithms that train several: {multi}")]
    if cls.multi_task and scenario.server.mode == "async":
        return [("", f"{name} plans synchronous rounds (who trains which model); use server.mode: sync")]
    if cls.multi_task and any(n.ram is not None for n in scenario.network.nodes.values()):
        return [("", f"{name} needs every selected update (and the clients' reports), but a RAM relay passes "
                     "only one per round; remove network.nodes.*.ram or use a single-model algorithm")]
    return []


def build_strategy(spec: Any, clients: ClientInfo) -> Strategy:
    cls = ALGORITHMS[spec.name]
    return cls(cls.Params.model_validate(spec.params), clients)
