"""Replaying device-state logs at array scale against the FedScale-trace world of the same size.

    python benchmarks/device_logs_replay.py [--devices 20000] [--hours 24] [--pairs 3] [--repeat 1] [--format parquet]
                                            [--battery]

Not a test: run it by hand. It writes, for the same number of phones and days,

* a FedScale-format trace (benchmarks/make_fedscale_trace.py: online 20 min, offline 2 h, medians) replayed
  by ``fedscale_trace`` -- the engine section's trace world of benchmarks/speed.py;
* device-state logs (``--format``) of phones with owners: ~60 screen sessions a day (4 min, exponential; the
  screen unlocked meanwhile), plugged in 22:00-07:00 (jitter 1 h), on Wi-Fi 18:00-08:00 (jitter 1 h) and 4G
  otherwise, a battery level every 30 min -- about 300 events a phone a day -- replayed by ``device_logs``:
  availability ``locked and charging and wifi``;

then replays each as the array form of the engine does -- the file read, the group's population model built,
every device advanced to each round's start, a round every 3 minutes over ``--hours`` -- in alternated order,
``--pairs`` times, in one process (threads pinned to 1; each side of a pair is ``--repeat`` replays, so that
a small fleet's fraction of a second is not timer and scheduler noise), and prints the logs' wall time as a ratio of the
trace's beside it (the median of the pairs) and the machine's load (``uptime``) before and after. Reading the
file is included: a run pays it once. A whole ``netfl simulate`` of either world is dominated by training,
whose amount follows how many phones are eligible, so it compares the worlds, not the replay.

``--battery``: each world is the engine's idle rows with batteries instead of the availability model alone
(:class:`~netfl.sim.idle_rows.IdleRows`, built as a run builds them: the files read, the device table drawn, the
rows advanced to each round's start and the round's eligible devices found, min_level included) -- the trace
and the logs with the simulated battery (55 kJ, 50 mW idle, from 30 to 100 %), and a third world, ``levels``:
the logs with the battery following their logged levels (``battery.levels``: a level every 30 minutes, one more
source of changes per phone). It prints levels / trace and levels / logs beside logs / trace.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"  # before numpy loads its BLAS

import numpy as np  # noqa: E402
import yaml  # noqa: E402

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from make_fedscale_trace import make_trace  # noqa: E402
from speed import engine_scenario  # noqa: E402

from netfl.fleet_logs import BATTERY, CHARGER, LOCK, NETWORK, SCREEN, DeviceLog, write_device_logs  # noqa: E402

NETFL = str(Path(sys.executable).parent / "netfl")
DAY = 86_400.0


def phone_logs(devices: int, days: int, seed: int = 0):
    """The phones' logs, one device at a time (streamed to the writer)."""
    rng = np.random.default_rng(seed)
    for d in range(devices):
        times, kinds, values = [], [], []

        def add(t, kind, value, times=times, kinds=kinds, values=values):
            times.append(np.asarray(t, float))
            kinds.append(np.full(np.size(t), kind, np.int8))
            values.append(np.broadcast_to(np.asarray(value, float), np.shape(t)).ravel())

        horizon = days * DAY
        starts = np.sort(rng.uniform(0, horizon, 60 * days))
        ends = np.minimum(starts + rng.exponential(240.0, len(starts)), np.append(starts[1:], horizon))
        for t, on in ((starts, 1), (ends, 0)):
            add(t, SCREEN, on)
            add(t, LOCK, 1 - on)
        day = np.arange(days) * DAY
        add(day + 22 * 3600 + rng.normal(0, 3600, days), CHARGER, 1)
        add(day + 7 * 3600 + rng.normal(0, 3600, days), CHARGER, 0)
        add(day + 18 * 3600 + rng.normal(0, 3600, days), NETWORK, 1)
        add(day + 8 * 3600 + rng.normal(0, 3600, days), NETWORK, 4)
        levels = np.arange(0, horizon, 1800.0)
        add(levels, BATTERY, np.round(rng.uniform(20, 100, len(levels))))
        t, k, v = np.concatenate(times), np.concatenate(kinds), np.concatenate(values)
        keep = (t >= 0) & (t < horizon)
        order = np.argsort(t[keep], kind="stable")
        yield DeviceLog(f"phone-{d:06d}", t[keep][order].round(0), k[keep][order], v[keep][order])


