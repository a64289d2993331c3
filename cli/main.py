"""The ``netfl`` command.

Every error a user can cause (bad YAML, bad field, missing data) is printed
as one clear message and exits with code 2; a traceback means a bug in
netfl. A run whose training diverged (a NaN or inf) is written like any
other and exits with code 3.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import click

from netfl.errors import NetflError, NetflWarning
from netfl.version import DISTRIBUTION, __version__

EXIT_USAGE = 2
EXIT_DIVERGED = 3


def _fail(exc: Exception | str) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(EXIT_USAGE)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, message=f"netfl %(version)s (the {DISTRIBUTION} distribution)")
def main() -> None:
    """netfl: a discrete-event network simulator for federated learning."""


class FractionType(click.ParamType):
    """A fraction written as a topology file writes one: ``0.55`` or ``55%``."""

    name = "fraction"

    def convert(self, value, param, ctx) -> float:
        if isinstance(value, float):
            return value
        from netfl.units import parse_quantity

        try:
            number = parse_quantity(value, "fraction")
        except ValueError:
            self.fail(f"{value!r} is not a fraction: write 0.55 or 55%", param, ctx)
        text = str(value).strip()
        if text.endswith("%"):
            if not 0 <= number <= 1:
                self.fail(f"{value} is not between 0% and 100%", param, ctx)
            from decimal import Decimal

            number = float(Decimal(text[:-1].strip()) / 100)  # 70% is 0.7, not 70 x 0.01 = 0.7000000000000001
        return number


FRACTION = FractionType()

SET_HELP = (
    "change one value of the topology: a YAML path and a YAML value, e.g. --set server.algorithm.name=fedau "
    "--set devices[0].availability.p=0.3 (repeatable)"
)

TENSORBOARD_HELP = (
    "also log the run to TensorBoard: event files in a subfolder of DIR named like the results folder (a sweep's: "
    "case/seed<k>) [default: the topology's tracking.tensorboard]; needs the tracking extra"
)
MLFLOW_HELP = (
    "also log the run to MLflow at URI: sqlite:///mlflow.db, a folder (MLflow's file store) or a server's "
    "http(s):// address [default: the topology's tracking.mlflow]; needs the tracking extra"
)

THREADS_HELP = (
    "threads that train clients side by side, one torch thread each [default: every CPU this process may use, "
    "fewer while other processes keep some busy]; the results are the same whatever the count"
)


@main.command()
@click.argument("topology", type=click.Path(path_type=Path))
@click.option("--set", "overrides", multiple=True, metavar="PATH=VALUE", help=SET_HELP)
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    help="folder holding the data set's files, as the run will be given it",
)
def validate(topology: Path, overrides: tuple[str, ...], data_dir: Path | None) -> None:
    """Check TOPOLOGY (and that its data set's files are there) and print a one-screen summary of the scenario.

    Your own model, data loader or policy file is imported, and your model run on two samples: it is code that
    netfl runs."""
    from netfl.config import check_data, load_scenario
    from netfl.config.summary import describe_scenario

    try:
        scenario = load_scenario(topology, overrides=overrides)
        check_data(scenario, data_dir)
        tracking = _tracking(scenario, str(topology))
        with warnings.catch_warnings(record=True) as noted:
            warnings.simplefilter("always", NetflWarning)
            reports = _inspect_users_own(scenario, data_dir)
    except NetflError as exc:
        _fail(exc)
    click.echo(f"OK {topology}")
    for note in dict.fromkeys(str(w.message) for w in noted if issubclass(w.category, NetflWarning)):
        click.echo(f"warning: {note}", err=True)
    click.echo(describe_scenario(scenario))
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


@main.command()
@click.argument("topology", type=click.Path(path_type=Path))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    help="results folder: new or empty, or an earlier run with --overwrite [default: results/<name>/]",
)
@click.option("--data-dir", type=click.Path(path_type=Path), help="folder holding the data set's files")
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    help="override the scenario's seed (an integer >= 0; world "
    "and training alike, unless it sets world_seed or "
    "training_seed)",
)
@click.option(
    "--device",
    default="cpu",
    show_default=True,
    help="where torch trains: cpu, cuda or cuda:<index> (simulated time never depends on it)",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    help=THREADS_HELP,
)
@click.option("--set", "overrides", multiple=True, metavar="PATH=VALUE", help=SET_HELP)
@click.option(
    "--overwrite",
    is_flag=True,
    help="replace an earlier run in the results folder [default: refuse "
    "with --out; without it, write to results/<name>-2, -3, ...]",
)
@click.option(
    "--checkpoint-every",
    "checkpoint_every",
    metavar="Nrounds|DURATION",
    help="keep a checkpoint every N rounds (50rounds) or simulated time (30min), and at a Ctrl-C, to continue "
    "with netfl resume; removed when the run completes",
)
@click.option("--tensorboard", type=click.Path(path_type=Path), metavar="DIR", help=TENSORBOARD_HELP)
@click.option("--mlflow", metavar="URI", help=MLFLOW_HELP)
@click.option("--quiet", "-q", is_flag=True, help="no progress bar and no summary")
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
    tensorboard: Path | None,
    mlflow: str | None,
    quiet: bool,
) -> None:
    """Run the scenario in TOPOLOGY and write its results."""

    def run():
        from netfl.checkpoint import Every
        from netfl.config import check_data, load_scenario

        every = Every.parse(checkpoint_every) if checkpoint_every is not None else None
        scenario = load_scenario(topology, overrides=overrides)
        check_data(scenario, data_dir)  # before torch is even imported
        tracking = _tracking(scenario, str(topology), tensorboard=tensorboard, mlflow=mlflow)
        if seed is not None:
            scenario = scenario.model_copy(update={"seed": seed})
        from netfl.runner import default_out_dir

        wanted = out_dir or default_out_dir(scenario)
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

    _run_guarded(run, quiet, resumable=checkpoint_every is not None)


def _tracking(scenario, where: str, **given):
    """Where runs of ``scenario`` are logged (the topology's tracking:, each target replaced by an option's),
    refused here, before any run, when the tracker's package is missing."""
    from netfl.results.tracking import check_tracking, tracking_of

    tracking = tracking_of(scenario, **given)
    check_tracking(tracking, where)
    return tracking


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


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    help="folder holding the data set's files [default: the one the run was started with]",
)
@click.option("--device", default="cpu", show_default=True, help="where torch trains: cpu, cuda or cuda:<index>")
@click.option("--threads", type=click.IntRange(min=1), help=THREADS_HELP)
@click.option("--quiet", "-q", is_flag=True, help="no progress bar and no summary")
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

    _run_guarded(run, quiet, resumable=True, run_dir=run_dir)


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    help="where the repeat goes [default: RUN_DIR-rerun, or -rerun-2, ...]",
)
@click.option("--data-dir", type=click.Path(path_type=Path), help="folder holding the data set's files")
@click.option("--device", default="cpu", show_default=True, help="where torch trains: cpu, cuda or cuda:<index>")
@click.option("--threads", type=click.IntRange(min=1), help=THREADS_HELP)
@click.option("--quiet", "-q", is_flag=True, help="no progress bar")
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

    outcome = _run_guarded(run, quiet=True)
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
        sys.exit(1)


