"""Production FL's eligibility rule as a policy made of other policies (idle, Wi-Fi) and the charger.

Its components are named like any policy (``{policy: daily, ...}``) and
looked up in :mod:`netfl.policies.catalog`. When every component has a
population form (the built-ins, a user's population policy), a device group's
``eligible`` is one population model (:class:`EligibleModel`) whose state is
the AND of its components' models, and a device's policy is its row; a user's
per-device class among the components keeps the per-device composite.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from netfl import keyed_random
from netfl.component_spec import PolicySpec
from netfl.errors import PolicyError
from netfl.policies.base import AvailabilityPolicy, DeviceInfo, DeviceState, PolicyParams, SessionPolicy
from netfl.policies.catalog import (
    BUILTIN_POLICIES,
    build_policy,
    check_spec,
    continuous_builtins,
    policy_class,
    population_model,
    supports_population,
)
from netfl.policies.participation import nested_validation_error
from netfl.policies.population import FlipHook, PopulationModel
from netfl.policies.rows import SessionRow
from netfl.policies.user_script import is_user_reference

COMPONENTS = ("idle", "wifi")


class NestedPolicy(PolicySpec):
    """A component policy inside another's parameters: ``{policy: daily, start: ..., end: ...}``.

    Built-ins are checked here, so errors carry their full path (e.g.
    ``devices[0].availability.wifi.on``). A user's class
    (``path/to/file.py:Class``) is checked by :meth:`Eligible.check`, because
    its path is relative to the topology file, unknown to this model.
    """

    @model_validator(mode="after")
    def _check(self):
        if is_user_reference(self.policy):
            return self
        cls = BUILTIN_POLICIES.get(self.policy)
        continuous = continuous_builtins()
        problem = (
            f"unknown policy {self.policy!r}; continuous-time built-ins: {', '.join(continuous)}; "
            f"or a class of yours as path/to/file.py:ClassName"
            if cls is None
            else f"{self.policy!r} is a per-round policy; a component must be continuous-time ({', '.join(continuous)})"
            if not issubclass(cls, SessionPolicy)
            else None
        )
        if problem is not None:
            raise ValidationError.from_exception_data(
                "NestedPolicy",
                [{"type": PydanticCustomError("policy", problem), "loc": ("policy",), "input": self.policy}],
            )
        try:
            cls.Params.model_validate(self.params)
        except ValidationError as exc:
            raise nested_validation_error(exc, cls.Params, "NestedPolicy") from None
        return self


class EligibleModel(PopulationModel):
    """``eligible`` for a device group: online while every component is (idle AND on Wi-Fi), each component a
    population model of its own, keyed from the group's key and its name.

    A device's ``change`` is the next change of any of its components: the AND may change there, and the
    device is re-evaluated then (its state flips, and ``on_flip`` sees it, only if the AND did change), so the
    cost is one step per component change, as with a device's components asked one by one, and never a search
    ahead for a change that may never come.

    The charger is the engine's: when ``requires_charging`` (``charging: true``), a device is eligible only
    while ``state`` AND its charger is plugged in; the engine ANDs the two and re-evaluates at charger changes.
    """

    placed = True  # its components may read files (traces) or be a user's (relative to the topology)

    def __init__(
        self,
        params: Any,
        n: int,
        key: int,
        label_mix: np.ndarray,
        seed: int,
        *,
        base_dir: Path | None = None,
        first: int = 0,
    ):
        super().__init__(n, key, params)
        self.requires_charging: bool = params.charging
        self.components: dict[str, PopulationModel] = {
            name: population_model(
                getattr(params, name),
                n,
                keyed_random.child_key(key, name),
                label_mix,
                seed,
                base_dir=base_dir,
                first=first,
            )
            for name in COMPONENTS
            if getattr(params, name) is not None
        }
        everyone = np.arange(n)
        self.state[:] = self._all_on(everyone)
        self.change[:] = self._next_change(everyone, np.zeros(n))

    def _all_on(self, devices: np.ndarray) -> np.ndarray:
        on = np.ones(len(devices), dtype=bool)
        for component in self.components.values():
            on &= component.state[devices]
        return on

    def flip(self, due: np.ndarray, on_flip: FlipHook | None = None) -> None:
        """Bring the components of ``due`` to their change and flip the devices whose AND changed."""
        at = self.change[due]
        for component in self.components.values():
            component.advance_rows(due, at)
        flipped = np.flatnonzero(self._all_on(due) != self.state[due])
        if flipped.size:
            devices = due[flipped]
            if on_flip is not None:
                on_flip(devices, self.since[devices], at[flipped], self.state[devices])
            self.state[devices] = ~self.state[devices]
            self.since[devices] = at[flipped]
        self.change[due] = self._next_change(due, at)

    def _next_change(self, due: np.ndarray, at: np.ndarray) -> np.ndarray:
        out = np.full(len(due), math.inf)
        for component in self.components.values():
            np.minimum(out, component.change[due], out=out)
        return out


class Eligible(SessionRow):
    """Production FL's eligibility rule: idle, charging and on unmetered Wi-Fi.

    Devices train only when all three hold (Bonawitz et al., MLSys 2019,
    section 2; Yang et al. 2018, Gboard), which is why production
    availability peaks at night. ``charging`` reads the device's battery
    state (set by ``battery.charging``; ``charging: false`` ignores it, e.g.
    for mains-powered devices); ``idle`` and ``wifi`` are component session
    policies, e.g. ``{policy: sessions, on: ..., off: ...}``, ``{policy:
    daily, ...}`` or ``{policy: diurnal, ...}``, omitted meaning always.
    Each component draws from its own stream, so one never shifts
    another's draws. Do not use this as a charging schedule: it reads the
    charger state itself.
    """

    population = EligibleModel

    class Params(PolicyParams):
        charging: bool = Field(True, description="require the charger to be plugged in")
        idle: NestedPolicy | None = Field(None, description="when the user leaves the device idle")
        wifi: NestedPolicy | None = Field(None, description="when the device is on unmetered Wi-Fi")

    def __init__(self, params: PolicyParams, device: DeviceInfo, rng: np.random.Generator):
        if self.population_form(params, device.base_dir):
            super().__init__(params, device, rng)  # a row of a model of one device
            return
        AvailabilityPolicy.__init__(self, params, device, rng)  # a user's per-device class among the components
        self.model = None  # type: ignore[assignment]
        self._components: dict[str, SessionPolicy] = {}
        for name, child_rng in zip(COMPONENTS, rng.spawn(2)):
            spec = getattr(params, name)
            if spec is None:
                continue
            component = build_policy(spec, device, child_rng)
            if not isinstance(component, SessionPolicy):
                raise PolicyError(
                    f"eligible.{name}: {spec.policy!r} is a per-round policy; a component must be continuous-time"
                )
            self._components[name] = component

    @classmethod
    def population_form(cls, params: PolicyParams, base_dir: Path | None) -> bool:
        """A population model when every component has one; a user's per-device class keeps the composite."""
        return all(supports_population(getattr(params, name), base_dir) for name in COMPONENTS if getattr(params, name))

    @classmethod
    def check(cls, params: PolicyParams, base_dir: Path) -> list[tuple[str, str]]:
        """The components in full: a user's class is only loadable once the topology's folder is known."""
        return [
            (f".{name}{path}", msg)
            for name in COMPONENTS
            if getattr(params, name) is not None
            for path, msg in check_spec(getattr(params, name), base_dir, continuous_only=True)
        ]

    @classmethod
    def check_devices(cls, params: PolicyParams, base_dir: Path, devices: range) -> list[tuple[str, str]]:
        """Each component's own device checks (a log set or trace that lists too few of the group's devices)."""
        return [
            (f".{name}{path}", msg)
            for name in COMPONENTS
            if getattr(params, name) is not None
            for path, msg in check_spec(getattr(params, name), base_dir, continuous_only=True, devices=devices)
        ]

    @property
    def components(self) -> dict[str, SessionPolicy]:
        """Each component's policy for this device (of a model: the row of the component's model)."""
        if self.model is None:
            return self._components
        base_dir = self.device.base_dir if self.device is not None else None
        return {
            name: policy_class(getattr(self.params, name).policy, base_dir).row_of(model, self.row)  # type: ignore[attr-defined]
            for name, model in self.model.components.items()  # type: ignore[attr-defined]
        }

    def online(self, now: float, state: DeviceState) -> bool:
        if self.model is not None:
            on = self._state_at(now)
        else:
            on = all([c.online(now, state) for c in self._components.values()])  # ask all: each keeps its clock
        return (state.charging or not self.params.charging) and on

    def next_wakeup(self, now: float) -> float:
        if self.model is not None:
            return super().next_wakeup(now)
        return min((c.next_wakeup(now) for c in self._components.values()), default=math.inf)
