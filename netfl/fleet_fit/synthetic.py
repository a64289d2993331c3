"""A fleet of known parameters and the device logs it writes: for the fit's round trip, its docs and benchmark.

Each device's owner uses it by the ``diurnal`` chain (screen on = unlocked), it is on Wi-Fi by another
``diurnal`` chain (else 4G), and its charger follows the ``daily`` window with jitter -- netfl's own population
models, keyed from the seed, so the logs come from the very processes the fit estimates. The battery follows
the physics with the given powers (held at full on the charger, at empty), logged at every change of state,
when it fills, and every 15 minutes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from netfl import keyed_random
from netfl.fleet_logs.records import DeviceLog
from netfl.fleet_logs.states import BATTERY, CHARGER, G4, LOCK, NETWORK, SCREEN, WIFI
from netfl.policies.population import DailyModel, DiurnalModel
from netfl.policies.sessions import Daily, Diurnal
from netfl.policies.usage import PHONE_USE_PROFILE

__all__ = ["Owners", "LIGHT", "HEAVY", "fleet_logs"]

DAY = 86400.0
SAMPLE = 900.0


@dataclass(frozen=True)
class Owners:
    """A kind of owner and phone: the true parameters the fit should recover."""

    use_profile: tuple[float, ...] = PHONE_USE_PROFILE
    use_mixing: float = 240.0
    wifi_profile: tuple[float, ...] = (0.9,) * 7 + (0.5,) * 11 + (0.8,) * 6
    wifi_mixing: float = 1800.0
    start: str = "22:30"
    end: str = "07:00"
    jitter: float = 2700.0
    capacity: float = 55e3
    idle_power: float = 0.05
    use_power: float = 1.5
    charge_power: float = 10.0


LIGHT = Owners()
HEAVY = Owners(
    use_profile=tuple(min(0.6, 2.2 * p) for p in PHONE_USE_PROFILE),
    start="00:30",
    end="08:00",
    jitter=1800.0,
    use_power=2.0,
    charge_power=15.0,
)


def _flips(model, days: float) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    changes = []
    model.advance(days * DAY, lambda d, since, at, was: changes.append((d.copy(), at.copy(), ~was)))
    return changes


def _per_device(n: int, initial: np.ndarray, changes) -> list[tuple[list[float], list[bool]]]:
    out = [([0.0], [bool(s)]) for s in initial]
    for devices, at, state in changes:
        for d, t, s in zip(devices.tolist(), at.tolist(), state.tolist()):
            out[d][0].append(t)
            out[d][1].append(s)
    return out


def _group(owners: Owners, n: int, days: float, key: int):
    use = DiurnalModel(
        Diurnal.Params(profile=list(owners.use_profile), mixing=owners.use_mixing),
        n,
        keyed_random.child_key(key, "use"),
        None,
        0,
    )
    wifi = DiurnalModel(
        Diurnal.Params(profile=list(owners.wifi_profile), mixing=owners.wifi_mixing),
        n,
        keyed_random.child_key(key, "wifi"),
        None,
        0,
    )
    charger = DailyModel(
        Daily.Params(start=owners.start, end=owners.end, jitter=owners.jitter),
        n,
        keyed_random.child_key(key, "charger"),
        None,
        0,
    )
    tracks = []
    for model in (use, wifi, charger):
        initial = model.state.copy()
        tracks.append(_per_device(n, initial, _flips(model, days)))
    return tracks


def _battery(level: float, changes: list[tuple[float, int, float]], end: float, o: Owners) -> list[tuple[float, float]]:
    """(time, percent) samples along the physics; ``changes``: (time, kind, value) in time order."""
    per_percent = o.capacity / 100.0
    using = plugged = False
    samples, t = [(0.0, level)], 0.0
    marks = sorted([(c[0], c[1], c[2]) for c in changes] + [(s, 0, 0.0) for s in np.arange(SAMPLE, end, SAMPLE)])
    for when, kind, value in marks + [(end, 0, 0.0)]:
        rate = ((o.charge_power if plugged else 0.0) - o.idle_power - (o.use_power if using else 0.0)) / per_percent
        if when > t:
            target = level + rate * (when - t)
            if target > 100.0 and level < 100.0:  # fills on the way: a sample when it does
                samples.append((t + (100.0 - level) / rate, 100.0))
            if target < 0.0 and level > 0.0:
                samples.append((t - level / rate, 0.0))
            level = min(100.0, max(0.0, target))
            samples.append((when, level))
            t = when
        if kind == SCREEN:
            using = value == 1.0
        elif kind == CHARGER:
            plugged = value == 1.0
    return samples


def fleet_logs(kinds: list[tuple[Owners, int]], days: float, seed: int) -> Iterator[DeviceLog]:
    """The logs of ``count`` devices of each kind of owner over ``days`` (devices named ``<kind index>-<n>``)."""
    for k, (owners, n) in enumerate(kinds):
        key = keyed_random.child_key(seed, f"synthetic-{k}")
        use, wifi, charger = _group(owners, n, days, key)
        start_levels = 30.0 + 60.0 * keyed_random.uniform(key, np.arange(n), 0)
        for d in range(n):
            changes: list[tuple[float, int, float]] = []
            for t, s in zip(*use[d]):
                changes += [(t, SCREEN, float(s)), (t, LOCK, float(not s))]
            for t, s in zip(*wifi[d]):
                changes.append((t, NETWORK, float(WIFI if s else G4)))
            for t, s in zip(*charger[d]):
                changes.append((t, CHARGER, float(s)))
            changes = [c for c in changes if c[0] < days * DAY]
            changes.sort(key=lambda c: c[0])
            battery = _battery(float(start_levels[d]), changes, days * DAY, owners)
            rows = changes + [(t, BATTERY, round(v, 1)) for t, v in battery]
            rows.sort(key=lambda r: r[0])
            arr = np.array(rows)
            yield DeviceLog(
                device=f"{k}-{d}",
                times=np.round(arr[:, 0], 3),
                kinds=arr[:, 1].astype(np.int8),
                values=arr[:, 2],
                source="synthetic",
            )
