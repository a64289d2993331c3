"""Your own model and data, end to end: a user's MLP is the built-in one bit for bit, the two examples run, netfl
validate says what it measured, and every mistake is one message naming the file (exit 2, no traceback)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from cli_support import TINY, assert_user_error, run
from learn_support import BATCHNORM_MLP

import netfl
from netfl.registry.datasets import FASHION_MNIST_DIR, IDX_FILES

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "own-model"
REPRODUCED = ("events.parquet", "metrics.csv", "devices.parquet")

USER_MLP = """
import torch
from torch import nn


class MLP(nn.Module):
    \"\"\"The built-in `mlp` with hidden [32] on 8x8 digits, as a user writes it.\"\"\"

    def __init__(self, num_classes):
        super().__init__()
        self.hidden = nn.Linear(64, 32)
        self.out = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x.flatten(1))))


class Wrong(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 4)

    def forward(self, x):
        return self.fc(x.reshape(len(x), 63))
"""


def _topology(tmp_path: Path, model: dict, extra: dict | None = None) -> Path:
    data = yaml.safe_load(TINY)
    data["task"]["model"] = model
    data["stop"] = {"rounds": 4}
    data["devices"][0]["count"] = 6
    data["server"] = {"round": {"participants": 4}}
    data.update(extra or {})
    path = tmp_path / f"{len(list(tmp_path.glob('*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_user_module_equal_to_a_built_in_one_gives_the_same_bytes(tmp_path: Path) -> None:
    (tmp_path / "my_models.py").write_text(USER_MLP)
    builtin = _topology(tmp_path, {"name": "mlp", "hidden": [32]})
    mine = _topology(tmp_path, {"path": "my_models.py:MLP"})
    a = netfl.run(builtin, out=tmp_path / "builtin")
    b = netfl.run(mine, out=tmp_path / "mine")
    for name in REPRODUCED:
        assert (tmp_path / "builtin" / name).read_bytes() == (tmp_path / "mine" / name).read_bytes(), name
    assert b.summary["tasks"][0]["model"] == "my_models.py:MLP"
    assert a.summary["tasks"][0]["training"].startswith("fused") and b.summary["tasks"][0]["training"].startswith(
        "fused"
    )
    assert b.events.query("kind == 'train_start'").flops.iloc[0] > 0


def test_the_shakespeare_example_trains_per_token_on_its_speakers(tmp_path: Path) -> None:
    overrides = ["stop.rounds=2", "task.local.steps=2", "eval.every=1 rounds", "task.model.args.hidden=16"]
    result = netfl.run(EXAMPLES / "shakespeare.yaml", overrides=overrides, out=tmp_path / "run")
    summary = result.summary
    assert summary["num_devices"] == 23 and summary["tasks"][0]["training"].startswith("batched")
    assert summary["tasks"][0]["model"] == "models.py:CharGRU(embedding=32, hidden=16)"
    accuracy = result.metrics.test_accuracy.tolist()
    assert len(accuracy) == 3 and accuracy[-1] > accuracy[0]  # learns from the first rounds
    assert {"class_'\\n'_accuracy", "class_'}'_accuracy"} <= set(result.metrics.columns)  # LEAF's 80 characters
    saved = yaml.safe_load((tmp_path / "run" / "scenario.yaml").read_text())
    assert saved["tasks"][0]["model"]["path"] == "models.py:CharGRU"  # relative to the topology, as written


@pytest.mark.slow
@pytest.mark.skipif(not all((FASHION_MNIST_DIR / f).exists() or (FASHION_MNIST_DIR / f"{f}.gz").exists()
                            for f in IDX_FILES), reason="needs Debian's dataset-fashion-mnist")  # fmt: skip
@pytest.mark.parametrize("buffers", ["average", "local"])
def test_the_batchnorm_example_runs_under_both_buffer_rules(tmp_path: Path, buffers: str) -> None:
    overrides = [
        "stop.rounds=2",
        "devices[0].count=8",
        "server.round.participants=4",
        "task.dataset.max_train_samples=2000",
        "eval.max_test_samples=300",
        "eval.every=1 rounds",
        f"task.model.buffers={buffers}",
    ]
    result = netfl.run(EXAMPLES / "fashion_bn.yaml", overrides=overrides, threads=2)
    assert result.summary["tasks"][0]["training"].startswith("replicas (any module (channels_last)")
    assert result.summary["final_test_accuracy"] > 0.3  # two rounds of 4 phones: well above chance (10 %)
    sent = result.events.query("kind == 'upload_start'").bytes.iloc[0]
    params = 16 * 9 + 16 + 32 * 16 * 9 + 32 + 2 * 16 + 2 * 32 + 32 * 7 * 7 * 10 + 10
    assert sent == 4 * (params + (2 * 16 + 1 + 2 * 32 + 1 if buffers == "average" else 0))


def test_validate_imports_the_users_files_and_says_what_it_measured() -> None:
    result = run("validate", EXAMPLES / "shakespeare.yaml")
    assert result.exit_code == 0, result.output
    assert "models.py:CharGRU(embedding=32, hidden=64): 26,576 parameters; 106 kB on the wire; outputs (80, 80)" in (
        result.output
    )
    assert "23 clients (each of the 23 devices holds one)" in result.output
    batched = "trains on batched (a sequence model whose every layer the batched path computes, in the worker threads)"
    assert batched in result.output  # embedding 80 x 32, GRU
    # 3 x 64 x (32 + 64) + 2 x 192 biases, head 64 x 80 + 80 (LEAF's 80 characters): 2,560 + 18,816 + 5,200
    assert "a label per token (80 per sample); 80 classes" in result.output
    assert "\ndata budget " in result.output and "(a quarter of this machine's memory; set NETFL_DATA_BUDGET" in (
        result.output
    )


def _write_user_files(tmp_path: Path) -> None:
    (tmp_path / "my_models.py").write_text(USER_MLP)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "mine.npz", x=rng.random((60, 1, 8, 8), dtype=np.float32), y=np.arange(60) % 10,
             client=np.arange(60) % 5)  # fmt: skip


@pytest.mark.parametrize(
    "model,dataset,expected",
    [
        ({"path": "nowhere.py:Net"}, None, ["0.yaml: 1 problem(s)", "task.model.path: nowhere.py:Net: file not"]),
        ({"path": "my_models.py:Nope"}, None, ["my_models.py: no 'Nope' in this model file; defined there: MLP,"]),
        ({"path": "my_models.py:Wrong"}, None, ["my_models.py:24: RuntimeError in my_models.py:Wrong on two training"]),
        ({"path": "my_models.py:MLP"}, {"path": "missing.npz"}, ["task.dataset.path: missing.npz: file not found"]),
        ({"path": "my_models.py:MLP"}, {"path": "mine.npz", "partition": {"kind": "natural"}},
         ["task.dataset.partition: 6 devices but the data names 5 clients"]),
        ({"name": "logistic"}, {"name": "digits", "partition": {"kind": "natural"}},
         ["task.dataset.partition.kind: natural puts each real client's samples on one device, but digits does not"]),
        ({"name": "lenet5"}, {"path": "mine.npz", "input_shape": [64]},
         ["task.model.name: lenet5 takes images (C, H, W); these samples have shape (64,)"]),
    ],
)  # fmt: skip
def test_every_mistake_is_one_message_naming_the_file(tmp_path: Path, model, dataset, expected) -> None:
    _write_user_files(tmp_path)
    path = _topology(tmp_path, model)
    if dataset is not None:
        data = yaml.safe_load(path.read_text())
        data["task"]["dataset"] = dataset
        path.write_text(yaml.safe_dump(data))
    assert_user_error(run("validate", path), *expected)
    assert_user_error(run("simulate", path, "--out", tmp_path / "out", "-q"), *expected)
    assert not (tmp_path / "out" / "summary.json").exists()


def test_a_study_may_vary_a_models_arguments_and_is_checked_before_any_run(tmp_path: Path) -> None:
    _write_user_files(tmp_path)
    topology = _topology(tmp_path, {"path": "my_models.py:MLP"})
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump({"name": "widths", "base": str(topology), "seeds": 1,
                                     "grid": {"task.model": {"builtin": {"name": "mlp", "hidden": [8]},
                                                             "wrong": {"path": "my_models.py:Wrong"}}}}))  # fmt: skip
    result = run("sweep", study, "--out", tmp_path / "study", "-q")
    assert_user_error(result, "my_models.py:24: RuntimeError in my_models.py:Wrong")
    assert not (tmp_path / "study").exists()  # refused before any run started


def test_resuming_a_run_of_a_user_model_is_the_run_that_never_stopped(tmp_path: Path) -> None:
    from test_checkpoint import interrupted_and_resumed

    from netfl.checkpoint import Every

    _write_user_files(tmp_path)
    topology = _topology(tmp_path, {"path": "my_models.py:MLP"}, {"stop": {"rounds": 8}})
    checkpoint = interrupted_and_resumed(tmp_path, topology, [], 5, Every(rounds=2))
    assert checkpoint.rounds == 4 and json.dumps(checkpoint.scenario["tasks"][0]["model"]) == (
        '{"path": "my_models.py:MLP"}'
    )


BN_MODEL = """
import torch
from torch import nn


