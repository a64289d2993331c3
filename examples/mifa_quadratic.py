"""The MIFA notes' quadratic toy through netfl's strategies.

Ten clients, client i minimising f_i(w) = 1/2 ||w - b_i||^2 with spread-out
optima b_i; each client's update arrives in a round with probability
p_i = 0.1 (Bernoulli); one local gradient step of gamma = 0.02, server step
eta = 0.02 on the gradient-like G_t (MIFA convention) -- or, for the FedAU
convention strategies, server_lr = eta / gamma = 1, the same step. Every
algorithm sees the same arrivals. No engine and no data: the strategies'
``aggregate`` is called directly with closed-form client updates
(:class:`netfl.learn.federation.algorithms.toy.QuadraticToy`).

Expected (the notes): unbiased FedAvg stalls at an error floor of order
eta (1/p - 1) sigma_G^2; MIFA and U-MIFA reach the optimum; U-MIFAm is the
fastest. U-MIFA with the table keeping its own estimates (``store: estimate``,
the notes' recursion read literally) diverges at p = 0.1.

    python examples/mifa_quadratic.py [--rounds 3000] [--seed 0] [--out results/examples/mifa_quadratic]

Writes ``mifa_quadratic.png`` (error vs round, log scale), ``errors.csv`` and
``table.md`` (also printed) into ``--out``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from netfl.learn.federation.algorithms import ALGORITHMS
from netfl.learn.federation.algorithms.toy import QuadraticToy

ETA = 0.02  # the notes' step size
TARGET = 1e-3

# (label, registered name, parameters)
RUNS: list[tuple[str, str, dict]] = [
    ("FedAvg, average participating", "fedavg", {"weighting": "uniform", "server_lr": 1.0}),
    ("FedAvg unbiased (1/p weights)", "fedavg_unbiased", {"server_lr": ETA}),
    ("FedAU (K = inf)", "fedau", {"server_lr": 1.0}),
    ("MIFA", "mifa", {"server_lr": ETA}),
    ("U-MIFA", "umifa", {"server_lr": ETA}),
    ("U-MIFA, store: estimate (literal)", "umifa", {"server_lr": ETA, "store": "estimate"}),
    ("MIFAm (beta 0.9)", "mifam", {"server_lr": ETA, "beta": 0.9}),
    ("U-MIFAm (beta 0.9)", "umifam", {"server_lr": ETA, "beta": 0.9}),
]


def errors(rounds: int, seed: int = 0) -> tuple[dict[str, np.ndarray], QuadraticToy, object]:
    """Each algorithm's ‖w − w*‖² after every round (examples/reproductions.py pins its rounds to 1e-3), the toy
    and the starting point."""
    toy = QuadraticToy.spread(num_clients=10, dim=5, scale=3.0, p=0.1, lr=ETA, local_steps=1, seed=seed)
    arrivals = toy.arrivals(rounds, seed=seed + 1)
    x0 = toy.optimum + 5.0  # start 5 away from w* in every coordinate
    curves: dict[str, np.ndarray] = {}
    for label, name, params in RUNS:
        cls = ALGORITHMS[name]
        with np.errstate(all="ignore"):
            curves[label] = toy.run(cls(cls.Params(**params), toy.client_info()), arrivals, x0)
    return curves, toy, x0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/examples/mifa_quadratic"))
    args = parser.parse_args()

    started = time.perf_counter()
    curves, toy, x0 = errors(args.rounds, args.seed)
    elapsed = time.perf_counter() - started
    sigma_g2 = float(((toy.b - toy.optimum) ** 2).sum(dim=1).mean())

    args.out.mkdir(parents=True, exist_ok=True)
    rows = [
        "| algorithm | final ‖w − w*‖² | mean over last 10 % of rounds | rounds to reach 1e-3 |",
        "| --- | --- | --- | --- |",
    ]
    for label, err in curves.items():
        tail = err[-max(1, len(err) // 10) :]
        below = np.flatnonzero(err < TARGET)
        reach = str(int(below[0]) + 1) if len(below) else "never"
        final = f"{err[-1]:.3g}" if np.isfinite(err[-1]) else "diverged"
        mean_tail = f"{tail.mean():.3g}" if np.all(np.isfinite(tail)) else "diverged"
        rows.append(f"| {label} | {final} | {mean_tail} | {reach} |")
    header = (
        f"Quadratic toy: 10 clients, p = 0.1, eta = gamma = {ETA}, dim 5, sigma_G^2 = {sigma_g2:.1f}, "
        f"||w0 - w*||^2 = {float(((x0 - toy.optimum) ** 2).sum()):.0f}, {args.rounds} rounds, seed {args.seed} "
        f"({elapsed:.1f} s)"
    )
    table = header + "\n\n" + "\n".join(rows) + "\n"
    (args.out / "table.md").write_text(table)

    with open(args.out / "errors.csv", "w") as f:
        f.write("round," + ",".join(f'"{label}"' for label in curves) + "\n")
        for t in range(args.rounds):
            f.write(f"{t + 1}," + ",".join(f"{curves[label][t]:.6g}" for label in curves) + "\n")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    rounds = np.arange(1, args.rounds + 1)
    floor = 1e-32
    for label, err in curves.items():
        shown = np.where(np.isfinite(err), np.clip(err, floor, 1e8), np.nan)
        ax.plot(rounds, shown, linewidth=1.1, label=label, linestyle="--" if "literal" in label else "-")
    ax.set_yscale("log")
    ax.set_ylim(floor, 1e4)
    ax.axhline(TARGET, color="grey", linewidth=0.6, linestyle=":")
    ax.set_xlabel("round")
    ax.set_ylabel("‖w − w*‖²")
    ax.set_title("MIFA notes' quadratic toy: 10 clients, p = 0.1, η = 0.02")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(args.out / "mifa_quadratic.png")
    plt.close(fig)

    print(table)
    print(f"wrote {args.out / 'mifa_quadratic.png'}, {args.out / 'errors.csv'}, {args.out / 'table.md'}")


if __name__ == "__main__":
    main()
