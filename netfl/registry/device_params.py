"""A device group's parameters that the engine reads as they were declared: the wireless channel of its link
(:class:`ChannelSpec`, ``devices[].link.channel``, read by :class:`netfl.sim.channel.Channel`) and its owner's use
(:class:`UsageSpec`, ``devices[].usage``, read by :class:`netfl.sim.device.availability.Usage` for a device that
works and by :class:`netfl.sim.idle_rows.IdleRows` for idle ones).

A field is the whole declaration: YAML key, unit (a :mod:`netfl.units` type), default, bounds, description. The
scenario's schema takes the class as the type of ``LinkSpec.channel``, the docs' table and the JSON schema are
generated from it, and the engine reads the same frozen object (a channel with the device's own distance, drawn from
``distance_m``, and its node's band; the use with the sessions' model built from ``sessions``), so nothing is copied
or renamed on the way. Here, below both the configuration
and the engine (``tests/config/test_layers.py``), because both read it.
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from netfl.component_spec import PolicySpec
from netfl.distributions import DistanceDistribution, Distribution, positive_distribution
from netfl.numbers import Strict
from netfl.registry.choices import ChannelKind
from netfl.units import BitsPerSecond, Bytes, Seconds, Watts

__all__ = ["MAX_SPECTRAL_EFFICIENCY", "ChannelSpec", "UsageSpec"]

#: bit/s/Hz an adaptive-rate channel reaches at most: LTE's top modulation and coding, CQI 15 (64-QAM, code rate
#: 948/1024), 3GPP TS 36.213 Table 7.2.3-1 (netfl/sim/channel.py says why a cap and gives other radios' values).
MAX_SPECTRAL_EFFICIENCY = 5.5547


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
