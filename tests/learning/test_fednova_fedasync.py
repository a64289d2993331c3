"""FedNova (Wang et al., Tackling the Objective Inconsistency Problem in Heterogeneous Federated Optimization)
and FedAsync (Xie, Koyejo & Gupta, Asynchronous Federated Optimization): each rule on hand-computed inputs."""

from __future__ import annotations

import pytest
import torch

from netfl.backend import RoundContext
from netfl.learn.federation.algorithms import ALGORITHMS, ClientInfo, ClientUpdate
from netfl.learn.federation.algorithms.fedasync import staleness_factor

F64 = torch.float64


def vec(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=F64)


def ctx(version: int) -> RoundContext:
    return RoundContext(round_index=version, sim_time_s=0.0, available=(), selected=(), delivered=())


def make(name: str, **params):
    cls = ALGORITHMS[name]
    return cls(cls.Params(**params), ClientInfo((1, 3), local_lr=0.1))


def test_fednova_normalises_unequal_step_counts_by_hand() -> None:
    """Client 0: 2 steps, 1 sample, Delta = [1, 0]; client 1: 6 steps, 3 samples, Delta = [0, 3]. p = (1/4, 3/4),
    tau_eff = 1/4 * 2 + 3/4 * 6 = 5, sum p_i Delta_i / tau_i = [1/8, 3/8], so x += 5 * [1/8, 3/8] = [5/8, 15/8]."""
    updates = [ClientUpdate(0, 1, vec(1.0, 0.0), 0, 0.1, 2), ClientUpdate(1, 3, vec(0.0, 3.0), 0, 0.1, 6)]
    x = vec(0.0, 0.0)
    nova = make("fednova").aggregate(x, updates, ctx(0)).vector
    torch.testing.assert_close(nova, vec(0.625, 1.875), rtol=0, atol=1e-15)
    # FedAvg on the same updates, the biased baseline: the client that ran 6 steps pulls harder
    fedavg = make("fedavg").aggregate(x, updates, ctx(0)).vector
    torch.testing.assert_close(fedavg, vec(0.25, 2.25), rtol=0, atol=1e-15)
    # uniform p = (1/2, 1/2): tau_eff = 4, sum p d = [1/4, 1/4]; server_lr scales the step
    uniform = make("fednova", weighting="uniform", server_lr=0.5).aggregate(x, updates, ctx(0)).vector
    torch.testing.assert_close(uniform, vec(0.5, 0.5), rtol=0, atol=1e-15)


def test_fednova_with_equal_steps_is_fedavg() -> None:
    updates = [ClientUpdate(0, 1, vec(0.3, -0.1), 0, 0.1, 4), ClientUpdate(1, 3, vec(-0.2, 0.5), 0, 0.1, 4)]
    x = vec(1.0, 2.0)
    nova = make("fednova").aggregate(x, updates, ctx(0)).vector
    torch.testing.assert_close(nova, make("fedavg").aggregate(x, updates, ctx(0)).vector, rtol=0, atol=1e-15)
    assert torch.equal(make("fednova").aggregate(x, [], ctx(0)).vector, x)
    with pytest.raises(ValueError, match="local steps"):
        make("fednova").aggregate(x, [ClientUpdate(0, 1, vec(1.0, 1.0), 0)], ctx(0))


def test_staleness_functions_by_hand() -> None:
    assert [staleness_factor(s, "constant") for s in (0, 3, 50)] == [1.0, 1.0, 1.0]
    assert staleness_factor(3, "polynomial", a=0.5) == 0.5  # (3 + 1)^-1/2
    assert staleness_factor(0, "polynomial", a=2.0) == 1.0
    assert staleness_factor(4, "hinge", a=10, b=4) == 1.0
    assert staleness_factor(6, "hinge", a=10, b=4) == 1 / 21  # 1 / (10 (6 - 4) + 1)


@pytest.mark.parametrize(
    "params, version, expected",
    [
        # x = [1, 1]; the update started from x_tau = [0, 2] at version 2 and is delta = [1, 1]: x_new = [1, 3]
        ({"staleness": "constant"}, 5, (1.0, 2.0)),  # alpha_t = 0.5: 0.5 [1, 1] + 0.5 [1, 3]
        ({"staleness": "polynomial", "a": 0.5}, 5, (1.0, 1.5)),  # s = 3: alpha_t = 0.5 / 2 = 0.25
        ({"staleness": "hinge", "a": 10, "b": 4}, 5, (1.0, 2.0)),  # s = 3 <= b: alpha_t = 0.5
        ({"staleness": "hinge", "a": 10, "b": 4}, 8, (1.0, 1.0 + 2 / 42)),  # s = 6: alpha_t = 0.5 / 21
    ],
)
def test_fedasync_mixing_for_each_staleness_function(params: dict, version: int, expected: tuple) -> None:
    s = make("fedasync", alpha=0.5, **params)
    update = ClientUpdate(0, 1, vec(1.0, 1.0), 2, start=vec(0.0, 2.0))
    got = s.aggregate(vec(1.0, 1.0), [update], ctx(version)).vector
    torch.testing.assert_close(got, vec(*expected), rtol=0, atol=1e-15)


def test_fedasync_fresh_update_is_alpha_of_its_delta_and_the_bound_drops_stale_ones() -> None:
    s = make("fedasync", alpha=0.4, staleness="constant", max_staleness=2)
    x = vec(1.0, -1.0)
    fresh = ClientUpdate(0, 1, vec(0.5, 0.5), 7, start=x)
    torch.testing.assert_close(s.aggregate(x, [fresh], ctx(7)).vector, x + 0.4 * vec(0.5, 0.5), rtol=0, atol=1e-15)
    assert s.admit(ClientUpdate(0, 1, vec(0.0, 0.0), 5, start=x), ctx(7))  # s = 2
    assert not s.admit(ClientUpdate(0, 1, vec(0.0, 0.0), 4, start=x), ctx(7))  # s = 3 > 2
    assert make("fedasync").admit(ClientUpdate(0, 1, vec(0.0, 0.0), 0, start=x), ctx(10**6))


def test_a_dropped_update_is_logged_with_its_staleness_and_takes_a_model_version() -> None:
    """As the README says: an update FedAsync drops under ``max_staleness`` is received, not applied; its
    ``aggregate`` event carries its staleness (applied=0), the version still advances (the paper's server
    iteration t counts every update received), and the staleness record covers every update received."""
    from pathlib import Path

    import netfl

    topology = Path(__file__).resolve().parents[2] / "topologies" / "anarchic.yaml"
    overrides = ["server.algorithm={name: fedasync, max_staleness: 1}", "server.async.buffer=1", "stop.rounds=25"]
    result = netfl.run(topology, overrides=overrides, threads=1)
    aggregates = result.events[result.events["kind"] == "aggregate"]
    assert list(aggregates["round"]) == list(range(25))  # one version per update received, dropped or not
    dropped = aggregates[aggregates["applied"] == 0]
    assert len(dropped) > 0 and (dropped["staleness"] > 1).all() and (dropped["received"] == 1).all()
    assert ((aggregates["applied"] == 1) == (aggregates["staleness"] <= 1)).all()
    s = result.summary
    assert s["updates_received"] == 25 and s["updates_applied"] == 25 - len(dropped)
    assert sum(s["staleness"]["histogram"].values()) == s["updates_received"]