def _run_into(
    scenario,
    wanted: Path,
    *,
    quiet: bool,
    overwrite: bool = False,
    chosen: bool = True,
    overwrite_option: str | None = "--overwrite",
    **options,
):
    """``run_scenario`` into ``wanted`` (or, not ``chosen``, the first free ``wanted-2``, ...), claimed before the
    run and for all of it (netfl.results.claim); the progress bar and warnings on stderr."""
    from netfl.results.claim import claim_out_dir
    from netfl.runner import run_scenario

    progress = _progress(scenario, quiet)
    with claim_out_dir(wanted, overwrite=overwrite, chosen=chosen, overwrite_option=overwrite_option) as claim:
        return run_scenario(scenario, out_dir=claim.path, progress=progress, warn=progress.note, **options)


def _progress(scenario, quiet: bool):
    from netfl.results.progress import Progress

    return Progress(
        max_rounds=scenario.stop.rounds, max_time_s=scenario.stop.sim_time, enabled=None if not quiet else False
    )


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


def _run_guarded(run, quiet: bool, *, resumable: bool = False, run_dir: Path | None = None):
    """``run()`` (returning the outcome and a note) with Ctrl-C/SIGTERM and user errors handled as every
    command handles them; prints the run's summary unless ``quiet``."""
    from netfl.signals import Interrupted, ignore_further_signals, terminate_as_interrupt

    try:
        with terminate_as_interrupt():
            outcome, note = run()
    except NetflError as exc:
        _fail(exc)
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
            from netfl.checkpoint import checkpoint_path

            if exc.checkpointed_at is not None:
                click.echo(
                    f"  checkpoint written where it stopped ({exc.checkpointed_at:.0f} simulated s); "
                    f"continue with: netfl resume {written}",
                    err=True,
                )
            elif checkpoint_path(written).exists():
                click.echo(f"  continue from the last checkpoint: netfl resume {written}", err=True)
        sys.exit(130)
    except KeyboardInterrupt:  # before the run began (loading netfl, reading the topology)
        ignore_further_signals()
        click.echo("interrupted before the run began: nothing was written", err=True)
        sys.exit(130)
    s = outcome.summary
    if not quiet:
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
    s = outcome.summary
    if s["updates_skipped"]:
        click.echo(
            f"warning: {s['updates_skipped']} update(s) or report(s) were not finite (NaN or inf) and were "
            "skipped (server.on_divergence: skip_update)",
            err=True,
        )
    divergence = outcome.result.divergence
    if divergence is not None:
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
            f"diverged: {divergence.describe()}, at {s['sim_time_s']:g} simulated s; results up to there "
            f"written to {outcome.out_dir}/ (stopped_by: diverged); {fix}",
            err=True,
        )
        sys.exit(EXIT_DIVERGED)
    return outcome


