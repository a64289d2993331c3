"""Scenario -> the learner: each task's data split over the devices, the strategy, the learner itself.

Data is loaded here (torch); the simulated world never sees it, only the
:class:`~netfl.backend.TrainingBackend` the learner implements.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from netfl.config.algorithm_choice import users_strategy
from netfl.config.budget import MAX_JOB_SAMPLES
from netfl.config.data import resolve_data_dir
from netfl.config.flower_choice import flower_class
from netfl.config.schema import CompressionSpec, CompressorSpec, PartitionSpec, Scenario, ServerOptimizerSpec
from netfl.config.server_checks import device_edges, edge_nodes
from netfl.errors import ModelError, ScenarioError
from netfl.learn.data.datasets import Dataset, load_dataset
from netfl.learn.data.leaf_tasks import load_leaf_task
from netfl.learn.data.partition import ClientParts, natural_parts, partition_indices, sample_parts
from netfl.learn.data.user_data import load_user_dataset
from netfl.learn.federation.algorithms import ALGORITHMS
from netfl.learn.federation.compression import CompressionSettings, CompressorSettings
from netfl.learn.federation.learner import Learner
from netfl.learn.federation.server_optimizers import ServerOptimizerChoice
from netfl.learn.federation.strategy import ClientInfo
from netfl.learn.federation.strategy_calls import AggregationRecord, build_strategy
from netfl.learn.federation.task_model import TaskSetup
from netfl.learn.models.user import ModelRecipe, builtin_recipe, user_recipe
from netfl.registry.datasets import DATASETS
from netfl.registry.partitions import LABEL_KINDS, fit_problems
from netfl.rng import RandomStreams


def _stream_keys(task: int) -> tuple[int, ...]:
    """Task 0 keeps the stream names single-task scenarios always had; task s > 0 adds its index."""
    return (task,) if task else ()


def build_task(scenario: Scenario, task: int, streams: RandomStreams, data_dir: Path | None) -> TaskSetup:
    """Load task ``task``'s data set, split it over the devices, and say how its model is made (a user's model
    file is imported here; the module is built by the learner)."""
    spec = scenario.tasks[task]
    keys = _stream_keys(task)
    where = _where(scenario, task)
    dataset = load_task_dataset(scenario, task, streams, data_dir)
    if spec.dataset.max_train_samples is not None and spec.dataset.max_train_samples < len(dataset.train_y):
        keep = np.sort(
            streams.numpy("train_subset", *keys).choice(
                len(dataset.train_y), spec.dataset.max_train_samples, replace=False
            )
        )
        client = dataset.train_client
        if client is not None:  # renumber the clients that kept samples
            kept, client = np.unique(client[keep], return_inverse=True)
            dataset = replace(dataset, client_names=tuple(dataset.client_names[k] for k in kept))
        dataset = replace(dataset, train_x=dataset.train_x[keep], train_y=dataset.train_y[keep], train_client=client)
    parts = _split(scenario, task, dataset, streams.numpy("partition", *keys))
    largest = int(parts.sizes.max())
    if spec.local.epochs is not None and spec.local.epochs * largest > MAX_JOB_SAMPLES:  # validate saw the mean
        raise _problem(
            scenario,
            f"{where}.local.epochs",
            f"the largest client holds {largest:,} samples: a job of {spec.local.epochs:g} "
            f"epochs would train on {spec.local.epochs * largest:.3g}, more than the "
            f"{MAX_JOB_SAMPLES:.0e} netfl accepts per job",
        )
    return TaskSetup(dataset, parts, model_recipe(scenario, task, dataset), spec.local)


def load_task_dataset(scenario: Scenario, task: int, streams: RandomStreams, data_dir: Path | None) -> Dataset:
    """Task ``task``'s data set: a built-in by name, or the user's own (a file, a LEAF folder, a loader)."""
    spec = scenario.tasks[task].dataset
    seed = streams.integer_seed("test_split", *_stream_keys(task))
    vocabulary = vocabulary_setting(scenario, task)
    if spec.builtin and DATASETS[spec.name].leaf is not None:
        return load_leaf_task(
            spec.name,
            data_dir=resolve_data_dir(scenario, data_dir, task),
            test_fraction=spec.test_fraction,
            seed=seed,
            targets=spec.targets,
            vocabulary=vocabulary,
        )
    if spec.builtin:
        return load_dataset(
            spec.name, data_dir=resolve_data_dir(scenario, data_dir, task), test_fraction=spec.test_fraction, seed=seed
        )
    return load_user_dataset(
        spec.path,
        base_dir=_base_dir(scenario),
        loader=spec.loader,
        args=spec.args,
        input_shape=tuple(spec.input_shape) if spec.input_shape is not None else None,
        test_fraction=spec.test_fraction,
        seed=seed,
        targets=spec.targets,
        vocabulary=vocabulary,
    )


def vocabulary_setting(scenario: Scenario, task: int) -> str | Path | None:
    """``dataset.vocabulary``: ``leaf``, ``used``, or its file (relative to the topology's folder), or None."""
    given = scenario.tasks[task].dataset.vocabulary
    if given is None or given in ("leaf", "used"):
        return given
    file = Path(given).expanduser()
    base = _base_dir(scenario)
    return file if file.is_absolute() or base is None else base / file


def model_recipe(scenario: Scenario, task: int, dataset: Dataset) -> ModelRecipe:
    """How task ``task``'s module is made, for samples of ``dataset`` (a user's file is imported now)."""
    spec = scenario.tasks[task].model
    try:
        if spec.builtin:
            return builtin_recipe(
                spec.name,
                dataset.input_shape,
                dataset.num_classes,
                hidden=spec.layers,
                flops_per_sample=spec.flops_per_sample,
                buffers=spec.buffers,
                tokens=_token_ids(dataset),
                per_token=dataset.per_token,
            )
        return user_recipe(
            spec.path if spec.path is not None else spec.factory,
            spec.args,
            dataset.input_shape,
            dataset.num_classes,
            base_dir=_base_dir(scenario),
            flops_per_sample=spec.flops_per_sample,
            buffers=spec.buffers,
        )
    except ModelError as exc:
        if spec.builtin:  # a built-in that does not take these samples: the scenario's mistake
            raise _problem(scenario, f"{_where(scenario, task)}.model.name", str(exc)) from None
        raise


def _token_ids(dataset: Dataset) -> int | None:
    """How many token ids a built-in text model embeds: the vocabulary's, or for arrays of your own the largest
    id + 1 (None: the samples are not ids)."""
    if dataset.vocabulary is not None:
        return dataset.vocabulary.ids
    if dataset.train_x.is_floating_point() or not dataset.train_x.numel():
        return None
    top = max(int(dataset.train_x.max()), int(dataset.test_x.max()) if dataset.test_x.numel() else 0)
    return top + 1 if top >= 0 else None


def _split(scenario: Scenario, task: int, dataset: Dataset, rng: np.random.Generator) -> ClientParts:
    """The task's partition of ``dataset`` over the devices (ScenarioError naming the partition's field)."""
    part = scenario.tasks[task].dataset.partition
    where = f"{_where(scenario, task)}.dataset.partition"
    labels = dataset.train_y.numpy()
    if part.kind == "natural":
        if dataset.train_client is None:
            raise _problem(
                scenario,
                f"{where}.kind",
                f"natural needs each sample's client, but {dataset.name} names none; add `client` to the arrays "
                "(a LEAF folder has its users), or use another kind",
            )
        try:
            parts, _ = natural_parts(dataset.train_client, scenario.num_devices, part.pick, rng)
        except ValueError as exc:
            raise _problem(scenario, where, str(exc)) from None
        return parts
    if part.kind in LABEL_KINDS and dataset.per_token:
        raise _problem(
            scenario,
            f"{where}.kind",
            f"{part.kind} splits by label, but {dataset.name} has a label per token; use iid or natural",
        )
    if not scenario.tasks[task].dataset.builtin:
        _check_labels_named(scenario, task, dataset)
    try:
        if part.samples_per_client is not None:
            return sample_parts(
                labels,
                scenario.num_devices,
                part.samples_per_client,
                part.kind,
                rng,
                alpha=part.alpha,
                classes_per_client=part.classes_per_client,
            )
        return ClientParts.of(
            partition_indices(
                labels if labels.ndim == 1 else np.zeros(len(labels), dtype=np.int64),  # iid ignores labels
                scenario.num_devices,
                part.kind,
                rng,
                alpha=part.alpha,
                classes_per_client=part.classes_per_client,
                **partition_options(part),
            )
        )
    except ValueError as exc:
        hint = (
            "; give dataset.partition.samples_per_client to let devices share samples"
            if scenario.num_devices > len(labels)
            else ""
        )
        raise _problem(scenario, where, f"{exc}{hint}") from None


def partition_options(spec: PartitionSpec) -> dict:
    """The partition's ``exclusive`` groups and ``quantity_skew`` as :func:`partition_indices` takes them: pairs."""
    skew = spec.quantity_skew
    return {
        "exclusive": None if spec.exclusive is None else [(g.clients, g.labels) for g in spec.exclusive],
        "quantity_skew": None if skew is None else (skew.clients, skew.share),
    }


def _check_labels_named(scenario: Scenario, task: int, dataset: Dataset) -> None:
    """The labels a partition names exist in a data set of the user's own (known once it is loaded)."""
    part = scenario.tasks[task].dataset.partition
    problems = fit_problems(part, labels=dataset.num_classes, data=dataset.name)
    if problems:
        path, message = problems[0]
        raise _problem(scenario, f"{_where(scenario, task)}.dataset.partition{path}", message)


def _where(scenario: Scenario, task: int) -> str:
    return "task" if len(scenario.tasks) == 1 else f"tasks[{task}]"


def _base_dir(scenario: Scenario) -> Path | None:
    return scenario.source.parent if scenario.source is not None else None


def _problem(scenario: Scenario, path: str, message: str) -> ScenarioError:
    return ScenarioError(str(scenario.source or scenario.name), [(path, message)])


def build_learner(
    scenario: Scenario,
    tasks: Sequence[TaskSetup],
    streams: RandomStreams,
    participation: Sequence[float | None] | None,
    device: str,
    observers: Sequence[Callable[[AggregationRecord], object]] = (),
) -> Learner:
    """The learner of ``tasks`` with the scenario's strategy; ``participation``: each device's p
    (None: unknown; None for all: no policy states one); ``observers``: called with each aggregation."""
    sizes = tuple(tuple(t.parts.sizes.tolist()) for t in tasks)
    local = scenario.task.local
    try:
        algorithm = scenario.server.algorithm
        strategy = build_strategy(
            strategy_class(scenario),
            algorithm.params,
            ClientInfo(
                sizes[0],
                local.lr,
                tuple(participation) if participation is not None else None,
                lr_schedule=local.lr_schedule,
                task_sizes=sizes,
            ),
        )
    except ValueError as exc:  # e.g. an algorithm that needs p_i with a policy that has none
        raise ScenarioError(str(scenario.source or scenario.name), [("server.algorithm", str(exc))]) from None
    edges = _client_edges(scenario)
    try:
        learner = Learner(
            tasks,
            strategy=strategy,
            streams=streams,
            participants=scenario.server.round.asked,
            max_test_samples=scenario.eval.max_test_samples,
            device=device,
            on_divergence=scenario.server.on_divergence,
            server_optimizer=server_optimizer_choice(scenario.server.optimizer),
            compression=compression_settings(scenario.server.compression),
            client_edges=edges,
            edge_count=len(edge_nodes(scenario)) if edges is not None else None,
            observers=observers,
        )
    except ValueError as exc:  # a model with buffers under edges
        if edges is None:
            raise
        raise ScenarioError(str(scenario.source or scenario.name), [("network.nodes", str(exc))]) from None
    if algorithm.flower is not None:  # Flower sees the model's tensors, named as the model names them
        strategy.use_tensors(learner.layout.names, learner.layout.shapes)
    return learner


def strategy_class(scenario: Scenario) -> type:
    """The class of the scenario's algorithm: a built-in's, the user's, or the adapter of a Flower strategy (Flower
    is imported here, and only here, for a scenario that names one)."""
    algorithm = scenario.server.algorithm
    if algorithm.builtin:
        return ALGORITHMS[algorithm.name]
    if algorithm.flower is not None:
        from netfl.learn.federation.flower_adapter import flower_strategy

        return flower_strategy(flower_class(algorithm.flower, _base_dir(scenario)), algorithm.label)
    return users_strategy(algorithm, _base_dir(scenario))


def server_optimizer_choice(spec: ServerOptimizerSpec | None) -> ServerOptimizerChoice | None:
    """``server.optimizer`` as the learner takes it: its name and parameters."""
    return ServerOptimizerChoice(spec.name, spec.params) if spec is not None else None


def compression_settings(spec: CompressionSpec | None) -> CompressionSettings | None:
    """``server.compression`` as the learner takes it: each direction's compressor as plain values."""
    if spec is None:
        return None
    return CompressionSettings(_compressor(spec.uplink), _compressor(spec.downlink))


def _compressor(spec: CompressorSpec | None) -> CompressorSettings | None:
    if spec is None:
        return None
    qsgd = spec.qsgd
    return CompressorSettings(
        spec.kind,
        fraction=spec.topk,
        levels=qsgd.levels if qsgd is not None else None,
        bucket=qsgd.bucket if qsgd is not None else None,
        error_feedback=spec.error_feedback,
    )


def _client_edges(scenario: Scenario) -> list[int] | None:
    """Each device's edge server (its index among the edge nodes), for hierarchical FL; None without edges."""
    edges = edge_nodes(scenario)
    if not edges:
        return None
    by_group = [edges.index(e) for e in device_edges(scenario)]  # checked: every group is under an edge
    return [by_group[g] for g, group in enumerate(scenario.devices) for _ in range(group.count)]