def trace_logs(clients: dict, days: int):
    """The trace's clients as device logs with the same eligibility: at each online stretch's start the phone is
    locked, plugged in and on Wi-Fi, at its end unlocked, unplugged and on 4G; a battery level every 30 min
    besides (which the rule ignores). Eight events a stretch: the logs hold what a trace keeps as two bounds."""
    horizon = days * DAY
    for client, record in clients.items():
        on, off = np.asarray(record["active"], float), np.asarray(record["inactive"], float)
        keep = (on < horizon) & (off > on)
        on, off = on[keep], np.minimum(off[keep], horizon)
        levels = np.arange(0, horizon, 1800.0)
        times = np.concatenate([np.repeat(on, 4), np.repeat(off, 4), levels])
        kinds = np.concatenate(
            [np.tile([SCREEN, LOCK, CHARGER, NETWORK], len(on)), np.tile([SCREEN, LOCK, CHARGER, NETWORK], len(off)),
             np.full(len(levels), BATTERY)]
        ).astype(np.int8)  # fmt: skip
        values = np.concatenate(
            [np.tile([0, 1, 1, 1], len(on)), np.tile([1, 0, 0, 4], len(off)), np.full(len(levels), 60.0)]
        ).astype(float)
        order = np.argsort(times, kind="stable")
        yield DeviceLog(f"client-{client}", times[order], kinds[order], values[order])


def scenario(devices: int, hours: int, availability: dict) -> dict:
    """The engine section's trace world (benchmarks/speed.py), its availability as given."""
    data = engine_scenario(devices, hours, "diurnal", "trace")
    data["devices"][0] |= data.pop("devices_update") | {"availability": availability}
    return data


