"""Registries: validating and listing without torch, and every entry matching what a run builds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from netfl.cli.main import main
from netfl.learn.data.partition import natural_parts, partition_indices
from netfl.registry import implementations
from netfl.registry.algorithms import ALGORITHMS
from netfl.registry.compression import COMPRESSORS
from netfl.registry.datasets import DATASET_NAMES, DATASETS
from netfl.registry.media import MEDIUM_KINDS
from netfl.registry.models import MODEL_NAMES, TEXT_MODELS
from netfl.registry.partitions import PARTITION_KINDS
from netfl.registry.server_optimizers import SERVER_OPTIMIZERS
from netfl.sim.medium import MEDIA

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "topologies" / "quickstart.yaml"

# Run in a fresh interpreter: this test process has long imported torch.
_NO_TORCH = """
import sys
from click.testing import CliRunner
from netfl.cli.main import main

runner = CliRunner()
for args in (["--help"], ["validate", sys.argv[1]], ["algorithms"], ["policies"]):
    result = runner.invoke(main, args)
    assert result.exit_code == 0, (args, result.output, result.exception)
    assert result.output.strip(), args
print(" ".join(sorted(m for m in ("torch", "simpy") if m in sys.modules)) or "neither")
"""


def test_help_validate_algorithms_and_policies_import_neither_torch_nor_simpy() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _NO_TORCH, str(QUICKSTART)], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "neither", f"imported: {out.stdout.strip()}"


# ------------------------------------------------------------------------------- entries and implementations


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_every_algorithm_entry_loads_its_strategy(name: str) -> None:
    from netfl.learn.federation.algorithms import ALGORITHMS as STRATEGIES
    from netfl.learn.federation.algorithms import Strategy

    entry = ALGORITHMS[name]
    cls = STRATEGIES[name]
    assert issubclass(cls, Strategy) and cls.__module__.startswith("netfl.learn.federation.algorithms.")
    assert cls.name == name and cls.entry is entry
    assert cls.Params is entry.params
    assert (cls.summary, cls.paper) == (entry.summary, entry.paper)
    assert (cls.needs_participation, cls.multi_task) == (entry.needs_participation, entry.multi_task)


def test_every_server_optimizer_entry_has_its_class() -> None:
    from netfl.learn.federation.server_optimizers import SERVER_OPTIMIZER_CLASSES, ServerOptimizer

    assert list(SERVER_OPTIMIZER_CLASSES) == list(SERVER_OPTIMIZERS)
    assert all(issubclass(c, ServerOptimizer) and c.name == n for n, c in SERVER_OPTIMIZER_CLASSES.items())


def test_implementations_are_found_by_module_and_must_match_the_registry() -> None:
    """A registered name without a class, a class naming an unregistered one, or two classes for one name: the
    package that gathers them fails to import, naming each."""
    import types

    module = types.ModuleType("netfl_test_components")

    class Base:
        name = "base's own, not an implementation"

    def made(*names: str) -> list[type]:
        return [type(f"C{i}", (Base,), {"name": n, "__module__": module.__name__}) for i, n in enumerate(names)]

    classes = made("a", "b")
    assert implementations(Base, ["b", "a"], [module]) == {"b": classes[1], "a": classes[0]}
    assert type("Other", (Base,), {"name": "c"}).__module__ != module.__name__  # another module's: not counted
    with pytest.raises(ImportError, match="'c' has no class"):
        implementations(Base, ["a", "b", "c"], [module])
    with pytest.raises(ImportError, match="C1 implements 'b', not registered"):
        implementations(Base, ["a"], [module])
    made("a")
    with pytest.raises(ImportError, match="'a' has 2 classes"):
        implementations(Base, ["a", "b"], [module])


def test_a_strategy_must_use_its_entrys_params() -> None:
    from netfl.learn.federation.algorithms import Strategy, StrategyParams

    class Other(StrategyParams):
        pass

    with pytest.raises(TypeError, match="Params must be the built-in fedavg's FedAvgParams"):
        type("Wrong", (Strategy,), {"name": "fedavg", "Params": Other})
    mine = type("Mine", (Strategy,), {"name": "no_such_algorithm", "__doc__": "My rule."})  # a user's: no registry
    assert (mine.entry.name, mine.entry.summary, mine.entry.params) == ("no_such_algorithm", "My rule.", StrategyParams)
    with pytest.raises(TypeError, match="Mine.client_state = -1: an int >= 0"):
        type("Mine", (Strategy,), {"client_state": -1})


def test_dataset_and_model_registries_match_the_loaders() -> None:
    from netfl.learn.data import datasets
    from netfl.learn.models import builtin as models

    assert datasets.DATASET_NAMES is DATASET_NAMES
    assert set(datasets._LOADERS) == {n for n in DATASET_NAMES if DATASETS[n].leaf is None}  # LEAF: read_leaf
    assert models.MODEL_NAMES is MODEL_NAMES
    for name in MODEL_NAMES:  # every registered name builds
        models.build_model(name, (80,) if name in TEXT_MODELS else (1, 8, 8), 10)


@pytest.mark.parametrize("name", ["digits", "blobs3"])  # the ones that need no files
def test_loaded_data_has_the_registered_classes_and_shape(name: str) -> None:
    from netfl.learn.data.datasets import load_dataset

    data = load_dataset(name)
    assert data.num_classes == DATASETS[name].num_classes == int(data.train_y.max()) + 1
    assert data.input_shape == DATASETS[name].input_shape


# ---------------------------------------------------------------------------------------------- the CLI


def test_policies_listing_shows_every_builtin_with_its_parameters() -> None:
    from netfl.policies import BUILTIN_POLICIES

    result = CliRunner().invoke(main, ["policies"])
    assert result.exit_code == 0, result.output
    for name in BUILTIN_POLICIES:
        assert any(line.startswith(f"{name} (") for line in result.output.splitlines()), name
    assert "markov (per round):" in result.output
    assert "eligible (continuous time):" in result.output
    assert "    transition (float, default 0.05): P(off -> on) per round before rescaling" in result.output
    assert "``" not in result.output and "probability `p` (FedAU" in result.output  # docstring markup, as read


def test_algorithms_listing_shows_every_algorithm_with_its_paper() -> None:
    result = CliRunner().invoke(main, ["algorithms"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for name, entry in ALGORITHMS.items():
        assert f"{name}: {entry.summary}" in [line.split("  (needs")[0] for line in lines], name
        assert f"    paper: {entry.paper}" in lines, name
    assert "seed 00" not in result.output  # papers are cited by authors and title
    options = lines[lines.index(next(line for line in lines if line.startswith("Round options"))) :]
    assert options[1].startswith("over_commit (fraction, default 0): ask ceil((1 + over_commit) x participants)")
    assert options[2].startswith("    paper: Bonawitz et al., Towards Federated Learning at Scale: System Design")
    assert any(line.startswith("partial_work (bool, default false):") for line in options)
    assert any(line.startswith("cloud_every (int, default 1):") for line in options)
    for name, entry in SERVER_OPTIMIZERS.items():
        assert f"{name}: {entry.summary}" in lines and f"    paper: {entry.paper}" in lines, name
    assert (
        "    lr (float, required): eta: the server's step size; required: the paper tunes it on a log grid, with tau"
        in lines
    )
    for name, (summary, paper) in COMPRESSORS.items():
        assert f"{name}: {summary}" in lines and f"    paper: {paper}" in lines, name


@pytest.mark.parametrize(
    "old,new,problem",
    [
        (
            "name: digits",
            "name: imagenet",
            "task.dataset.name: "
            "'imagenet' is not accepted; use 'digits', 'fashion-mnist', 'mnist', 'cifar10', 'blobs3', 'shakespeare' or "
            "'sent140'",
        ),
        (
            "name: mlp,",
            "name: mlpp,",
            "task.model.name: 'mlpp' is not accepted; use 'logistic', 'mlp', 'lenet5', 'cnn', 'mlp_softmax', "
            "'shakespeare_lstm' or 'sent140_lstm'",
        ),
        ("name: digits", "name: 7", "task.dataset.name: 7 is not accepted; use 'digits', "),
        (
            "name: fedavg,",
            "name: fedavgg,",
            "server.algorithm.name: unknown algorithm 'fedavgg'; accepted: " + ", ".join(ALGORITHMS),
        ),
    ],
)
def test_unknown_name_gives_file_yaml_path_and_accepted_names(tmp_path: Path, old: str, new: str, problem: str) -> None:
    text = QUICKSTART.read_text()
    assert old in text
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(old, new, 1))
    result = CliRunner().invoke(main, ["validate", str(bad)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {bad}: 1 problem(s)\n  {problem}"), result.stderr


def test_the_engine_implements_exactly_the_registered_media() -> None:
    assert list(MEDIA) == list(MEDIUM_KINDS)


def test_the_partitioner_splits_by_exactly_the_registered_kinds() -> None:
    """Every registered kind has an implementation that splits real labels (natural: real clients); a kind
    without one, or one outside the registry, fails here."""
    from netfl.learn.data.partition import NOT_SPLIT_HERE
    from netfl.learn.data.split_kinds import SPLITS

    assert sorted([*SPLITS, *NOT_SPLIT_HERE]) == sorted(PARTITION_KINDS)
    labels = np.repeat(np.arange(4), 10)
    for kind in SPLITS:
        parts = partition_indices(labels, 4, kind, np.random.default_rng(0), alpha=1.0, classes_per_client=2)
        assert sorted(np.concatenate(parts).tolist()) == list(range(40)), kind
    parts, clients = natural_parts(labels, 4, "random", np.random.default_rng(0))  # the labels as client ids
    assert sorted(np.concatenate(list(parts)).tolist()) == list(range(40)) and clients.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="kind natural: each device holds one real client's samples"):
        partition_indices(labels, 4, "natural", np.random.default_rng(0))
    with pytest.raises(ValueError, match="kind: 'stripes' is not accepted; use 'iid'"):
        partition_indices(labels, 4, "stripes", np.random.default_rng(0))
