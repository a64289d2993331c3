"""The commands about one run: ``validate`` checks a topology, ``simulate`` runs it, ``resume`` continues a run from
its checkpoint, ``rerun`` repeats a run and compares."""

from __future__ import annotations

import gc
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

import click

from netfl.cli import options
from netfl.cli.exits import EXIT_FAILED, user_errors
from netfl.cli.run_outcome import guarded_run
from netfl.errors import NetflError, NetflWarning


@contextmanager
def settled_imports():
    """No garbage collection while a run's modules are imported, and their objects frozen out of later ones.

    Importing torch, pandas and matplotlib makes about a million objects, none of them garbage; each full
    collection on the way scans all made so far: about 1.5 s of a small job's start-up went to collecting
    nothing. Frozen (``gc.freeze``), what the imports made is never scanned again (this process ends with the
    run)."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


@click.command()
@click.argument("topology", type=options.PATH)
@options.overrides()
@options.data_dir()
def validate(topology: Path, overrides: tuple[str, ...], data_dir: Path | None) -> None:
    """Check TOPOLOGY (and that its data set's files are there) and print a one-screen summary of the scenario.

    Your own model, data loader or policy file is imported, and your model run on two samples: it is code that
    netfl runs."""
    from netfl.config import check_data, load_scenario
    from netfl.config.summary import describe_scenario

    with user_errors():
        scenario = load_scenario(topology, overrides=overrides)
        check_data(scenario, data_dir)
        tracking = options.resolve_tracking(scenario, str(topology))
        with warnings.catch_warnings(record=True) as noted:
            warnings.simplefilter("always", NetflWarning)
            reports = _inspect_users_own(scenario, data_dir)
    click.echo(f"OK {topology}")
    for note in dict.fromkeys(str(w.message) for w in noted if issubclass(w.category, NetflWarning)):
        click.echo(f"warning: {note}", err=True)
    click.echo(describe_scenario(scenario))
    from netfl.policies.device_logs import describe_logs, log_sets

    for path, needed in log_sets(scenario).items():  # device-state logs: their devices and days, from a sample
        click.echo(describe_logs(path, needed))
    from netfl.fleet_fit.fragment import provenance_lines

    for line in provenance_lines(topology):
        click.echo(f"fitted (netfl fit): {line}")
    if tracking:
        click.echo(f"tracking: each run logged to {tracking.describe()}")
    for s, report in enumerate(reports):
        click.echo(f"task {s} as measured:" if len(reports) > 1 else "task as measured:")
        click.echo("\n".join(report.lines()))
    if any(not task.dataset.builtin for task in scenario.tasks):
        from netfl.learn.data.data_budget import data_budget

        click.echo(f"data budget {data_budget().describe()}: what your data set may take once loaded")


def _inspect_users_own(scenario, data_dir: Path | None) -> list:
    """A scenario naming the user's own model or data: load and measure them (this imports torch and runs the
    user's files); a scenario of built-ins alone is checked without torch."""
    if not scenario.names_users_code:
        return []
    from netfl.assemble.inspect import inspect_tasks

    return inspect_tasks(scenario, data_dir)


@click.command()
@click.argument("topology", type=options.PATH)
@options.out("results folder: new or empty, or an earlier run with --overwrite [default: results/<name>/]")
@options.data_dir()
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    help="override the scenario's seed (an integer >= 0; world "
    "and training alike, unless it sets world_seed or "
    "training_seed)",
)
@options.device()
@options.threads()
@options.overrides()
@options.overwrite()
@click.option(
    "--checkpoint-every",
    "checkpoint_every",
    metavar="Nrounds|DURATION",
    help="keep a checkpoint every N rounds (50rounds) or simulated time (30min), and at a Ctrl-C, to continue "
    "with netfl resume; removed when the run completes",
)
@options.tracking()
@options.quiet()
def simulate(
    topology: Path,
    out_dir: Path | None,
    data_dir: Path | None,
    seed: int | None,
    device: str,
    threads: int | None,
    overrides: tuple[str, ...],
    overwrite: bool,
    checkpoint_every: str | None,
    tensorboard: str | None,
    mlflow: str | None,
    quiet: bool,
) -> None:
    """Run the scenario in TOPOLOGY and write its results."""

    def run():
        with settled_imports():
            from netfl.checkpoint import Every
            from netfl.config import check_data, load_scenario

            every = Every.parse(checkpoint_every) if checkpoint_every is not None else None
            scenario = load_scenario(topology, overrides=overrides)
            check_data(scenario, data_dir)  # before torch is even imported
            if seed is not None:
                scenario = scenario.model_copy(update={"seed": seed})
            from netfl.runner import default_out_dir

        wanted = out_dir or default_out_dir(scenario)
        tracking = options.resolve_tracking(scenario, str(topology), out=wanted, tensorboard=tensorboard, mlflow=mlflow)
        outcome = _run_into(
            scenario,
            wanted,
            quiet=quiet,
            overwrite=overwrite,
            chosen=out_dir is not None,
            data_dir=data_dir,
            device=device,
            threads=threads,
            checkpoint_every=every,
            tracking=tracking,
        )
        return outcome, _elsewhere(wanted) if outcome.out_dir != wanted else ""

    guarded_run(run, quiet, resumable=checkpoint_every is not None)


