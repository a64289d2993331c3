"""A device group's parameters that the engine reads as they were declared: its compute speed (:class:`ComputeSpec`,
``devices[].compute``), power (:class:`PowerSpec`, ``devices[].power``) and battery (:class:`BatterySpec`,
``devices[].battery``), read through the device table (:data:`DEVICE_COLUMNS`); its link (:class:`LinkSpec`,
``devices[].link``, read by :class:`netfl.sim.network.Attachments`), the link's wireless channel
(:class:`ChannelSpec`, ``devices[].link.channel``, read by :class:`netfl.sim.channel.Channel`) and its owner's use
(:class:`UsageSpec`, ``devices[].usage``, read by :class:`netfl.sim.device.availability.Usage` for a device that
works and by :class:`netfl.sim.idle_rows.IdleRows` for idle ones).

A field is the whole declaration: YAML key, unit (a :mod:`netfl.units` type), default, bounds, description. The
scenario's schema takes each class as the type of its key (``DeviceGroupSpec.power``, ``LinkSpec.channel``), the
docs' tables, the JSON schema and ``netfl validate``'s summary are generated from them, and the engine reads the
same frozen objects (a channel with the device's own distance, drawn from ``distance_m``, and its node's band; the
use with the sessions' model built from ``sessions``) or the device table's columns that :data:`DEVICE_COLUMNS`
draws from them, so nothing is copied or renamed on the way. Here, below both the configuration and the engine
(``tests/config/test_layers.py``), because both read it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from netfl.component_spec import PolicySpec
from netfl.distributions import (
    DistanceDistribution,
    Distribution,
    FlopsDistribution,
    FractionDistribution,
    RateDistribution,
    positive_distribution,
)
from netfl.numbers import Strict
from netfl.registry.choices import ChannelKind
from netfl.registry.network_params import SERVER
from netfl.units import BitsPerSecond, Bytes, Fraction, Joules, Seconds, Watts

__all__ = [
    "DEVICE_COLUMNS",
    "MAX_SPECTRAL_EFFICIENCY",
    "BatterySpec",
    "ChannelSpec",
    "Column",
    "ComputeSpec",
    "LinkSpec",
    "LoggedLevelsSpec",
    "PowerSpec",
    "UsageSpec",
]

#: bit/s/Hz an adaptive-rate channel reaches at most: LTE's top modulation and coding, CQI 15 (64-QAM, code rate
#: 948/1024), 3GPP TS 36.213 Table 7.2.3-1 (netfl/sim/channel.py says why a cap and gives other radios' values).
MAX_SPECTRAL_EFFICIENCY = 5.5547

#: Radio receive power when the scenario gives none: about half the uplink transmit power (receive chains draw
#: less than the power amplifier).
RECEIVE_TO_TRANSMIT_POWER = 0.5


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
    transmit: Watts = Field(0.2, ge=0, description="drawn while uploading, on top of idle")
    receive: Watts | None = Field(
        None, ge=0, description="drawn while downloading, on top of idle; half of transmit if omitted"
    )
    idle: Watts = Field(0.05, ge=0, description="drawn at all times")

    @property
    def receive_w(self) -> float:
        """Drawn while downloading, on top of idle: ``receive``, or half of ``transmit`` without it."""
        return self.receive if self.receive is not None else self.transmit * RECEIVE_TO_TRANSMIT_POWER


class LoggedLevelsSpec(Strict):
    """The battery's level taken from device-state logs' battery rows (FLASH's ``NN%``): between two logged levels
    it moves linearly (the log's slope is one more load, FL work's energy drawn on top); it starts at the first
    logged level and stays at the last (docs/device-logs.md). Scenario device n follows the log set's device n in
    file order, as ``device_logs`` replays it."""

    file: Path = Field(description="the logs: a FLASH .json, a .csv or .parquet table, or a folder of them")
    unlisted: Literal["refuse", "cycle"] = Field(
        "refuse", description="more devices than the logs hold: refused, or device n follows log device n mod count"
    )


class BatterySpec(Strict):
    """A battery; a device without one is mains powered and never empties.

    Default capacity 55 kJ: a 4000 mAh x 3.85 V phone battery (phones sold since about 2019 hold 3000 to
    5000 mAh, 42 to 69 kJ). ``health`` is the share of that capacity a device's battery still holds: a
    lithium-ion cell is rated to keep about 80 % after 500 full cycles (Apple's rating for iPhone batteries;
    about 1.5 years of daily charging), so a fleet of phones one to three years old is well described by
    ``health: {uniform: [0.7, 1.0]}``. Drawn once per device; the charge (``initial``, ``min_level``, the
    level logged) is a fraction of the faded capacity, as a phone's percentage is.
    """

    capacity: Joules = Field(55e3, gt=0, description="energy when full; 55 kJ is a 4000 mAh x 3.85 V phone battery")
    health: FractionDistribution | None = Field(
        None,
        description="share of capacity the battery still holds (fade with age), in (0, 1]; per device: "
        "{uniform: [0.7, 1.0]}; omitted: 1, as new",
    )
    initial: FractionDistribution = Field(
        Distribution("constant", (1.0,)), description="initial charge, fraction of capacity"
    )
    min_level: Fraction = Field(0.0, ge=0, le=1, description="at or below this fraction the device does not take part")
    charging: PolicySpec | None = Field(None, description="when the charger is plugged in: a continuous-time policy")
    charge_power: Watts = Field(10.0, gt=0, description="charger power; 10 W is a 5 V x 2 A USB charger")
    levels: LoggedLevelsSpec | None = Field(
        None,
        description="the level from device logs' battery rows, linear between them (its table; the idle draw, the "
        "owner's use and the charger's power are then 0: the log holds them); FL work drawn on top",
    )

    @property
    def not_applicable(self) -> tuple[str, ...]:
        """The keys that mean nothing with ``levels`` (refused where given, and not shown by ``netfl validate``):
        the battery starts at its first logged level, and what a charger gave is in the log."""
        return ("initial", "charge_power") if self.levels is not None else ()

    @model_validator(mode="after")
    def _levels_start_the_battery(self):
        given = [key for key in self.not_applicable if key in self.model_fields_set]
        if given:
            raise ValueError(
                f"{', '.join(given)}: not with levels (the battery starts at its first logged level, and the "
                "charge a charger gave is in the log); remove it"
            )
        return self

    @field_validator("health")
    @classmethod
    def _a_share(cls, d: Distribution | None):
        if d is not None and d.kind not in ("constant", "uniform", "choice") or d.support_min <= 0 or d.support_max > 1:
            raise ValueError(f"health must stay within (0, 1] (a constant, uniform or choice); got {d.describe()}")
        return d

    @field_validator("initial")
    @classmethod
    def _in_unit_interval(cls, d: Distribution):
        low = d.support_min
        high = max(d.params) if d.kind in ("constant", "uniform", "choice") else float("inf")
        if d.kind in ("normal", "lognormal") or low < 0 or high > 1:
            raise ValueError("initial must stay within [0, 1] (a constant, uniform or choice)")
        return d


class ChannelSpec(Strict):
    """A wireless uplink from the device to its access point (see netfl/sim/channel.py).

    Defaults: 0.2 W (23 dBm) transmit power, the maximum of an LTE handset;
    noise figure 7 dB; path loss 128.1 + 37.6 log10(d km) dB (3GPP TR 36.814).
    """

    kind: ChannelKind = Field("rayleigh", description="the fading: none (awgn), Rayleigh, or Rician (with rician_k)")
    distance_m: DistanceDistribution = Field(description="metres to the access point")
    tx_power: Watts = Field(0.2, gt=0, description="radiated power")
    shadowing_db: float = Field(0.0, ge=0, description="std of log-normal shadowing, drawn once per device")
    rician_k: float | None = Field(None, ge=0, description="Rician K factor (kind rician)")
    coherence: Seconds = Field(
        0.1, ge=1e-6, description="block-fading coherence time, at least 1 us (the channel is drawn once per block)"
    )
    noise_figure_db: float = Field(
        7.0, ge=0, description="noise figure in dB, on top of thermal noise of -174 dBm/Hz (3GPP TR 36.814: 7 dB)"
    )
    rate: BitsPerSecond | None = Field(
        None, gt=0, description="fixed transmission rate (outage => retransmit); adaptive Shannon rate if omitted"
    )
    packet_size: Bytes = Field(
        1500, gt=0, description="with a fixed rate: bytes per packet; a packet begun in an outage is sent again"
    )
    max_spectral_efficiency: float = Field(
        MAX_SPECTRAL_EFFICIENCY,
        gt=0,
        description="bit/s/Hz an adaptive rate reaches at most (the radio's top "
        "modulation and coding; 5.5547 is LTE's 64-QAM CQI 15, 7.4063 its 256-QAM; .inf: Shannon uncapped)",
    )

    @field_validator("distance_m")
    @classmethod
    def _positive(cls, d: Distribution):
        return positive_distribution(d)

    @model_validator(mode="after")
    def _k_for_rician(self):
        if self.kind == "rician" and self.rician_k is None:
            raise ValueError("kind rician needs rician_k (e.g. rician_k: 3)")
        if self.kind != "rician" and self.rician_k is not None:
            raise ValueError(f"rician_k applies to kind rician only (kind is {self.kind})")
        return self

    @property
    def packet_bits(self) -> float:
        """``packet_size`` in bits, as the engine counts a fixed-rate link's packets."""
        return 8.0 * self.packet_size


class LinkSpec(Strict):
    """The device's link: straight to the server (``uplink``/``downlink``), or to a node of ``network``."""

    # The engine reads the group's declaration as it is (World.links): its node, its latency and its channel; each
    # device's rates are its own, drawn from uplink and downlink into the device table.

    to: str | None = Field(None, description="an access point or relay of network.nodes; the server if omitted")
    uplink: RateDistribution | None = Field(None, description="bit/s of a fixed-rate (wired-like) link")
    downlink: RateDistribution | None = Field(None, description="bit/s; same as uplink if omitted")
    latency: Seconds = Field(0.0, ge=0, description="one-way, per transfer")
    channel: ChannelSpec | None = Field(
        None, description="a wireless channel to the access point `to`, instead of uplink (its table)"
    )

    @field_validator("uplink", "downlink")
    @classmethod
    def _positive(cls, d: Distribution | None):
        return None if d is None else positive_distribution(d)

    @model_validator(mode="after")
    def _rate_or_channel(self):
        if self.uplink is None and self.channel is None:
            raise ValueError("give uplink (a fixed rate) or channel (a wireless link to an access point)")
        if self.uplink is not None and self.channel is not None:
            raise ValueError("give either uplink or channel, not both")
        if self.channel is not None and self.to is None:
            raise ValueError("a wireless channel needs `to: <access point>` (a node of network.nodes)")
        return self

    @property
    def node(self) -> str:
        """The node the devices attach to: ``to``, or the server on a link without one."""
        return self.to or SERVER


class UsageSpec(Strict):
    """A device's own use (screen on, apps): sessions that draw their own power (netfl/policies/usage.py).

    ``usage: phone`` is the preset of a typical smartphone day; a mapping names the sessions (a continuous-time
    policy) and their power.
    """

    sessions: PolicySpec = Field(description="when the device is in use: a continuous-time policy (e.g. diurnal)")
    power: Watts = Field(gt=0, le=1e6, description="drawn while in use, on top of the idle draw")
    train_while_in_use: bool = Field(
        False,
        description="false: a device in use is not idle, so it is not asked to train and its work stops when a "
        "session begins (production FL trains on idle devices); true: use only draws power",
    )


@dataclass(frozen=True)
class Column:
    """One quantity of the engine's device table (:class:`netfl.sim.device_table.DeviceTable`): a float per device,
    read from the group's declaration. The table's attribute, its row's (``DeviceProfile``) and the building
    layer's draw (``netfl.assemble.world.device_table``) all follow from this line."""

    name: str  # the table's attribute; its suffix says the unit (compute_w: W, capacity_j: J)
    key: str  # where the group holds it, as the YAML path under devices[] (power.compute; a property of a spec too)
    absent: float = math.nan  # where the key's mapping or value is omitted (a group without a battery: mains)
    stream: str = ""  # a distribution is drawn per device from ("devices", group, stream); the key's last name if ""
    of: str = ""  # a fraction of this column (the initial charge: of the capacity)
    #: the YAML path of a per-device factor of the value (the capacity: its health), drawn per device from the
    #: keyed stream ("devices", group, the factor's last name) -- netfl.policies.per_device
    scaled_by: str = ""

    @property
    def stream_name(self) -> str:
        return self.stream or self.key.rsplit(".", 1)[-1]


#: The device table's quantities, in its order. A number is the group's, shared by its devices (held once, not per
#: device); a distribution is drawn per device from its own seeded stream, so a device's value depends only on the
#: seed, its group, the column and its position in the group.
DEVICE_COLUMNS: tuple[Column, ...] = (
    Column("flops_per_s", "compute.flops_per_s"),
    Column("compute_w", "power.compute"),
    Column("transmit_w", "power.transmit"),
    Column("receive_w", "power.receive_w"),
    Column("idle_w", "power.idle"),
    Column("capacity_j", "battery.capacity", absent=math.inf, scaled_by="battery.health"),  # inf: mains powered
    Column("initial_j", "battery.initial", absent=math.inf, stream="battery_initial", of="capacity_j"),
    Column("min_level", "battery.min_level", absent=0.0),
    Column("charge_w", "battery.charge_power", absent=0.0),
    Column("uplink_bps", "link.uplink"),  # nan: a wireless channel decides
    Column("downlink_bps", "link.downlink"),  # nan: the node's broadcast, the uplink or the default decides
    Column("distance_m", "link.channel.distance_m", stream="distance"),  # nan: a fixed-rate link
)
