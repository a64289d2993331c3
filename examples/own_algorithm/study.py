"""FedAvg against the three example strategies of this folder on world.yaml, over two seeds (about a minute),
then their report.

    python examples/own_algorithm/study.py [OUT]     # OUT: results/own-algorithm-study by default

Each strategy is named by its file's path, as ``server.algorithm: {path: ...}`` names it in a topology; the
world is this folder's world.yaml, read once and changed as a dict. Each run is written to ``OUT/<method>/seed-N``
and ``netfl report OUT`` compares them: runs whose scenarios differ only in the algorithm are cases, paired by
seed, whoever wrote them (here this loop, not a sweep).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

import netfl

HERE = Path(__file__).resolve().parent
METHODS = {
    "fedavg": {"name": "fedavg"},
    "feddyn": {"path": f"{HERE / 'feddyn.py'}:FedDyn", "alpha": 0.01},
    "trimmed_mean": {"path": f"{HERE / 'trimmed_mean.py'}:TrimmedMean", "trim": 0.2},
    "battery_aware": {"path": f"{HERE / 'battery_aware.py'}:BatteryAware", "min_battery": 0.3},
}
SEEDS = (1, 2)


def main(out: Path) -> None:
    base = yaml.safe_load((HERE / "world.yaml").read_text())
    print(f"{'method':<14} {'seed':>4} {'accuracy':>9} {'work J':>8} {'all J':>9} {'min battery':>12}")
    for method, algorithm in METHODS.items():
        for seed in SEEDS:
            world = {**base, "server": {**base["server"], "algorithm": algorithm}}
            result = netfl.run(world, seed=seed, out=out / method / f"seed-{seed}")
            s = result.summary
            battery = result.devices["battery_fraction"].min()
            print(
                f"{method:<14} {seed:>4} {s['final_test_accuracy']:>9.3f} {s['work_energy_j']:>8.3f} "
                f"{s['energy_j']:>9.0f} {battery:>12.3f}"
            )

    # the report: which method reaches 60 % accuracy first in simulated time, paired by seed
    subprocess.run([sys.executable, "-m", "netfl.cli.main", "report", str(out), "--target", "0.6"], check=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("results") / "own-algorithm-study")
