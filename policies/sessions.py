"""Continuous-time availability: always, sessions, daily windows, diurnal profiles.

All policies here are *lazy by time*: each keeps a small state machine that
draws the next duration only when simulated time reaches the end of the
current one, so the intervals depend on the seed alone and not on how often
or when the engine asks (it asks at start, at every wake-up and at every
device state change, possibly several times at one instant). Time is assumed
never to go backwards; time 0 is the start of the simulation and, for the
clock-based policies (``daily``, ``diurnal``), midnight of day 0 plus their
shared ``time_zone_offset`` (local time minus simulated time: with ``8h``,
simulated 0 is 08:00 local).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, PlainValidator, model_validator

from netfl.distributions import Distribution, parse_duration
from netfl.policies.base import DeviceInfo, DeviceState, PolicyParams, SessionPolicy
from netfl.units import Seconds, parse_quantity

__all__ = ["Duration", "parse_duration", "ClockTime", "ClockParams", "OnOff", "Daily", "Diurnal", "PRODUCTION_PROFILE"]

HOUR = 3600.0
DAY = 24 * HOUR


Duration = Annotated[Distribution, PlainValidator(parse_duration)]


class Always(SessionPolicy):
    """Always online: a mains-powered, always-connected device (battery permitting)."""

    def online(self, now, state) -> bool:
        return True


class _Alternating:
    """Alternating on/off intervals whose lengths are drawn in time order as time passes."""

    def __init__(self, online: bool, end: float, draw: Callable[[bool], float]):
        self.state, self.end, self._draw = online, end, draw

    def at(self, now: float) -> bool:
        while now >= self.end:
            self.state = not self.state
            self.end += self._draw(self.state)
        return self.state


class OnOff(SessionPolicy):
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
    """

    class Params(PolicyParams):
        on: Duration = Field(description="length of an online session")
        off: Duration = Field(description="length of an offline gap")

    def __init__(self, params: PolicyParams, device: DeviceInfo, rng: np.random.Generator):
        super().__init__(params, device, rng)
        on, off = params.on, params.off
        self.stationary = on.mean / (on.mean + off.mean)
        online = bool(rng.random() < self.stationary)
        first = (on if online else off).draw(rng)
        self._chain = _Alternating(online, first, lambda state: (on if state else off).draw(rng))

    def online(self, now: float, state: DeviceState) -> bool:
        return self._chain.at(now)

    def next_wakeup(self, now: float) -> float:
        self._chain.at(now)
        return self._chain.end


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

    time_zone_offset: Seconds = Field(0.0, description="local time minus simulated time (8h: simulated 0 is 08:00)")


class Daily(SessionPolicy):
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

    def __init__(self, params: PolicyParams, device: DeviceInfo, rng: np.random.Generator):
        super().__init__(params, device, rng)
        self._length = (params.end - params.start) % DAY
        self._day = -1  # yesterday's window may still be open at time 0
        self._window = self._draw_window(self._day)

    def _draw_window(self, day: int) -> tuple[float, float]:
        j = self.params.jitter
        shift_start = float(self.rng.uniform(-j, j)) if j > 0 else 0.0
        shift_end = float(self.rng.uniform(-j, j)) if j > 0 else 0.0
        opens = day * DAY + window_start(self.params)
        return opens + shift_start, opens + self._length + shift_end

    def _advance(self, now: float) -> None:
        while now >= self._window[1]:  # day -1's window (or an earlier one) may not reach time 0
            self._day += 1
            self._window = self._draw_window(self._day)

    def online(self, now: float, state: DeviceState) -> bool:
        self._advance(now)
        return self._window[0] <= now

    def next_wakeup(self, now: float) -> float:
        self._advance(now)
        return self._window[0] if now < self._window[0] else self._window[1]


def window_start(params: Daily.Params) -> float:
    """Where day 0's window opens on the simulated clock: ``start`` local, the offset taken modulo a day (the
    windows repeat daily), so that day -1's window is the earliest that may still be open at time 0."""
    return params.start - params.time_zone_offset % DAY


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


class Diurnal(SessionPolicy):
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
    simulated + offset, so groups in different zones peak at different times.
    Without ``profile`` the ``production`` preset applies.
    """

    class Params(ClockParams):
        profile: Annotated[list[Probability], Field(min_length=24, max_length=24)] | None = Field(
            None, description="24 probabilities, hour 0 (00:00-01:00 local) first"
        )
        preset: Literal["production"] | None = Field(
            None, description="a built-in profile instead of profile; production when neither is given"
        )
        mixing: Seconds = Field(600.0, gt=0, description="mean time between state redraws")

        @model_validator(mode="after")
        def _one_profile(self):
            if self.profile is not None and self.preset is not None:
                raise ValueError("give either profile or preset, not both")
            return self

        def hourly(self) -> tuple[float, ...]:
            return tuple(self.profile) if self.profile is not None else PRODUCTION_PROFILE

    def __init__(self, params: PolicyParams, device: DeviceInfo, rng: np.random.Generator):
        super().__init__(params, device, rng)
        self.profile = np.asarray(params.hourly(), dtype=float)
        self._offset = params.time_zone_offset
        hour = math.floor(self._offset / HOUR)  # local hours since midnight of day 0, at time 0
        self._state = bool(rng.random() < self.profile[hour % 24])
        self._change, self._change_hour = self._next_change(0.0, hour, self._state)

    def _next_change(self, t: float, hour: int, online: bool) -> tuple[float, int]:
        """When (and in which local hour) the chain next leaves state ``online``, starting at ``t`` in ``hour``."""
        leave = (1.0 - self.profile) if online else self.profile
        if not leave.any():
            return math.inf, hour
        mixing = self.params.mixing
        while True:
            boundary = (hour + 1) * HOUR - self._offset
            rate = leave[hour % 24] / mixing
            if rate > 0:
                at = t + float(self.rng.exponential(1.0 / rate))
                if at < boundary:
                    return at, hour
            t, hour = boundary, hour + 1

    def _advance(self, now: float) -> None:
        while now >= self._change:
            self._state = not self._state
            self._change, self._change_hour = self._next_change(self._change, self._change_hour, self._state)

    def online(self, now: float, state: DeviceState) -> bool:
        self._advance(now)
        return self._state

    def next_wakeup(self, now: float) -> float:
        self._advance(now)
        return self._change
