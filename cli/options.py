"""The options several ``netfl`` commands share, each declared once: its name, type, default and help.

Each is a function returning click's decorator, so a command lists them in the order its ``--help`` shows them::

    @click.command()
    @options.data_dir()
    @options.device()
    def simulate(data_dir, device): ...

Where a shared option means something different in a command (``--out`` names a different folder, ``--threads``
has another default in a sweep), the command passes only that difference; the rest is stated here.
"""

from __future__ import annotations

from pathlib import Path

import click

#: A file or folder argument or option, given to the command as a Path (whether it exists is checked later,
#: with a message that names the field or command).
PATH = click.Path(path_type=Path)


def data_dir(default: str | None = None):
    """``--data-dir``: where a user-supplied data set's files are; ``default`` says where they are without it."""
    return click.option(
        "--data-dir",
        type=PATH,
        help="folder holding the data set's files" + (f" [default: {default}]" if default else ""),
    )


def device():
    """``--device``: the torch device; simulated time is the same on any."""
    return click.option(
        "--device",
        default="cpu",
        show_default=True,
        help="where torch trains: cpu, cuda or cuda:<index> (simulated time never depends on it)",
    )


def threads(default: str = "every CPU this process may use, fewer while other processes keep some busy"):
    """``--threads``: how many clients train at once; ``default`` says how many without it."""
    return click.option(
        "--threads",
        type=click.IntRange(min=1),
        help=f"threads that train clients side by side, one torch thread each [default: {default}]; the results "
        "are the same whatever the count",
    )


def overrides(of: str = "the topology"):
    """``--set PATH=VALUE`` (repeatable), read into ``overrides``: a change to the scenario(s), ``of`` saying which."""
    return click.option(
        "--set",
        "overrides",
        multiple=True,
        metavar="PATH=VALUE",
        help=f"change one value of {of}: a YAML path and a YAML value, e.g. --set server.algorithm.name=fedau "
        "--set devices[0].availability.p=0.3 (repeatable)",
    )


def out(help: str):
    """``--out``, read into ``out_dir``: the folder a command writes, described by ``help`` (each writes another)."""
    return click.option("--out", "out_dir", type=PATH, help=help)


def overwrite():
    """``--overwrite``: a run may replace an earlier run in the folder it was given."""
    return click.option(
        "--overwrite",
        is_flag=True,
        help="replace an earlier run in the results folder [default: refuse with --out; without it, write to "
        "results/<name>-2, -3, ...]",
    )


def quiet(help: str = "no progress bar and no summary"):
    """``-q``/``--quiet``; ``help`` says what the command then leaves out."""
    return click.option("--quiet", "-q", is_flag=True, help=help)


def tracking():
    """``--tensorboard DIR`` and ``--mlflow URI``: log each run to an experiment tracker besides its folder."""
    tensorboard = click.option(
        "--tensorboard",
        metavar="DIR",  # a string: click's Path would read an empty one as the current folder
        help="also log the run to TensorBoard: event files in a subfolder of DIR named like the results folder (a "
        "sweep's: case/seed<k>) [default: the topology's tracking.tensorboard]; needs the tracking extra",
    )
    mlflow = click.option(
        "--mlflow",
        metavar="URI",
        help="also log the run to MLflow at URI: sqlite:///mlflow.db, a folder (MLflow's file store) or a server's "
        "http(s):// address [default: the topology's tracking.mlflow]; needs the tracking extra",
    )
    return lambda function: tensorboard(mlflow(function))


def resolve_tracking(scenario, where: str, *, out: Path | None = None, study: Path | None = None, run=None, **given):
    """Where runs of ``scenario`` are logged (the topology's tracking:, each target replaced by an option's),
    refused here, before any run, when the tracker's package is missing or a target cannot take the run: ``out``
    is the run's results folder, ``study`` and ``run`` (a sweep's RunPlan) the sweep's folder and run."""
    from netfl.results.tracking import Label, check_tracking, tracking_of

    tracking = tracking_of(scenario, **given)
    if study is not None and run is not None:
        label = Label.of_study_run("", run.case, run.seed, run.folder, study)
        check_tracking(tracking, where, subfolder=label.subfolder, own=[(study, "this sweep's study folder")])
    elif out is not None:
        check_tracking(tracking, where, subfolder=Path(Path(out).name), own=[(out, "this run's results folder")])
    else:
        check_tracking(tracking, where)
    return tracking
