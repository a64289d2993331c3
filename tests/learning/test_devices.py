"""Every algorithm family trains on the device it is given, and a GPU run's world is the CPU run's: the same
events, device statistics and timeline; accuracies within rounding. The ``cpu`` cases run in every run of the
suite, the ``cuda`` ones where a GPU is (tests/device_support.py).

Also, on the CPU, the places where a GPU run once met tensors on two devices: a job's state moved by a
checkpoint (:func:`~netfl.learn.training.runtime.on_device`), BatchNorm statistics averaged where they are, QSGD's draws
moved to the vector. The ``meta`` device stands in for a GPU: torch refuses to mix it with CPU tensors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from device_support import DEVICES

from netfl.config import load_scenario
from netfl.learn.federation.compression import qsgd
from netfl.learn.federation.task_model import sample_weighted_mean
from netfl.learn.training.runtime import on_device
from netfl.runner import device_columns, run_scenario

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"
CNN = "task.model={name: cnn}"  # stacked on a GPU, replicas on a CPU
SYNC = ("quickstart.yaml", "stop.rounds=3", CNN)
ASYNC = ("afa-noniid.yaml", "stop.rounds=6", "eval.every=3 rounds", CNN)

#: One run of each family: (topology, overrides...). Selection by update norms (mmfl) makes the world depend on
#: float rounding, so only its accuracies are compared across devices.
FAMILIES = {
    "fedavg+adam+compression": (
        *SYNC,
        "server.optimizer={name: adam, lr: 0.01}",
        "server.compression={uplink: {topk: 10%, error_feedback: true}, downlink: {qsgd: {levels: 16}}}",
    ),
    "fedprox": (*SYNC, "server.algorithm={name: fedprox, mu: 0.01}"),
    "scaffold": (*SYNC, "server.algorithm={name: scaffold}"),
    "fednova": (*SYNC, "server.algorithm={name: fednova}"),
    "fedau": (*SYNC, "server.algorithm={name: fedau}"),
    "umifam": (*SYNC, "server.algorithm={name: umifam}"),
    "fed_cvar": (*SYNC, "server.algorithm={name: fed_cvar}"),
    "afa_cd": (*ASYNC, "server.algorithm={name: afa_cd}"),
    "fedbuff": (*ASYNC, "server.algorithm={name: fedbuff}"),
    "fedasync": (*ASYNC, "server.algorithm={name: fedasync}", "server.async.buffer=1"),
    "mmfl": ("mmfl.yaml", "stop.rounds=3"),
    "hierarchical": ("hierarchical.yaml", "stop.rounds=4", "eval.every=2 rounds"),
}
WORLD_FOLLOWS_FLOATS = {"mmfl"}


def _run(case: str, device: str):
    topology, *overrides = FAMILIES[case]
    scenario = load_scenario(TOPOLOGIES / topology, overrides=list(overrides))
    return run_scenario(scenario, device=device, threads=1, write=False)


def _world(outcome) -> dict[str, pd.DataFrame]:
    result = outcome.result
    tables = {"events": result.recorder.columns(), "devices": device_columns(result)}
    if result.timeline is not None:
        tables["timeline"] = result.timeline.columns()
    return {name: pd.DataFrame(columns) for name, columns in tables.items()}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(FAMILIES))
def test_every_algorithm_family_trains_on_the_device(case: str, device: str) -> None:
    outcome = _run(case, device)
    assert outcome.summary["device"] == device
    accuracies = [row.test_accuracy for row in outcome.result.metrics]
    assert accuracies and all(np.isfinite(accuracies)), accuracies
    assert outcome.result.updates_applied > 0 and outcome.result.stopped_by == "rounds"
    if device == "cpu":
        return
    on_cpu = _run(case, "cpu")
    if case not in WORLD_FOLLOWS_FLOATS:
        for name, table in _world(outcome).items():
            pd.testing.assert_frame_equal(table, _world(on_cpu)[name], check_exact=True, obj=f"{case}: {name}")
    np.testing.assert_allclose(accuracies, [row.test_accuracy for row in on_cpu.result.metrics], atol=0.05)


class Memory:
    """A strategy's state: tensors inside an object of its own."""

    def __init__(self):
        self.table = torch.arange(6.0).view(2, 3)


def test_a_state_moves_to_the_device_whole_and_keeps_what_it_shared() -> None:
    vector = torch.ones(4)
    state = {"global": vector, "snapshots": {0: (vector, torch.zeros(0))}, "strategy": Memory(), "round": 3}
    moved = on_device(state, torch.device("meta"))
    assert moved["global"].device.type == "meta" and moved["strategy"].table.device.type == "meta"
    assert moved["snapshots"][0][0] is moved["global"]  # one tensor before, one after
    assert moved["round"] == 3 and state["global"].device.type == "cpu"  # a copy: the state itself is left alone
    back = on_device(on_device(state, torch.device("cpu")), torch.device("cpu"))
    assert torch.equal(back["strategy"].table, state["strategy"].table)


def test_buffers_are_averaged_where_they_are() -> None:
    a, b = torch.tensor([1.0, 10.0]), torch.tensor([4.0, 40.0])
    torch.testing.assert_close(sample_weighted_mean([a, b], [1, 2]), torch.tensor([3.0, 30.0], dtype=torch.float64))
    on_meta = sample_weighted_mean([a.to("meta"), b.to("meta")], [1, 2])  # a GPU's buffers: the mean stays there
    assert on_meta.device.type == "meta" and on_meta.shape == (2,)


def test_qsgd_draws_on_the_cpu_and_quantises_where_the_vector_is() -> None:
    v = torch.tensor([0.5, -1.0, 0.25, 2.0])
    quantised = qsgd(v, 4, torch.Generator().manual_seed(3))
    again = qsgd(v.to("meta"), 4, torch.Generator().manual_seed(3))  # no mixing of devices
    assert again.device.type == "meta" and again.shape == v.shape
    norm = float(torch.linalg.vector_norm(v))
    levels = quantised.abs() / norm * 4
    assert torch.allclose(levels, levels.round(), atol=1e-5)  # on QSGD's levels |v| k / s