@main.command()
@click.argument("study_file", type=click.Path(path_type=Path))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    help="study folder: new, empty, or an earlier sweep of it [default: the study's out, else results/<name>/]",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    help="runs side by side in local processes [default: one per CPU, at most one per run]",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    help="training threads of each run [default: the CPUs divided among the jobs; 1 on Ray]",
)
@click.option("--ray", "use_ray", is_flag=True, help="run each run as a task on a local Ray instance")
@click.option(
    "--ray-address", metavar="ADDR", help="run on the Ray cluster at ADDR (ray://host:10001, host:6379 or auto)"
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="PATH=VALUE",
    help="change one value of every run, after its case and grid point (repeatable), e.g. a quick "
    "version: --set stop.rounds=20",
)
@click.option("--seeds", type=click.IntRange(min=1), help="run this many seeds instead of the study's")
@click.option(
    "--max-runs",
    type=click.IntRange(min=1),
    help="allow a study of up to this many runs, and of as many engine events in all as this many runs of 10^7 "
    "events each [default: 10,000 runs]; checked before any run is expanded or started",
)
@click.option("--rerun", is_flag=True, help="run every run again, also those already complete and unchanged")
@click.option("--dry-run", is_flag=True, help="list the runs and which are done; run nothing")
@click.option("--data-dir", type=click.Path(path_type=Path), help="folder holding the data set's files")
@click.option("--device", default="cpu", show_default=True, help="where torch trains: cpu, cuda or cuda:<index>")
@click.option("--tensorboard", type=click.Path(path_type=Path), metavar="DIR", help=TENSORBOARD_HELP)
@click.option("--mlflow", metavar="URI", help=MLFLOW_HELP)
@click.option("--quiet", "-q", is_flag=True, help="print only the final tally")
def sweep(
    study_file: Path,
    out_dir: Path | None,
    jobs: int | None,
    threads: int | None,
    use_ray: bool,
    ray_address: str | None,
    overrides: tuple[str, ...],
    seeds: int | None,
    max_runs: int | None,
    rerun: bool,
    dry_run: bool,
    data_dir: Path | None,
    device: str,
    tensorboard: Path | None,
    mlflow: str | None,
    quiet: bool,
) -> None:
    """Run every case and seed of the study in STUDY_FILE; re-running skips the runs already done (and does not
    log them to the trackers again).

    Exit code 0 when every run is complete, 1 when some failed (each failure is in sweep.json, and in its
    folder's error.txt when netfl may write there), 2 for a bad or too large study file, 130 when interrupted
    (finished runs are kept; no run goes on).
    """
    from netfl.cpus import available_cpus
    from netfl.signals import ignore_further_signals, terminate_as_interrupt
    from netfl.study import load_study, run_sweep
    from netfl.study.progress import SweepProgress
    from netfl.study.sweep import is_done
    from netfl.study.users_code import check_users_code

    progress = SweepProgress(bar=False if quiet else None)
    try:
        with terminate_as_interrupt():
            study = load_study(
                study_file, out=out_dir, overrides=overrides, seeds=seeds, data_dir=data_dir, max_runs=max_runs
            )
            check_users_code(study.runs, str(study_file), data_dir)  # the user's own models and data, before any run
            tracking = {plan.folder: _tracking(plan.scenario, str(study_file), tensorboard=tensorboard, mlflow=mlflow)
                        for plan in study.runs}  # fmt: skip
            if dry_run:
                for plan in study.runs:
                    state = "done" if not rerun and is_done(plan, study.out / plan.folder) else "to run"
                    click.echo(f"{state:7} {plan.label}  ->  {study.out / plan.folder}")
                return
            if use_ray or ray_address:
                from netfl.study.ray_runner import RayRunner

                runner = RayRunner(address=ray_address, threads=threads or 1, data_dir=data_dir, device=device)
            else:
                from netfl.study.local import LocalRunner

                cpus = available_cpus()
                jobs = jobs or max(1, min(cpus, len(study.runs)))
                runner = LocalRunner(
                    jobs=jobs, threads=threads or max(1, cpus // jobs), data_dir=data_dir, device=device
                )

            def start(todo: list) -> None:
                progress.start(todo)
                if not quiet:
                    done = len(study.runs) - len(todo)
                    click.echo(
                        f"{study.name}: {len(study.runs)} runs in {len(study.cases)} cases, {len(todo)} to run"
                        f"{f' ({done} already done)' if done else ''}, in {study.out}/ on {runner.describe()}",
                        err=True,
                    )

            try:
                outcome = run_sweep(
                    study,
                    runner,
                    rerun=rerun,
                    on_start=start,
                    on_done=(lambda plan, record: None) if quiet else progress.done,
                    tick=progress.tick,
                    tracking=tracking,
                )
            finally:  # no process of the sweep outlives it (a Ray runner shuts Ray down as its run ends)
                getattr(runner, "close", lambda: None)()
    except NetflError as exc:
        _fail(exc)
    except KeyboardInterrupt:  # reading and checking the study, or claiming its folder: no run began
        ignore_further_signals()
        click.echo("interrupted before any run began: nothing was run", err=True)
        sys.exit(130)
    finally:
        progress.close()
    if outcome.interrupted:
        ignore_further_signals()
    _report_sweep(outcome)


def _report_sweep(outcome) -> None:
    study = outcome.study
    complete, skipped = outcome.with_status("complete"), outcome.with_status("skipped")
    failed, interrupted = outcome.with_status("failed"), outcome.with_status("interrupted")
    tally = [f"{len(complete)} ran", f"{len(skipped)} already done"]
    tally += [f"{len(failed)} failed"] if failed else []
    tally += [f"{len(interrupted)} not run (interrupted)"] if interrupted else []
    click.echo(f"{study.name}: {', '.join(tally)}; status in {study.out / 'sweep.json'}")
    for plan in complete:
        if "tracking_error" in outcome.records[plan.folder]:
            click.echo(f"warning: {plan.label}: not logged: {outcome.records[plan.folder]['tracking_error']}", err=True)
    for plan in failed:
        error = str(outcome.records[plan.folder].get("error", "")).splitlines()
        written = outcome.error_files.get(plan.folder)
        click.echo(f"  failed: {plan.label}: {error[0] if error else ''}" + (f" ({written})" if written else ""))
    if outcome.interrupted:
        click.echo("interrupted: every finished run is kept; run the same command again to run the rest", err=True)
        sys.exit(130)
    if complete or skipped:
        click.echo(f"  compare them: netfl report {study.out}")
    if failed:
        sys.exit(1)


@main.command()
def algorithms() -> None:
    """List the FL algorithms, server optimisers, compressors and round options, with parameters and papers."""
    from netfl.registry.algorithms import ROUND_OPTIONS, describe_algorithms
    from netfl.registry.compression import COMPRESSORS
    from netfl.registry.server_optimizers import describe_server_optimizers

    for algo in describe_algorithms():
        needs = (
            "  (needs each client's participation probability p: bernoulli, markov or cyclic)"
            if algo["needs_participation"]
            else ""
        )
        click.echo(f"{algo['name']}: {algo['summary']}{needs}")
        _echo_params(algo["params"])
        click.echo(f"    paper: {algo['paper']}")
        click.echo()
    click.echo(
        "Server optimisers (server.optimizer: {name: NAME, ...}), on the aggregated update Delta_t of an algorithm "
        "whose step is x + Delta_t:"
    )
    for opt in describe_server_optimizers():
        click.echo(f"{opt['name']}: {opt['summary']}")
        _echo_params(opt["params"])
        click.echo(f"    paper: {opt['paper']}")
    click.echo()
    click.echo("Compression (server.compression: {uplink: ..., downlink: ...}), with any algorithm but scaffold:")
    for name, (summary, paper) in COMPRESSORS.items():
        click.echo(f"{name}: {summary}")
        click.echo(f"    paper: {paper}")
    click.echo()
    click.echo("Round options (server.round, server.mode: sync, with any algorithm above unless said otherwise):")
    for option in ROUND_OPTIONS:
        click.echo(f"{option['name']} ({option['type']}, default {option['default']}): {option['summary']}")
        click.echo(f"    paper: {option['paper']}")


def _echo_params(params: list[dict]) -> None:
    for param in params:
        default = "required" if param["required"] else f"default {param['default']}"
        click.echo(f"    {param['name']} ({param['type']}, {default}): {param['description'] or ''}".rstrip(": "))


@main.command()
def policies() -> None:
    """List the built-in availability policies and their parameters (each runs at any scale)."""
    from netfl.policies import BUILTIN_POLICIES
    from netfl.registry import describe_params

    for name, cls in BUILTIN_POLICIES.items():
        summary = (cls.__doc__ or "").strip().splitlines()[0]
        click.echo(f"{name} ({'per round' if cls.time_base == 'round' else 'continuous time'}): {summary}")
        _echo_params(describe_params(cls.Params))
        click.echo()
    click.echo(
        "Your own: availability: {policy: path/to/file.py:ClassName, ...} (the protocols: netfl/policies/base.py, "
        "one object per device; netfl/policies/population_policy.py, a whole group at once, any engine)"
    )


@main.command()
@click.argument("dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--target",
    "targets",
    type=FRACTION,
    multiple=True,
    help="test accuracy to reach: 0.55 or 55%; repeat for several [default: the best accuracy every "
    "run reached, rounded down to a whole percent]",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    help="report folder: new, empty, or an earlier report it replaces [default: <first DIR>/report/]",
)
@click.option(
    "--interpolate",
    is_flag=True,
    help="time, rounds and energy to a target where the line between two evaluations crosses it, instead of "
    "at the first evaluation at or above it (the report says so)",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="how the verdict is printed: text, or json for scripts (the report's folder and counts, and per target "
    "who reached it first, the ties and the paired differences in s, J and fractions)",
)
def report(
    dirs: tuple[Path, ...], targets: tuple[float, ...], out_dir: Path | None, interpolate: bool, output_format: str
) -> None:
    """Compare the runs under DIRS (run or study folders) by case: paired comparisons, tables, plots and
    report.html; print who reached each target first and the paired differences behind it."""
    from netfl.results.report import write_report

    try:
        made = write_report(dirs, targets=targets, out_dir=out_dir, interpolate=interpolate)
    except NetflError as exc:
        _fail(exc)
    for note in made.notes:
        click.echo(f"warning: {note}", err=True)
    if output_format == "json":
        import json

        counts = {"runs": made.runs, "cases": made.cases, "incomplete": made.incomplete}
        out = {"report": str(made.out_dir / "report.html"), **counts, "still_running": made.unfinished}
        click.echo(json.dumps({**out, **made.verdict.as_dict()}, indent=1))
        return
    flagged = f", {made.incomplete} incomplete (flagged)" if made.incomplete else ""
    running = f"; {made.unfinished} more still running, not in it" if made.unfinished else ""
    click.echo(f"{made.runs} run(s) in {made.cases} case(s){flagged}: {made.out_dir / 'report.html'}{running}")
    verdict = made.verdict.text()
    if verdict:
        click.echo(verdict)


@main.group()
def trace() -> None:
    """Availability traces."""


@trace.command("convert")
@click.argument("pickle_file", type=click.Path(path_type=Path))
@click.argument("csv_file", type=click.Path(path_type=Path))
@click.option(
    "--devices",
    type=click.IntRange(min=1),
    help="write N devices, device n replaying client n mod the number of clients (as the fedscale_trace policy "
    "does) [default: one per client]",
)
@click.option(
    "--allow-pickle",
    is_flag=True,
    help="unpickle PICKLE_FILE, which runs whatever code it holds (required: only for a trace from a source you trust)",
)
def trace_convert(pickle_file: Path, csv_file: Path, devices: int | None, allow_pickle: bool) -> None:
    """Convert a FedScale device-behaviour trace (pickle) to netfl's CSV intervals.

    Unpickling runs code stored in the file, so it needs --allow-pickle: convert
    only traces you trust, once, and point topologies at the CSV (policy: trace_csv).
    """
    from netfl.policies.traces import fedscale_client_count, fedscale_to_csv

    if not allow_pickle:
        _fail(
            f"{pickle_file}: a FedScale trace is a Python pickle, and unpickling runs whatever code the file "
            "holds; add --allow-pickle to convert it if you trust its source"
        )
    try:
        period = fedscale_to_csv(pickle_file, csv_file, num_devices=devices, allow_pickle=True)
        clients = fedscale_client_count(pickle_file, allow_pickle=True)
    except NetflError as exc:
        _fail(exc)
    count = devices or clients
    again = f" (devices {clients} to {count - 1} replay clients again: device n is client n mod {clients})"
    click.echo(
        f"wrote {csv_file}: {count} devices from the trace's {clients} clients{again if count > clients else ''}; "
        f"the trace repeats every {period:g} s: use availability: "
        f"{{policy: trace_csv, file: {csv_file}, period: {period:g}}}"
    )


if __name__ == "__main__":
    main()
