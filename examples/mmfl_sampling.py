"""MMFL: variance-reduced optimal client sampling against random and round-robin (MMFL, Zhang et al.).

Zhang et al., "Optimal Variance-Reduced Client Sampling for Multiple Models
Federated Learning" (poster; code haoran-zh/mmfl-Dec), through netfl's
simulator: N clients train S models at once, each client sends at most one
model's update per round and the server takes about m = 10 % of N updates.

Setting (the poster's, scaled down to CPU): S = 5 Fashion-MNIST models;
each client holds 30 % of the labels (3 of 10) for models 1-3 and 40 % (4)
for models 4-5; 10 % of the clients hold 52.6 % of each model's data
(``partition: {kind: classes, quantity_skew: {clients: 10%, share: 52.6%}}``).
Kept: N = 120 clients, m = 12 updates per round. Scaled: a seeded subset
of 12 000 of the 60 000 training samples, an MLP (784-64-10) instead of
the reference's CNN, 2 local epochs of batch 50 at lr 0.05 instead of 5
epochs of batch 500 at lr 0.01, 100 rounds instead of 150 -- so that the
optimal sampler, whose clients train *every* model every round to report
their update norms, runs in minutes on 2 cores.

- ``optimal``: every client reports ||update|| / lr per model (5 numbers
  over its uplink), the server computes the closed-form p_{s|i}, each client
  uploads model s with p_{s|i}; aggregation weights d_{i,s} / p_{s|i}.
- ``random``: m clients uniformly, each on a uniform model; weights
  d_{i,s} N S / m.
- ``round_robin``: m clients uniformly, client blocks rotate the models;
  plain average.

All clients are always available and mains powered, identical in speed
and link, so the comparison is the paper's; netfl still times every round
(the optimal sampler's probe -- every client downloading and training all
five models -- makes its rounds longer and costs far more energy: both are
in the table).

    python examples/mmfl_sampling.py [--quick] [--seeds 0 1 2] [--jobs 2] [--out DIR]

Writes ``mmfl_sampling.png`` (average accuracy over the models against round
and against simulated time), ``curves.csv`` and ``table.md`` (also printed)
into ``--out`` (default ``results/examples/mmfl_sampling``).
"""

from __future__ import annotations

import argparse
import copy
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from netfl.build import build_simulation
from netfl.config import scenario_from_dict

SAMPLERS = ("optimal", "random", "round_robin")
COLORS = {"optimal": "tab:red", "random": "tab:blue", "round_robin": "tab:green"}


def scenario(sampling: str, seed: int, args: argparse.Namespace) -> dict:
    tasks = []
    for s in range(args.models):
        classes = 3 if s < 3 else 4  # 30 % of the labels for models 1-3, 40 % for models 4-5
        tasks.append({
            "dataset": {"name": args.dataset, "max_train_samples": args.train_samples,
                        "partition": {"kind": "classes", "classes_per_client": classes,
                                      "quantity_skew": {"clients": 0.1, "share": 0.526}}},
            "model": {"name": "mlp", "hidden": [args.hidden]},
            "local": {"epochs": args.epochs, "batch_size": args.batch, "lr": args.lr},
        })
    return {
        "name": f"mmfl-{sampling}-seed{seed}", "seed": seed, "stop": {"rounds": args.rounds}, "tasks": tasks,
        "devices": [{"group": "clients", "count": args.clients, "compute": {"flops_per_s": "20GFLOPS"},
                     "power": {"compute": "2W", "transmit": "0.2W", "idle": "0W"},
                     "link": {"uplink": "10Mbps", "downlink": "50Mbps", "latency": "20ms"}}],
        "server": {"algorithm": {"name": "mmfl", "sampling": sampling, "norms": args.norms},
                   "round": {"participants": max(1, round(0.1 * args.clients))}},
        "eval": {"every": args.eval_every, "max_test_samples": args.test_samples},
    }


