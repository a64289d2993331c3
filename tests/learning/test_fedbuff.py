"""FedBuff (Nguyen et al., "Federated Learning with Buffered Asynchronous Aggregation"): the server step against
hand computations, its equivalences with the plain asynchronous updates, and a run on digits that learns."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import yaml

from netfl.assemble import build_simulation
from netfl.backend import RoundContext
from netfl.config import scenario_from_dict
from netfl.learn.federation.algorithms import ALGORITHMS, ClientInfo, ClientUpdate
from netfl.learn.federation.algorithms.fedbuff import staleness_weight

F64 = torch.float64
ANARCHIC = Path(__file__).resolve().parents[2] / "topologies" / "anarchic.yaml"


def vec(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=F64)


def ctx(version: int, n: int) -> RoundContext:
    return RoundContext(round_index=version, sim_time_s=0.0, available=(), selected=(), delivered=tuple(range(n)))


def make(name: str, **params):
    cls = ALGORITHMS[name]
    return cls(cls.Params(**params), ClientInfo((1,) * 4, local_lr=0.1))


def test_staleness_weight_is_one_over_sqrt_one_plus_s() -> None:
    assert [staleness_weight(s, "inverse_sqrt") for s in (0, 3, 8)] == [1.0, 0.5, 1 / 3]
    assert staleness_weight(5, "none") == 1.0
    with pytest.raises(ValueError, match=">= 0"):
        staleness_weight(-1, "inverse_sqrt")


def test_two_buffers_with_known_staleness_by_hand() -> None:
    s = make("fedbuff", server_lr=0.5)
    x = vec(1.0, 2.0)
    # buffer 1, server at version 3: one fresh update (s = 0, w = 1), one from version 0 (s = 3, w = 1/2)
    # x += 0.5 * (1/2) * (1 * [0.4, -0.2] + 1/2 * [0.8, 0.4]) = 0.25 * [0.8, 0] = [0.2, 0]
    x = s.aggregate(x, [ClientUpdate(0, 1, vec(0.4, -0.2), 3), ClientUpdate(1, 1, vec(0.8, 0.4), 0)], ctx(3, 2)).vector
    torch.testing.assert_close(x, vec(1.2, 2.0), rtol=0, atol=1e-15)
    # buffer 2, server at version 8: one fresh update (w = 1), one from version 0 (s = 8, w = 1/3)
    # x += 0.5 * (1/2) * ([0.3, 0.3] + 1/3 * [0.9, -0.9]) = 0.25 * [0.6, 0] = [0.15, 0]
    x = s.aggregate(x, [ClientUpdate(2, 1, vec(0.3, 0.3), 8), ClientUpdate(3, 1, vec(0.9, -0.9), 0)], ctx(8, 2)).vector
    torch.testing.assert_close(x, vec(1.35, 2.0), rtol=0, atol=1e-15)
    assert torch.equal(s.aggregate(x, [], ctx(9, 0)).vector, x)  # an empty buffer changes nothing


def test_without_staleness_weighting_it_is_the_uniform_mean() -> None:
    updates = [ClientUpdate(i, 1, vec(0.1 * i, 1.0 - i), i) for i in range(3)]
    x = vec(0.5, -0.5)
    plain = make("fedbuff", server_lr=2.0, staleness_weight="none").aggregate(x, updates, ctx(5, 3)).vector
    fedavg = make("fedavg", server_lr=2.0, weighting="uniform").aggregate(x, updates, ctx(5, 3)).vector
    assert torch.equal(plain, fedavg)


def test_k1_unweighted_is_the_afa_cd_step_with_eta_k() -> None:
    """AFA-CD moves x by eta * eta_L * delta / (K_steps * eta_L): with eta = K_steps it is FedBuff's x + delta."""
    update = ClientUpdate(2, 1, vec(0.3, -0.6), 1, 0.1, 4)
    x = vec(1.0, 1.0)
    fedbuff = make("fedbuff", staleness_weight="none").aggregate(x, [update], ctx(7, 1)).vector
    afa = make("afa_cd", server_lr=4.0).aggregate(x, [update], ctx(7, 1)).vector
    torch.testing.assert_close(fedbuff, x + update.delta, rtol=0, atol=1e-15)
    torch.testing.assert_close(afa, fedbuff, rtol=0, atol=1e-15)


def anarchic(algorithm: dict, *, buffer: int = 8, rounds: int = 40) -> dict:
    data = yaml.safe_load(ANARCHIC.read_text())
    data["server"]["algorithm"] = algorithm
    data["server"]["async"]["buffer"] = buffer
    data["stop"] = {"rounds": rounds}
    return data


def run(data: dict):
    sim, learner = build_simulation(scenario_from_dict(data, source=str(ANARCHIC), base_dir=ANARCHIC.parent))
    return sim, learner, sim.run()


@pytest.mark.parametrize("buffer", [1, 3])
def test_unweighted_fedbuff_runs_exactly_like_plain_async_fedavg(buffer: int) -> None:
    """The same arrivals, the same event log and the same model, bit for bit, whatever K."""
    sim_a, learner_a, a = run(anarchic({"name": "fedbuff", "staleness_weight": "none"}, buffer=buffer, rounds=24))
    sim_b, learner_b, _ = run(anarchic({"name": "fedavg", "weighting": "uniform"}, buffer=buffer, rounds=24))
    assert max(a.staleness) > 0  # stale updates were applied, so the equivalence is not only the fresh case
    assert sim_a.recorder.columns() == sim_b.recorder.columns()
    assert torch.equal(learner_a.global_vector, learner_b.global_vector)


def test_the_strategy_sees_the_staleness_the_engine_logs() -> None:
    data = anarchic({"name": "fedbuff"}, buffer=3, rounds=24)
    sim, learner = build_simulation(scenario_from_dict(data, source=str(ANARCHIC), base_dir=ANARCHIC.parent))
    seen: list[int] = []
    aggregate = learner.strategy.aggregate

    def spy(x, updates, context):
        seen.extend(context.round_index - u.start_version for u in updates)
        return aggregate(x, updates, context)

    learner.strategy.aggregate = spy
    result = sim.run()
    assert seen == result.staleness and max(seen) > 0


def test_fedbuff_learns_digits_from_anarchic_arrivals() -> None:
    """anarchic.yaml's 40 workers with FedBuff (K = 8, the paper's weights): from chance to well above it."""
    _, _, result = run(anarchic({"name": "fedbuff"}))
    first, last = result.metrics[0], result.metrics[-1]
    assert result.rounds == 40 and result.updates_applied == 40 * 8
    assert first.test_accuracy < 0.15 and last.test_accuracy > 0.5
    assert last.test_loss < first.test_loss - 0.8
    assert not math.isnan(last.test_loss)
