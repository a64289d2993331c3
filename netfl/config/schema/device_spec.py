"""A device group (``devices[]``): how many, how fast they train, the power they draw, their battery, when they
are online, their own use, and their link."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator

from netfl.component_spec import PolicySpec
from netfl.distributions import (
    Distribution,
    FlopsDistribution,
    FractionDistribution,
    positive_distribution,
)
from netfl.numbers import Strict
from netfl.problems import one_of
from netfl.registry.device_params import LinkSpec, UsageSpec
from netfl.units import Fraction, Joules, Watts

__all__ = [
    "BatterySpec",
    "ComputeSpec",
    "DeviceGroupSpec",
    "LinkSpec",
    "PowerSpec",
]


class ComputeSpec(Strict):
    flops_per_s: FlopsDistribution = Field(description="sustained training speed, FLOP/s")

    @field_validator("flops_per_s")
    @classmethod
    def _positive(cls, d: Distribution):
        return positive_distribution(d)


class PowerSpec(Strict):
    """Electrical power drawn in each activity (on top of idle while busy).

    Defaults: 2 W while training (a phone SoC under sustained load), 0.2 W
    while transmitting (LTE uplink at most about 0.2 W), 50 mW idle.
    """

    compute: Watts = Field(2.0, ge=0, description="drawn while training, on top of idle")
    transmit: Watts = Field(0.2, ge=0, description="drawn while uploading, on top of idle; half of it while receiving")
    idle: Watts = Field(0.05, ge=0, description="drawn at all times")


class BatterySpec(Strict):
    """A battery; a device without one is mains powered and never empties.

    Default capacity 55 kJ: a 4000 mAh x 3.85 V phone battery.
    """

    capacity: Joules = Field(55e3, gt=0, description="energy when full; 55 kJ is a 4000 mAh x 3.85 V phone battery")
    initial: FractionDistribution = Field(
        Distribution("constant", (1.0,)), description="initial charge, fraction of capacity"
    )
    min_level: Fraction = Field(0.0, ge=0, le=1, description="at or below this fraction the device does not take part")
    charging: PolicySpec | None = Field(None, description="when the charger is plugged in: a continuous-time policy")
    charge_power: Watts = Field(10.0, gt=0, description="charger power; 10 W is a 5 V x 2 A USB charger")

    @field_validator("initial")
    @classmethod
    def _in_unit_interval(cls, d: Distribution):
        low = d.support_min
        high = max(d.params) if d.kind in ("constant", "uniform", "choice") else float("inf")
        if d.kind in ("normal", "lognormal") or low < 0 or high > 1:
            raise ValueError("initial must stay within [0, 1] (a constant, uniform or choice)")
        return d


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