def run(data: dict) -> dict:
    """One simulation (in a worker process): per-model accuracy per evaluation, time, energy, traffic."""
    import torch

    torch.set_num_threads(1)
    started = time.perf_counter()
    sim, _ = build_simulation(scenario_from_dict(copy.deepcopy(data)))
    result = sim.run()
    m = result.metrics
    return {"round": np.array([r.round for r in m]), "time": np.array([r.sim_time_s for r in m]),
            "acc": np.array([r.test_accuracy for r in m]),
            "per_model": np.array([[t.accuracy for t in r.tasks] for r in m]),
            "energy_j": result.energy_j, "bytes_up": result.network.bytes_up,
            "updates": result.updates_received, "wall_s": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="fashion-mnist", choices=["fashion-mnist", "digits"])
    parser.add_argument("--clients", type=int, default=120, help="N (the poster: 120); m = 10 %% of N")
    parser.add_argument("--models", type=int, default=5, help="S (the poster: 5)")
    parser.add_argument("--train-samples", type=int, default=12000, help="seeded subset of the training set")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--epochs", type=float, default=2)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--norms", default="update", choices=["update", "loss"])
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--test-samples", type=int, default=2000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--target", type=float, default=0.65, help="average accuracy whose first round and time "
                                                                     "are tabulated (per seed)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="runs in parallel")
    parser.add_argument("--quick", action="store_true", help="a one-minute smoke run (digits, 40 clients, 3 models, 20 rounds)")
    parser.add_argument("--out", type=Path, default=Path("results/examples/mmfl_sampling"))
    args = parser.parse_args()
    if args.quick:
        args.dataset, args.clients, args.models, args.rounds, args.seeds = "digits", 40, 3, 20, args.seeds[:1]
        args.train_samples, args.test_samples = None, None

    started = time.perf_counter()
    keys = [(sampling, seed) for seed in args.seeds for sampling in SAMPLERS]
    runs: dict[tuple[str, int], dict] = {}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for key, r in zip(keys, pool.map(run, [scenario(s, seed, args) for s, seed in keys])):
            runs[key] = r
            print(f"{key[0]} seed {key[1]}: average accuracy {100 * r['acc'][-1]:.1f} % after {r['round'][-1]} "
                  f"rounds ({r['wall_s']:.0f} s)", flush=True)
    elapsed = time.perf_counter() - started

    def ms(values, scale: float = 100.0, digits: int = 1) -> str:
        v = scale * np.asarray(values, dtype=float)
        return f"{v.mean():.{digits}f} ± {v.std():.{digits}f}" if len(v) > 1 else f"{v[0]:.{digits}f}"

    def reached(r: dict, key: str) -> str:
        hit = np.flatnonzero(r["acc"] >= args.target)
        return (f"{r[key][hit[0]]:.0f}" if key == "round" else f"{r[key][hit[0]]:.1f}") if len(hit) else "-"

    target = f"{100 * args.target:.0f} %"
    rows = ["| sampling | average accuracy, final (%) | mean of the last 20 % of evaluations (%) | worst model, final (%) "
            f"| rounds to {target} | simulated s to {target} | simulated time (s) | energy (J) | uplink (MB) | updates |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for sampling in SAMPLERS:
        rs = [runs[sampling, seed] for seed in args.seeds]
        tail = [r["acc"][-max(1, len(r["acc"]) // 5):].mean() for r in rs]
        rows.append(f"| {sampling} | {ms([r['acc'][-1] for r in rs])} | {ms(tail)} | "
                    f"{ms([r['per_model'][-1].min() for r in rs])} | {', '.join(reached(r, 'round') for r in rs)} | "
                    f"{', '.join(reached(r, 'time') for r in rs)} | "
                    f"{ms([r['time'][-1] for r in rs], 1, 0)} | "
                    f"{ms([r['energy_j'] for r in rs], 1, 0)} | {ms([r['bytes_up'] for r in rs], 1e-6, 1)} | "
                    f"{ms([r['updates'] for r in rs], 1, 0)} |")
    opt = np.mean([runs["optimal", s]["acc"][-1] for s in args.seeds])
    gaps = ", ".join(f"{100 * (opt - np.mean([runs[b, s]['acc'][-1] for s in args.seeds])):+.1f} points vs {b}"
                     for b in SAMPLERS[1:])
    notes = (f"{args.dataset} ({args.train_samples or 'all'} training samples), {args.models} models (MLP, one "
             f"hidden layer of {args.hidden}), {args.clients} clients, m = {max(1, round(0.1 * args.clients))} updates per round, "
             f"{args.epochs:g} local epochs of batch {args.batch} at lr {args.lr:g}, {args.rounds} rounds, norms "
             f"reported: {args.norms}. Accuracy on {args.test_samples or 'all'} test samples per model, averaged "
             f"over the models; mean ± std over seeds {args.seeds} (rounds and times to {target}: per seed; - never). "
             f"Optimal sampling: {gaps}. {elapsed:.0f} s in all "
             f"({args.jobs} runs in parallel).")
    table = "\n".join(rows) + "\n\n" + notes + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text(table)
    with open(args.out / "curves.csv", "w") as f:
        f.write("sampling,seed,round,sim_time_s,average_accuracy," +
                ",".join(f"model{s}_accuracy" for s in range(args.models)) + "\n")
        for (sampling, seed), r in runs.items():
            for k in range(len(r["round"])):
                f.write(f"{sampling},{seed},{r['round'][k]},{r['time'][k]:.3f},{r['acc'][k]:.4f}," +
                        ",".join(f"{a:.4f}" for a in r["per_model"][k]) + "\n")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_round, by_time) = plt.subplots(1, 2, figsize=(10, 4), dpi=110, sharey=True)
    for sampling in SAMPLERS:
        for i, seed in enumerate(args.seeds):
            r = runs[sampling, seed]
            label = sampling.replace("_", " ") if i == 0 else None
            by_round.plot(r["round"], 100 * r["acc"], color=COLORS[sampling], lw=1.2, alpha=0.8, label=label)
            by_time.plot(r["time"], 100 * r["acc"], color=COLORS[sampling], lw=1.2, alpha=0.8)
    by_round.set_xlabel("round")
    by_time.set_xlabel("simulated wall-clock time (s)")
    by_round.set_ylabel(f"test accuracy, average over {args.models} models (%)")
    for ax in (by_round, by_time):
        ax.grid(alpha=0.3)
    by_round.legend(loc="lower right")
    fig.suptitle(f"MMFL client sampling: {args.clients} clients, {args.models} models, {args.dataset}", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out / "mmfl_sampling.png")
    plt.close(fig)

    print(table)
    print(f"wrote {args.out / 'mmfl_sampling.png'}, {args.out / 'curves.csv'}, {args.out / 'table.md'}")


if __name__ == "__main__":
    main()