class SmallBN(nn.Module):
    def __init__(self, num_classes, width=4):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width)
        self.fc = nn.Linear(width * 16, num_classes)

    def forward(self, x):
        return self.fc(nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2).flatten(1))
"""


@pytest.mark.parametrize(
    "algorithm,extra",
    [
        ({"name": "fedprox", "mu": 0.1}, {}),  # a pull in every local step
        ({"name": "scaffold"}, {}),  # control variates: a shift in every step, twice the bytes
        ({"name": "mifa"}, {}),  # a memory of every client's update
        ({"name": "fed_cvar", "alpha": 0.5}, {}),  # an extra trainable scalar beside the module
        ({"name": "fedbuff"}, {"server": {"mode": "async", "async": {"buffer": 2}}}),  # stale updates
    ],
)  # fmt: skip
def test_every_kind_of_algorithm_trains_a_users_batchnorm_module(tmp_path: Path, algorithm, extra) -> None:
    (tmp_path / "bn.py").write_text(BN_MODEL)
    _write_user_files(tmp_path)
    path = _topology(tmp_path, {"path": "bn.py:SmallBN"}, {"stop": {"rounds": 3}, "eval": {"every": "1 rounds"}})
    data = yaml.safe_load(path.read_text())
    data["task"]["dataset"] = {"path": "mine.npz", "partition": {"kind": "natural"}}
    data["devices"][0]["count"] = 5
    data["server"] = {**data["server"], "algorithm": algorithm, **extra.get("server", {})}
    if extra:
        data["server"].pop("round", None)
        data["devices"][0]["availability"] = {"policy": "always"}
    path.write_text(yaml.safe_dump(data))
    result = netfl.run(path)
    assert result.summary["updates_applied"] > 0 and result.summary["stopped_by"] == "rounds"
    assert np.isfinite(result.metrics.test_loss).all()
    assert len(set(result.metrics.test_loss.round(6))) > 1  # the model moved


def test_several_models_of_ones_own_train_at_once_with_mmfl(tmp_path: Path) -> None:
    (tmp_path / "bn.py").write_text(BN_MODEL)
    data = yaml.safe_load((REPO / "topologies" / "mmfl.yaml").read_text())
    data["tasks"][1]["model"] = {"path": "bn.py:SmallBN", "args": {"width": 3}}
    data["tasks"][2]["model"] = {"path": "bn.py:SmallBN", "buffers": "local"}
    data["stop"] = {"rounds": 3}
    path = tmp_path / "mmfl.yaml"
    path.write_text(yaml.safe_dump(data))
    result = netfl.run(path)
    tasks = result.summary["tasks"]
    assert [t["model"] for t in tasks] == ["logistic", "bn.py:SmallBN(width=3)", "bn.py:SmallBN"]
    assert [t["training"].split()[0] for t in tasks] == ["fused", "replicas", "replicas"]
    assert set(result.events.query("kind == 'upload_start' and task.notna()").task) >= {1, 2}


def test_the_lazy_engine_draws_samples_for_millions_of_phones_from_ones_own_data(tmp_path: Path) -> None:
    _write_user_files(tmp_path)
    data = yaml.safe_load((REPO / "topologies" / "million-phones.yaml").read_text())
    data["task"]["dataset"] = {
        "path": str(tmp_path / "mine.npz"),
        "partition": {"kind": "iid", "samples_per_client": 5},
    }
    data["task"]["model"] = {"path": str(tmp_path / "my_models.py") + ":MLP"}
    data["devices"][0]["count"] = 3000
    data["stop"] = {"rounds": 3}
    path = tmp_path / "lazy.yaml"
    path.write_text(yaml.safe_dump(data))
    result = netfl.run(path)
    assert result.summary["num_devices"] == 3000 and result.summary["updates_applied"] > 0


def test_a_world_in_a_dict_may_hold_the_class_itself(tmp_path: Path) -> None:
    from torch import nn

    class Tiny(nn.Module):
        def __init__(self, num_classes):
            super().__init__()
            self.fc = nn.Linear(64, num_classes)

        def forward(self, x):
            return self.fc(x.flatten(1))

    world = yaml.safe_load(TINY)
    world["task"]["model"] = Tiny  # the class, not its name
    result = netfl.run(world)
    assert result.summary["tasks"][0]["model"].endswith("Tiny") and result.summary["rounds"] == 2


FAILS_LATER = """
import os, sys
import torch
from torch import nn


