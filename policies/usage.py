"""A phone's own day: sessions of use (screen on, apps, calls) that draw their own power.

What empties a real phone by the evening is its owner, not federated
learning: with only FL work and a standby draw a battery barely moves over a
day. A device group's ``usage`` names when its devices are in use -- any
continuous-time built-in policy, one row per device of its population model,
so both forms of the engine draw the same sessions -- and the power they draw
meanwhile. A device in use is not idle: unless ``train_while_in_use``, it is
not asked to train, and work under way stops when a session begins (cause
``in_use``), as production FL trains only on idle devices. A session that
begins while the phone is off (battery empty) draws nothing: nobody uses a
dead phone.

The ``phone`` preset (``usage: phone``) is a typical smartphone day,
illustrative rather than fitted to a trace:

* when: a diurnal two-state chain whose hourly probability of being in use
  is :data:`PHONE_USE_PROFILE` (local time) -- little at night, more at midday
  and most in the evening; about 3.2 hours of use a day, in sessions of
  about 5 minutes (``mixing`` 4 min) -- the order of the daily screen-on time
  and the short, frequent sessions smartphone studies report (Falaki et al.,
  "Diversity in Smartphone Usage", MobiSys 2010; Böhmer et al., "Falling
  Asleep with Angry Birds, Facebook and Kindle", MobileHCI 2011);
* power: 2 W in use -- the order measured for a smartphone with the display
  lit and an application running (Carroll & Heiser, "An Analysis of Power
  Consumption in a Smartphone", USENIX ATC 2010), on top of the idle draw.

A full 55 kJ phone then spends about 23 kJ on its owner's use over a day and
some 4 kJ standing by, so that started full in the morning it reaches the
night at about half charge -- where the chargers of the ``daily`` policy take
over.
"""

from __future__ import annotations

from typing import Any

#: P(in use) by local hour, 00:00-01:00 first: night 2 %, morning 10-15 %, midday 20 %, evening 25 %.
PHONE_USE_PROFILE: tuple[float, ...] = (
    *(0.02,) * 7,  # 00-07
    0.10,  # 07-08
    *(0.15,) * 4,  # 08-12
    *(0.20,) * 2,  # 12-14
    *(0.15,) * 4,  # 14-18
    *(0.25,) * 5,  # 18-23
    0.10,  # 23-24
)

#: ``usage: phone``, as the mapping it stands for.
PRESETS: dict[str, dict[str, Any]] = {
    "phone": {
        "sessions": {"policy": "diurnal", "profile": list(PHONE_USE_PROFILE), "mixing": "4min"},
        "power": 2.0,
    },
}

__all__ = ["PHONE_USE_PROFILE", "PRESETS"]
