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

The ``phone`` preset (``usage: phone``) is a smartphone fleet's day,
restated from published measurements (not fitted to one trace):

* screen time and its spread: the owners of a fleet differ by an order of
  magnitude (Falaki et al., "Diversity in Smartphone Usage", MobiSys 2010:
  daily interaction from about half an hour to over 8 hours across users,
  10 to 200 sessions a day). Average daily screen time lies between 2.4 h
  in about 76 sessions (dscout, "Mobile Touches", 2016; its heaviest tenth
  of users 3.75 h in 132 sessions) and about 4.7 h in about 69 sessions of
  about 4 minutes (Strategy Analytics, 2016). The preset: a diurnal chain
  whose hourly probability of use is :data:`PHONE_USE_PROFILE` (local time:
  little at night, more at midday, most in the evening) for the median
  owner, sessions of about 3 minutes (``mixing`` 2.5 min), and per owner a
  log-normal factor on how often the phone is picked up (``rate_scale``,
  sigma 0.45) and on how long a session lasts (``length_scale``, sigma
  0.25), drawn once per device: 3.4 h of use a day on average (p10 1.7 h,
  median 3.2 h, p90 5.4 h; 2 000 phones, benchmarks/phone_day.py) in about
  65 sessions of about 3 minutes;
* power: 2 W in use, on top of the idle draw -- an assumption at the high
  end of the measured range, not a measured average: Carroll & Heiser ("An
  Analysis of Power Consumption in a Smartphone", USENIX ATC 2010) measured
  about 0.3 to 1.1 W across usage scenarios on a 2008 phone (an Openmoko
  Freerunner), the display and the SoC dominating; their "The Systems
  Hacker's Guide to the Galaxy: Energy Usage in a Modern Smartphone" (APSys
  2013) measures a Galaxy S III the same way.

A full 55 kJ phone then spends about 23 kJ on its median owner's use over
a day, about 39 kJ on a heavy user's (p90), and some 4 kJ standing by: with
batteries faded by age (``battery.health``, e.g. ``{uniform: [0.7, 1.0]}``,
netfl/registry/device_params.py) and a nightly charger, about one phone in
ten reaches 21:00 below 30 %, as users who plug in at every level of charge
report (Ferreira et al., "Understanding Human-Smartphone Concerns: A Study
of Battery Life", Pervasive 2011). The split of that drain is the preset's
known gap: standing by is about 15 % of its day's drain, where Chen et al.
("Smartphone Energy Drain in the Wild: Analysis and Implications",
SIGMETRICS 2015; 1 520 phones) find 45.9 % of the daily drain with the
screen off; the preset puts more of the drain in use than real fleets do.
"""

from __future__ import annotations

from typing import Any

#: P(in use) by local hour for the median owner, 00:00-01:00 first: night 2 %, morning 10-15 %, midday 20 %, evening
#: 25 % (3.2 hours a day).
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
        "sessions": {
            "policy": "diurnal",
            "profile": list(PHONE_USE_PROFILE),
            "mixing": "2.5min",
            "rate_scale": {"lognormal": {"median": 1.0, "sigma": 0.45}},  # light and heavy users (see above)
            "length_scale": {"lognormal": {"median": 1.0, "sigma": 0.25}},
        },
        "power": 2.0,
    },
}

__all__ = ["PHONE_USE_PROFILE", "PRESETS"]
