"""netfl from Python: describe a world (a YAML file, a dict, or the schema's models), run it, read typed results::

    import netfl

    result = netfl.run("topologies/quickstart.yaml", seed=3)
    result.summary["final_test_accuracy"]
    result.metrics.plot(x="sim_time_s", y="test_accuracy")       # pandas DataFrames
    result.events.query("kind == 'dropout'").cause.value_counts()
    result.devices.groupby("group").energy_j.sum()
    result.timeline.plot(x="sim_time_s", y="available")            # the world at every evaluation, per group

    world = netfl.from_dict({"name": "mine", "stop": {"rounds": 5}, ...})  # validated like a file
    netfl.run(world, out="results/mine")                                     # also writes the run folder

Nothing is written unless ``out`` is given. The same checks as ``netfl
validate`` run first: a bad scenario raises :class:`netfl.ScenarioError`
listing every problem with its path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from netfl.config import Scenario, check_data, check_scenario, load_scenario, scenario_from_dict
from netfl.config.schema import AlgorithmSpec, DatasetSpec, ModelSpec
from netfl.results.algorithm_file import algorithm_frame
from netfl.results.claim import claim_out_dir
from netfl.results.events_file import events_frame
from netfl.results.metrics_file import metrics_columns
from netfl.results.tracking import check_tracking, tracking_of
from netfl.runner import RunOutcome, device_columns, run_scenario
from netfl.user_code import reference_of

__all__ = ["Result", "from_dict", "load", "run", "with_own"]


@dataclass
class Result:
    """What a run gives: ``summary`` (as summary.json) and ``metrics``, ``events``, ``devices``, ``timeline`` and
    ``algorithm`` as DataFrames (the columns of metrics.csv, events.parquet, devices.parquet, timeline.parquet and
    algorithm.csv: the strategy's own metrics of each aggregation); ``out_dir`` if the run was written."""

    summary: dict[str, Any]
    metrics: pd.DataFrame
    events: pd.DataFrame
    devices: pd.DataFrame
    out_dir: Path | None = None
    timeline: pd.DataFrame | None = None
    algorithm: pd.DataFrame | None = None

    @classmethod
    def of(cls, outcome: RunOutcome) -> Result:
        result = outcome.result
        return cls(
            outcome.summary,
            pd.DataFrame(metrics_columns(result.metrics, outcome.num_classes, outcome.class_names)),
            events_frame(result.recorder.columns()),
            pd.DataFrame(dict(device_columns(result))),
            outcome.out_dir,
            pd.DataFrame(result.timeline.columns()) if result.timeline is not None else None,
            algorithm_frame(outcome.algorithm),
        )


def with_own(
    world: Scenario,
    *,
    model: Any = None,
    model_args: dict[str, Any] | None = None,
    data: Any = None,
    algorithm: Any = None,
    algorithm_args: dict[str, Any] | None = None,
) -> Scenario:
    """``world`` with its one task's model and/or data set, and/or its algorithm, replaced by objects given in
    Python (see :func:`run`)."""
    if algorithm is not None or algorithm_args is not None:
        world = _with_algorithm(world, algorithm, algorithm_args)
    if model is None and data is None:
        return world
    if len(world.tasks) != 1:
        raise TypeError(
            "model= and data= replace the model or data of a world with one task; with several, set "
            "each task's model (ModelSpec(factory=...)) and dataset (DatasetSpec(loader=...))"
        )
    task = world.tasks[0]
    if model is not None:
        task = task.model_copy(update={"model": ModelSpec(factory=model, args=model_args or {})})
    if data is not None:
        spec = task.dataset
        task = task.model_copy(update={"dataset": DatasetSpec(loader=data, test_fraction=spec.test_fraction,
                                                              max_train_samples=spec.max_train_samples,
                                                              partition=spec.partition)})  # fmt: skip
    return world.model_copy(update={"tasks": [task]})


def _with_algorithm(world: Scenario, algorithm: Any, args: dict[str, Any] | None) -> Scenario:
    """``world`` whose ``server.algorithm`` is ``algorithm`` (a Strategy subclass, a Flower strategy class, a
    built-in's name, or ``file.py:Class``) with ``args`` as its parameters (``args`` alone: the world's algorithm,
    other parameters)."""
    current = world.server.algorithm
    if algorithm is None:
        source = {"name": current.name, "path": current.path, "factory": current.factory, "flower": current.flower}
        given = {k: v for k, v in source.items() if v is not None}
    elif isinstance(algorithm, str):
        given = {"path": algorithm} if ":" in algorithm else {"name": algorithm}
    elif isinstance(algorithm, type) and _is_flower(algorithm):
        given = {"flower": _flower_reference(algorithm)}
    elif isinstance(algorithm, type):
        given = {"factory": algorithm}
    else:
        raise TypeError(
            f"algorithm= takes a netfl.algorithms.Strategy subclass, a built-in's name or 'file.py:Class', not "
            f"{type(algorithm).__name__}"
        )
    spec = AlgorithmSpec(**given, **(args or {}))
    return world.model_copy(update={"server": world.server.model_copy(update={"algorithm": spec})})


def _is_flower(cls: type) -> bool:
    """Whether ``cls`` is a Flower strategy (told by its bases' modules: Flower is not imported to ask)."""
    return any(k.__name__ == "Strategy" and k.__module__.startswith("flwr.") for k in cls.__mro__)


def _flower_reference(cls: type) -> str:
    """How ``server.algorithm.flower`` names a Flower strategy class: Flower's own by import path, a user's by its
    file (``file.py:Class``; one defined in a script or notebook cannot be named, and is refused as such)."""
    if cls.__module__.startswith("flwr."):
        return f"{cls.__module__}.{cls.__qualname__}"
    return reference_of(cls)


def load(path: str | Path, overrides: Sequence[str] = ()) -> Scenario:
    """A topology file, validated (ScenarioError lists every problem with its YAML path); ``overrides`` as
    ``netfl simulate --set``: ``["server.algorithm.name=fedau", "devices[0].count=50"]``."""
    return load_scenario(path, overrides=overrides)


def from_dict(data: dict[str, Any]) -> Scenario:
    """A scenario from a dict with the topology file's keys, validated like a file."""
    return scenario_from_dict(data)


def run(
    world: Scenario | dict[str, Any] | str | Path,
    *,
    seed: int | None = None,
    out: str | Path | None = None,
    threads: int | None = None,
    device: str = "cpu",
    data_dir: str | Path | None = None,
    overrides: Sequence[str] = (),
    overwrite: bool = False,
    model: Any = None,
    model_args: dict[str, Any] | None = None,
    data: Any = None,
    tensorboard: str | Path | None = None,
    mlflow: str | None = None,
    algorithm: Any = None,
    algorithm_args: dict[str, Any] | None = None,
    on_aggregate: Callable[[Any], object] | None = None,
) -> Result:
    """Run ``world`` (a Scenario, a dict, or a topology file's path) and return its results.

    ``seed`` replaces the scenario's; ``out`` also writes the run folder there (as ``netfl simulate --out``,
    checked before the run; an earlier run there is an error unless ``overwrite``); ``threads``, ``device``
    and ``overrides`` (of a file's path) as on the command line (``--set``); ``data_dir`` where the data
    set's files are.

    Your own model and data, for a world with one task: ``model`` a ``torch.nn.Module`` class or a function
    returning a module (built with ``model_args``, and ``num_classes`` / ``input_shape`` if it takes them),
    ``data`` a function returning the arrays (``x``, ``y``, optional ``client``, ``x_test``, ``y_test``,
    ``num_classes``) or that mapping itself; they replace the world's ``task.model`` and ``task.dataset``
    (the dataset's partition and sizes are kept).

    Your own algorithm: ``algorithm`` a :class:`netfl.algorithms.Strategy` subclass (or a Flower strategy class,
    a built-in's name, or ``"file.py:Class"``) with ``algorithm_args`` its parameters (``algorithm_args`` alone
    changes the world's algorithm's parameters); checked against the world as a topology's ``server.algorithm`` is.
    ``on_aggregate``: called with each aggregation as it happens (:class:`netfl.algorithms.AggregationRecord`:
    the updates, their clients and staleness, the vector before and the result), to observe or check a method.

    ``tensorboard`` (a folder) and ``mlflow`` (a tracking URI) also log the written run there, as
    ``netfl simulate --tensorboard/--mlflow`` (:mod:`netfl.results.tracking`; the ``tracking`` extra); they and
    the world's own ``tracking:`` log only a run written with ``out``.
    """
    if (tensorboard is not None or mlflow is not None) and out is None:
        raise TypeError("tensorboard= and mlflow= log the run netfl writes: give out= too")
    if overrides and not isinstance(world, (str, Path)):
        raise TypeError("overrides apply to a topology file; change a dict or a Scenario directly")
    if isinstance(world, (str, Path)):
        world = load_scenario(world, overrides=overrides, check_references=False)
    elif isinstance(world, dict):
        world = scenario_from_dict(world, check_references=False)
    if any(v is not None for v in (model, data, algorithm, algorithm_args)):
        world = with_own(
            world, model=model, model_args=model_args, data=data, algorithm=algorithm, algorithm_args=algorithm_args
        )
    observers = (on_aggregate,) if on_aggregate is not None else ()
    check_scenario(world)
    if seed is not None:
        world = world.model_copy(update={"seed": seed})
    data_dir = Path(data_dir) if data_dir is not None else None
    check_data(world, data_dir)
    if out is None:
        return Result.of(
            run_scenario(world, write=False, data_dir=data_dir, device=device, threads=threads, observers=observers)
        )
    tracking = tracking_of(world, tensorboard=tensorboard, mlflow=mlflow)
    check_tracking(tracking, str(world.source) if world.source is not None else "tracking")
    with claim_out_dir(Path(out), overwrite=overwrite, overwrite_option="overwrite=True") as claim:
        outcome = run_scenario(
            world,
            out_dir=claim.path,
            data_dir=data_dir,
            device=device,
            threads=threads,
            tracking=tracking,
            observers=observers,
        )
        return Result.of(outcome)
