"""Policies by name: the lookup every part of netfl uses to turn a ``policy:`` value into a class.

:data:`BUILTIN_POLICIES` is filled by :mod:`netfl.policies.builtin` when the
package is imported (every import of a ``netfl.policies`` module imports the
package first, so it is never seen empty). Policies that hold other policies
(:class:`~netfl.policies.eligible.Eligible`) look their components up here,
which is why the table lives apart from the modules that define policies.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from netfl.errors import PolicyError
from netfl.policies.base import AvailabilityPolicy, DeviceInfo, SessionPolicy
from netfl.policies.population import POPULATION_MODELS, PopulationModel, build_population_model
from netfl.policies.rows import PopulationRow
from netfl.policies.user_script import is_user_reference, load_user_policy
from netfl.problems import describe_validation_error

__all__ = [
    "BUILTIN_POLICIES",
    "build_policy",
    "check_spec",
    "continuous_builtins",
    "policy_class",
    "policy_label",
    "population_model",
    "supports_population",
]

#: Built-in policies by the name a topology gives, in listing order.
BUILTIN_POLICIES: dict[str, type[AvailabilityPolicy]] = {}


def continuous_builtins() -> list[str]:
    """The built-ins that answer in continuous time (usable as chargers and as components)."""
    return [name for name, cls in BUILTIN_POLICIES.items() if issubclass(cls, SessionPolicy)]


def policy_label(policy: AvailabilityPolicy) -> str:
    """How the event log names a policy (the cause ``policy:<label>`` of the offline and dropout it causes): a
    built-in by its topology name (``diurnal``), a user's class by its file and name (``my_policies.py:Nightly``),
    a policy built in code by its class."""
    path, name = getattr(policy, "_path", None), getattr(policy, "_name", None)  # a user's script, as loaded
    if path is not None and name is not None:
        return f"{Path(path).name}:{name}"
    label = getattr(policy, "label", None)  # the array form's view of a group's built-in
    if isinstance(label, str):
        return label
    builtin = next((key for key, cls in BUILTIN_POLICIES.items() if type(policy) is cls), None)
    return builtin or type(policy).__qualname__


def policy_class(name: str, base_dir: Path | None = None) -> type[AvailabilityPolicy]:
    """The class a policy name refers to; PolicyError says what is accepted."""
    if is_user_reference(name):
        return load_user_policy(name, base_dir or Path.cwd())
    try:
        return BUILTIN_POLICIES[name]
    except KeyError:
        raise PolicyError(
            f"unknown policy {name!r}; built-ins: {', '.join(BUILTIN_POLICIES)}; "
            "or a class of yours as path/to/file.py:ClassName"
        ) from None


def check_spec(
    spec: Any, base_dir: Path | None, *, continuous_only: bool = False, devices: range | None = None
) -> list[tuple[str, str]]:
    """Problems with a policy spec as (sub-path, message) pairs, empty when valid: its name, its
    parameters and the policy's own :meth:`~AvailabilityPolicy.check` (files, nested user policies), and, given
    the scenario indices of the ``devices`` it is for, :meth:`~AvailabilityPolicy.check_devices`."""
    try:
        cls = policy_class(spec.policy, base_dir)
    except PolicyError as exc:
        return [(".policy", str(exc))]
    if continuous_only and not issubclass(cls, SessionPolicy):
        return [
            (
                ".policy",
                f"{spec.policy!r} is a per-round policy; this needs a continuous-time one "
                "(e.g. daily, sessions, diurnal, trace_csv)",
            )
        ]
    try:
        params = cls.Params.model_validate(spec.params)
    except ValidationError as exc:
        out = []
        for err in exc.errors():
            path, msg = describe_validation_error(err, cls.Params)
            out.append(("." + path if path else "", msg))
        return out
    problems = cls.check(params, base_dir or Path.cwd())
    if devices is not None and not problems:
        problems = cls.check_devices(params, base_dir or Path.cwd(), devices)
    return problems


def build_policy(spec: Any, device: DeviceInfo, rng: np.random.Generator) -> AvailabilityPolicy:
    """The policy ``spec`` names, for ``device``, drawing from ``rng`` only."""
    cls = policy_class(spec.policy, device.base_dir)
    try:
        params = cls.Params.model_validate(spec.params)
    except ValidationError as exc:  # validation checks this first; a direct caller gets a message, not a traceback
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'parameters'}: {e['msg']}" for e in exc.errors())
        raise PolicyError(f"policy {spec.policy!r}: {problems}") from None
    return cls(params, device, rng)


def supports_population(spec: Any, base_dir: Path | None = None) -> bool:
    """Whether a policy has a population form: ``spec`` is a topology's policy (``.policy`` and ``.params``: the
    answer for those parameters -- ``eligible`` has one only when its components have), or a built-in's name.

    A user's class has one when it is a population policy (:mod:`netfl.policies.population_policy`); a spec
    that does not load or validate has none (the checks report why).
    """
    if isinstance(spec, str):
        return spec in POPULATION_MODELS
    try:
        cls = policy_class(spec.policy, base_dir)
        params = cls.Params.model_validate(spec.params)
    except (PolicyError, ValidationError):
        return False
    return issubclass(cls, PopulationRow) and cls.population_form(params, base_dir)


def population_model(
    spec: Any, n: int, key: int, label_mix: np.ndarray, seed: int, *, base_dir: Path | None = None, first: int = 0
) -> PopulationModel:
    """The population model of the policy ``spec`` names (it must have one: :func:`supports_population`) for a
    group of ``n`` devices, the first of which is device ``first`` of the scenario; the rest as
    :func:`~netfl.policies.population.build_population_model`."""
    params = policy_class(spec.policy, base_dir).Params.model_validate(spec.params)
    model = spec.policy if spec.policy in POPULATION_MODELS else population_class(spec, base_dir)
    return build_population_model(model, params, n, key, label_mix, seed, base_dir=base_dir, first=first)


def population_class(spec: Any, base_dir: Path | None = None) -> type[PopulationModel]:
    """The population model class of the policy ``spec`` names (it must have one: :func:`supports_population`)."""
    if spec.policy in POPULATION_MODELS:
        return POPULATION_MODELS[spec.policy]
    return policy_class(spec.policy, base_dir).population  # type: ignore[attr-defined]
