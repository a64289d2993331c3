"""A device group (``devices[]``): how many, how fast they train, the power they draw, their battery, when they
are online, their own use, and their link. The parts the engine reads are declared in
:mod:`netfl.registry.device_params`, below both."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from netfl.component_spec import PolicySpec
from netfl.numbers import Strict
from netfl.problems import one_of
from netfl.registry.device_params import BatterySpec, ComputeSpec, LinkSpec, LoggedLevelsSpec, PowerSpec, UsageSpec

__all__ = [
    "BatterySpec",
    "ComputeSpec",
    "DeviceGroupSpec",
    "LinkSpec",
    "LoggedLevelsSpec",
    "PowerSpec",
]


def _usage_preset(value: Any) -> Any:
    if isinstance(value, str):
        from netfl.policies.usage import PRESETS

        if value not in PRESETS:
            raise ValueError(
                f"unknown usage preset {value!r}; presets: {one_of(list(PRESETS))}, or a mapping of sessions and power"
            )
        return PRESETS[value]
    return value


class DeviceGroupSpec(Strict):
    group: str = Field(
        pattern=r"^[A-Za-z0-9_.-]+$", description="the group's name (letters, digits, _ . -); results are per group"
    )
    count: int = Field(gt=0, description="devices in the group")
    compute: ComputeSpec = Field(description="how fast the devices train (its table)")
    power: PowerSpec = Field(PowerSpec(), description="power drawn in each activity (its table)")
    battery: BatterySpec | None = Field(None, description="a battery (its table); mains powered if omitted")
    availability: PolicySpec = Field(
        PolicySpec(policy="always"),
        description="when a device is online: an availability policy and its parameters (netfl policies lists them)",
    )
    usage: Annotated[UsageSpec | None, BeforeValidator(_usage_preset)] = Field(
        None, description="the device's own use, drawing power (usage: phone, or sessions and power)"
    )
    link: LinkSpec = Field(description="the link to the server or to a node of network (its table)")
