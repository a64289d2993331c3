"""A user's algorithm against the built-in one: what running a strategy from a file costs, and what a strategy
with per-client state holds at a million devices.

    python benchmarks/own_algorithm.py [--pairs 5] [--big-pairs 2] [--skip-big] [--json PATH]

Run by hand on a quiet machine; not a test. Two sections, every figure measured in this one run:

* cost -- FedAvg written by a user in a file of their own (this script writes it: the rule of
  ``server.algorithm: {name: fedavg}``, against ``netfl.algorithms`` only) run by ``path:`` against the
  built-in, whole job (``netfl simulate``, process start to results, one thread), alternated in pairs, on
  topologies/quickstart.yaml and topologies/million-phones.yaml: the ratio of wall times (median over pairs),
  and whether the two give the same metrics.csv (they must).
* memory -- the million-phones world with FedDyn (examples/own_algorithm/feddyn.py: a vector g_i for every
  client that delivered an update) against FedAvg: the peak RSS of each, how many distinct clients trained
  (``clients_in_memory``, the strategy's own metric), and what FedDyn would hold with a vector for every one
  of the 10^6 devices up front.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NETFL = [sys.executable, "-m", "netfl.cli.main"]
USERS_FEDAVG = '''\
"""FedAvg as a user writes it, against netfl's public strategy API only."""

from pydantic import Field

from netfl.algorithms import Aggregate, Strategy, StrategyParams, data_weights, weighted_sum


class MyFedAvgParams(StrategyParams):
    weighting: str = Field("samples", description="samples or uniform")
    server_lr: float = Field(1.0, gt=0)


class MyFedAvg(Strategy):
    Params = MyFedAvgParams

    def aggregate(self, x, updates, context):
        metrics = {"updates": len(updates), "samples": sum(u.num_samples for u in updates)}
        if not updates:
            return Aggregate(x, metrics)
        weights = data_weights(updates, self.params.weighting)
        return Aggregate(x + self.params.server_lr * weighted_sum(updates, weights, x), metrics)
'''


def simulate(topology: Path, out: Path, algorithm: str | None) -> dict:
    """One whole job in a child process: wall seconds, the child's peak RSS, and its summary."""
    overrides = [] if algorithm is None else ["--set", f"server.algorithm={algorithm}"]
    cmd = [*NETFL, "simulate", str(topology), "--out", str(out), "--quiet", "--threads", "1", *overrides]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr.read().decode()[-2000:]}")
    proc.stderr.close()
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "maxrss_mb": usage.ru_maxrss / 1024,
        "summary": json.loads((out / "summary.json").read_text()),
    }


def same_metrics(a: Path, b: Path) -> bool:
    return (a / "metrics.csv").read_bytes() == (b / "metrics.csv").read_bytes()


def cost(topology: Path, pairs: int, tmp: Path, algorithm: str) -> dict:
    """Built-in and user FedAvg alternated (the order swapped every pair): ratio user / built-in."""
    walls: dict[str, list[float]] = {"builtin": [], "user": []}
    identical = True
    for i in range(pairs):
        order = [("builtin", None), ("user", algorithm)]
        if i % 2:
            order.reverse()
        outs = {}
        for label, spec in order:
            outs[label] = tmp / f"{topology.stem}-{label}-{i}"
            walls[label].append(simulate(topology, outs[label], spec)["wall_s"])
        identical &= same_metrics(outs["builtin"], outs["user"])
    ratios = [u / b for u, b in zip(walls["user"], walls["builtin"])]
    return {
        "topology": topology.name,
        "pairs": pairs,
        "builtin_wall_s": walls["builtin"],
        "user_wall_s": walls["user"],
        "ratio_median": statistics.median(ratios),
        "ratios": ratios,
        "same_metrics": identical,
    }


def memory(topology: Path, tmp: Path) -> dict:
    feddyn = f"{{path: {ROOT / 'examples' / 'own_algorithm' / 'feddyn.py'}:FedDyn, alpha: 0.01}}"
    fedavg = simulate(topology, tmp / "mem-fedavg", None)
    dyn = simulate(topology, tmp / "mem-feddyn", feddyn)
    with open(tmp / "mem-feddyn" / "algorithm.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    held = max(int(float(r["clients_in_memory"])) for r in rows)
    devices = dyn["summary"]["num_devices"]
    received = dyn["summary"]["updates_received"]
    vector_bytes = dyn["summary"]["bytes_up"] / received if received else None  # an upload: about one vector
    return {
        "fedavg_maxrss_mb": fedavg["maxrss_mb"],
        "feddyn_maxrss_mb": dyn["maxrss_mb"],
        "feddyn_extra_mb": dyn["maxrss_mb"] - fedavg["maxrss_mb"],
        "clients_in_memory": held,
        "devices": devices,
        "vector_bytes": vector_bytes,
        "held_mb": None if vector_bytes is None else held * vector_bytes / 2**20,
        "every_device_up_front_mb": None if vector_bytes is None else devices * vector_bytes / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=5, help="alternated pairs on the quickstart")
    parser.add_argument("--big-pairs", type=int, default=2, help="alternated pairs on the million phones")
    parser.add_argument("--skip-big", action="store_true", help="the quickstart only")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "own_algorithm.json")
    args = parser.parse_args()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    results: dict = {"load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="netfl-own-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "my_fedavg.py").write_text(USERS_FEDAVG)
        user = f"{{path: {tmp / 'my_fedavg.py'}:MyFedAvg}}"
        worlds = [ROOT / "topologies" / "quickstart.yaml"]
        if not args.skip_big:
            worlds.append(ROOT / "topologies" / "million-phones.yaml")
        results["cost"] = []
        for topology in worlds:
            pairs = args.pairs if topology.stem == "quickstart" else args.big_pairs
            row = cost(topology, pairs, tmp, user)
            results["cost"].append(row)
            print(
                f"{row['topology']:<22} user FedAvg / built-in: {row['ratio_median']:.3f}x (median of {pairs} "
                f"pairs; {', '.join(f'{r:.3f}' for r in row['ratios'])}); same metrics.csv: {row['same_metrics']}",
                flush=True,
            )
        if not args.skip_big:
            m = memory(ROOT / "topologies" / "million-phones.yaml", tmp)
            results["memory"] = m
            print(
                f"million-phones, FedDyn's g_i: {m['clients_in_memory']:,} clients held of {m['devices']:,}; peak RSS "
                f"{m['feddyn_maxrss_mb']:.0f} MB against FedAvg's {m['fedavg_maxrss_mb']:.0f} MB "
                f"(+{m['feddyn_extra_mb']:.0f} MB; the vectors held {m['held_mb'] or float('nan'):.0f} MB, a vector "
                f"for every device up front {m['every_device_up_front_mb'] or float('nan'):.0f} MB)"
            )
    results["load_after"] = os.getloadavg()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
