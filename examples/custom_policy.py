"""A user-scripted availability policy: train only while plugged in at night.

Production FL (e.g. Gboard) trains on a phone only when it is idle, charging
and on unmetered Wi-Fi, which in practice means at night. This policy makes
a device available while its charger is plugged in *and* the local time is
inside a night window. "Battery above 30 %" is the battery's ``min_level``
in the topology: the engine tracks that threshold exactly (it wakes the
policy when the level crosses it, and never selects a device below it).

Used by ``examples/custom_policy.yaml``::

    availability: {policy: custom_policy.py:PluggedInAtNight, night_start_h: 22, night_end_h: 7}
"""

from __future__ import annotations

from pydantic import Field

from netfl.policies import PolicyParams, SessionPolicy

DAY_S = 86400.0


class PluggedInAtNight(SessionPolicy):
    class Params(PolicyParams):
        night_start_h: float = Field(22.0, ge=0, lt=24)
        night_end_h: float = Field(7.0, ge=0, lt=24)

    def _is_night(self, now: float) -> bool:
        hour = (now % DAY_S) / 3600.0
        start, end = self.params.night_start_h, self.params.night_end_h
        return start <= hour < end if start < end else (hour >= start or hour < end)

    def online(self, now, state) -> bool:
        # Asked at start, at each wake-up below, and whenever the charger is
        # plugged or unplugged or the battery crosses its min_level.
        return state.charging and self._is_night(now)

    def next_wakeup(self, now: float) -> float:
        """The next night boundary: the only change that happens by itself."""
        day = now - now % DAY_S
        boundaries = [
            day + h * 3600.0 + k * DAY_S for k in (0, 1) for h in (self.params.night_start_h, self.params.night_end_h)
        ]
        return min(b for b in boundaries if b > now)
