"""What heterogeneous owners cost at scale: a phone fleet's idle day with and without per-device parameters.

The idle rows of topologies/ten-million-phones.yaml's phones (diurnal availability, a nightly charger, the
owners' use) are built and taken through a simulated day in the server's 3-minute steps: as the earlier
``phone`` preset (one profile for all, sessions of 5 minutes); with the present preset but every parameter
shared by the group (its factors at 1, one time zone, batteries at full health); and heterogeneous (the
preset's per-owner factors, time zones drawn per device for availability, charger and use,
``battery.health: {uniform: [0.7, 1.0]}``). Each run is its own process (its peak RSS is its own); the
variants alternate, side by side, so that the machine's load falls on all alike:

    .venv/bin/python benchmarks/owners_scale.py [--sizes 100000,1000000] [--repeats 2]

Printed: each run's build and day seconds of CPU, changes taken and peak RSS, and the heterogeneous world's extra
bytes per device and time per change against the other two.
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


#: The worlds compared: the earlier ``phone`` preset (one profile, sessions of 5 min), the present one with every
#: owner alike (its factors at 1), and the present one heterogeneous.
VARIANTS = ("before", "shared", "heterogeneous")


def scenario(n: int, variant: str) -> dict:
    from netfl.policies.usage import PRESETS

    sessions = dict(PRESETS["phone"]["sessions"])
    charging = {"policy": "daily", "start": "22:00", "end": "07:00", "jitter": "1h"}
    availability = {"policy": "diurnal", "mixing": "20min"}
    battery = {"capacity": "55kJ", "initial": {"uniform": [0.3, 1.0]}, "min_level": "20%", "charging": charging}
    if variant == "heterogeneous":
        for policy in (sessions, charging, availability):
            policy["time_zone_offset"] = ZONES
        battery["health"] = {"uniform": [0.7, 1.0]}
    else:
        sessions.pop("rate_scale"), sessions.pop("length_scale")
    if variant == "before":
        sessions["mixing"] = "4min"
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


def one(n: int, variant: str) -> dict:
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
    sc = scenario_from_dict(scenario(n, variant))
    started = time.process_time()  # CPU seconds: the machine's other load moves them far less than the wall
    streams = RandomStreams(sc.seed)
    table = device_table(sc, streams)
    [availability] = group_models(sc, streams, None)
    [charger] = group_models(sc, streams, None, "charging")
    [usage] = usage_setups(sc, streams, None)
    rows = IdleChanges(table, [GroupRows(availability, charger, usage)])
    built = time.process_time()
    for t in range(0, 24 * 3600 + 1, 180):
        rows.advance(float(t))
    done = time.process_time()
    return {
        "build_s": built - started,
        "day_s": done - built,
        "changes": changes[0],
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def joined(runs: list[dict], key: str, form: str) -> str:
    """Each run's value of ``key``, in order, as ``a/b``."""
    return "/".join(format(r[key], form) for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(int(args.one[0]), args.one[1])))
        return
    print(f"load before: {os.getloadavg()}")
    for n in map(int, args.sizes.split(",")):
        got: dict[str, list[dict]] = {variant: [] for variant in VARIANTS}
        for _ in range(args.repeats):
            for variant in VARIANTS:  # alternated, side by side in time
                cmd = [sys.executable, __file__, "--one", str(n), variant]
                got[variant].append(json.loads(subprocess.check_output(cmd).decode().strip().splitlines()[-1]))
        for variant, runs in got.items():
            print(
                f"n={n:>9,} {variant:<13}: build {joined(runs, 'build_s', '.2f')} s, day {joined(runs, 'day_s', '.1f')}"
                f" s, {runs[0]['changes']:,} changes ({runs[0]['changes'] / n:.0f} a device), peak RSS "
                f"{joined(runs, 'rss_mb', '.0f')} MB"
            )
        for base in ("before", "shared"):
            pairs = list(zip(got[base], got["heterogeneous"]))
            extra_b = min(h["rss_mb"] - s["rss_mb"] for s, h in pairs) * 2**20 / n
            ratios = [h["day_s"] / s["day_s"] for s, h in pairs]
            per_change = [(s["day_s"] / s["changes"] * 1e9, h["day_s"] / h["changes"] * 1e9) for s, h in pairs]
            print(
                f"  heterogeneous against {base}: {extra_b:+.0f} B per device (peak RSS); day time ratio "
                f"{', '.join(f'{r:.2f}x' for r in ratios)} (pair by pair); ns per change "
                f"{', '.join(f'{a:.0f} -> {b:.0f}' for a, b in per_change)}"
            )
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
