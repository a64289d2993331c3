"""The commands about studies: ``sweep`` runs every case and seed of a study, ``report`` compares runs by case."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from netfl.cli import options
from netfl.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, exit_interrupted, fail, user_errors
from netfl.errors import NetflError


@click.command()
@click.argument("study_file", type=options.PATH)
@options.out("study folder: new, empty, or an earlier sweep of it [default: the study's out, else results/<name>/]")
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    help="runs side by side in local processes [default: one per CPU, at most one per run]",
)
@options.threads(default="the CPUs divided among the jobs; 1 on Ray")
@click.option("--ray", "use_ray", is_flag=True, help="run each run as a task on a local Ray instance")
@click.option(
    "--ray-address", metavar="ADDR", help="run on the Ray cluster at ADDR (ray://host:10001, host:6379 or auto)"
)
@click.option(
    "--gpus-per-run",
    type=float,
    metavar="SHARE",
    help="on Ray: the share of a GPU each run asks for and trains on, as Flower's num_gpus (0.25: four runs to "
    "a GPU; at most 1) [default with --device cuda: 1]",
)
@options.overrides(of="every run, after its case and grid point")
@click.option("--seeds", type=click.IntRange(min=1), help="run this many seeds instead of the study's")
@click.option(
    "--max-runs",
    type=click.IntRange(min=1),
    help="allow a study of up to this many runs, and of as many engine events in all as this many runs of 10^7 "
    "events each [default: 10,000 runs]; checked before any run is expanded or started",
)
@click.option("--rerun", is_flag=True, help="run every run again, also those already complete and unchanged")
@click.option("--dry-run", is_flag=True, help="list the runs and which are done; run nothing")
@options.data_dir()
@options.device()
@options.tracking()
@options.quiet("print only the final tally")
def sweep(
    study_file: Path,
    out_dir: Path | None,
    jobs: int | None,
    threads: int | None,
    use_ray: bool,
    ray_address: str | None,
    gpus_per_run: float | None,
    overrides: tuple[str, ...],
    seeds: int | None,
    max_runs: int | None,
    rerun: bool,
    dry_run: bool,
    data_dir: Path | None,
    device: str,
    tensorboard: str | None,
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
    outcome, began = None, False
    try:
        with terminate_as_interrupt():
            from netfl.study.ray_runner import gpu_request

            given = click.get_current_context().get_parameter_source("device") is not click.core.ParameterSource.DEFAULT
            gpus_per_run, device = gpu_request(
                gpus_per_run, device, on_ray=bool(use_ray or ray_address), device_given=given
            )
            study = load_study(
                study_file, out=out_dir, overrides=overrides, seeds=seeds, data_dir=data_dir, max_runs=max_runs
            )
            check_users_code(study.runs, str(study_file), data_dir)  # the user's own models and data, before any run
            tracking = {
                plan.folder: options.resolve_tracking(
                    plan.scenario, str(study_file), study=study.out, run=plan, tensorboard=tensorboard, mlflow=mlflow
                )
                for plan in study.runs
            }
            if dry_run:
                for plan in study.runs:
                    state = "done" if not rerun and is_done(plan, study.out / plan.folder) else "to run"
                    click.echo(f"{state:7} {plan.label}  ->  {study.out / plan.folder}")
                return
            if use_ray or ray_address:
                from netfl.study.ray_runner import RayRunner

                runner = RayRunner(
                    address=ray_address,
                    threads=threads or 1,
                    data_dir=data_dir,
                    device=device,
                    gpus_per_run=gpus_per_run,
                )
            else:
                from netfl.study.local import LocalRunner

                cpus = available_cpus()
                jobs = jobs or max(1, min(cpus, len(study.runs)))
                runner = LocalRunner(
                    jobs=jobs, threads=threads or max(1, cpus // jobs), data_dir=data_dir, device=device
                )

            def start(todo: list) -> None:
                nonlocal began
                began = True
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
        fail(exc)
    except KeyboardInterrupt:
        if not began:  # reading and checking the study, or claiming its folder: no run began
            exit_interrupted("interrupted before any run began: nothing was run")
        if outcome is None:  # as the sweep wrote its last status (the signal came after it could say so)
            exit_interrupted(f"interrupted: every finished run is kept (status in {study.out / 'sweep.json'})")
        outcome.interrupted = True  # as its helpers stopped, every run ended: reported as they ended
    finally:
        progress.close()
    if outcome.interrupted:
        ignore_further_signals()
        _report_sweep(outcome)
        return
    try:  # every run is done and sweep.json written: a signal now cuts the report short, and says so
        with terminate_as_interrupt():
            _report_sweep(outcome)
    except KeyboardInterrupt:
        exit_interrupted(f"interrupted while reporting: every run is done (status in {study.out / 'sweep.json'})")


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
        sys.exit(EXIT_INTERRUPTED)
    if complete or skipped:
        click.echo(f"  compare them: netfl report {study.out}")
    if failed:
        sys.exit(EXIT_FAILED)


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


@click.command()
@click.argument("dirs", nargs=-1, required=True, type=options.PATH)
@click.option(
    "--target",
    "targets",
    type=FRACTION,
    multiple=True,
    help="test accuracy to reach: 0.55 or 55%; repeat for several [default: the best accuracy every "
    "run reached, rounded down to a whole percent]",
)
@options.out("report folder: new, empty, or an earlier report it replaces [default: <first DIR>/report/]")
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

    with user_errors():
        made = write_report(dirs, targets=targets, out_dir=out_dir, interpolate=interpolate)
    for note in made.notes:
        click.echo(f"warning: {note}", err=True)
    if output_format == "json":
        import json

        counts = {"runs": made.runs, "cases": made.cases, "incomplete": made.incomplete}
        out = {"report": str(made.out_dir / "report.html"), **counts, "still_running": made.unfinished}
        if made.pairing:  # runs no sweep named, grouped by their scenarios
            out["pairing"] = made.pairing
        click.echo(json.dumps({**out, **made.verdict.as_dict()}, indent=1))
        return
    flagged = f", {made.incomplete} incomplete (flagged)" if made.incomplete else ""
    running = f"; {made.unfinished} more still running, not in it" if made.unfinished else ""
    click.echo(f"{made.runs} run(s) in {made.cases} case(s){flagged}: {made.out_dir / 'report.html'}{running}")
    for line in made.pairing:
        click.echo(line[0].upper() + line[1:] + ".")
    verdict = made.verdict.text()
    if verdict:
        click.echo(verdict)
