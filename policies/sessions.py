"""Continuous-time availability: always, sessions, daily windows, diurnal profiles.

These classes declare each policy's parameters and meaning; its behaviour is
implemented once, by its population model (:mod:`netfl.policies.population`),
of which a device's policy is one row (:mod:`netfl.policies.rows`). Each
model draws a device's next duration only when simulated time reaches the end
of the current one, from a stream keyed by (seed, group, device, draw
number), so the intervals depend on the seed alone and not on how often or
when the engine asks. Time 0 is the start of the simulation and, for the
clock-based policies (``daily``, ``diurnal``), midnight of day 0 plus their
``time_zone_offset`` (local time minus simulated time: with ``8h``,
simulated 0 is 08:00 local): one for the group, or drawn per device
(``{uniform: [-5h, 3h]}``, ``{choice: {values: [-5h, 1h], weights: [3, 1]}}``:
:mod:`netfl.policies.per_device`).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Literal

from pydantic import Field, PlainValidator, model_validator

from netfl.distributions import Distribution, parse_duration
from netfl.policies.base import PolicyParams
from netfl.policies.per_device import PerDeviceScale, PerDeviceTime
from netfl.policies.population import DAY, HOUR, AlwaysModel, DailyModel, DiurnalModel, SessionsModel
from netfl.policies.rows import SessionRow
from netfl.units import Seconds, parse_quantity

__all__ = [
    "Duration",
    "parse_duration",
    "ClockTime",
    "ClockParams",
    "Always",
    "OnOff",
    "Daily",
    "Diurnal",
    "PRODUCTION_PROFILE",
    "HOUR",
    "DAY",
]


Duration = Annotated[Distribution, PlainValidator(parse_duration)]


class Always(SessionRow):
    """Always online: a mains-powered, always-connected device (battery permitting)."""

    population = AlwaysModel


class OnOff(SessionRow):
    """Online and offline sessions alternate, their lengths drawn from ``on`` and ``off``.

    An alternating renewal process: the standard model of device churn in
    P2P and mobile measurement studies, with exponential (memoryless),
    lognormal or Weibull session lengths. The long-run online fraction is
    ``mean(on) / (mean(on) + mean(off))``.

    Start: online with that probability, then a fresh full duration of the
    drawn state. This is exact for exponential durations (memoryless); for
    others the exact stationary start would draw the *residual* of a
    length-biased session, so the first session is slightly off (shorter on
    average for heavy tails) -- a transient that lasts one session.

    Heterogeneous devices: a device's on durations are multiplied by its
    ``length_scale`` and its off gaps divided by its ``rate_scale``, each drawn
    once per device (:mod:`netfl.policies.per_device`).
    """

    population = SessionsModel

    class Params(PolicyParams):
        on: Duration = Field(description="length of an online session")
        off: Duration = Field(description="length of an offline gap")
        rate_scale: PerDeviceScale = Field(
            Distribution("constant", (1.0,)),
            description="per-device multiplier of the rate of coming online (off gaps divided by it)",
        )
        length_scale: PerDeviceScale = Field(
            Distribution("constant", (1.0,)), description="per-device multiplier of an online session's length"
        )


# ------------------------------------------------------------ time of day

_CLOCK = re.compile(r"^\s*(\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d+)?))?\s*$")


def _parse_clock(value: object) -> float:
    """Seconds after midnight from "HH:MM", "HH:MM:SS" or a duration with a unit ("22h")."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ValueError(
            f'write the time of day in quotes, e.g. "22:00" (YAML reads an unquoted 22:00 as the '
            f"number 1320); got {value!r}"
        )
    if isinstance(value, str):
        match = _CLOCK.match(value)
        if match:
            h, m, s = int(match.group(1)), int(match.group(2)), float(match.group(3) or 0)
            if m >= 60 or s >= 60 or h > 24 or (h == 24 and (m or s)):
                raise ValueError(f"{value!r} is not a time of day (00:00 to 24:00)")
            return (h * HOUR + m * 60 + s) % DAY
        try:
            seconds = parse_quantity(value, "time")
        except ValueError:
            seconds = math.nan
        if 0 <= seconds <= DAY:
            return seconds % DAY
    raise ValueError(f'expected a time of day such as "22:00" or "07:30:00", got {value!r}')


ClockTime = Annotated[float, PlainValidator(_parse_clock)]
"""Seconds after midnight, written "HH:MM" (quoted in YAML)."""


class ClockParams(PolicyParams):
    """What every clock-based policy shares: which local time simulated time 0 is."""

    time_zone_offset: PerDeviceTime = Field(
        Distribution("constant", (0.0,)),
        description="local time minus simulated time (8h: simulated 0 is 08:00); per device: {uniform: [-5h, 3h]}, "
        "{choice: [-5h, 0h, 1h]} or {choice: {values: [...], weights: [...]}}",
    )


