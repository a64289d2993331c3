"""A Flower strategy as it is (``server.algorithm: {flower: ...}``): Flower's own FedAvg and FedAdam, in the message
API and the older one, give netfl's FedAvg and its Adam server step on the quickstart; a user's Flower strategy
from a file runs by path, deterministically, fenced, checked by ``netfl validate``, in sweeps, reruns and
checkpoints."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_support import TINY, assert_user_error, run
from test_checkpoint import StopAt

import netfl
from netfl.checkpoint import Checkpoint, Every, checkpoint_path
from netfl.config import load_scenario
from netfl.runner import run_scenario
from netfl.signals import Interrupted
from netfl.study import load_study, run_sweep
from netfl.study.local import LocalRunner

pytest.importorskip("flwr")

REPO = Path(__file__).resolve().parents[2]
SAME = ("events.parquet", "metrics.csv", "devices.parquet", "algorithm.csv")
MESSAGE, LEGACY = "flwr.serverapp.strategy", "flwr.server.strategy"
#: Flower's FedAvg asks every eligible device (fraction 1) and needs at least one: netfl's fedavg with no
#: round.participants does the same
EVERY_ELIGIBLE = {
    MESSAGE: "min_available_nodes: 1, min_train_nodes: 1",
    LEGACY: "min_available_clients: 1, min_fit_clients: 1, min_evaluate_clients: 1",
}

MY_STRATEGY = """\
from flwr.app import MetricRecord
from flwr.serverapp.strategy import FedAvg