class Later(nn.Module):
    \"\"\"Fine on the checks' samples; then, from its {after}th forward pass in training, it {does}.\"\"\"

    calls = 0

    def __init__(self, num_classes):
        super().__init__()
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        if self.training:
            type(self).calls += 1
            if type(self).calls > {after}:
                {action}
        return self.fc(torch.tanh(x.flatten(1)))  # not a Linear/ReLU chain: trained on replicas, forward called
"""


@pytest.mark.parametrize(
    "action,expected",
    [
        ("raise ValueError('a bad batch')", "my_later.py:20: ValueError in my_later.py:Later: a bad batch"),
        ("sys.exit(0)", "my_later.py:20: SystemExit in my_later.py:Later: 0"),
        ("os._exit(0)", "my_later.py:20: os._exit(0) in my_later.py:Later, which would end netfl at once"),
    ],
)
def test_a_users_model_failing_mid_run_is_one_message_in_any_thread(tmp_path: Path, action, expected) -> None:
    (tmp_path / "my_later.py").write_text(FAILS_LATER.replace("{after}", "6").replace("{action}", action)
                                          .replace("{does}", "fails"))  # fmt: skip
    path = _topology(tmp_path, {"path": "my_later.py:Later"})
    assert_user_error(run("simulate", path, "--out", tmp_path / "out", "-q", "--threads", "2"), expected)


@pytest.mark.parametrize("command", ["validate", "simulate"])
@pytest.mark.parametrize(
    "action,expected",
    [
        ("sys.exit(3)", "my_later.py:20: SystemExit in my_later.py:Later: 3"),
        ("os._exit(0)", "my_later.py:20: os._exit(0) in my_later.py:Later, which would end netfl at once"),
    ],
)
def test_a_users_model_ending_the_process_in_the_checks_is_one_message(
    tmp_path: Path, command: str, action, expected
) -> None:
    """From its first forward pass: in the checks before any run (the module on two samples, its FLOPs), which
    run the user's module fenced as training does."""
    (tmp_path / "my_later.py").write_text(FAILS_LATER.replace("{after}", "0").replace("{action}", action)
                                          .replace("{does}", "ends the process"))  # fmt: skip
    path = _topology(tmp_path, {"path": "my_later.py:Later"})
    extra = ["--out", tmp_path / "out", "-q"] if command == "simulate" else []
    assert_user_error(run(command, path, *extra), expected)
    assert not (tmp_path / "out").exists()


