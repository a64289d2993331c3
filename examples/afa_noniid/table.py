"""AFA-CS against AFA-CD per non-iid index p, from a sweep of study.yaml (Anarchic FL, Yang et al.).

    python examples/afa_noniid/table.py results/afa_noniid

Per p and algorithm: eta, final and best test accuracy, the mean over the last 25 % of the simulated time, and
CS − CD on that mean, seed by seed; then how uneven the arrivals were (the fast workers' share of the updates,
staleness). Prints the table and writes it to STUDY_DIR/table.md.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

from netfl.config import load_scenario
from netfl.results.report_load import find_run_folders, load_runs


def ms(values) -> str:
    """Mean ± standard deviation over the seeds (ddof 0), in %."""
    values = 100 * np.asarray(values, dtype=float)
    return f"{values.mean():.1f} ± {values.std():.1f}" if len(values) > 1 else f"{values[0]:.1f}"


def tail(run) -> float:
    """Mean test accuracy over the evaluations in the last 25 % of the run's simulated time."""
    m = run.metrics
    return float(m.test_accuracy[m.sim_time_s >= 0.75 * m.sim_time_s.iloc[-1]].mean())


def local_steps(k) -> str:
    return f"K ~ U{{{k.params[0]:g}..{k.params[1]:g}}}" if k.kind == "uniform" else f"K ~ {k.as_scenario_value()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study_dir", type=Path, help="the study folder netfl sweep wrote")
    args = parser.parse_args()

    runs: dict[tuple[int, str], list] = defaultdict(list)  # (p, algorithm) -> runs, by seed
    for run in sorted(load_runs(find_run_folders([args.study_dir])), key=lambda r: r.seed):
        algorithm, point = run.case.split(", ")
        runs[int(point.removeprefix("classes_per_client=")), algorithm].append(run)
    ps = sorted({p for p, _ in runs})
    algorithms = sorted({a for _, a in runs})  # afa_cd, afa_cs
    first = runs[ps[0], algorithms[0]][0]
    scenario = load_scenario(first.path / "scenario.yaml")
    seeds = [r.seed for r in runs[ps[0], algorithms[0]]]

    rows = [
        "| p (classes per worker) | algorithm | eta | final acc | best acc | mean acc, last 25 % of the run "
        "| CS − CD (last 25 %) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in ps:
        for algorithm in algorithms:
            rs = runs[p, algorithm]
            eta = load_scenario(rs[0].path / "scenario.yaml").server.algorithm.params["server_lr"]
            diff = ""
            if algorithm == "afa_cs" and (p, "afa_cd") in runs:
                diff = ms(np.subtract([tail(r) for r in rs], [tail(r) for r in runs[p, "afa_cd"]]))
            rows.append(
                f"| {p} | {algorithm} | {eta:.2f} | {ms([r.metrics.test_accuracy.iloc[-1] for r in rs])} | "
                f"{ms([r.metrics.test_accuracy.max() for r in rs])} | {ms([tail(r) for r in rs])} | {diff} |"
            )

    devices = first.devices
    delivered = devices.groupby("group").updates_delivered.sum()
    groups = scenario.devices
    staleness = first.summary["staleness"]
    task, server = scenario.tasks[0], scenario.server
    notes = (
        f"{task.dataset.name}, {task.model.name} model, M = {sum(g.count for g in groups)} workers ("
        + ", ".join(f"{g.count} {g.group}" for g in groups)
        + f"), m = {server.async_.buffer} updates per aggregation, {local_steps(server.async_.local_steps)}, "
        f"batch {task.local.batch_size}, "
        f"eta_L = {task.local.lr:g}, {first.summary['rounds']} aggregations per run. In the first run "
        f"({first.case}, seed {first.seed}) the fast workers sent "
        f"{100 * delivered.get('fast', 0) / delivered.sum():.0f} % of the updates; staleness mean "
        f"{staleness['mean']:.1f}, max {staleness['max']} versions. Accuracy in % on the test set, mean ± std "
        f"over seeds {seeds} (both algorithms see the same world per seed)."
    )
    table = "\n".join(rows) + "\n\n" + notes
    (args.study_dir / "table.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
