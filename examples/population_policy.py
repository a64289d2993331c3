"""A user's population policy: phones on home Wi-Fi in the evening, each at its own time.

Each phone's owner comes home at a usual time of their own (drawn once per
phone, uniform between ``arrive_from_h`` and ``arrive_to_h``), give or take
up to ``jitter_min`` minutes each day, and the phone stays on the home
Wi-Fi for an exponential stretch of mean ``stay_h`` hours. Written for a
whole group at once (netfl.policies.PopulationPolicy): every method answers
for an array of devices, so it runs at a million phones in the array form
of the engine as well as with every phone an actor, with the same world
for one seed.

Used by ``examples/population_policy.yaml``::

    availability: {policy: population_policy.py:EveningWifi, arrive_from_h: 17, arrive_to_h: 20, stay_h: 4}
"""

from __future__ import annotations

import numpy as np
from pydantic import Field, model_validator

from netfl.policies import PolicyParams, PopulationPolicy

HOUR, DAY = 3600.0, 86400.0


class EveningWifi(PopulationPolicy):
    """Online on home Wi-Fi from a phone's own evening arrival for an exponential stay."""

    class Params(PolicyParams):
        arrive_from_h: float = Field(17.0, gt=0, lt=24, description="earliest usual arrival, hours after midnight")
        arrive_to_h: float = Field(20.0, gt=0, lt=24, description="latest usual arrival")
        jitter_min: float = Field(30.0, ge=0, description="a day's arrival moves by up to this many minutes")
        stay_h: float = Field(4.0, gt=0, description="mean time on the Wi-Fi, hours")

        @model_validator(mode="after")
        def _arrivals_inside_the_day(self):
            if not self.arrive_from_h <= self.arrive_to_h:
                raise ValueError("arrive_from_h must not be after arrive_to_h")
            if not self.jitter_min / 60 < min(self.arrive_from_h, 24 - self.arrive_to_h):
                raise ValueError("jitter_min must keep every arrival within its day")
            return self

    def start(self, devices):
        p = self.params
        # each phone's first draw: its owner's usual arrival (kept for every day)
        self.usual = HOUR * (p.arrive_from_h + (p.arrive_to_h - p.arrive_from_h) * self.uniform(devices))
        self.day = np.zeros(len(devices))  # each phone's next (or current) evening
        online = np.zeros(len(devices), dtype=bool)  # the day starts at midnight, everyone away
        return online, self.arrival(devices)

    def next_change(self, devices, at, online):
        out = np.empty(len(devices))
        home, away = np.flatnonzero(online), np.flatnonzero(~online)
        out[home] = at[home] + self.exponential(devices[home], self.params.stay_h * HOUR)  # just arrived
        self.day[devices[away]] += 1  # just left: the next evening, or a later one if the stay ran past it
        missed = away
        while missed.size:
            out[missed] = self.arrival(devices[missed])
            missed = missed[out[missed] <= at[missed]]
            self.day[devices[missed]] += 1
        return out

    def arrival(self, devices):
        """Each phone's arrival on its current evening (one draw: that day's jitter)."""
        jitter = self.params.jitter_min * 60 * (2 * self.uniform(devices) - 1)
        return self.day[devices] * DAY + self.usual[devices] + jitter
