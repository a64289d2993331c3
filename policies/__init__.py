"""Availability policies: when a device can take part.

The protocol is documented in :mod:`netfl.policies.base`. A topology names a
built-in (``availability: {policy: bernoulli, p: 0.3}``); the other keys of
that mapping are the policy's parameters.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import ValidationError

from netfl.policies.base import (AvailabilityPolicy, DeviceInfo, PolicyParams, RoundPolicy,
                                 SessionPolicy)
from netfl.policies.builtin import BUILTIN_POLICIES

__all__ = ["AvailabilityPolicy", "DeviceInfo", "PolicyParams", "RoundPolicy", "SessionPolicy",
           "BUILTIN_POLICIES", "policy_class", "validate_policy", "build_policy"]


def policy_class(name: str) -> type[AvailabilityPolicy]:
    try:
        return BUILTIN_POLICIES[name]
    except KeyError:
        raise KeyError(f"unknown policy {name!r}; built-ins: {', '.join(BUILTIN_POLICIES)}") from None


def validate_policy(spec: Any, scenario: Any = None) -> list[tuple[str, str]]:
    """Problems with a PolicySpec as (sub-path, message) pairs; empty when valid."""
    from netfl.scenario import describe_validation_error, format_loc

    try:
        cls = policy_class(spec.policy)
    except KeyError as exc:
        return [(".policy", exc.args[0])]
    try:
        cls.Params.model_validate(spec.params)
    except ValidationError as exc:
        out = []
        for err in exc.errors():
            path, msg = describe_validation_error(err, cls.Params)
            out.append(("." + path if path else "", msg))
        return out
    return []


def build_policy(spec: Any, device: DeviceInfo, rng: np.random.Generator) -> AvailabilityPolicy:
    cls = policy_class(spec.policy)
    return cls(cls.Params.model_validate(spec.params), device, rng)
