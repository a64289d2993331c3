"""How much a run will do, estimated from its schedule before anything is built: rounds, evaluations, events.

Values that are each reasonable can still ask for 10^12 rounds (a stop at 10^9 simulated seconds with rounds
of a millisecond) or 10^13 evaluations (``eval.every: 1e-9s`` over two hours). Such a run would validate and
then climb in memory -- the event log keeps every event, each evaluation is a pass over the test set and a
metrics row -- until something gave. The estimate:

* a job (one client's share of a round) on a device group: its download and upload at the group's mean link
  rates plus the link's latency each way, and its training FLOPs at the group's mean speed (a wireless link,
  whose rate comes from its channel, counts as instant); the shortest is the fastest group's;
* a round: synchronous, the longest of ``round.interval`` and the shortest of ``round.deadline`` and that
  job; asynchronous (one aggregation per ``async.buffer`` updates), ``buffer`` such jobs, plus the mean
  ``pause``, shared by every device working at once;
* rounds: ``stop.rounds``, or fewer when ``stop.sim_time`` ends the run first at that pace;
* events: per round (or asynchronous aggregation) its start and aggregate, and seven per job (selected or, for
  an asynchronous worker, pull; then the download, the training and the upload, each starting and ending), as
  :data:`netfl.events.JOB_EVENTS` and :data:`~netfl.events.AGGREGATION_EVENTS` declare them; where the log
  holds idle devices' events (``events.idle_devices``), theirs from a sample of each group's availability,
  charger and use (:mod:`netfl.config.idle_estimate`); a working device's battery and radio events come on top;
* evaluations: one at the start and one at the end, and between them one every ``eval.every`` rounds, or
  every ``eval.every`` seconds of the run's simulated time (``stop.sim_time``, else its rounds at that pace).

Rounds can end sooner than the estimate says (every device asked gone at once) and usually last longer, so
the figures are orders of magnitude, not bounds: a run is refused only far past what any real run needs, at
:data:`MAX_EVALUATIONS` evaluations, or more memory than the machine has (the budget's bound,
:func:`netfl.config.budget.memory_bound`) for the event log alone or for everything the run holds: the devices'
state (:data:`~netfl.config.engine_form.ROW_BYTES_PER_DEVICE` a device as rows, or
:data:`~netfl.config.engine_form.ACTOR_BYTES_PER_DEVICE` as actors), the event log, the learner's models and the
process itself (:data:`BASE_BYTES`). Nothing here imports torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from netfl.config import budget
from netfl.config.budget import Workload, machine, size, workload
from netfl.config.engine_form import ACTOR_BYTES_PER_DEVICE, ROW_BYTES_PER_DEVICE, engine_choice
from netfl.config.idle_estimate import idle_event_rate
from netfl.config.schema import DeviceGroupSpec, Scenario
from netfl.events import AGGREGATION_EVENTS, JOB_EVENTS

MAX_EVALUATIONS = 10**7
#: What one event takes while the run goes on and as it is written (measured: about 130 bytes in the log).
BYTES_PER_EVENT = 200
#: What the process holds whatever the scenario: Python, numpy and torch (the ten-thousand-device worlds of
#: docs/scale.md peak at about 0.7 GB with their data and log; kept low, so that a small container is not refused).
BASE_BYTES = 2**29


@dataclass(frozen=True)
class Schedule:
    """A run's estimated size; None where the schedule does not say (rounds that take no time by themselves)."""

    round_s: float  # the shortest round to expect (0: none)
    round_set_by: str  # what sets it, for messages
    rounds: float | None
    duration_s: float | None  # simulated: stop.sim_time, or the rounds at the shortest round if they end first
    evaluations: float | None
    events: float | None
    idle_events: float = 0.0  # of ``events``: idle devices' (online/offline, plugs, use), where the log holds them
    buffer_late: bool = False  # asynchronous: the buffer's first fill is estimated after stop.sim_time
    held_bytes: float = 0.0  # memory the run holds: the process, the devices' state, the event log and the models
    devices_bytes: float = 0.0  # of ``held_bytes``: the devices' state

    def describe(self) -> str:
        """``about 60 rounds, 14 evaluations and 4,000 engine events (~781.2 KiB)``."""
        if self.rounds is None:
            return "not estimated (rounds that take no simulated time of their own; stop.rounds would bound them)"
        evaluations = f"{_count(self.evaluations)} evaluations" if self.evaluations is not None else "evaluations"
        idle = f", {_count(self.idle_events)} of them idle devices'" if self.idle_events else ""
        late = (
            f"; at this pace the asynchronous buffer fills once in {_time(self.round_s)}, after the stop: expect "
            "no aggregation (a smaller server.async.buffer, or a later stop.sim_time)"
            if self.buffer_late
            else ""
        )
        held = f"; about {size(self.held_bytes)} held in all ({size(self.devices_bytes)} of device state)"
        return (
            f"about {_count(self.rounds)} rounds, {evaluations} and {_count(self.events)} engine events "
            f"(~{size(self.events * BYTES_PER_EVENT)}{idle}){held if self.held_bytes else ''}{late}"
        )