def _elsewhere(wanted: Path) -> str:
    """Why a run went to ``wanted-2`` (or ``-3``...): what ``wanted`` holds, and --overwrite only where it may
    replace that."""
    from netfl.results.folders import RUN, describe, kinds_of

    kinds = kinds_of(wanted)
    if kinds - {RUN}:
        return f"{wanted}/ holds {describe(kinds)}"
    if kinds:
        return f"{wanted}/ holds an earlier run; --overwrite replaces it"
    return f"another netfl process is writing {wanted}/"


@click.command()
@click.argument("run_dir", type=options.PATH)
@options.data_dir(default="the one the run was started with")
@options.device()
@options.threads()
@options.quiet()
def resume(run_dir: Path, data_dir: Path | None, device: str, threads: int | None, quiet: bool) -> None:
    """Continue the run that writes RUN_DIR from its last checkpoint (netfl simulate --checkpoint-every).

    The engine first replays the run up to the checkpoint without training (fast), then goes on; the results
    are those of a run that never stopped, bit for bit. A checkpoint is a pickle: resume only your own.
    """

    def run():
        from netfl.checkpoint import Checkpoint, checkpoint_path
        from netfl.results.claim import claim_out_dir
        from netfl.runner import run_scenario

        path = checkpoint_path(run_dir)
        if not path.is_file():
            raise NetflError(
                f"{run_dir}: no checkpoint to resume from (looked for {path}); a run keeps one while "
                "it runs with netfl simulate --checkpoint-every, and removes it when it completes"
            )
        with claim_out_dir(run_dir, overwrite=True):  # the run that keeps the checkpoint may still be going
            checkpoint = Checkpoint.load(path)
            scenario = checkpoint.resumed_scenario()
            saved = checkpoint.options.get("data_dir")
            progress = _progress(scenario, quiet)
            outcome = run_scenario(
                scenario,
                out_dir=run_dir,
                progress=progress,
                warn=progress.note,
                device=device,
                threads=threads,
                resume=checkpoint,
                data_dir=data_dir or (Path(saved) if saved else None),
            )
        return outcome, f"resumed from {checkpoint.describe()}"

    guarded_run(run, quiet, resumable=True, run_dir=run_dir)


@click.command()
@click.argument("run_dir", type=options.PATH)
@options.out("where the repeat goes [default: RUN_DIR-rerun, or -rerun-2, ...]")
@options.data_dir()
@options.device()
@options.threads()
@options.quiet("no progress bar")
def rerun(
    run_dir: Path, out_dir: Path | None, data_dir: Path | None, device: str, threads: int | None, quiet: bool
) -> None:
    """Repeat the run in RUN_DIR from its scenario.yaml, and say whether the repeat is identical.

    Compares events.parquet, metrics.csv and devices.parquet byte for byte, and the software versions with
    those the run recorded (a different torch may round differently).
    """
    from netfl.results.repeat import compare_runs, load_run_scenario

    def run():
        from netfl.runner import software_versions

        scenario, recorded = load_run_scenario(run_dir)
        changed = {k: (v, software_versions().get(k)) for k, v in recorded.items() if software_versions().get(k) != v}
        for name, (then, now) in sorted(changed.items()):
            click.echo(f"warning: {name} {now} here, {then} when {run_dir} was run: results may differ", err=True)
        wanted = out_dir or run_dir.with_name(f"{run_dir.name}-rerun")
        outcome = _run_into(
            scenario,
            wanted,
            quiet=quiet,
            chosen=out_dir is not None,
            overwrite_option=None,  # rerun never replaces a run: the repeat goes beside the one it repeats
            data_dir=data_dir,
            device=device,
            threads=threads,
        )
        return outcome, ""

    outcome = guarded_run(run, quiet=True)
    same, different = compare_runs(run_dir, outcome.out_dir)
    click.echo(
        f"repeated {run_dir} in {outcome.out_dir}/: "
        + (
            f"identical ({', '.join(same)})"
            if not different
            else f"DIFFERENT: {', '.join(different)}" + (f"; identical: {', '.join(same)}" if same else "")
        )
    )
    if different:
        sys.exit(EXIT_FAILED)


def _run_into(
    scenario,
    wanted: Path,
    *,
    quiet: bool,
    overwrite: bool = False,
    chosen: bool = True,
    overwrite_option: str | None = "--overwrite",
    **run_options,
):
    """``run_scenario`` into ``wanted`` (or, not ``chosen``, the first free ``wanted-2``, ...), claimed before the
    run and for all of it (netfl.results.claim); the progress bar and warnings on stderr."""
    from netfl.results.claim import claim_out_dir
    from netfl.runner import run_scenario

    progress = _progress(scenario, quiet)
    with claim_out_dir(wanted, overwrite=overwrite, chosen=chosen, overwrite_option=overwrite_option) as claim:
        return run_scenario(scenario, out_dir=claim.path, progress=progress, warn=progress.note, **run_options)


def _progress(scenario, quiet: bool):
    from netfl.results.progress import Progress

    return Progress(
        max_rounds=scenario.stop.rounds, max_time_s=scenario.stop.sim_time, enabled=None if not quiet else False
    )
