"""How ``simulate``, ``resume`` and ``rerun`` run and end: user errors and interruptions handled alike, then the
run's summary, its skipped updates, and a diverged run's cause and exit code."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from netfl.cli.exits import EXIT_DIVERGED, EXIT_INTERRUPTED, exit_interrupted, user_errors


def guarded_run(run, quiet: bool, *, resumable: bool = False, run_dir: Path | None = None):
    """``run()`` (returning the outcome and a note) with Ctrl-C/SIGTERM and user errors handled as every
    command handles them; prints the run's summary unless ``quiet``."""
    from netfl.signals import Interrupted, ignore_further_signals, terminate_as_interrupt

    try:
        with user_errors(), terminate_as_interrupt():
            outcome, note = run()
    except Interrupted as exc:
        ignore_further_signals()
        where = (
            f"partial results written to {exc.written}/ (complete: false)"
            if exc.written is not None
            else "stopped while building the world; nothing was written"
        )
        click.echo(f"interrupted: {where}", err=True)
        written = exc.written or run_dir
        if resumable and written is not None:
            _say_how_to_resume(written, exc.checkpointed_at)
        sys.exit(EXIT_INTERRUPTED)
    except KeyboardInterrupt:  # before the run began (loading netfl, reading the topology)
        exit_interrupted("interrupted before the run began: nothing was written")
    if not quiet:
        _print_summary(outcome, note)
    _warn_skipped(outcome.summary)
    _stop_if_diverged(outcome)
    return outcome


def _say_how_to_resume(written: Path, checkpointed_at: float | None) -> None:
    from netfl.checkpoint import checkpoint_path

    if checkpointed_at is not None:
        click.echo(
            f"  checkpoint written where it stopped ({checkpointed_at:.0f} simulated s); "
            f"continue with: netfl resume {written}",
            err=True,
        )
    elif checkpoint_path(written).exists():
        click.echo(f"  continue from the last checkpoint: netfl resume {written}", err=True)


def _print_summary(outcome, note: str) -> None:
    s = outcome.summary
    click.echo(
        f"{s['scenario']}: {s['algorithm']}, {s['rounds']} rounds in {s['sim_time_s']:.0f} simulated s "
        f"({s['wall_time_s']:.1f} s real)"
    )
    click.echo(
        f"  test accuracy: final {100 * s['final_test_accuracy']:.1f}%, best {100 * s['best_test_accuracy']:.1f}%"
    )
    click.echo(
        f"  updates: {s['updates_received']} received, {s['updates_applied']} applied, "
        f"{s['updates_dropped']} dropped; {_energy(s)}"
    )
    click.echo(f"  results: {outcome.out_dir}/" + (f" ({note})" if note else ""))


def _energy(summary: dict) -> str:
    """What the devices drew, and of it what federated learning cost (training and the radio): over hours the idle
    draw is most of the total and is spent with or without learning."""
    from netfl.units import format_si

    def joules(key: str) -> str:
        value = summary.get(key)
        return "n/a" if value is None else format_si(value, "J", 3)

    line = f"energy {joules('energy_j')}, of which training and radio {joules('work_energy_j')}"
    use = (summary.get("energy_by_activity_j") or {}).get("use")
    return line if use is None else f"{line}, the owners' own use {format_si(use, 'J', 3)}"


def _warn_skipped(s: dict) -> None:
    if s["updates_skipped"]:
        click.echo(
            f"warning: {s['updates_skipped']} update(s) or report(s) were not finite (NaN or inf) and were "
            "skipped (server.on_divergence: skip_update)",
            err=True,
        )


def _stop_if_diverged(outcome) -> None:
    """A diverged run's results are written: say where it diverged and what setting could help, exit EXIT_DIVERGED."""
    divergence = outcome.result.divergence
    if divergence is None:
        return
    fix = {
        "update": "lower task.local.lr, or set server.on_divergence: skip_update to drop such updates and go on",
        "loss_explosion": "lower task.local.lr or server.algorithm.server_lr (server.on_loss_explosion: warn "
        "only warns)",
        "initial": "look at the model's forward pass (a NaN or inf in its output, or in its initial weights); no "
        "setting of the run can help",
    }.get(
        "update"
        if divergence.where == "loss"
        else "initial"
        if divergence.where == "evaluation" and divergence.round_index is None
        else divergence.where,
        "lower server.algorithm.server_lr or task.local.lr (skip_update cannot help: the global model itself "
        "is not finite)",
    )
    click.echo(
        f"diverged: {divergence.describe()}, at {outcome.summary['sim_time_s']:g} simulated s; results up to there "
        f"written to {outcome.out_dir}/ (stopped_by: diverged); {fix}",
        err=True,
    )
    sys.exit(EXIT_DIVERGED)
