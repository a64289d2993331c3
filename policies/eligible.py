"""Production FL's eligibility rule as a policy made of other policies (idle, Wi-Fi) and the charger.

Its components are named like any policy (``{policy: daily, ...}``) and
looked up in :mod:`netfl.policies.catalog`.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from pydantic import Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from netfl.component_spec import PolicySpec
from netfl.errors import PolicyError
from netfl.policies.base import DeviceInfo, DeviceState, PolicyParams, SessionPolicy
from netfl.policies.catalog import BUILTIN_POLICIES, build_policy, check_spec, continuous_builtins
from netfl.policies.participation import nested_validation_error
from netfl.policies.user_script import is_user_reference


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


class Eligible(SessionPolicy):
    """Production FL's eligibility rule: idle, charging and on unmetered Wi-Fi.

    Devices train only when all three hold (Bonawitz et al., MLSys 2019,
    section 2; Yang et al. 2018, Gboard), which is why production
    availability peaks at night. ``charging`` reads the device's battery
    state (set by ``battery.charging``; ``charging: false`` ignores it, e.g.
    for mains-powered devices); ``idle`` and ``wifi`` are component session
    policies, e.g. ``{policy: sessions, on: ..., off: ...}``, ``{policy:
    daily, ...}`` or ``{policy: diurnal, ...}``, omitted meaning always.
    Each component draws from its own child generator, so one never shifts
    another's draws. Do not use this as a charging schedule: it reads the
    charger state itself.
    """

    class Params(PolicyParams):
        charging: bool = Field(True, description="require the charger to be plugged in")
        idle: NestedPolicy | None = Field(None, description="when the user leaves the device idle")
        wifi: NestedPolicy | None = Field(None, description="when the device is on unmetered Wi-Fi")

    def __init__(self, params: PolicyParams, device: DeviceInfo, rng: np.random.Generator):
        super().__init__(params, device, rng)

        self.components: dict[str, SessionPolicy] = {}
        for name, child_rng in zip(("idle", "wifi"), rng.spawn(2)):
            spec = getattr(params, name)
            if spec is None:
                continue
            component = build_policy(spec, device, child_rng)
            if not isinstance(component, SessionPolicy):
                raise PolicyError(
                    f"eligible.{name}: {spec.policy!r} is a per-round policy; a component must be continuous-time"
                )
            self.components[name] = component

    @classmethod
    def check(cls, params: PolicyParams, base_dir: Path) -> list[tuple[str, str]]:
        """The components in full: a user's class is only loadable once the topology's folder is known."""
        return [
            (f".{name}{path}", msg)
            for name in ("idle", "wifi")
            if getattr(params, name) is not None
            for path, msg in check_spec(getattr(params, name), base_dir, continuous_only=True)
        ]

    def online(self, now: float, state: DeviceState) -> bool:
        answers = [c.online(now, state) for c in self.components.values()]  # ask all: each keeps its own clock
        return (state.charging or not self.params.charging) and all(answers)

    def next_wakeup(self, now: float) -> float:
        return min((c.next_wakeup(now) for c in self.components.values()), default=math.inf)
