"""A one-screen, human-readable description of a scenario (``netfl validate``)."""

from __future__ import annotations

import math

from netfl.scenario import Scenario
from netfl.results.progress import format_duration


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:g} {prefix}{unit}"
    return f"{value:g} {unit}"


def describe_scenario(s: Scenario) -> str:
    stop = []
    if s.stop.rounds:
        stop.append(f"{s.stop.rounds} rounds")
    if s.stop.sim_time:
        stop.append(f"{format_duration(s.stop.sim_time)} simulated")
    lines = [f"scenario   {s.name} (seed {s.seed}); stop after {' or '.join(stop)}, whichever comes first"]
    for i, t in enumerate(s.tasks):
        p = t.dataset.partition
        part = p.kind + (f"(alpha={p.alpha:g})" if p.kind == "dirichlet" else "") + \
            (f"({p.classes_per_client} classes each)" if p.kind == "classes" else "")
        work = f"{t.local.steps} steps" if t.local.steps else f"{t.local.epochs:g} epochs"
        lines.append(f"task {i}     {t.dataset.name}, {part} partition; model {t.model.name}; "
                     f"local {work} of batch {t.local.batch_size} at lr {t.local.lr:g}")
    lines.append(f"devices    {s.num_devices} in {len(s.devices)} group(s)")
    for g in s.devices:
        battery = "mains" if g.battery is None else f"battery {_si(g.battery.capacity, 'J')} (min {g.battery.min_level:.0%})"
        params = ", ".join(f"{k}={v}" for k, v in g.availability.params.items())
        down = g.link.downlink.describe() if g.link.downlink else "= uplink"
        lines.append(f"  {g.group:<10} x{g.count}: compute {g.compute.flops_per_s.describe()} FLOP/s; {battery}; "
                     f"availability {g.availability.policy}{f'({params})' if params else ''}; "
                     f"uplink {g.link.uplink.describe()} bit/s, downlink {down}")
    r = s.server.round
    deadline = "none" if math.isinf(r.deadline) else format_duration(r.deadline)
    algo = ", ".join(f"{k}={v}" for k, v in s.server.algorithm.params.items())
    lines.append(f"server     {s.server.algorithm.name}{f'({algo})' if algo else ''}, {s.server.mode} rounds; "
                 f"{r.participants or 'all available'} participants per round; deadline {deadline}")
    lines.append(f"eval       every {s.eval.every} round(s)")
    return "\n".join(lines)
