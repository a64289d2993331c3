"""FedAU's comparison table from a sweep of study.yaml (FedAU, Wang & Ji): one row per algorithm, one column
per participation pattern.

    python examples/fedau_participation/table.py results/fedau_participation

A cell is the test accuracy averaged over the last 10 % of evaluations / the best accuracy, and the worst class's
accuracy over the same last 10 % (the report shows overall accuracy only). Prints the table and writes it to
STUDY_DIR/table.md. Checks that every round lasted the same simulated time, so that the rounds of the table are
the simulated time of `netfl report`'s plots.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

from netfl.config import load_scenario
from netfl.results.report_load import find_run_folders, load_runs

LABELS = {
    "fedau": "FedAU (K = inf)",
    "fedau50": "FedAU (K = 50)",
    "known": "known participation p",
    "participating": "average participating",
    "all": "average all",
    "mifa": "MIFA",
}
PATTERNS = {"bernoulli": "Bernoulli", "markov": "Markovian (transition 0.05)", "cyclic": "cyclic (period 100)"}


def tail_mean(values: np.ndarray) -> float:
    """Mean over the last 10 % of the evaluations (at least one; the round-0 evaluation left out)."""
    v = values[1:] if len(values) > 1 else values
    return float(v[-max(1, round(0.1 * len(v))) :].mean())


def fmt(values: list[float]) -> str:
    a = 100 * np.asarray(values)
    return f"{a.mean():.1f}" if len(a) == 1 else f"{a.mean():.1f} ± {a.std(ddof=1):.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study_dir", type=Path, help="the study folder netfl sweep wrote")
    args = parser.parse_args()

    cells: dict[tuple[str, str], list] = defaultdict(list)  # (case, pattern) -> runs
    scenarios = {}
    for run in sorted(load_runs(find_run_folders([args.study_dir])), key=lambda r: r.seed):
        case, point = run.case.split(", ")
        pattern = point.removeprefix("availability=")
        scenario = load_scenario(run.path / "scenario.yaml")
        interval = scenario.server.round.interval
        m = run.metrics
        if not np.allclose(m.sim_time_s, m["round"] * interval, rtol=0, atol=1e-6):
            raise SystemExit(f"{run.path}: rounds did not all last {interval:g} simulated s")
        cells[case, pattern].append(run)
        scenarios[case] = scenario

    cases = list(dict.fromkeys(case for case, _ in cells))
    order = list(PATTERNS)
    patterns = sorted({p for _, p in cells}, key=lambda p: order.index(p) if p in order else len(order))
    first = next(iter(scenarios.values()))
    seeds = sorted({run.seed for runs in cells.values() for run in runs})
    rounds = max(run.summary["rounds"] for runs in cells.values() for run in runs)
    task, clients = first.tasks[0], first.devices[0].count
    lines = [
        f"FedAU vs baselines: {task.dataset.name}, {task.model.name}, N = {clients}, "
        f"Dirichlet({task.dataset.partition.alpha:g}) label skew, participation tied to data, "
        f"I = {task.local.steps} steps, batch {task.local.batch_size}, {rounds} rounds "
        f"({first.server.round.interval:g} simulated s each), seeds {', '.join(map(str, seeds))}.",
        "Test accuracy (%): mean over the last 10 % of evaluations / best"
        + (" (mean ± std over seeds)" if len(seeds) > 1 else "")
        + "; worst class: its accuracy over the same last 10 %.",
        "",
        "| algorithm (gamma, eta) | " + " | ".join(PATTERNS.get(p, p) for p in patterns) + " |",
        "| --- |" + " --- |" * len(patterns),
    ]
    for case in cases:
        gamma = scenarios[case].tasks[0].local.lr
        eta = scenarios[case].server.algorithm.params.get("server_lr", 1.0)  # MIFA without one: eta = 1
        row = []
        for pattern in patterns:
            runs = cells.get((case, pattern), [])
            acc = [r.metrics.test_accuracy.to_numpy() for r in runs]
            worst = [r.metrics.filter(regex=r"^class_\d+_accuracy$").min(axis=1).to_numpy() for r in runs]
            row.append(
                f"{fmt([tail_mean(a) for a in acc])} / {fmt([a.max() for a in acc])} "
                f"(worst class {fmt([tail_mean(w) for w in worst])})"
                if runs
                else "-"
            )
        lines.append(f"| {LABELS.get(case, case)} ({gamma:.3g}, {eta:g}) | " + " | ".join(row) + " |")

    def per_round(pattern: str) -> float:
        runs = [r for (_, p), rs in cells.items() if p == pattern for r in rs]
        return float(np.mean([r.summary["updates_received"] / r.summary["rounds"] for r in runs]))

    lines += [
        "",
        f"Mean participants per round: {', '.join(f'{p} {per_round(p):.1f}' for p in patterns)} (of {clients}).",
    ]
    table = "\n".join(lines)
    (args.study_dir / "table.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