class Daily(SessionRow):
    """Online inside a daily window ``[start, end)`` that may wrap past midnight.

    For availability ("only in the evening") and for charging schedules
    (phones charge overnight: ``start: "22:00", end: "07:00"``). With
    ``jitter`` each day's start and end move by independent uniform draws
    in ``[-jitter, +jitter]``, drawn day by day in order (start, then end).
    Jitter must stay below half the window and half the gap so that days
    never overlap. ``start`` and ``end`` are local times: ``time_zone_offset``
    (local minus simulated) places them on the simulated clock, as for
    :class:`Diurnal`.
    """

    population = DailyModel

    class Params(ClockParams):
        start: ClockTime = Field(description='window opens, "HH:MM"')
        end: ClockTime = Field(description='window closes, "HH:MM"; before start means the next day')
        jitter: Seconds = Field(0.0, ge=0, description="uniform +- shift of each day's start and end")

        @model_validator(mode="after")
        def _window_fits(self):
            length = (self.end - self.start) % DAY
            if length == 0:
                raise ValueError(
                    "start and end are the same time of day; for a device that is always online use policy: always"
                )
            if 2 * self.jitter >= min(length, DAY - length):
                raise ValueError(
                    f"jitter ({self.jitter:g}s) must be less than half the window "
                    f"({length:g}s) and half the gap ({DAY - length:g}s)"
                )
            return self


# --------------------------------------------------------- diurnal profile

# Availability by hour of day for the "production" preset: a smooth cosine
# between 0.40 at 03:00 and 0.10 at 15:00 (local time), evaluated at each
# hour's midpoint -- about a 4x swing between the night peak and the daytime
# trough. Production FL counts devices that are idle, charging and on Wi-Fi,
# which peak at night (Bonawitz et al., "Towards Federated Learning at Scale:
# System Design", MLSys 2019, device availability over the day; Yang et al.
# 2018, Gboard). The levels are illustrative, not a fit to a trace.
PRODUCTION_PROFILE: tuple[float, ...] = tuple(
    round(0.25 + 0.15 * math.cos(2 * math.pi * (h + 0.5 - 3) / 24), 3) for h in range(24)
)

Probability = Annotated[float, Field(ge=0, le=1)]


class Diurnal(SessionRow):
    """Availability that follows a 24-hour profile: ``P(online during hour h) = profile[h]``.

    A continuous-time two-state Markov chain whose rates are constant within
    each hour: ``lambda_on(h) = profile[h] / mixing``, ``lambda_off(h) =
    (1 - profile[h]) / mixing``. Its stationary probability within hour h is
    ``profile[h]`` and it forgets its state in about ``mixing`` (the mean time
    between redraws), so short mixing follows the profile closely while
    sessions stay realistic. Simulated exactly: an exponential holding time
    is drawn at the current hour's rate; if it crosses the hour boundary it
    is discarded and redrawn from the boundary at the next hour's rate
    (memorylessness makes this exact). The start state is drawn from the
    first hour's profile. ``time_zone_offset`` shifts local time: local =
    simulated + offset, so groups (or, drawn per device, devices) in different
    zones peak at different times. Without ``profile`` the ``production``
    preset applies.

    Heterogeneous devices: ``rate_scale`` (a) multiplies a device's rate of
    coming online and ``length_scale`` (s) the length of its stays online
    (its rate of leaving is divided by s), each drawn once per device; its
    probability of being online in hour h is then ``a s p / (a s p + 1 - p)``
    with ``p = profile[h]`` (about ``a s p`` for small p: a heavy user's
    screen time is a times as many sessions, s times as long).
    """

    population = DiurnalModel

    class Params(ClockParams):
        profile: Annotated[list[Probability], Field(min_length=24, max_length=24)] | None = Field(
            None, description="24 probabilities, hour 0 (00:00-01:00 local) first"
        )
        preset: Literal["production"] | None = Field(
            None, description="a built-in profile instead of profile; production when neither is given"
        )
        mixing: Seconds = Field(600.0, gt=0, description="mean time between state redraws")
        rate_scale: PerDeviceScale = Field(
            Distribution("constant", (1.0,)),
            description="per-device multiplier of the rate of coming online (of sessions begun per hour); "
            "e.g. {lognormal: {median: 1, sigma: 0.5}} for light and heavy users",
        )
        length_scale: PerDeviceScale = Field(
            Distribution("constant", (1.0,)),
            description="per-device multiplier of the time a stay online lasts (a session's length)",
        )

        @model_validator(mode="after")
        def _one_profile(self):
            if self.profile is not None and self.preset is not None:
                raise ValueError("give either profile or preset, not both")
            return self

        def hourly(self) -> tuple[float, ...]:
            return tuple(self.profile) if self.profile is not None else PRODUCTION_PROFILE