def estimate_schedule(scenario: Scenario, work: Workload | None = None, *, idle: bool = True) -> Schedule:
    """The estimate of the module docstring; ``work``: the scenario's :func:`~netfl.config.budget.workload`, if
    already known; ``idle``: count idle devices' events where the log holds them (False where the policies have
    not been checked yet: their models are built to count)."""
    work = work or workload(scenario)
    job_s, group = min((_job_s(g, work), g.group) for g in scenario.devices)
    server, stop = scenario.server, scenario.stop
    if server.mode == "async":
        a = server.async_
        round_s = a.buffer * (job_s + a.pause) / scenario.num_devices
        set_by = f"{a.buffer} updates from {scenario.num_devices:,} devices, a job taking {_time(job_s)} on {group}"
        per_round = len(AGGREGATION_EVENTS) + len(JOB_EVENTS["async"]) * a.buffer
    else:
        r = server.round
        round_s, set_by = min((r.deadline, "the deadline"), (job_s, f"a job on {group}"))
        round_s, set_by = max((r.interval, "the interval"), (round_s, set_by))
        per_round = len(AGGREGATION_EVENTS) + len(JOB_EVENTS["sync"]) * work.jobs_per_round
    paced = stop.sim_time / round_s if stop.sim_time is not None and round_s > 0 else math.inf
    rounds = min(stop.rounds if stop.rounds is not None else math.inf, paced)
    if math.isinf(rounds):
        return Schedule(round_s, set_by, None, None, None, None)
    choice = engine_choice(scenario) if idle else None
    duration = min(stop.sim_time if stop.sim_time is not None else math.inf, rounds * round_s)
    every = scenario.eval.every
    evaluations = 2 + (rounds // every.rounds if every.rounds is not None else duration // every.seconds)
    idle_events = (
        idle_event_rate(scenario, duration, rounds).events(duration, rounds)
        if choice is not None and choice.idle_events
        else 0.0
    )
    late = server.mode == "async" and stop.sim_time is not None and round_s > stop.sim_time
    events = rounds * per_round + idle_events
    per_device = ACTOR_BYTES_PER_DEVICE if choice is not None and choice.form == "actors" else ROW_BYTES_PER_DEVICE
    devices = scenario.num_devices * per_device
    held = BASE_BYTES + devices + events * BYTES_PER_EVENT + work.memory_bytes
    return Schedule(round_s, set_by, rounds, duration, evaluations, events, idle_events, late, held, devices)


def check_schedule(scenario: Scenario, work: Workload | None = None, *, idle: bool = True) -> list[tuple[str, str]]:
    """(path, message) for a run whose estimated evaluations or event log are past their bounds (``idle``: as
    :func:`estimate_schedule`'s)."""
    work = work or workload(scenario)
    schedule = estimate_schedule(scenario, work, idle=idle)
    if schedule.rounds is None:
        return []
    stop, problems = scenario.stop, []
    pace = f"rounds of about {_time(schedule.round_s)} ({schedule.round_set_by})"
    timed = stop.sim_time is not None and (stop.rounds is None or schedule.rounds < stop.rounds)
    how_many = (
        f"about {_count(schedule.rounds)} rounds: {stop.sim_time:g} simulated s at {pace}"
        if timed
        else f"{_count(schedule.rounds)} rounds"
    )
    if schedule.evaluations > MAX_EVALUATIONS:
        every = scenario.eval.every
        often = (
            f"{every.rounds} round(s) over {how_many}"
            if every.rounds is not None
            else f"{every.seconds:g} simulated s over about {schedule.duration_s:.3g} simulated s ({how_many})"
        )
        problems.append(
            (
                "eval.every",
                f"evaluating every {often} would evaluate the model about "
                f"{_count(schedule.evaluations)} times; netfl refuses more than {_count(MAX_EVALUATIONS)} "
                "evaluations (each a pass over the test set and a row of metrics.csv): evaluate less often",
            )
        )
    log_bytes, bound = schedule.events * BYTES_PER_EVENT, budget.memory_bound()
    if log_bytes > bound:
        mostly_idle = schedule.idle_events > schedule.events / 2
        problems.append(
            (
                "events.idle_devices" if mostly_idle else "stop.sim_time" if timed else "stop.rounds",
                f"{how_many} would log about {_count(schedule.events)} engine events (~{size(log_bytes)} "
                f"in memory{_of_them(schedule)}); {machine(bound)}, room for about "
                f"{_count(bound / BYTES_PER_EVENT)} events: "
                + (
                    "set events: {idle_devices: false} (idle devices then log nothing), or stop sooner"
                    if mostly_idle
                    else "stop sooner, or make rounds longer"
                ),
            )
        )
    elif schedule.held_bytes > bound and work.memory_bytes <= bound:  # the models alone: the budget's refusal
        problems.append(_too_much_held(scenario, schedule, work, bound))
    return problems


def _too_much_held(scenario: Scenario, schedule: Schedule, work: Workload, bound: int) -> tuple[str, str]:
    """The refusal of a run whose state, log and models together exceed the machine, at the largest term's field."""
    log = schedule.events * BYTES_PER_EVENT
    terms = {"devices": schedule.devices_bytes, "events": log, "models": work.memory_bytes}
    largest = max(terms, key=terms.get)
    if largest == "devices":
        i = max(range(len(scenario.devices)), key=lambda k: scenario.devices[k].count)
        path, advice = f"devices[{i}].count", "simulate fewer devices"
    elif largest == "events":
        path, advice = "stop.sim_time" if scenario.stop.sim_time is not None else "stop.rounds", "stop sooner"
    else:
        path = "task.model" if len(scenario.tasks) == 1 else "tasks"
        advice = "use a smaller model or fewer participants"
    per = schedule.devices_bytes / scenario.num_devices
    return (
        path,
        f"the run would hold about {size(schedule.held_bytes)}: {scenario.num_devices:,} devices' state at about "
        f"{per:,.0f} B each ({size(schedule.devices_bytes)}), an event log of {_count(schedule.events)} events "
        f"({size(log)}), {size(work.memory_bytes)} of models and {size(BASE_BYTES)} for the process itself; "
        f"{machine(bound)}: {advice}",
    )


def check_buffer(scenario: Scenario, work: Workload) -> list[tuple[str, str]]:
    """An asynchronous buffer that no run can fill before ``stop.sim_time``: more updates than every device could
    upload by then, each job taking no less than its link's latency both ways, its model's transfers at the
    link's fastest rates and its fewest training FLOPs at the group's fastest speed (a bound, not an estimate:
    devices that are never away and never pause)."""
    server, stop = scenario.server, scenario.stop
    if server.mode != "async" or stop.sim_time is None:
        return []
    buffer = server.async_.buffer
    most, fastest = 0.0, (math.inf, "")
    for group in scenario.devices:
        job_s = _fastest_job_s(group, scenario, work)
        if job_s <= 0:
            return []  # nothing bounds this group's uploads
        most += group.count * math.floor(stop.sim_time / job_s)
        fastest = min(fastest, (job_s, group.group))
    if most >= buffer:
        return []
    return [
        (
            "server.async.buffer",
            f"no run can fill a buffer of {buffer:,} updates: in stop.sim_time ({stop.sim_time:g} s) the "
            f"{scenario.num_devices:,} devices can upload at most {most:,.0f} (a job takes at least "
            f"{_time(fastest[0])} on {fastest[1]}: latency, transfers at the fastest rates, training at the fastest "
            f"speed), so the run would end with no aggregation; give a buffer of at most {most:,.0f}, or a later "
            "stop.sim_time",
        )
    ]


def _fastest_job_s(group: DeviceGroupSpec, scenario: Scenario, work: Workload) -> float:
    """The least time one job can take on a device of ``group`` (:func:`check_buffer`)."""
    link = group.link
    up = link.uplink.support_max if link.uplink is not None else math.inf  # a channel's rate: no bound here
    down = link.downlink.support_max if link.downlink is not None else up
    bits = 8.0 * work.model_bytes
    flops = work.job_flops  # the largest job; the fewest steps one can draw, below
    steps = scenario.server.async_.local_steps
    if steps is not None:
        flops = flops * steps.support_min / steps.support_max if math.isfinite(steps.support_max) else 0.0
    elif any(task.local.steps is None for task in scenario.tasks):
        flops = 0.0  # epochs over a client's own share, which may be tiny
    return 2 * link.latency + bits / down + bits / up + flops / group.compute.flops_per_s.support_max


def _of_them(schedule: Schedule) -> str:
    return (
        f", {_count(schedule.idle_events)} of them idle devices' online/offline, plugs and use"
        if schedule.idle_events
        else ""
    )


def _job_s(group: DeviceGroupSpec, work: Workload) -> float:
    """Seconds one job takes on a device of ``group`` of mean speed and link rates."""
    link = group.link
    up = link.uplink.mean if link.uplink is not None else math.inf
    down = link.downlink.mean if link.downlink is not None else up
    bits = 8.0 * work.model_bytes
    return 2 * link.latency + bits / down + work.job_flops / group.compute.flops_per_s.mean + bits / up


def _count(n: float) -> str:
    """``4,000`` below a million, ``3.2e+12`` above."""
    return f"{n:,.0f}" if n < 1e6 else f"{n:.2g}"


def _time(seconds: float) -> str:
    return f"{seconds:.3g} s"
