"""`netfl fit`'s cost: a week of device logs streamed into per-device statistics and fitted (not a test).

    OMP_NUM_THREADS=1 python benchmarks/fit.py [--devices 1000,4000] [--days 7] [--format parquet]

A week of 500 synthetic phones (netfl.fleet_fit.synthetic) is generated once and written as many times as
needed under new device names to make each size (the cost of a fit depends on the lines, not on whose they
are). Each size is fitted in a fresh process (`--simulate 0`: the report's simulation is a run of the engine,
measured in benchmarks/speed.py): wall time, lines per second, peak RSS (ru_maxrss), and the extrapolation
to 10^5 devices' week at the measured rate. Reading alone is timed beside it, alternated in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

CHILD = """
import json, resource, sys, time
from netfl.fleet_fit.pipeline import fit_stats, stream_stats
from netfl.fleet_logs import iter_device_logs
path, what = sys.argv[1], sys.argv[2]
t = time.perf_counter()
if what == "read":
    lines = sum(len(log) for log in iter_device_logs(path))
else:
    stats, lines = stream_stats(path)
    fit_stats(stats, clusters=4, capacity=55e3, seed=0)
print(json.dumps({"s": time.perf_counter() - t, "lines": lines,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default="1000,4000")
    parser.add_argument("--days", type=float, default=7)
    parser.add_argument("--format", default="parquet", choices=["csv", "parquet", "flash"])
    args = parser.parse_args()
    from netfl.fleet_fit.synthetic import HEAVY, LIGHT, fleet_logs
    from netfl.fleet_logs import write_device_logs

    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    print(f"load: {os.getloadavg()}")
    t = time.perf_counter()
    base = list(fleet_logs([(LIGHT, 300), (HEAVY, 200)], args.days, seed=1))
    print(f"generated 500 devices x {args.days:g} days in {time.perf_counter() - t:.0f} s")
    suffix = {"csv": "csv", "parquet": "parquet", "flash": "json"}[args.format]
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.devices.split(",")]:
            logs = (replace(base[i % 500], device=f"{i // 500}-{base[i % 500].device}") for i in range(n))
            path = write_device_logs(logs, Path(tmp) / f"logs-{n}.{suffix}", args.format)
            runs = {}
            for what in ("read", "fit", "read", "fit"):  # alternated
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, str(path), what], env=env, capture_output=True, text=True, check=True
                )
                runs.setdefault(what, []).append(json.loads(out.stdout))
            fit, read = min(runs["fit"], key=lambda r: r["s"]), min(runs["read"], key=lambda r: r["s"])
            rate = fit["lines"] / fit["s"]
            week = 1e5 * fit["lines"] / n * 7 / args.days
            print(
                f"{n:>7} devices, {fit['lines']:>11,} lines ({path.stat().st_size / 2**20:.0f} MiB {args.format}): "
                f"fit {fit['s']:.1f} s = {rate:,.0f} lines/s, peak RSS {fit['rss_mb']:.0f} MB; read alone "
                f"{read['s']:.1f} s (fit/read {fit['s'] / read['s']:.2f}); 10^5 devices' week = {week:.2e} lines "
                f"-> {week / rate / 60:.1f} min at this rate"
            )
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
