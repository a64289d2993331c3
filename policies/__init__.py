"""Availability policies: when a device can take part.

The protocol is documented in :mod:`netfl.policies.base`. A topology names a
built-in (``availability: {policy: markov, p: 0.3}``) or a user's class
(``availability: {policy: my_policies.py:Charging, level: 0.3}``, the path
relative to the topology file); the other keys of that mapping are the
policy's parameters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from netfl.errors import PolicyError
from netfl.problems import describe_validation_error
from netfl.policies.base import (AvailabilityPolicy, DeviceInfo, DeviceState, PolicyParams, RoundPolicy,
                                 SessionPolicy)
from netfl.policies.builtin import BUILTIN_POLICIES
from netfl.policies.user_script import is_user_reference, load_user_policy

__all__ = ["AvailabilityPolicy", "DeviceInfo", "DeviceState", "PolicyParams", "RoundPolicy", "SessionPolicy",
           "BUILTIN_POLICIES", "policy_class", "validate_policy", "check_spec", "build_policy"]


def policy_class(name: str, base_dir: Path | None = None) -> type[AvailabilityPolicy]:
    """The class a policy name refers to; PolicyError says what is accepted."""
    if is_user_reference(name):
        return load_user_policy(name, base_dir or Path.cwd())
    try:
        return BUILTIN_POLICIES[name]
    except KeyError:
        raise PolicyError(f"unknown policy {name!r}; built-ins: {', '.join(BUILTIN_POLICIES)}; "
                          "or a class of yours as path/to/file.py:ClassName") from None


def _base_dir(scenario: Any) -> Path | None:
    source = getattr(scenario, "source", None)
    return Path(source).parent if source is not None else None


def validate_policy(spec: Any, scenario: Any = None, *, continuous_only: bool = False) -> list[tuple[str, str]]:
    """Problems with a PolicySpec as (sub-path, message) pairs; empty when valid."""
    return check_spec(spec, _base_dir(scenario), continuous_only=continuous_only)


def check_spec(spec: Any, base_dir: Path | None, *, continuous_only: bool = False) -> list[tuple[str, str]]:
    """Name, parameters and the policy's own :meth:`~AvailabilityPolicy.check` (files, nested user policies)."""
    try:
        cls = policy_class(spec.policy, base_dir)
    except PolicyError as exc:
        return [(".policy", str(exc))]
    if continuous_only and not issubclass(cls, SessionPolicy):
        return [(".policy", f"{spec.policy!r} is a per-round policy; this needs a continuous-time one "
                            f"(e.g. daily, sessions, diurnal, trace_csv)")]
    try:
        params = cls.Params.model_validate(spec.params)
    except ValidationError as exc:
        out = []
        for err in exc.errors():
            path, msg = describe_validation_error(err, cls.Params)
            out.append(("." + path if path else "", msg))
        return out
    return cls.check(params, base_dir or Path.cwd())


def build_policy(spec: Any, device: DeviceInfo, rng: np.random.Generator) -> AvailabilityPolicy:
    cls = policy_class(spec.policy, device.base_dir)
    try:
        params = cls.Params.model_validate(spec.params)
    except ValidationError as exc:  # validation checks this first; a direct caller gets a message, not a traceback
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'parameters'}: {e['msg']}" for e in exc.errors())
        raise PolicyError(f"policy {spec.policy!r}: {problems}") from None
    return cls(params, device, rng)
