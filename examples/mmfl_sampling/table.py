"""MMFL's sampling comparison from a sweep of study.yaml (MMFL, Zhang et al.): the average accuracy over the
models, the worst model, rounds and simulated time to a target, and what the sampling costs (time, energy,
uplink bytes).

    python examples/mmfl_sampling/table.py results/mmfl_sampling --target 0.65

Rounds and simulated seconds to the target are per seed (- when never reached). Prints the table and writes it
to STUDY_DIR/table.md.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

from netfl.config import load_scenario
from netfl.results.report_load import find_run_folders, load_runs
from netfl.units import parse_quantity


def ms(values, scale: float = 100.0, digits: int = 1) -> str:
    """Mean ± standard deviation over the seeds (ddof 0), times ``scale``."""
    v = scale * np.asarray(values, dtype=float)
    return f"{v.mean():.{digits}f} ± {v.std():.{digits}f}" if len(v) > 1 else f"{v[0]:.{digits}f}"


def fraction(text: str) -> float:
    """``0.65`` or ``65%``, as topology files write fractions."""
    return parse_quantity(text, "fraction")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study_dir", type=Path, help="the study folder netfl sweep wrote")
    parser.add_argument(
        "--target",
        type=fraction,
        default=0.65,
        help="average accuracy whose first round and time are tabulated: 0.65 or 65%% (default 0.65)",
    )
    args = parser.parse_args()

    runs: dict[str, list] = defaultdict(list)  # sampling -> runs, by seed
    for run in sorted(load_runs(find_run_folders([args.study_dir])), key=lambda r: r.seed):
        runs[run.case].append(run)
    samplers = list(runs)
    first = runs[samplers[0]][0]
    scenario = load_scenario(first.path / "scenario.yaml")
    seeds = [r.seed for r in runs[samplers[0]]]

    def reached(run, column: str) -> str:
        m = run.metrics
        hit = np.flatnonzero(m.test_accuracy.to_numpy() >= args.target)
        return f"{m[column].iloc[hit[0]]:.{0 if column == 'round' else 1}f}" if len(hit) else "-"

    def tail(run) -> float:
        """Mean average accuracy over the last 20 % of evaluations."""
        acc = run.metrics.test_accuracy.to_numpy()
        return float(acc[-max(1, len(acc) // 5) :].mean())

    def worst_model(run) -> float:
        return float(run.metrics.filter(regex=r"^task\d+_accuracy$").iloc[-1].min())

    target = f"{100 * args.target:.0f} %"
    rows = [
        "| sampling | average accuracy, final (%) | mean of the last 20 % of evaluations (%) | worst model, final (%) "
        f"| rounds to {target} | simulated s to {target} | simulated time (s) | energy (J) | uplink (MB) | updates |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for sampling, rs in runs.items():
        s = [r.summary for r in rs]
        rows.append(
            f"| {sampling} | {ms([r.metrics.test_accuracy.iloc[-1] for r in rs])} | {ms([tail(r) for r in rs])} "
            f"| {ms([worst_model(r) for r in rs])} | {', '.join(reached(r, 'round') for r in rs)} "
            f"| {', '.join(reached(r, 'sim_time_s') for r in rs)} | {ms([x['sim_time_s'] for x in s], 1, 0)} "
            f"| {ms([x['energy_j'] for x in s], 1, 0)} | {ms([x['bytes_up'] for x in s], 1e-6, 1)} "
            f"| {ms([x['updates_received'] for x in s], 1, 0)} |"
        )
    final = {k: np.mean([r.metrics.test_accuracy.iloc[-1] for r in rs]) for k, rs in runs.items()}
    gaps = (
        ", ".join(f"{100 * (final['optimal'] - final[b]):+.1f} points vs {b}" for b in samplers if b != "optimal")
        if "optimal" in final
        else ""
    )
    tasks, server = scenario.tasks, scenario.server
    dataset, local = tasks[0].dataset, tasks[0].local
    notes = (
        f"{dataset.name} ({dataset.max_train_samples or 'all'} training samples), {len(tasks)} models "
        f"({', '.join(dict.fromkeys(t.model.name for t in tasks))}), {scenario.devices[0].count} clients, "
        f"m = {server.round.participants} updates per round, {local.epochs:g} local epochs of batch "
        f"{local.batch_size} at lr {local.lr:g}, {first.summary['rounds']} rounds, norms reported: "
        f"{server.algorithm.params.get('norms', 'update')}. Accuracy on "
        f"{scenario.eval.max_test_samples or 'all'} test samples per model, averaged over the models; mean ± "
        f"std over seeds {seeds} (rounds and times to {target}: per seed; - never)."
        + (f" Optimal sampling: {gaps}." if gaps else "")
    )
    table = "\n".join(rows) + "\n\n" + notes
    (args.study_dir / "table.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
