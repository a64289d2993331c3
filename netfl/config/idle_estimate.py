"""How many events idle devices add to the event log, estimated before the run from a sample of each group.

With ``events: {idle_devices: true}`` (the default below 10^4 devices, and always in the actor form) every
online/offline change, plug and session of use of every device is an event: a day of 10^6 phones with their
own use logs some 10^8 of them, tens of GB. The schedule's estimate (:mod:`netfl.config.schedule`) adds them
so that such a run is refused up front, not when memory runs out.

Each device group's availability, charger and use models -- the population models the engine itself runs,
from a stream of their own, so the run's draws are untouched -- are built for at most :data:`SAMPLE` devices and
stepped over the run's duration (at most :data:`HORIZON_S`), or over its rounds (at most :data:`ROUNDS`) for a
per-round policy; every flip is one event, and each device starts with one for each state that is on at time
0 (online, plugged in, in use). A user's population policy is sampled too, its calls fenced as in the run (an
error names its file and line, a Ctrl-C ends a call that never returns), and so is a trace, read as the run
reads it. A pace of many flips (a 2 s trace, a policy flipping every second) is counted up to :data:`FLIPS`
flips and scaled to the run, so the estimate's work is bounded. Groups alike are sampled once. The battery's
own marks (empty, full, min_level) are few beside these and are left out, as are per-device policies (actors:
one object per device, no population form). Like the rest of the schedule's figures, an order of magnitude,
not a bound.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from netfl.config.schema import DeviceGroupSpec, Scenario
from netfl.policies.catalog import population_class, population_model, supports_population

#: The roles a policy plays for a device group, each drawing from its own streams.
ROLES = ("availability", "charging", "usage")
#: Devices of a group whose models are stepped.
SAMPLE = 256
#: The longest stretch of simulated time (a week) and the most rounds that are stepped; a longer run is scaled.
HORIZON_S = 7 * 86_400.0
ROUNDS = 1_000
#: Flips of a sample counted before the rest of the stretch is scaled from them (:func:`_flips`).
FLIPS = 200_000
#: The key of the sample's models: not a stream of the run's (the estimate draws nothing the run draws).
_KEY = 0x1D1E


def policy_of(group: DeviceGroupSpec, role: str) -> Any:
    """The policy spec that plays ``role`` (one of :data:`ROLES`) for ``group``; None where it has none."""
    if role == "availability":
        return group.availability
    if role == "usage":
        return group.usage.sessions if group.usage is not None else None
    return group.battery.charging if group.battery is not None else None


@dataclass(frozen=True)
class IdleEventRate:
    """Idle devices' events of the whole fleet: at the start, per simulated second, and per round."""

    at_start: float = 0.0
    per_s: float = 0.0
    per_round: float = 0.0

    def events(self, duration_s: float, rounds: float) -> float:
        """Events over a run of ``duration_s`` simulated seconds and ``rounds`` rounds."""
        return self.at_start + self.per_s * duration_s + self.per_round * rounds


def idle_event_rate(scenario: Scenario, duration_s: float, rounds: float) -> IdleEventRate:
    """The fleet's idle events from a sample of every group's models (the module docstring), stepped over
    ``duration_s`` and ``rounds`` (each capped)."""
    base_dir = scenario.source.parent if scenario.source is not None else None
    horizon = min(duration_s, HORIZON_S)
    steps = int(min(rounds, ROUNDS))
    at_start = per_s = per_round = 0.0
    first = 0
    for group in scenario.devices:
        n = min(group.count, SAMPLE)
        for role in ROLES:
            spec = policy_of(group, role)
            if spec is None or not supports_population(spec, base_dir):
                continue
            on, rate, continuous = _sampled(spec, n, first, scenario.seeds.world, base_dir, horizon, steps)
            at_start += group.count * on
            if continuous:
                per_s += group.count * rate
            else:
                per_round += group.count * rate
        first += group.count
    return IdleEventRate(at_start, per_s, per_round)


#: Sampled models by what decides their answer: groups alike (1,000 groups of one kind of phone) are sampled once,
#: and the summary's estimate reuses the checks' (a user's policy is asked once). Traces are not kept: each group
#: replays its own rows.
_SAMPLED: dict[tuple, tuple[float, float, bool]] = {}


def _sampled(
    spec: Any, n: int, first: int, seed: int, base_dir: Path | None, horizon: float, steps: int
) -> tuple[float, float, bool]:
    """(share of the sample on at time 0, flips per device and second -- or per round --, continuous or not) of
    the model of ``spec`` built for ``n`` devices, the first of which is the scenario's device ``first``."""
    cls = population_class(spec, base_dir)  # a user's class once loaded: a file changed since is another class
    params = json.dumps(spec.params, sort_keys=True, default=str)
    key = (cls, params, n, seed, str(base_dir), horizon, steps)
    if cls.placed or key not in _SAMPLED:  # a trace replays rows by index (and its file may change): never kept
        model = population_model(spec, n, _KEY, np.broadcast_to(1.0, (n, 1)), seed, base_dir=base_dir, first=first)
        on = float(np.mean(model.state))
        continuous = model.time_base == "continuous"
        if continuous:
            rate = _flips(model, horizon) / (n * horizon) if horizon > 0 else 0.0
        else:
            rate = _flips(model, steps - 1) / (n * steps) if steps else 0.0  # rounds 0 .. steps - 1
        _SAMPLED[key] = (on, rate, continuous)
    return _SAMPLED[key]


def _flips(model, until: float) -> float:
    """How often the sample's devices flip up to ``until`` (seconds, or rounds for a per-round model); past
    :data:`FLIPS` flips (a trace of a 2 s period, a user's policy flipping every second), the count so far
    scaled to ``until``: the stretch stepped doubles from 2^-40 of ``until`` until it ends or the count is
    past the cap, so the work stays bounded whatever the pace."""
    count = 0

    def seen(devices, since, at, was_on) -> None:
        nonlocal count
        count += len(devices)

    reached = until / 2**40 if model.time_base == "continuous" and until > 0 else until
    while True:
        model.advance(reached, seen)
        if reached >= until:
            return float(count)
        if count > FLIPS:
            return count * until / reached
        reached = min(2 * reached, until)