def simulate_once(path: Path, out: Path) -> float:
    """Wall seconds of a whole ``netfl simulate`` (its own process, one training thread)."""
    start = time.perf_counter()
    done = subprocess.run(
        [NETFL, "simulate", str(path), "--out", str(out), "--threads", "1"], capture_output=True, text=True
    )
    if done.returncode:
        sys.exit(f"{path.name}: netfl simulate failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - start


def replay_once(world: str, devices: int, hours: int, trace: Path, logs: Path) -> tuple[float, int]:
    """Read the file and replay the group's availability over ``hours`` as the array form does (every device
    advanced to each round's start, a round every 3 minutes): (wall seconds, flips)."""
    from netfl.component_spec import PolicySpec
    from netfl.policies.catalog import population_model

    for path in (trace, logs):  # a new modification time: each replay reads its file, as a fresh run does
        os.utime(path, ns=(time.time_ns(), time.time_ns()))
    if world == "trace":
        spec = {"policy": "fedscale_trace", "file": str(trace), "trust_pickle": True}
    else:
        spec = {"policy": "device_logs", "file": str(logs)}
    flips = 0

    def count(due, since, at, was_on):
        nonlocal flips
        flips += len(due)

    start = time.perf_counter()
    model = population_model(PolicySpec.model_validate(spec), devices, 1, np.ones((devices, 1)), 0)
    for now in np.arange(0.0, hours * 3600.0 + 1, 180.0):
        model.advance(float(now), count)
        model.state.sum()  # the eligible count a round reads
    return time.perf_counter() - start, flips


def rows_once(world: str, devices: int, hours: int, trace: Path, logs: Path) -> tuple[float, int]:
    """Build the world's idle rows as a run does (files read, table drawn) and advance them to each round's start,
    finding the round's eligible devices: (wall seconds, eligible device-rounds)."""
    from netfl.assemble import build_world, population_models
    from netfl.config import scenario_from_dict
    from netfl.fleet_logs.levels import forget_levels
    from netfl.rng import RandomStreams
    from netfl.sim.idle_rows import GroupRows, IdleRows
    from netfl.sim.logged_levels import LoggedPower

    forget_levels()  # as in a fresh run: the logs world keeps no battery rows that the levels world asked for
    for path in (trace, logs):  # a new modification time: each replay reads its file, as a fresh run does
        os.utime(path, ns=(time.time_ns(), time.time_ns()))
    if world == "trace":
        availability = {"policy": "fedscale_trace", "file": str(trace), "trust_pickle": True}
    else:
        availability = {"policy": "device_logs", "file": str(logs)}
    data = scenario(devices, hours, availability)
    if world == "levels":
        battery = data["devices"][0]["battery"]
        del battery["initial"]
        battery["levels"] = {"file": str(logs)}
    start = time.perf_counter()
    sc = scenario_from_dict(data, check_references=False)
    streams = RandomStreams(sc.seed)
    w = build_world(sc, streams, population=population_models(sc, streams, np.ones((devices, 1))))
    table = w.devices
    levels = LoggedPower(len(table), table.capacity_j, table.group_slices(), w.levels) if world == "levels" else None
    rows = IdleRows(table, [GroupRows(m) for m in w.population], None, levels)
    eligible = 0
    for now in np.arange(0.0, hours * 3600.0 + 1, 180.0):
        rows.advance(float(now))
        eligible += len(rows.eligible(float(now)))
    return time.perf_counter() - start, eligible


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=20_000)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1, help="replays timed together as one side of a pair")
    parser.add_argument("--format", default="parquet", choices=["flash", "csv", "parquet"])
    parser.add_argument(
        "--logs", default="trace", choices=["trace", "owners"],
        help="trace: the trace's own stretches as logs (the same world); owners: phones with owners (more events)",
    )  # fmt: skip
    parser.add_argument("--simulate-hours", type=int, default=0, help="also time whole runs of this many hours")
    parser.add_argument(
        "--battery", action="store_true",
        help="the engine's idle rows with batteries, and a third world whose batteries follow the logged levels",
    )  # fmt: skip
    args = parser.parse_args()
    days = max(1, -(-args.hours // 24))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trace = tmp / "trace.pkl"
        start = time.perf_counter()
        clients = make_trace(args.devices, finish=days * DAY, online=20 * 60.0, offline=2 * 3600.0)
        trace.write_bytes(pickle.dumps(clients, protocol=pickle.HIGHEST_PROTOCOL))
        suffix = {"flash": "json"}.get(args.format, args.format)
        source = trace_logs(clients, days) if args.logs == "trace" else phone_logs(args.devices, days)
        logs = write_device_logs(source, tmp / f"fleet.{suffix}", args.format)
        del clients, source
        print(
            f"wrote the trace ({trace.stat().st_size / 1e6:.0f} MB) and the logs ({logs.stat().st_size / 1e6:.0f} MB, "
            f"{args.format}) of {args.devices:,} phones x {days} day(s) in {time.perf_counter() - start:.0f} s"
        )
        print("load before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
        worlds = ("trace", "logs", "levels") if args.battery else ("trace", "logs")
        once, counted = (rows_once, "eligible device-rounds") if args.battery else (replay_once, "flips")
        walls: dict[str, list[float]] = {world: [] for world in worlds}
        if args.battery:  # numba's compiled step loaded, the imports done: not timed in any world's first pair
            for world in worlds:
                once(world, min(args.devices, 1000), 1, trace, logs)
        for pair in range(args.pairs):
            order = worlds[pair % len(worlds) :] + worlds[: pair % len(worlds)]  # each world first in turn
            order = order if pair % 2 == 0 else order[::-1]
            line = []
            for world in order:
                wall, flips = 0.0, 0
                for _ in range(args.repeat):
                    one, flips = once(world, args.devices, args.hours, trace, logs)
                    wall += one
                walls[world].append(wall)
                times = f" x {args.repeat}" if args.repeat > 1 else ""
                line.append(f"{world} {wall:.2f} s ({flips:,} {counted}{times})")
            print(f"pair {pair + 1}: " + ", ".join(line))
        print("load after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
        what = "rows with batteries" if args.battery else "replay"
        for top, bottom in (("logs", "trace"), ("levels", "trace"), ("levels", "logs"))[: 3 if args.battery else 1]:
            ratios = [a / b for a, b in zip(walls[top], walls[bottom])]
            print(f"{what}, {top} / {bottom}: median {statistics.median(ratios):.2f}x (pairs: {_listed(ratios)})")
        if args.simulate_hours:
            replay = {"policy": "device_logs", "file": str(logs)}
            fedscale = {"policy": "fedscale_trace", "file": str(trace), "trust_pickle": True}
            paths = {}
            for world, availability in (("trace", fedscale), ("logs", replay)):
                paths[world] = tmp / f"{world}.yaml"
                data = scenario(args.devices, args.simulate_hours, availability)
                paths[world].write_text(yaml.safe_dump(data, sort_keys=False))
            runs: dict[str, list[float]] = {"trace": [], "logs": []}
            for pair in range(args.pairs):
                for world in ("trace", "logs") if pair % 2 == 0 else ("logs", "trace"):
                    runs[world].append(simulate_once(paths[world], tmp / f"out-{world}-{pair}"))
                print(f"simulate pair {pair + 1}: trace {runs['trace'][-1]:.1f} s, logs {runs['logs'][-1]:.1f} s")
            ratios = [a / b for a, b in zip(runs["logs"], runs["trace"])]
            print(f"whole run, logs / trace: median {statistics.median(ratios):.2f}x (pairs: {_listed(ratios)})")
            print("load after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


def _listed(ratios: list[float]) -> str:
    return ", ".join(f"{r:.2f}" for r in ratios)


if __name__ == "__main__":
    main()
