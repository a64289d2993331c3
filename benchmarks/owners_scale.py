"""What heterogeneous owners cost at scale: a phone fleet's idle day with and without per-device parameters.

The idle rows of topologies/ten-million-phones.yaml's phones (diurnal availability, a nightly charger, the
owners' use) are built and taken through a simulated day in the server's 3-minute steps, once with every
parameter shared by the group (the usage preset's factors at 1, one time zone, batteries at full health) and
once heterogeneous (the ``phone`` preset's per-owner factors, time zones drawn per device for availability,
charger and use, ``battery.health: {uniform: [0.7, 1.0]}``). Each run is its own process (its peak RSS is its
own); the pairs alternate, side by side, so that the machine's load falls on both alike:

    .venv/bin/python benchmarks/owners_scale.py [--sizes 100000,1000000] [--repeats 2]

Printed: build and day seconds, changes taken, peak RSS, and the heterogeneous world's extra bytes and
nanoseconds per device (and per change).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

ZONES = {"uniform": ["-3h", "3h"]}


def scenario(n: int, heterogeneous: bool) -> dict:
    from netfl.policies.usage import PRESETS

    sessions = dict(PRESETS["phone"]["sessions"])
    charging = {"policy": "daily", "start": "22:00", "end": "07:00", "jitter": "1h"}
    availability = {"policy": "diurnal", "mixing": "20min"}
    battery = {"capacity": "55kJ", "initial": {"uniform": [0.3, 1.0]}, "min_level": "20%", "charging": charging}
    if heterogeneous:
        for policy in (sessions, charging, availability):
            policy["time_zone_offset"] = ZONES
        battery["health"] = {"uniform": [0.7, 1.0]}
    else:
        sessions.pop("rate_scale"), sessions.pop("length_scale")
    return {
        "name": "owners-scale",
        "seed": 17,
        "stop": {"sim_time": "24h"},
        "task": {
            "dataset": {"name": "digits", "partition": {"kind": "iid", "samples_per_client": 20}},
            "model": {"name": "logistic"},
            "local": {"steps": 5, "batch_size": 10, "lr": 0.1},
        },
        "devices": [
            {
                "group": "phones",
                "count": n,
                "compute": {"flops_per_s": {"uniform": [0.5e9, 2e9]}},
                "battery": battery,
                "usage": {"sessions": sessions, "power": "2W"},
                "availability": availability,
                "link": {"uplink": {"uniform": ["1Mbps", "10Mbps"]}, "downlink": "20Mbps", "latency": "40ms"},
            }
        ],
        "server": {
            "algorithm": {"name": "fedavg"},
            "round": {"participants": 100, "deadline": "2min", "interval": "3min"},
        },
        "engine": {"devices": "arrays"},
    }


def one(n: int, heterogeneous: bool) -> dict:
    """Build the idle rows of n phones and take them through the day; what it cost (run in its own process)."""
    from netfl.assemble.availability import group_models, usage_setups
    from netfl.assemble.world import device_table
    from netfl.config.loading import scenario_from_dict
    from netfl.policies.population import PopulationModel
    from netfl.rng import RandomStreams
    from netfl.sim.idle_changes import GroupRows, IdleChanges

    changes = [0]
    flip = PopulationModel.flip

    def counted(self, due, on_flip=None):
        changes[0] += len(due)
        return flip(self, due, on_flip)

    PopulationModel.flip = counted
    sc = scenario_from_dict(scenario(n, heterogeneous))
    started = time.perf_counter()
    streams = RandomStreams(sc.seed)
    table = device_table(sc, streams)
    [availability] = group_models(sc, streams, None)
    [charger] = group_models(sc, streams, None, "charging")
    [usage] = usage_setups(sc, streams, None)
    rows = IdleChanges(table, [GroupRows(availability, charger, usage)])
    built = time.perf_counter()
    for t in range(0, 24 * 3600 + 1, 180):
        rows.advance(float(t))
    done = time.perf_counter()
    level = rows.level_at(slice(None), 24 * 3600.0) / rows.capacity
    return {
        "build_s": built - started,
        "day_s": done - built,
        "changes": changes[0],
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "mean_level": float(level.mean()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(int(args.one[0]), args.one[1] == "1")))
        return
    print(f"load before: {os.getloadavg()}")
    for n in map(int, args.sizes.split(",")):
        got: dict[bool, list[dict]] = {False: [], True: []}
        for _ in range(args.repeats):
            for heterogeneous in (False, True):  # alternated, side by side in time
                cmd = [sys.executable, __file__, "--one", str(n), "1" if heterogeneous else "0"]
                got[heterogeneous].append(json.loads(subprocess.check_output(cmd).decode().strip().splitlines()[-1]))
        for heterogeneous, runs in got.items():
            best = {k: min(r[k] for r in runs) for k in ("build_s", "day_s", "rss_mb")}
            print(
                f"n={n:>9,} {'heterogeneous' if heterogeneous else 'shared       '}: build {best['build_s']:.2f} s, "
                f"day {best['day_s']:.2f} s, {runs[0]['changes']:,} changes, peak RSS {best['rss_mb']:.0f} MB, "
                f"mean level at 24:00 {runs[0]['mean_level']:.1%}"
            )
        pairs = list(zip(got[False], got[True]))
        extra_b = min(h["rss_mb"] - s["rss_mb"] for s, h in pairs) * 2**20 / n
        ratio = min(h["day_s"] / s["day_s"] for s, h in pairs)
        extra_ns = min((h["day_s"] + h["build_s"] - s["day_s"] - s["build_s"]) for s, h in pairs) * 1e9 / n
        per_change = min(h["day_s"] / h["changes"] for _, h in pairs) * 1e9
        per_change_shared = min(s["day_s"] / s["changes"] for s, _ in pairs) * 1e9
        print(
            f"  heterogeneous - shared: {extra_b:.0f} B per device (peak RSS), {extra_ns:.0f} ns per device a day "
            f"(build + day); day time ratio {ratio:.2f}x; {per_change_shared:.0f} -> {per_change:.0f} ns per change"
        )
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