class CountingFedAvg(FedAvg):
    \"\"\"Flower's FedAvg that counts its aggregations.\"\"\"

    def __init__(self, start: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.calls = start

    def aggregate_train(self, server_round, replies):
        arrays, metrics = super().aggregate_train(server_round, replies)
        self.calls += 1
        return arrays, MetricRecord({**(metrics or {}), "calls": self.calls, "round_seen": server_round})
"""


def quickstart(folder: Path, rounds: int = 3) -> Path:
    """The quickstart, a few rounds, evaluated each round, every eligible device asked."""
    text = (REPO / "topologies" / "quickstart.yaml").read_text()
    text = text.replace("stop: {rounds: 60, sim_time: 2h}", f"stop: {{rounds: {rounds}}}")
    text = text.replace("round: {participants: 8, deadline: 3s}", "round: {deadline: 3s}")
    text = text.replace("eval: {every: 5 rounds}", "eval: {every: 1 rounds}")
    path = folder / "quickstart.yaml"
    path.write_text(text)
    return path


def tiny(folder: Path, algorithm: str, code: str = MY_STRATEGY, rounds: int = 3) -> Path:
    (folder / "my_strategy.py").write_text(code)
    path = folder / "tiny.yaml"
    path.write_text(
        TINY.replace("stop: {rounds: 2}", f"stop: {{rounds: {rounds}}}") + f"server:\n  algorithm: {algorithm}\n"
    )
    return path


def run_world(topology: Path, *overrides: str):
    """The run's result and each aggregation's record (the final model is the last one's vector)."""
    seen = []
    result = netfl.run(load_scenario(topology, overrides=list(overrides)), on_aggregate=seen.append)
    return result, seen


def assert_same_run(ours, theirs, final: bool = True) -> None:
    """The same metrics and the same model before each aggregation (``final``: and after the last; an observer sees
    what the strategy returned, before a server optimiser's step)."""
    (a, seen_a), (b, seen_b) = ours, theirs
    assert list(a.metrics["round"]) == list(b.metrics["round"])
    assert list(a.metrics["sim_time_s"]) == list(b.metrics["sim_time_s"])
    np.testing.assert_allclose(a.metrics["test_accuracy"], b.metrics["test_accuracy"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(a.metrics["test_loss"], b.metrics["test_loss"], rtol=1e-5)
    assert [len(r.updates) for r in seen_a] == [len(r.updates) for r in seen_b] and len(seen_a) == 3
    for ra, rb in zip(seen_a, seen_b):
        torch.testing.assert_close(ra.x, rb.x, rtol=1e-5, atol=1e-6)
    if final:
        torch.testing.assert_close(seen_a[-1].result.vector, seen_b[-1].result.vector, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("api", [MESSAGE, LEGACY])
def test_flowers_fedavg_gives_netfls_fedavg_on_the_quickstart(tmp_path: Path, api: str) -> None:
    topology = quickstart(tmp_path)
    ours = run_world(topology, "server.algorithm={name: fedavg, weighting: samples}")
    theirs = run_world(topology, f"server.algorithm={{flower: {api}.FedAvg, {EVERY_ELIGIBLE[api]}}}")
    assert_same_run(ours, theirs)
    result = theirs[0]
    assert result.summary["algorithm"] == f"flower:{api}.FedAvg"
    assert list(result.algorithm["replies"]) == [len(r.updates) for r in theirs[1]]  # algorithm.csv


@pytest.mark.parametrize("api", [MESSAGE, LEGACY])
def test_flowers_fedadam_gives_netfls_adam_server_step(tmp_path: Path, api: str) -> None:
    """With beta1 = beta2 = 0 Flower's bias correction (1 - beta^(round + 1)) and netfl's (1 - beta^t) are both 1,
    so the two rules are the same arithmetic: x + eta Delta / (|Delta| + tau)."""
    topology = quickstart(tmp_path)
    ours = run_world(
        topology,
        "server.algorithm={name: fedavg}",
        "server.optimizer={name: adam, lr: 0.05, beta1: 0.0, beta2: 0.0, tau: 0.01, bias_correction: true}",
    )
    theirs = run_world(
        topology,
        f"server.algorithm={{flower: {api}.FedAdam, eta: 0.05, beta_1: 0.0, beta_2: 0.0, tau: 0.01, "
        f"{EVERY_ELIGIBLE[api]}}}",
    )
    assert_same_run(ours, theirs, final=False)


@pytest.mark.parametrize("api", [MESSAGE, LEGACY])
def test_flowers_fedadam_with_its_default_betas_gives_netfls_adam_with_flowers_correction(
    tmp_path: Path, api: str
) -> None:
    """Flower's FedAdam as Flower ships it (beta1 0.9, beta2 0.99) against netfl's adam with
    ``bias_correction: flower``: the same run, to float tolerance."""
    topology = quickstart(tmp_path)
    ours = run_world(
        topology,
        "server.algorithm={name: fedavg}",
        "server.optimizer={name: adam, lr: 0.05, beta1: 0.9, beta2: 0.99, tau: 0.01, bias_correction: flower}",
    )
    theirs = run_world(
        topology, f"server.algorithm={{flower: {api}.FedAdam, eta: 0.05, tau: 0.01, {EVERY_ELIGIBLE[api]}}}"
    )
    assert_same_run(ours, theirs, final=False)


@pytest.mark.parametrize("api", [MESSAGE, LEGACY])
def test_flowers_fedadam_keeps_its_moments_across_rounds(tmp_path: Path, api: str) -> None:
    """Flower's FedAdam with its default betas, each step checked against its rule written out by hand: the
    samples-weighted mean of the clients' models, m and v carried from round to round, and Flower's step size
    eta sqrt(1 - beta2^(r + 1)) / (1 - beta1^(r + 1)) at Flower's round r = netfl's round + 1."""
    eta, beta1, beta2, tau = 0.05, 0.9, 0.99, 0.01
    _, seen = run_world(
        quickstart(tmp_path),
        f"server.algorithm={{flower: {api}.FedAdam, eta: {eta}, tau: {tau}, {EVERY_ELIGIBLE[api]}}}",
    )
    m = v = None
    for record in seen:
        x = record.x.double()
        weights = np.array([u.num_samples for u in record.updates], dtype=float)
        weights /= weights.sum()
        mean = sum(w * (x + u.delta.double()) for w, u in zip(weights, record.updates))
        delta = mean - x
        m = (1 - beta1) * delta if m is None else beta1 * m + (1 - beta1) * delta
        v = (1 - beta2) * delta**2 if v is None else beta2 * v + (1 - beta2) * delta**2
        r = record.context.round_index + 1
        step = eta * np.sqrt(1 - beta2 ** (r + 1)) / (1 - beta1 ** (r + 1))
        expected = x + step * m / (v.sqrt() + tau)
        torch.testing.assert_close(record.result.vector.double(), expected, rtol=1e-5, atol=1e-6)
    assert len(seen) == 3


def test_a_users_flower_strategy_runs_by_path_with_its_metrics(tmp_path: Path) -> None:
    topology = tiny(tmp_path, "{flower: my_strategy.py:CountingFedAvg, start: 10}")
    result = run("simulate", topology, "--out", tmp_path / "out", "--quiet")
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["algorithm"] == "flower:my_strategy.py:CountingFedAvg" and summary["complete"]
    rows = (tmp_path / "out" / "algorithm.csv").read_text().splitlines()
    assert rows[0] == "sim_time_s,round,task,replies,calls,round_seen"
    assert [r.split(",")[-2:] for r in rows[1:]] == [["11", "1"], ["12", "2"], ["13", "3"]]
    assert "flower:my_strategy.py:CountingFedAvg(start=10)" in run("validate", topology).output


def test_flowers_sampling_is_the_seeds_and_leaves_pythons_random_alone(tmp_path: Path) -> None:
    """Flower samples with Python's global random: each call is seeded from netfl's selection stream (same seed,
    same bytes) and the global state is put back as it was."""
    topology = tiny(tmp_path, "{flower: flwr.serverapp.strategy.FedAvg, fraction_train: 0.5}", rounds=4)
    random.seed(1234)
    before = random.getstate()
    for out in ("a", "b"):
        result = run("simulate", topology, "--out", tmp_path / out, "--quiet")
        assert result.exit_code == 0, result.output
    assert random.getstate() == before
    for file in SAME:
        assert (tmp_path / "a" / file).read_bytes() == (tmp_path / "b" / file).read_bytes(), file
    replies = [int(r.split(",")[3]) for r in (tmp_path / "a" / "algorithm.csv").read_text().splitlines()[1:]]
    assert replies == [2, 2, 2, 2]  # half of the four eligible boards each round
    picked = {seed: [r.context.selected for r in run_world(topology, f"seed={seed}")[1]] for seed in (1, 2)}
    assert picked[1] != picked[2]  # the draws are the seed's, not a constant


@pytest.mark.parametrize("api", [MESSAGE, LEGACY])
def test_a_flower_strategy_wanting_more_nodes_than_are_eligible_trains_nobody(tmp_path: Path, api: str) -> None:
    """Flower would wait for nodes to connect (the message API sleeps a second at a time, for ever): in netfl's
    world no more are eligible, so nobody trains that round and the model stays."""
    wants = "min_available_nodes: 5" if api == MESSAGE else "min_available_clients: 5"
    result, seen = run_world(tiny(tmp_path, f"{{flower: {api}.FedAvg, {wants}}}", rounds=2))
    assert list(result.algorithm["replies"]) == [0, 0] and all(r.context.selected == () for r in seen)
    assert all(torch.equal(r.x, r.result.vector) for r in seen)


def test_an_exception_in_a_flower_strategy_names_its_file_and_line(tmp_path: Path) -> None:
    code = MY_STRATEGY.replace("        self.calls += 1\n", "        self.calls += 1 / 0\n")
    topology = tiny(tmp_path, "{flower: my_strategy.py:CountingFedAvg}", code)
    result = run("simulate", topology, "--out", tmp_path / "out", "--quiet")
    line = code.splitlines().index("        self.calls += 1 / 0") + 1
    assert_user_error(
        result, f"{tmp_path / 'my_strategy.py'}:{line}: ZeroDivisionError in CountingFedAvg.aggregate_train"
    )
    assert "results up to there are in" in result.stderr
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["complete"] is False


def test_a_wrong_answer_of_a_flower_strategy_is_refused(tmp_path: Path) -> None:
    code = MY_STRATEGY.replace(
        "        return arrays, MetricRecord(",
        "        arrays = type(arrays)(dict(list(arrays.items())[:1]))\n        return arrays, MetricRecord(",
    )
    topology = tiny(tmp_path, "{flower: my_strategy.py:CountingFedAvg}", code)
    result = run("simulate", topology, "--out", tmp_path / "out", "--quiet")
    assert_user_error(
        result,
        f"{tmp_path / 'my_strategy.py'}:12: CountingFedAvg.aggregate_train returned arrays ['1.weight']; expected "
        "the model's ['1.weight', '1.bias'] (as sent)",
    )


@pytest.mark.parametrize(
    ("algorithm", "more", "expected"),
    [
        ("{flower: flwr.serverapp.strategy.FedAdam, etaa: 0.1}", "",
         "server.algorithm.etaa: FedAdam.__init__ ("),
        ("{flower: flwr.serverapp.strategy.FedAdam, etaa: 0.1}", "", "takes no 'etaa'; its parameters: fraction_train"),
        ("{flower: flwr.app.ArrayRecord}", "", "flwr.app.ArrayRecord is not a Flower strategy"),
        ("{flower: flwr.serverapp.strategy.FedAdamm}", "", "module flwr.serverapp.strategy has no 'FedAdamm'"),
        ("{flower: no_such_module.FedAdam}", "", "no module 'no_such_module' to import"),
        ("{flower: my_strategy.py:Nothing}", "", "no 'Nothing' in this Flower strategy file"),
        ("{flower: my_strategy.py:CountingFedAvg, begin: 1}", "", "server.algorithm.begin: CountingFedAvg.__init__"),
        ("{flower: flwr.serverapp.strategy.FedAvg}", "  mode: async\n", "is a Flower strategy, which runs in rounds"),
        ("{flower: flwr.serverapp.strategy.FedAvg}", "  optimizer: {name: adam, lr: 0.1}\n",
         "a Flower strategy takes its own server step"),
        ("{flower: flwr.serverapp.strategy.FedAvg, name: fedavg}", "", "not both name and flower"),
        ("{flower: 'FedAvg'}", "", "must read file.py:ClassName (a Flower strategy in a Python file) or an import"),
    ],
)  # fmt: skip
def test_validate_checks_a_flower_strategy_before_anything_runs(
    tmp_path: Path, algorithm: str, more: str, expected: str
) -> None:
    topology = tiny(tmp_path, algorithm)
    topology.write_text(topology.read_text() + more)
    assert_user_error(run("validate", topology), expected)


@pytest.mark.parametrize("api", [MESSAGE, LEGACY])
def test_a_flower_strategy_resumes_from_a_checkpoint_with_its_state(tmp_path: Path, api: str) -> None:
    """FedAdam's m and v (and the older API's current weights) travel in the checkpoint: cut and resumed, the run
    is the whole run's, byte for byte."""
    min_nodes = EVERY_ELIGIBLE[api]
    scenario = load_scenario(tiny(tmp_path, f"{{flower: {api}.FedAdam, eta: 0.05, {min_nodes}}}", rounds=4))
    run_scenario(scenario, out_dir=tmp_path / "whole", threads=1)
    with pytest.raises(Interrupted):
        run_scenario(
            scenario, out_dir=tmp_path / "cut", threads=1, checkpoint_every=Every(rounds=1), progress=StopAt(2)
        )
    checkpoint = Checkpoint.load(checkpoint_path(tmp_path / "cut"))
    run_scenario(scenario, out_dir=tmp_path / "cut", threads=1, resume=checkpoint)
    for file in SAME:
        assert (tmp_path / "whole" / file).read_bytes() == (tmp_path / "cut" / file).read_bytes(), file


def test_a_flower_strategy_class_from_python(tmp_path: Path) -> None:
    from flwr.server.strategy import FedAvg

    world = load_scenario(tiny(tmp_path, "{name: fedavg}", rounds=2))
    result = netfl.run(world, algorithm=FedAvg, algorithm_args={"fraction_fit": 0.5}, out=tmp_path / "out")
    assert result.summary["algorithm"] == "flower:flwr.server.strategy.fedavg.FedAvg"
    assert list(result.algorithm["replies"]) == [2, 2]
    assert "flower: flwr.server.strategy.fedavg.FedAvg" in (tmp_path / "out" / "scenario.yaml").read_text()


@pytest.mark.slow
def test_a_flower_strategy_in_a_sweep_and_a_rerun(tmp_path: Path) -> None:
    tiny(tmp_path, "{flower: my_strategy.py:CountingFedAvg, fraction_train: 0.5}", rounds=2)
    study = tmp_path / "study.yaml"
    study.write_text(
        "name: flowers\nbase: tiny.yaml\ncases:\n  counting: {}\n  adam: {server.algorithm: {flower: "
        "flwr.serverapp.strategy.FedAdam, eta: 0.05}}\nseeds: 1\n"
    )
    outcome = run_sweep(load_study(study, out=tmp_path / "sweep"), LocalRunner(jobs=1, threads=1))
    assert [r["status"] for r in outcome.records.values()] == ["complete"] * 2
    for case in ("counting", "adam"):
        folder = next(p for p in (tmp_path / "sweep" / "runs" / case).iterdir())
        result = run("rerun", folder, "--out", tmp_path / f"again-{case}")
        assert result.exit_code == 0 and "identical" in result.output, result.output
