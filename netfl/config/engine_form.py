"""Which form of the engine holds the devices, and why: one engine, chosen for the user.

The engine holds a device as a row of arrays while it is idle and as a SimPy
actor while it works (netfl/sim/idle_rows.py, netfl/sim/lazy_fleet.py): the
*array form*, exact and cheap at any scale. The *actor form* keeps every
device an actor from the start; it is used only where a feature still needs
it, which this module names, so that ``netfl validate`` can say which form a
scenario gets and why. Both forms draw the same world from one seed: a
built-in policy is one population model per group, of which an actor's
policy is a row (netfl/policies/rows.py).

``engine: {devices: auto}`` (the default) takes the array form unless a reason
below asks for actors; ``arrays`` insists on it (each reason is then a
problem, one per cause); ``actors`` insists on the other. ``lazy`` and
``eager``, the names of earlier versions, mean ``arrays`` and ``actors``.

Idle devices' events (``events: {idle_devices: true}``) are logged in either
form (netfl/sim/idle_events.py). Below ``IDLE_EVENTS_BELOW`` devices, where
they are logged by default, ``auto`` leaves them to actors: the array form
logs the same events, but their times and battery levels only to the last
bits of the actors' (SimPy's sums, a battery settled at other instants), so
a small world's event log stays byte for byte what it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from netfl.config.schema import IDLE_EVENTS_BELOW, Scenario
from netfl.policies.catalog import check_spec, supports_population

Form = Literal["arrays", "actors"]


@dataclass(frozen=True)
class EngineChoice:
    """The form a scenario runs in, and what keeps it from the array form (YAML path, reason) if anything."""

    form: Form
    asked: str
    needs_actors: tuple[tuple[str, str], ...]
    idle_events: bool = False  # the event log holds idle devices' events (the actor form's always does)
    idle_events_refused: bool = False  # events.idle_devices: false, but something needs actors, which log them

    def describe(self) -> str:
        """One line for ``netfl validate``: the form and why."""
        if self.form == "arrays":
            how = "asked for" if self.asked == "arrays" else "chosen: every part of this world has an array form"
            logged = "; their events logged from the rows" if self.idle_events else ""
            return f"arrays ({how}): idle devices kept as rows{logged}, a device an actor only while it works"
        if self.asked == "actors":
            return "actors (asked for): every device a SimPy actor from the start"
        why = "; ".join(f"{path}: {reason}" for path, reason in self.needs_actors)
        if self.idle_events_refused:
            why += " (events: {idle_devices: false} is not kept: actors log every device's online/offline changes)"
        if [path for path, _ in self.needs_actors] == ["events.idle_devices"]:
            why += (
                " (engine: {devices: arrays} logs the same events from rows, a battery's times to the last bits; "
                "events: {idle_devices: false} leaves them out and keeps idle devices as rows)"
            )
        return f"actors: every device a SimPy actor, because {why}"


def _asked(scenario: Scenario) -> str:
    return {"eager": "actors", "lazy": "arrays"}.get(scenario.engine.devices, scenario.engine.devices)


def needs_actors(scenario: Scenario) -> list[tuple[str, str]]:
    """What in the scenario has no array form yet, one entry per cause, each with its YAML path."""
    reasons: list[tuple[str, str]] = []
    base_dir = scenario.source.parent if scenario.source is not None else None
    for i, group in enumerate(scenario.devices):
        policy = group.availability.policy
        if _per_device(group.availability, base_dir):
            reasons.append((f"devices[{i}].availability.policy", f"{policy!r} answers per device (no population form)"))
        charging = group.battery.charging if group.battery is not None else None
        if charging is not None and _per_device(charging, base_dir):
            reasons.append(
                (
                    f"devices[{i}].battery.charging.policy",
                    f"{charging.policy!r} answers per device (no population form)",
                )
            )
    if any(node.kind == "edge" for node in scenario.network.nodes.values()):
        reasons.append(("network.nodes", "edge servers (hierarchical aggregation) run on actors"))
    return reasons


def _per_device(spec, base_dir) -> bool:
    """Whether a policy that loads and validates answers per device only; one that does not load (a missing
    file, a population policy without next_change) is no reason for actors: the policy checks say what is wrong."""
    return not supports_population(spec, base_dir) and not check_spec(spec, base_dir)


def idle_events(scenario: Scenario) -> bool:
    """Whether the event log holds idle devices' events: as ``events.idle_devices`` says, by default below
    IDLE_EVENTS_BELOW devices unless ``engine.devices`` asks for arrays."""
    wanted = scenario.events.idle_devices
    if wanted is not None:
        return wanted
    return _asked(scenario) != "arrays" and scenario.num_devices < IDLE_EVENTS_BELOW


def engine_choice(scenario: Scenario) -> EngineChoice:
    """The form a scenario gets and why (the module docstring): with ``auto``, idle devices' events below
    IDLE_EVENTS_BELOW devices are left to actors; above, and with ``arrays``, the rows log them."""
    asked, logged = _asked(scenario), idle_events(scenario)
    reasons = needs_actors(scenario) if asked != "actors" else []
    if asked == "auto" and logged and scenario.num_devices < IDLE_EVENTS_BELOW:
        why = "asked for" if scenario.events.idle_devices else f"the default below {IDLE_EVENTS_BELOW:,} devices"
        reasons.append(("events.idle_devices", f"idle devices' events ({why}) are logged by actors in a small world"))
    form: Form = "actors" if asked == "actors" or reasons else "arrays"
    refused = form == "actors" and scenario.events.idle_devices is False
    return EngineChoice(form, asked, tuple(reasons), logged or form == "actors", refused)


#: What a device costs held as an actor for a simulated day (SimPy processes, policy objects, its events):
#: measured with topologies/million-phones.yaml and nightly chargers, 10^3 to 3x10^4 phones.
ACTOR_BYTES_PER_DEVICE = 31_000
#: What an idle device costs as rows of the array form, whatever the run's length: its draws, battery, charger, use
#: and links (measured: 269 B a device from 10^6 to 10^7 phones, 280 B by tracemalloc; docs/scale.md).
ROW_BYTES_PER_DEVICE = 300
#: The most devices the actor form takes: about 6 GB of them.
MAX_ACTOR_DEVICES = 200_000


def check_engine(scenario: Scenario) -> list[tuple[str, str]]:
    """What keeps a scenario from the form it needs: ``engine.devices: arrays`` with something that needs actors,
    more devices than actors can hold, or asynchronous workers that would all work at once. One problem per
    cause, nothing else."""
    choice = engine_choice(scenario)
    n = scenario.num_devices
    if scenario.server.mode == "async" and scenario.server.async_.pause == 0 and n > MAX_ACTOR_DEVICES:
        return [
            (
                "server.async.pause",
                f"without a pause every one of the {n:,} devices pulls whenever it is available, so a large share "
                "of them works at once (each then an actor); give each worker a mean pause between its jobs, "
                "e.g. pause: 1d: about devices x availability / pause then start per second",
            )
        ]
    if choice.asked == "actors" and scenario.events.idle_devices is False:
        return [
            (
                "events.idle_devices",
                "false leaves idle devices' events out of the log, but engine.devices: actors keeps every device an "
                "actor, and an actor logs every online/offline change: use engine.devices: auto or arrays (idle "
                "devices then rows that log nothing), or remove idle_devices",
            )
        ]
    if choice.asked == "arrays":
        return [
            (path, f"{reason}; engine.devices: arrays cannot hold it: use engine.devices: auto")
            for path, reason in choice.needs_actors
        ]
    if choice.form == "actors" and n > MAX_ACTOR_DEVICES:
        size = n * ACTOR_BYTES_PER_DEVICE / 1e9
        return [
            (
                path,
                f"{reason}: {n:,} devices as actors would take about {size:,.0f} GB (the most they take is "
                f"{MAX_ACTOR_DEVICES:,}); remove it to keep idle devices as arrays, or simulate fewer devices",
            )
            for path, reason in (choice.needs_actors or (("engine.devices", "actors asked for"),))
        ]
    return []


__all__ = [
    "ACTOR_BYTES_PER_DEVICE",
    "ROW_BYTES_PER_DEVICE",
    "EngineChoice",
    "engine_choice",
    "check_engine",
    "idle_events",
    "needs_actors",
]
