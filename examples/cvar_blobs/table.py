"""Fed-CVaR-Avg's 2-D toy, from a sweep of study.yaml: per model and alpha, overall and per-class accuracy,
the rare class above all (Fed-CVaR-Avg, "Federated Learning Under Restricted User Availability").

    python examples/cvar_blobs/table.py results/cvar_blobs

Prints the table and writes STUDY_DIR/table.md, and rare_class.png: the rare user's class's test accuracy
against round, per model (the report plots overall accuracy only).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

from netfl.config import load_scenario
from netfl.results.report_load import find_run_folders, load_runs

RARE = 2  # the class of the rarely relayed user


def ms(values) -> str:
    """Mean ± standard deviation over the seeds (ddof 0), in %."""
    values = 100 * np.asarray(values, dtype=float)
    return f"{values.mean():.1f} ± {values.std():.1f}" if len(values) > 1 else f"{values[0]:.1f}"


def final(run, column: str) -> float:
    return float(run.metrics[column].iloc[-1])


def rare_tail(run) -> float:
    """The rare class's accuracy over the evaluations in the last 25 % of rounds: the global model is the last
    relayed user's, so a final accuracy depends on who was relayed last."""
    m = run.metrics
    return float(m[f"class_{RARE}_accuracy"][m["round"] >= 0.75 * run.summary["rounds"]].mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study_dir", type=Path, help="the study folder netfl sweep wrote")
    args = parser.parse_args()

    runs: dict[tuple[str, float], list] = defaultdict(list)  # (model, alpha) -> runs, by seed
    for run in sorted(load_runs(find_run_folders([args.study_dir])), key=lambda r: r.seed):
        model, point = run.case.split(", ")
        runs[model, float(point.removeprefix("alpha="))].append(run)
    first = next(iter(runs.values()))[0]
    scenario = load_scenario(first.path / "scenario.yaml")
    rho = scenario.network.nodes["relay"].ram.rho
    local, params = scenario.tasks[0].local, scenario.server.algorithm.params
    seeds = [r.seed for r in next(iter(runs.values()))]

    rows = [
        "| model | alpha | overall acc (final) | "
        + " | ".join(f"class {c} ({'rare, ' if c == RARE else ''}rho {rho[c]:g})" for c in range(len(rho)))
        + " | rare class, mean over the last 25 % of rounds |",
        "| --- | --- | --- |" + " --- |" * (len(rho) + 1),
    ]
    for (model, alpha), rs in runs.items():
        rows.append(
            f"| {model} | {alpha:g}{' (FedAvg)' if alpha == 1 else ''} | "
            f"{ms([final(r, 'test_accuracy') for r in rs])} | "
            + " | ".join(ms([final(r, f"class_{c}_accuracy") for r in rs]) for c in range(len(rho)))
            + f" | {ms([rare_tail(r) for r in rs])} |"
        )
    notes = [
        f"{first.summary['rounds']} rounds (the paper: 3999), H = {local.epochs:g} epochs of batch "
        f"{local.batch_size}, lr theta = {local.lr:g}, lr t = {params['t_lr']:g} (the paper: 1e-3 and 1e-3), "
        f"gamma = {params['gamma']:g}, rho = {tuple(rho)}; {first.summary['relays']['relay']['passed']} updates "
        f"relayed per run. Accuracy in % on the test set, mean ± std over seeds {seeds} (a seed fixes init, "
        "split, batches and the relay's draws; both alphas see the same draws).",
        "`mlp` trains with cross-entropy on the logits; `mlp_softmax` is the reference code's model "
        "(PeriklisTheodoropoulos/risk-aware-FL), which applies a softmax before nn.CrossEntropyLoss, so the loss "
        "is bounded below by log(1 + 2/e) = 0.55 and one-class local training never stops pushing the other "
        "classes away.",
    ]
    table = "\n".join(rows) + "\n\n" + "\n".join(notes)
    (args.study_dir / "table.md").write_text(table + "\n")
    print(table)
    plot(args.study_dir / "rare_class.png", runs, rho)
    print(f"wrote {args.study_dir / 'table.md'}, {args.study_dir / 'rare_class.png'}")


def plot(path: Path, runs: dict, rho: list[float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(model for model, _ in runs))
    alphas = list(dict.fromkeys(alpha for _, alpha in runs))
    colors = dict(zip(alphas, ["tab:red", "tab:blue", "tab:green", "tab:purple"]))
    fig, axes = plt.subplots(1, len(models), figsize=(4.6 * len(models), 3.8), dpi=100, squeeze=False, sharey=True)
    for ax, model in zip(axes[0], models):
        for alpha in alphas:
            for i, run in enumerate(runs.get((model, alpha), [])):
                ax.plot(
                    run.metrics["round"],
                    run.metrics[f"class_{RARE}_accuracy"],
                    color=colors[alpha],
                    lw=1,
                    alpha=0.8,
                    label=f"alpha = {alpha:g}" if i == 0 else None,
                )
        ax.set_title(f"{model}: rare class (rho {rho[RARE]:g}) test accuracy", fontsize=9)
        ax.set_xlabel("round")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(loc="center right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    main()
