"""The cost of an idle device's change, this tree's step against another tree's, in alternated pairs.

    python benchmarks/idle_step.py --other /path/to/other/tree [--devices 100000 1000000] [--hours 6] [--pairs 3]

Builds the phones world of ``benchmarks/speed.py --only engine`` (diurnal availability, nightly chargers, the
owners' use; no training) at each size and takes its idle devices' changes as the engine does, at every 3-minute
round for ``--hours`` simulated hours (``IdleRows.advance``), then asks who is eligible then (``eligible``), each
timed apart, in a child process with one thread -- alternately on this tree and on ``--other`` (a checkout of
netfl with ``netfl/policies`` and ``netfl/cli`` linked to its ``policies/`` and ``cli/``, put first on
PYTHONPATH), so that both see the same machine. The changes counted are the flips of the three models over those
hours (the battery's marks, a few per cent more, are not counted), the same in both trees: the figure printed is
nanoseconds of ``advance`` per change (wall, and this process's CPU time), and the ratio of the two trees' within
each pair. It is not a test; run it by hand, and read the load it prints.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
ROUND_S = 180.0


def child(devices: int, hours: float) -> dict:
    """Build the world, take its changes round by round, count the models' flips (untimed)."""
    import numpy as np

    sys.path.insert(0, str(BENCH))
    from speed import _engine_yaml

    from netfl.assemble import build_world, population_models
    from netfl.assemble.availability import group_models
    from netfl.config import scenario_from_dict
    from netfl.rng import RandomStreams
    from netfl.sim.idle_changes import GroupRows
    from netfl.sim.idle_rows import IdleRows

    sc = scenario_from_dict(_engine_yaml(devices, 24, "diurnal", "phones"))
    mix = np.full((devices, 10), 0.1)

    def rows() -> IdleRows:
        streams = RandomStreams(sc.seed)
        w = build_world(sc, streams, population=population_models(sc, streams, mix))
        charging = group_models(sc, streams, mix, "charging")
        return IdleRows(w.devices, [GroupRows(*g) for g in zip(w.population, charging, w.usage)])

    started = time.perf_counter()
    idle = rows()
    built = time.perf_counter() - started
    advance = eligible = cpu = 0.0
    for t in np.arange(ROUND_S, hours * 3600 + ROUND_S / 2, ROUND_S):
        t0, c0 = time.perf_counter(), time.process_time()
        idle.advance(float(t))
        t1, c1 = time.perf_counter(), time.process_time()
        idle.eligible(float(t))
        advance, eligible, cpu = advance + t1 - t0, eligible + time.perf_counter() - t1, cpu + c1 - c0
    flips = 0
    fresh = rows()  # the same realisation: each model's flips over the hours, counted on a copy

    def count(devices, since, at, was_on) -> None:
        nonlocal flips
        flips += len(devices)

    for group in fresh.groups:
        for model in (group.availability, group.charger, group.usage.model):
            model.advance(hours * 3600, count)
    return {
        "devices": devices,
        "build_s": built,
        "advance_s": advance,
        "advance_cpu_s": cpu,
        "eligible_s": eligible,
        "changes": flips,
    }


def measure(tree: Path | None, devices: int, hours: float) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env["NUMBA_NUM_THREADS"] = "1"
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(devices), str(hours)]
    out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", type=Path, help="the other tree (e.g. netfl before a change)")
    parser.add_argument("--devices", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write every measurement here")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), float(args.child[1]))))
        return
    runs = []
    for n in args.devices:
        for pair in range(args.pairs):
            order = [("this", None), ("other", args.other)] if args.other else [("this", None)]
            if pair % 2:
                order.reverse()
            got = {}
            for name, tree in order:
                load = os.getloadavg()[0]
                got[name] = measure(tree, n, args.hours) | {"tree": name, "load": load}
                r = got[name]
                print(
                    f"{n:>10,} devices  {name:5}  {r['changes']:>12,} changes  advance {r['advance_s']:7.2f} s "
                    f"({r['advance_s'] / r['changes'] * 1e9:6.1f} ns a change; "
                    f"CPU {r['advance_cpu_s'] / r['changes'] * 1e9:6.1f} ns)  eligible {r['eligible_s']:6.2f} s  "
                    f"build {r['build_s']:5.2f} s  (load {load:.1f})",
                    flush=True,
                )
            if "other" in got:
                ratio = got["other"]["advance_s"] / got["this"]["advance_s"]
                cpu = got["other"]["advance_cpu_s"] / got["this"]["advance_cpu_s"]
                print(
                    f"{'':>10}  pair {pair + 1}: the other tree's advance takes {ratio:.2f}x this one's "
                    f"({cpu:.2f}x its CPU)"
                )
            runs += got.values()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
