"""Fed-CVaR-Avg's Table 1 (overall and rare-pattern accuracy) from a sweep of study.yaml ("Federated Learning
Under Restricted User Availability").

    python examples/cvar_fashion/table.py results/cvar_fashion

The rare users and their labels are the partition's ``exclusive`` ones; a rare round is one whose relayed update
came from a rare user (events.parquet's relay_pass). At this scale the rare-pattern accuracy of the final model
depends mostly on how many rounds ago a rare user was last relayed, so the table also gives the last 25 % of
rounds, the per-seed (paired) differences and the accuracy binned by rounds since the last rare round, then the
paper's numbers. Prints the table and writes STUDY_DIR/table.md and rare_patterns.png (rare-pattern and label-9
accuracy against round; the report plots overall accuracy only).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from netfl.config import load_scenario
from netfl.results.report_load import find_run_folders, load_runs

PAPER = {  # Table 1: overall | pattern 1 | pattern 2 (mean ± std over 5 repeats)
    (1.0, 0.1): ("84.9 ± 0.6", "84.6 ± 1.6", "59.6 ± 3.8"),
    (1.0, 0.0): ("85.1 ± 0.5", "85.5 ± 1.5", "61.0 ± 3.6"),
    (0.1, 0.0): ("86.1 ± 0.9", "87.5 ± 2.4", "70.6 ± 3.5"),
    (0.1, 0.1): ("86.5 ± 0.5", "88.7 ± 1.5", "71.7 ± 2.4"),
}
SINCE_BINS = [(0, 10), (10, 25), (25, 50), (50, None)]


@dataclass
class Curves:
    """One run: evaluations (round, overall and per-class accuracy) and its rare rounds."""

    seed: int
    rounds: np.ndarray
    acc: np.ndarray
    per_class: np.ndarray  # evaluation x class
    rare_rounds: list[int]


def read(run, rare_users: list[int]) -> Curves:
    m = run.metrics
    classes = m.filter(regex=r"^class_\d+_accuracy$").to_numpy()
    events = pq.read_table(run.path / "events.parquet", columns=["round", "device", "kind"]).to_pandas()
    passed = events[(events.kind == "relay_pass") & events.device.isin(rare_users)]
    # event round i is the (i + 1)-th aggregation: metrics.csv's round i + 1 is the first evaluation after it
    return Curves(
        run.seed,
        m["round"].to_numpy(),
        m.test_accuracy.to_numpy(),
        classes,
        sorted(int(r) + 1 for r in passed["round"]),
    )


def ms(values) -> str:
    """Mean ± standard deviation over the seeds (ddof 0), in %."""
    values = 100 * np.asarray(values, dtype=float)
    return f"{values.mean():.1f} ± {values.std():.1f}" if len(values) > 1 else f"{values[0]:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study_dir", type=Path, help="the study folder netfl sweep wrote")
    args = parser.parse_args()

    loaded = sorted(load_runs(find_run_folders([args.study_dir])), key=lambda r: r.seed)
    scenario = load_scenario(loaded[0].path / "scenario.yaml")
    exclusive = scenario.tasks[0].dataset.partition.exclusive[0]
    rare_users, rare_labels = list(exclusive.clients), list(exclusive.labels)
    runs: dict[float, list[Curves]] = defaultdict(list)  # alpha -> runs, by seed
    for run in loaded:
        runs[float(run.case.removeprefix("alpha="))].append(read(run, rare_users))
    alphas = list(runs)
    total_rounds = loaded[0].summary["rounds"]
    gamma = scenario.server.algorithm.params["gamma"]
    seeds = [c.seed for c in runs[alphas[0]]]

    def rare(c: Curves, rows=slice(None)) -> np.ndarray:
        return c.per_class[rows][..., rare_labels].mean(-1)

    def tail(c: Curves) -> np.ndarray:
        return c.rounds >= 0.75 * total_rounds

    labels = ", ".join(map(str, rare_labels))
    lines = [
        f"| setting | overall acc | rare-pattern acc (labels {labels}) | "
        + " | ".join(f"label {k}" for k in rare_labels)
        + " | overall, last 25 % | rare-pattern, last 25 % | rare rounds per run | rounds since the last one |",
        "| --- | --- | --- |" + " --- |" * (len(rare_labels) + 4),
    ]
    for alpha in alphas:
        rs = runs[alpha]
        name = f"alpha = {alpha:g}" + (" (FedAvg)" if alpha == 1 else f", gamma = {gamma:g}")
        since_last = ", ".join(str(c.rounds[-1] - c.rare_rounds[-1]) if c.rare_rounds else "-" for c in rs)
        lines.append(
            f"| {name} | {ms([c.acc[-1] for c in rs])} | {ms([rare(c, -1) for c in rs])} | "
            + " | ".join(ms([c.per_class[-1, k] for c in rs]) for k in rare_labels)
            + f" | {ms([c.acc[tail(c)].mean() for c in rs])} | {ms([rare(c, tail(c)).mean() for c in rs])}"
            f" | {', '.join(str(len(c.rare_rounds)) for c in rs)} | {since_last} |"
        )
    lines += [
        "",
        "Rare-pattern accuracy by rounds since the last rare round (all evaluations after the first rare "
        "round, pooled over seeds; n = evaluations):",
        "",
        "| setting | " + " | ".join(f"{lo}-{hi - 1} rounds" if hi else f"{lo}+ rounds" for lo, hi in SINCE_BINS) + " |",
        "| --- |" + " --- |" * len(SINCE_BINS),
    ]
    for alpha in alphas:
        pooled = since_last_rare(runs[alpha], rare_labels)
        lines.append(
            f"| alpha = {alpha:g} | "
            + " | ".join(f"{100 * np.mean(v):.1f} (n = {len(v)})" if v else "-" for v in pooled)
            + " |"
        )
    if 1.0 in runs:  # paired by seed: same data, initial model and relay draws
        for alpha in [a for a in alphas if a != 1.0]:
            measures = [
                ("final overall", lambda c: c.acc[-1]),
                ("final rare-pattern", lambda c: rare(c, -1)),
                ("last-25 % rare-pattern", lambda c: rare(c, tail(c)).mean()),
            ]
            diffs = "; ".join(
                f"{label} " + ", ".join(f"{100 * (f(a) - f(b)):+.1f}" for a, b in zip(runs[alpha], runs[1.0]))
                for label, f in measures
            )
            lines.append(f"\nalpha = {alpha:g} minus alpha = 1, seed by seed {seeds} (points): {diffs}.")
    lines += [
        "",
        "The paper (Table 1, T = 6000, H = 20, 5 repeats; pattern 1 / pattern 2 are the two rare labels):",
        "",
        "| setting | overall | pattern 1 | pattern 2 |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| alpha = {a:g}, gamma = {g:g} | {o} | {p1} | {p2} |" for (a, g), (o, p1, p2) in PAPER.items()]
    task = scenario.tasks[0]
    rho = scenario.network.nodes["relay"].ram.rho
    test = scenario.eval.max_test_samples
    lines += [
        "",
        f"netfl: K = {len(rho)}, rho of the rare users {rare_users[0]}-{rare_users[-1]} = "
        f"{tuple(rho[u] for u in rare_users)} (labels {labels} exclusively), {total_rounds} rounds (the paper: "
        f"6000) of H = {task.local.epochs:g} local epochs (the paper: 20), batch {task.local.batch_size} (the "
        f"paper: 128), lr theta = {task.local.lr:g}, lr t = {scenario.server.algorithm.params['t_lr']:g}, "
        f"model {task.model.name}. Accuracy in % on {f'the first {test}' if test else 'all'} test images of "
        "the final global model (and averaged over the evaluations in the last 25 % of rounds), mean ± std "
        f"over seeds {seeds}; a seed fixes init, split, batches and the relay's draws, the same for both alphas.",
    ]
    table = "\n".join(lines)
    (args.study_dir / "table.md").write_text(table + "\n")
    print(table)
    plot(args.study_dir / "rare_patterns.png", runs, rare_labels, gamma)
    print(f"wrote {args.study_dir / 'table.md'}, {args.study_dir / 'rare_patterns.png'}")


def since_last_rare(rs: list[Curves], rare_labels: list[int]) -> list[list[float]]:
    """Rare-pattern accuracies of every evaluation, binned by rounds since the last rare round before it."""
    out: list[list[float]] = [[] for _ in SINCE_BINS]
    for c in rs:
        rare = np.asarray(c.rare_rounds)
        for rnd, pc in zip(c.rounds, c.per_class):
            before = rare[rare <= rnd]
            if len(before):
                k = rnd - before[-1]
                b = next(i for i, (lo, hi) in enumerate(SINCE_BINS) if hi is None or k < hi)
                out[b].append(float(pc[rare_labels].mean()))
    return out


def plot(path: Path, runs: dict[float, list[Curves]], rare_labels: list[int], gamma: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    alphas = list(runs)
    colors = dict(zip(alphas, ["tab:red", "tab:blue", "tab:green", "tab:purple"]))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), dpi=100, sharey=True)
    panels = [
        (
            f"rare-pattern accuracy (labels {', '.join(map(str, rare_labels))})",
            lambda c: c.per_class[:, rare_labels].mean(1),
        ),
        (f"label {rare_labels[-1]} accuracy", lambda c: c.per_class[:, rare_labels[-1]]),
    ]
    for ax, (title, value) in zip(axes, panels):
        for alpha in alphas:
            curves = [value(c) for c in runs[alpha]]
            rounds = runs[alpha][0].rounds
            for curve in curves:
                ax.plot(rounds, curve, color=colors[alpha], alpha=0.25, lw=0.8)
            label = f"alpha = {alpha:g}" + (" (FedAvg)" if alpha == 1 else f", gamma = {gamma:g}")
            ax.plot(rounds, np.mean(curves, axis=0), color=colors[alpha], lw=2, label=label)
        for rnd in runs[alphas[0]][0].rare_rounds:
            ax.axvline(rnd, color="grey", lw=0.5, alpha=0.5)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("round")
        ax.set_ylim(-0.02, 1.0)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper right", fontsize=8)
    fig.suptitle(
        f"Fed-CVaR-Avg: mean over seeds (thin: each seed; grey: rare rounds of seed {runs[alphas[0]][0].seed})",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    main()