def test_a_study_whose_check_process_dies_is_refused_not_hung(tmp_path: Path) -> None:
    """A model file that kills its own process (as a crash in native code would): the sweep's check of user code
    says so and the sweep stops, rather than waiting for ever on the dead child."""
    (tmp_path / "my_crash.py").write_text(
        "import os, signal\nfrom torch import nn\n\n\nclass Crash(nn.Module):\n"
        "    def __init__(self, num_classes):\n        os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    topology = _topology(tmp_path, {"path": "my_crash.py:Crash"})
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump({"name": "crash", "base": str(topology), "seeds": 1}))
    result = run("sweep", study, "--out", tmp_path / "study", "--dry-run")
    assert_user_error(result, "ended abruptly (a crash in native code, or out of memory)")


def test_an_mlp_with_batchnorm1d_validates_and_runs(tmp_path: Path) -> None:
    """The FLOP count used to run it on one sample in training mode, which BatchNorm1d refuses."""
    (tmp_path / "bn1d.py").write_text(BATCHNORM_MLP)
    path = _topology(tmp_path, {"path": "bn1d.py:NormedMLP"})
    checked = run("validate", path)
    assert checked.exit_code == 0, checked.output
    assert "4.78 kFLOP forward" in checked.output  # 2 x 64 x 32 + 32 + 2 x 32 x 10 + 10 = 4,778
    result = run("simulate", path, "--out", tmp_path / "out", "-q")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["updates_applied"] > 0


def test_flops_per_sample_skips_the_count(tmp_path: Path, monkeypatch) -> None:
    """With model.flops_per_sample nothing is counted: a count that would fail is never run, and every job
    costs the given figure."""
    from torch import nn

    from netfl.learn.models import flops

    def broken(*args, **kwargs):
        raise AssertionError("counted although flops_per_sample was given")

    (tmp_path / "bn1d.py").write_text(BATCHNORM_MLP)
    path = _topology(tmp_path, {"path": "bn1d.py:NormedMLP", "flops_per_sample": 12_345})
    monkeypatch.setitem(flops._FORMULAS, nn.functional.linear, broken)
    result = netfl.run(path)
    starts = result.events.query("kind == 'train_start'")
    assert len(starts) and (starts.flops == 12_345 * 2 * 8).all()  # 2 steps of batch 8


