"""Stacked local training (netfl.learn.stacked) against one job at a time, side by side in one process.

A check of the stacked path against netfl's own reference path (the largest
difference between the two models shows it is float rounding only); for
netfl against what a user would run instead, see benchmarks/speed.py.

Each case builds the same simulation twice -- ``Learner(batched=True)`` and
``batched=False`` -- runs both, and prints real seconds, the ratio and the
largest difference between the two final global models (float rounding
only: the jobs see the same minibatches either way). Alternating the two
and taking the best of ``--repeat`` runs damps the noise of a shared
machine.

    python benchmarks/batched_training.py [--repeat 2] [--cases quickstart fmnist-mlp mmfl-probe]

Fashion-MNIST cases need Debian's dataset-fashion-mnist (skipped without it).
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

import torch

from netfl.assemble import build_simulation
from netfl.config import load_scenario, scenario_from_dict
from netfl.learn.datasets import FASHION_MNIST_DIR

ROOT = Path(__file__).resolve().parents[1]


def fmnist_round(model: str, hidden: list[int], clients: int, rounds: int) -> dict:
    """A synchronous FedAvg round in which every client trains from the same global model."""
    return {
        "name": f"bench-fmnist-{model}",
        "seed": 1,
        "stop": {"rounds": rounds},
        "task": {
            "dataset": {"name": "fashion-mnist", "partition": {"kind": "dirichlet", "alpha": 0.5}},
            "model": {"name": model, "hidden": hidden},
            "local": {"steps": 5, "batch_size": 16, "lr": 0.05},
        },
        "devices": [{"group": "d", "count": clients, "compute": {"flops_per_s": 2e9}, "link": {"uplink": 2e7}}],
        "eval": {"every": f"{rounds} rounds", "max_test_samples": 1000},
    }


def mmfl_probe(clients: int, rounds: int) -> dict:
    """MMFL optimal sampling: every client trains all three models each round to report its update norms."""
    task = {
        "dataset": {"name": "fashion-mnist", "partition": {"kind": "classes", "classes_per_client": 3}},
        "model": {"name": "mlp", "hidden": [64]},
        "local": {"steps": 5, "batch_size": 32, "lr": 0.05},
    }
    return {
        "name": "bench-mmfl",
        "seed": 1,
        "stop": {"rounds": rounds},
        "tasks": [task] * 3,
        "devices": [{"group": "d", "count": clients, "compute": {"flops_per_s": 2e9}, "link": {"uplink": 2e7}}],
        "server": {"algorithm": {"name": "mmfl", "sampling": "optimal"}, "round": {"participants": 4}},
        "eval": {"every": f"{rounds} rounds", "max_test_samples": 1000},
    }


CASES = {
    "quickstart": lambda: load_scenario(ROOT / "topologies" / "quickstart.yaml"),
    "fmnist-mlp": lambda: scenario_from_dict(fmnist_round("mlp", [200], 50, 5)),
    "fmnist-lenet5": lambda: scenario_from_dict(fmnist_round("lenet5", [], 50, 3)),
    "mmfl-probe": lambda: scenario_from_dict(mmfl_probe(40, 4)),
}
NEEDS_FMNIST = {"fmnist-mlp", "fmnist-lenet5", "mmfl-probe"}


def timed(scenario, batched: bool) -> tuple[float, torch.Tensor]:
    sim, learner = build_simulation(copy.deepcopy(scenario))
    learner.batched = batched
    started = time.perf_counter()
    sim.run()
    return time.perf_counter() - started, torch.cat([t.global_vector for t in learner.tasks])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'case':<15} {'one by one (s)':>15} {'batched (s)':>12} {'speed-up':>9} {'max |diff|':>11}")
    for name in args.cases:
        if name in NEEDS_FMNIST and not (FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz").exists():
            print(f"{name:<15} skipped: no Fashion-MNIST in {FASHION_MNIST_DIR}")
            continue
        scenario = CASES[name]()
        alone, together = [], []
        for _ in range(args.repeat):
            t_alone, w_alone = timed(scenario, batched=False)
            t_together, w_together = timed(scenario, batched=True)
            alone.append(t_alone)
            together.append(t_together)
        diff = float((w_alone - w_together).abs().max())
        print(
            f"{name:<15} {min(alone):>15.2f} {min(together):>12.2f} {min(alone) / min(together):>8.1f}x {diff:>11.2e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
