"""FedAU against its baselines under Bernoulli, Markovian and cyclic participation (FedAU, Wang & Ji).

Wang & Ji, "A Lightweight Method for Tackling Unknown Participation
Statistics in Federated Averaging" (ICLR 2024; reference code IBM/fedau),
at CPU scale, through netfl's simulator: every run is a dict scenario
(``netfl.config.scenario_from_dict``) run end to end by
``netfl.runner.run_scenario`` -- availability policies decide who trains in
each round, the engine schedules downloads, local training and uploads in
simulated time, and the learner trains the real torch model.

Setting (FedAU's, scaled down to run in about 15 minutes per seed on 2 CPU cores):

- Fashion-MNIST (Debian's IDX files, ``/usr/share/datasets/fashion-mnist``),
  Dirichlet(0.1) label skew over N = 250 clients (FedAU's N), 600 rounds;
  model ``mlp`` (784-200-10) by default: netfl trains one client at a time,
  and LeNet-5 costs about 3x and FedAU's Fashion-MNIST CNN (``cnn``) about
  6x as much per local step on a CPU (``--model`` switches; size N and the
  rounds down accordingly);
- a participant runs I = 5 SGD steps with batch 16 from the global model;
- participation tied to data (``p: {from: data}``): one shared draw
  m ~ Dirichlet(0.1 * 1_10), p_n = max(0.02, 0.1 * 10 * q_n . m), so clients
  rich in the "favoured" labels take part far more often (mean p ~ 0.1,
  about half of the clients at the floor 0.02);
- three patterns with the same p_n: ``bernoulli`` (independent rounds),
  ``markov`` (two-state chain, transition 0.05) and ``cyclic`` (period 100);
  every available client trains (no ``participants`` limit, no deadline);
- algorithms and (gamma, eta) = (client lr, server lr): FedAU's CIFAR-10
  pairs (the paper's per-method grid-search results), used as published
  for the MLP here (they train it stably); ``--lr-scale`` multiplies every
  gamma for other models:

  ========================  ==============================  ===============
  label                     netfl algorithm                 (gamma, eta)
  ========================  ==============================  ===============
  FedAU                     fedau (K = inf)                 (0.1, 1)
  known participation p     fedavg_known                    (0.0562, 1)
  average participating     fedavg, weighting: uniform      (0.0562, 1.78)
  average all               fedavg_all                      (0.1, 10)
  MIFA                      mifa (zero memory, no wait)     (0.0562, 1)
  ========================  ==============================  ===============

  FedAU with K = 50 is ``fedau50`` in ``--algorithms``. MIFA's eta is
  FedAU's convention, x += eta * mean of the remembered deltas; netfl's
  ``mifa`` with ``server_lr`` omitted is exactly that.

Every device is mains powered with the same compute speed and link, and the
server paces rounds with ``round.interval`` (a round with nobody available
waits ``idle_wait`` < interval), so every round takes exactly ``interval``
simulated seconds: accuracy against round and against simulated time are
the same curve (the plot's top axis shows the simulated time). The script
checks this on every evaluation.

Everything derives from ``--seed`` (partition, p_n, participation draws,
model initialisation, minibatches); seed s of ``--seeds N`` is ``--seed + s``.
All algorithms of one seed and pattern see the same participation sequence.

    python examples/fedau_participation.py [--quick] [--seeds 1] [--jobs 2] [--out DIR]

Writes into ``--out`` (default ``results/examples/fedau_participation``):
``fedau_participation.png`` (a panel per pattern, test accuracy against round,
one line per algorithm), ``table.md`` (also printed), ``curves.csv`` (every
evaluation of every run) and every run's own netfl results under ``runs/<pattern>/<algorithm>/seed<s>/``,
with the scenario it ran as ``scenario.yaml`` (``netfl simulate`` takes it).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import yaml

PATTERNS: dict[str, dict] = {
    "bernoulli": {"policy": "bernoulli", "p": {"from": "data"}},
    "markov": {"policy": "markov", "p": {"from": "data"}, "transition": 0.05},
    "cyclic": {"policy": "cyclic", "p": {"from": "data"}, "period": 100},
}
PATTERN_TITLES = {"bernoulli": "Bernoulli", "markov": "Markovian (transition 0.05)", "cyclic": "cyclic (period 100)"}

# key: (label, algorithm spec, client lr gamma before --lr-scale)
ALGORITHMS: dict[str, tuple[str, dict, float]] = {
    "fedau": ("FedAU (K = inf)", {"name": "fedau", "server_lr": 1.0}, 0.1),
    "fedau50": ("FedAU (K = 50)", {"name": "fedau", "server_lr": 1.0, "K": 50}, 0.1),
    "known": ("known participation p", {"name": "fedavg_known", "server_lr": 1.0}, 0.0562),
    "participating": ("average participating", {"name": "fedavg", "weighting": "uniform", "server_lr": 1.78}, 0.0562),
    "all": ("average all", {"name": "fedavg_all", "server_lr": 10.0}, 0.1),
    "mifa": ("MIFA", {"name": "mifa"}, 0.0562),  # server_lr omitted: x += mean of remembered deltas (eta = 1)
}
DEFAULT_ALGORITHMS = ("fedau", "known", "participating", "all", "mifa")
COLORS = {"fedau": "tab:red", "fedau50": "tab:pink", "known": "tab:green", "participating": "tab:blue",
          "all": "tab:orange", "mifa": "tab:purple"}

ROUND_S = 10.0  # simulated seconds per round (round.interval); a round needs < 1 s at the speeds below


@dataclass(frozen=True)
class Sizes:
    clients: int
    rounds: int
    eval_every: int
    test_samples: int | None


FULL = Sizes(clients=250, rounds=600, eval_every=10, test_samples=None)
QUICK = Sizes(clients=100, rounds=200, eval_every=10, test_samples=None)


def scenario_dict(pattern: str, algo: str, seed: int, sizes: Sizes, model: str, lr_scale: float,
                  data_dir: str | None) -> dict:
    label, algorithm, gamma = ALGORITHMS[algo]
    dataset: dict = {"name": "fashion-mnist", "partition": {"kind": "dirichlet", "alpha": 0.1}}
    if data_dir is not None:
        dataset["data_dir"] = data_dir
    return {
        "name": f"fedau-{pattern}-{algo}-seed{seed}",
        "seed": seed,
        "stop": {"rounds": sizes.rounds},
        "task": {
            "dataset": dataset,
            "model": {"name": model},
            "local": {"steps": 5, "batch_size": 16, "lr": gamma * lr_scale},
        },
        "devices": [{
            "group": "clients",
            "count": sizes.clients,
            # mains powered (no battery), identical speed and link: a round's length never depends on who trains
            "compute": {"flops_per_s": "2GFLOPS"},
            "availability": PATTERNS[pattern],
            "link": {"uplink": "20Mbps", "downlink": "20Mbps", "latency": "10ms"},
        }],
        "server": {
            "algorithm": dict(algorithm),
            "mode": "sync",
            # all available clients, no deadline; every round lasts exactly `interval`
            "round": {"idle_wait": "1s", "interval": f"{ROUND_S}s"},
        },
        "eval": {"every": sizes.eval_every,
                 **({"max_test_samples": sizes.test_samples} if sizes.test_samples else {})},
    }


def _init_worker(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def run_one(pattern: str, algo: str, seed: int, sizes: Sizes, model: str, lr_scale: float, data_dir: str | None,
            out_dir: str) -> dict:
    """One netfl run; returns its curve (round, sim time, accuracy, worst-class accuracy) and a few counts."""
    from netfl.runner import run_scenario
    from netfl.config import scenario_from_dict

    started, cpu_started = time.perf_counter(), time.process_time()
    scenario = scenario_from_dict(scenario_dict(pattern, algo, seed, sizes, model, lr_scale, data_dir),
                                  source=f"fedau_participation[{pattern}/{algo}/seed{seed}]")
    outcome = run_scenario(scenario, out_dir=Path(out_dir))
    (outcome.out_dir / "scenario.yaml").write_text(
        yaml.safe_dump(scenario_dict(pattern, algo, seed, sizes, model, lr_scale, data_dir), sort_keys=False))
    rounds, times, acc, worst = [], [], [], []
    with (outcome.out_dir / "metrics.csv").open() as f:
        for row in csv.DictReader(f):
            rounds.append(int(row["round"]))
            times.append(float(row["sim_time_s"]))
            acc.append(float(row["test_accuracy"]))
            per_class = [float(v) for k, v in row.items() if k.startswith("class_") and v not in ("", "nan")]
            worst.append(min(per_class) if per_class else math.nan)
    s = outcome.summary
    return {"pattern": pattern, "algo": algo, "seed": seed, "round": rounds, "sim_time_s": times, "acc": acc,
            "worst": worst, "rounds": s["rounds"], "sim_time_total": s["sim_time_s"],
            "updates": s["updates_received"], "wall_s": time.perf_counter() - started,
            "cpu_s": time.process_time() - cpu_started}


def tail_mean(values: list[float]) -> float:
    """Mean over the last 10 % of the evaluations (at least one; the round-0 evaluation excluded)."""
    v = np.asarray(values[1:] if len(values) > 1 else values, dtype=float)
    k = max(1, int(round(0.1 * len(v))))
    return float(v[-k:].mean())


def fmt(values: list[float]) -> str:
    a = 100 * np.asarray(values)
    return f"{a.mean():.1f}" if len(a) == 1 else f"{a.mean():.1f} ± {a.std(ddof=1):.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke version: {QUICK.clients} clients, {QUICK.rounds} rounds, "
                             f"{QUICK.test_samples} test samples (full: {FULL.clients} clients, {FULL.rounds} rounds, "
                             "all 10000 test samples)")
    parser.add_argument("--seeds", type=int, default=1, help="seeds to average over (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--clients", type=int, help="override N")
    parser.add_argument("--rounds", type=int, help="override the number of rounds")
    parser.add_argument("--model", default="mlp", choices=["logistic", "mlp", "lenet5", "cnn"],
                        help="default lenet5; cnn is FedAU's Fashion-MNIST CNN (about 4x slower)")
    parser.add_argument("--lr-scale", type=float, default=1.0, help="multiplies every client lr gamma (default 1)")
    parser.add_argument("--algorithms", default=",".join(DEFAULT_ALGORITHMS),
                        help=f"comma-separated, from {', '.join(ALGORITHMS)} (default {','.join(DEFAULT_ALGORITHMS)})")
    parser.add_argument("--patterns", default=",".join(PATTERNS), help="comma-separated (default all three)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="runs in parallel, one torch thread each (default min(2, cores))")
    parser.add_argument("--data-dir", help="folder of the Fashion-MNIST IDX files (default Debian's)")
    parser.add_argument("--out", type=Path, default=Path("results/examples/fedau_participation"))
    args = parser.parse_args()

    base = QUICK if args.quick else FULL
    sizes = Sizes(args.clients or base.clients, args.rounds or base.rounds, base.eval_every, base.test_samples)
    algos = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    patterns = [p.strip() for p in args.patterns.split(",") if p.strip()]
    for name, known in ((algos, ALGORITHMS), (patterns, PATTERNS)):
        bad = [n for n in name if n not in known]
        if bad:
            parser.error(f"unknown: {', '.join(bad)} (accepted: {', '.join(known)})")
    seeds = [args.seed + s for s in range(args.seeds)]
    data_dir = str(Path(args.data_dir).resolve()) if args.data_dir else None
    args.out.mkdir(parents=True, exist_ok=True)

    tasks = [(p, a, s) for s in seeds for p in patterns for a in algos]
    print(f"FedAU participation: {len(tasks)} runs ({len(patterns)} patterns x {len(algos)} algorithms x "
          f"{len(seeds)} seed(s)), N={sizes.clients}, {sizes.rounds} rounds, model {args.model}, "
          f"{args.jobs} in parallel", flush=True)
    started = time.perf_counter()
    results: list[dict] = []
    jobs = max(1, args.jobs)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"), initializer=_init_worker,
                             initargs=(1 if jobs > 1 else max(1, os.cpu_count() or 1),)) as pool:
        futures = {pool.submit(run_one, p, a, s, sizes, args.model, args.lr_scale, data_dir,
                               str(args.out / "runs" / p / a / f"seed{s}")): (p, a, s) for p, a, s in tasks}
        for done, future in enumerate(as_completed(futures), 1):
            r = future.result()
            results.append(r)
            print(f"  [{done}/{len(tasks)}] {r['pattern']:9s} {ALGORITHMS[r['algo']][0]:22s} seed {r['seed']}: "
                  f"final {100 * r['acc'][-1]:.1f}%, last-10% mean {100 * tail_mean(r['acc']):.1f}%, "
                  f"{r['updates'] / r['rounds']:.1f} participants/round ({r['wall_s']:.0f} s, {r['cpu_s']:.0f} CPU s)",
                  flush=True)
    wall = time.perf_counter() - started

    # every round lasts ROUND_S simulated seconds: accuracy vs round == accuracy vs simulated time
    for r in results:
        expected = np.asarray(r["round"], dtype=float) * ROUND_S
        if not np.allclose(r["sim_time_s"], expected, rtol=0, atol=1e-6):
            raise SystemExit(f"{r['pattern']}/{r['algo']}: rounds did not all take {ROUND_S} simulated s")

    by_key: dict[tuple[str, str], list[dict]] = {}
    for r in sorted(results, key=lambda r: r["seed"]):
        by_key.setdefault((r["pattern"], r["algo"]), []).append(r)

    write_curves(args.out / "curves.csv", results)
    plot(args.out / "fedau_participation.png", by_key, patterns, algos, sizes, args.model)
    table = make_table(by_key, patterns, algos, sizes, args, seeds, wall)
    (args.out / "table.md").write_text(table + "\n")
    print()
    print(table)
    cpu = sum(r["cpu_s"] for r in results)
    print(f"\nwall time {wall:.0f} s; CPU time of the runs {cpu:.0f} s; results in {args.out}/")


def write_curves(path: Path, results: list[dict]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["pattern", "algorithm", "seed", "round", "sim_time_s", "test_accuracy", "worst_class_accuracy"])
        for r in sorted(results, key=lambda r: (r["pattern"], r["algo"], r["seed"])):
            for k in range(len(r["round"])):
                w.writerow([r["pattern"], r["algo"], r["seed"], r["round"][k], f"{r['sim_time_s'][k]:.1f}",
                            f"{r['acc'][k]:.4f}", f"{r['worst'][k]:.4f}"])


def plot(path: Path, by_key: dict, patterns: list[str], algos: list[str], sizes: Sizes, model: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(patterns), figsize=(5.2 * len(patterns), 4.4), sharey=True, squeeze=False)
    for ax, pattern in zip(axes[0], patterns):
        for algo in algos:
            runs = by_key.get((pattern, algo), [])
            if not runs:
                continue
            rounds = np.asarray(runs[0]["round"])
            acc = 100 * np.asarray([r["acc"] for r in runs])
            ax.plot(rounds, acc.mean(0), label=ALGORITHMS[algo][0], color=COLORS.get(algo), lw=1.4)
            if len(runs) > 1:
                ax.fill_between(rounds, acc.min(0), acc.max(0), color=COLORS.get(algo), alpha=0.15, lw=0)
        ax.set_title(PATTERN_TITLES[pattern])
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
        top = ax.secondary_xaxis("top", functions=(lambda r: r * ROUND_S / 60.0, lambda m: m * 60.0 / ROUND_S))
        top.set_xlabel("simulated time (min)")
    axes[0][0].set_ylabel("test accuracy (%)")
    axes[0][0].legend(loc="lower right", fontsize=8)
    seeds = len(next(iter(by_key.values())))
    fig.suptitle(f"FedAU vs baselines, Fashion-MNIST {model}, N={sizes.clients}, Dirichlet(0.1), "
                 f"p from data, I=5, batch 16" + (f" ({seeds} seeds: mean, min-max band)" if seeds > 1 else ""),
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def make_table(by_key: dict, patterns: list[str], algos: list[str], sizes: Sizes, args, seeds: list[int],
               wall: float) -> str:
    lines = [f"FedAU vs baselines: Fashion-MNIST, {args.model}, N = {sizes.clients}, Dirichlet(0.1) label skew, "
             f"participation tied to data (p: {{from: data}}), I = 5 steps, batch 16, {sizes.rounds} rounds "
             f"({ROUND_S:g} simulated s each), seeds {', '.join(map(str, seeds))}"
             + (f", client lr x {args.lr_scale:g}" if args.lr_scale != 1 else "") + ".",
             "Test accuracy (%): mean over the last 10 % of evaluations / best"
             + (" (mean ± std over seeds)" if len(seeds) > 1 else "") + "; worst class: its accuracy over the "
             "same last 10 %.", ""]
    lines += ["| algorithm (gamma, eta) | " + " | ".join(PATTERN_TITLES[p] for p in patterns) + " |",
              "| --- |" + " --- |" * len(patterns)]
    for algo in algos:
        label, spec, gamma = ALGORITHMS[algo]
        eta = spec.get("server_lr", 1.0)
        cells = []
        for pattern in patterns:
            runs = by_key.get((pattern, algo), [])
            if not runs:
                cells.append("-")
                continue
            cells.append(f"{fmt([tail_mean(r['acc']) for r in runs])} / {fmt([max(r['acc']) for r in runs])}"
                         f" (worst class {fmt([tail_mean(r['worst']) for r in runs])})")
        lines.append(f"| {label} ({gamma * args.lr_scale:.3g}, {eta:g}) | " + " | ".join(cells) + " |")
    parts = []
    for pattern in patterns:
        runs = [r for a in algos for r in by_key.get((pattern, a), [])]
        if runs:
            parts.append(f"{pattern} {np.mean([r['updates'] / r['rounds'] for r in runs]):.1f}")
    lines += ["", f"Mean participants per round: {', '.join(parts)} (of {sizes.clients}). Wall time {wall:.0f} s "
              f"with {args.jobs} parallel run(s)."]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