def test_a_test_label_outside_the_training_labels_is_refused_by_validate_and_simulate(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    y_test = np.arange(20) % 8
    y_test[3] = 12
    np.savez(tmp_path / "labels.npz", x=rng.random((60, 1, 8, 8), dtype=np.float32), y=np.arange(60) % 8,
             x_test=rng.random((20, 1, 8, 8), dtype=np.float32), y_test=y_test)  # fmt: skip
    (tmp_path / "my_models.py").write_text(USER_MLP)
    path = _topology(tmp_path, {"path": "my_models.py:MLP"})
    data = yaml.safe_load(path.read_text())
    data["task"]["dataset"] = {"path": "labels.npz"}
    path.write_text(yaml.safe_dump(data))
    expected = "labels.npz: y_test holds label(s) 12, outside the training labels y (0-7); netfl would build a 13-"
    assert_user_error(run("validate", path), expected)
    assert_user_error(run("simulate", path, "--out", tmp_path / "out", "-q"), expected)
    assert not (tmp_path / "out" / "summary.json").exists()


@pytest.mark.parametrize(
    "edits,expected",
    [
        ([("Linear(64, 32)", "Linear(64, 24)"), ("Linear(32, num", "Linear(24, num")],
         "parameter hidden.weight was (32, 64) there and is (24, 64) now"),
        ([("self.out", "self.head")], "parameter out.weight was (10, 32) there and is absent now"),
    ],
)  # fmt: skip
def test_resuming_after_the_model_file_changed_says_which_parameter_differs(tmp_path: Path, edits, expected) -> None:
    """Not a reshape error from deep inside training: the model no longer matches the checkpoint."""
    from test_checkpoint import StopAt

    from netfl.checkpoint import Every, checkpoint_path
    from netfl.config import load_scenario
    from netfl.runner import run_scenario
    from netfl.signals import Interrupted

    _write_user_files(tmp_path)
    topology = _topology(tmp_path, {"path": "my_models.py:MLP"}, {"stop": {"rounds": 6}})
    with pytest.raises(Interrupted):
        run_scenario(load_scenario(topology), out_dir=tmp_path / "cut", threads=1, checkpoint_every=Every(rounds=2),
                     progress=StopAt(3))  # fmt: skip
    assert checkpoint_path(tmp_path / "cut").exists()
    changed = USER_MLP
    for old, new in edits:
        changed = changed.replace(old, new)
    (tmp_path / "my_models.py").write_text(changed)
    result = run("resume", tmp_path / "cut", "-q")
    assert_user_error(result, "state: the model, my_models.py:MLP (", "my_models.py), no longer matches the checkpoint",
                      expected, "the model file changed since the run started")  # fmt: skip


SHAPE_CHANGES = """
import torch
from torch import nn


class Shrinks(nn.Module):
    \"\"\"Scores every class on the checks' samples; then, {when}, five classes only.\"\"\"

    calls = 0

    def __init__(self, num_classes):
        super().__init__()
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        type(self).calls += 1
        scores = self.fc(torch.tanh(x.flatten(1)))
        return scores[:, :5] if {when} else scores
"""


@pytest.mark.parametrize(
    "when,shape",
    [
        (
            "self.training and type(self).calls > 6",
            "(8, 5): it scores 5 classes, where (8, C >= 10) are expected (the labels reach 9)",
        ),  # a training step
        (
            "not self.training",
            "(359, 5): it scores 5 classes, where (359, C >= 10) are expected (the task has 10 classes)",
        ),  # the test set
    ],
)
def test_a_model_whose_output_shape_changes_mid_run_says_both_shapes(tmp_path: Path, when: str, shape: str) -> None:
    """Not torch's ``IndexError: Target 9 is out of bounds``, with no file and no word of the shape."""
    (tmp_path / "shrinks.py").write_text(SHAPE_CHANGES.replace("{when}", when))
    path = _topology(tmp_path, {"path": "shrinks.py:Shrinks"})
    result = run("simulate", path, "--out", tmp_path / "out", "-q", "--threads", "1")
    assert_user_error(result, "shrinks.py: OutputMismatch in shrinks.py:Shrinks: the model's output has shape ")
    assert shape in result.output and "its output changed shape since it was checked" in result.output
    assert "its output changed shape since it was checked" in result.output and "out of bounds" not in result.output
