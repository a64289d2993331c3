"""FedAU, the FedAvg baselines and the MIFA family against hand computations, plus the MIFA notes' quadratic toy."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from learn_support import task_setup
from pydantic import ValidationError

from netfl.backend import RoundContext
from netfl.config import scenario_from_dict
from netfl.config.schema import LocalSpec
from netfl.errors import ScenarioError
from netfl.learn.federation.algorithms import ALGORITHMS, ClientInfo, ClientUpdate, IntervalWeights, build_strategy
from netfl.learn.federation.algorithms.toy import QuadraticToy
from netfl.learn.training.reference import scheduled_lr
from netfl.registry.algorithms import describe_algorithms

F64 = torch.float64


def vec(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=F64)


def ctx(r: int, n_delivered: int = 0) -> RoundContext:
    return RoundContext(
        round_index=r, sim_time_s=float(r), available=(), selected=(), delivered=tuple(range(n_delivered))
    )


def upd(client: int, *delta: float, lr: float | None = None) -> ClientUpdate:
    return ClientUpdate(client=client, num_samples=1, delta=vec(*delta), start_version=0, lr=lr)


def make(name: str, clients: ClientInfo, **params):
    cls = ALGORITHMS[name]
    return cls(cls.Params(**params), clients)


def run_rounds(strategy, x: torch.Tensor, rounds: list[list[ClientUpdate]]) -> list[list[float]]:
    out = []
    for r, updates in enumerate(rounds):
        x = strategy.aggregate(x, updates, ctx(r, len(updates))).vector
        out.append(x.tolist())
    return out


# ------------------------------------------------------------------ registry


def test_registry_names_and_metadata() -> None:
    assert set(ALGORITHMS) == {
        "fedavg",
        "fedprox",
        "scaffold",
        "fedavg_all",
        "fedavg_known",
        "fedavg_unbiased",
        "fedau",
        "mifa",
        "umifa",
        "mifam",
        "umifam",
        "afa_cd",
        "afa_cs",
        "fedbuff",
        "fednova",
        "fedasync",
        "fed_cvar",
        "mmfl",
    }
    listing = {d["name"]: d for d in describe_algorithms()}
    assert set(listing) == set(ALGORITHMS)
    for name, cls in ALGORITHMS.items():
        assert cls.name == name
        assert cls.summary and "\n" not in cls.summary
        assert cls.paper and cls.__doc__ and "rule" in cls.__doc__.lower()
        assert all(p["description"] for p in listing[name]["params"]), name
    assert {p["name"]: p["default"] for p in listing["fedau"]["params"]} == {"server_lr": 1.0, "K": None}
    assert {p["name"] for p in listing["umifam"]["params"]} == {"server_lr", "wait_for_all", "beta", "store"}
    assert listing["umifa"]["needs_participation"] and not listing["mifa"]["needs_participation"]


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_unknown_parameters_are_rejected(name: str) -> None:
    clients = ClientInfo((1, 1), local_lr=0.1, participation=(0.5, 0.5))
    with pytest.raises(ValidationError):
        build_strategy(name, {"no_such_key": 1}, clients)
    assert isinstance(build_strategy(name, {}, clients), ALGORITHMS[name])


@pytest.mark.parametrize(
    "spec,field",
    [
        ({"name": "fedau", "K": 0}, "K"),
        ({"name": "mifam", "beta": 1.0}, "beta"),
        ({"name": "umifa", "store": "table"}, "store"),
        ({"name": "fedavg_all", "server_lr": -1}, "server_lr"),
    ],
)
def test_bad_parameter_values_are_named(spec: dict, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        build_strategy(spec["name"], {k: v for k, v in spec.items() if k != "name"}, ClientInfo((1,), 0.1, (0.5,)))
    assert info.value.errors()[0]["loc"] == (field,)


# ------------------------------------------------------------ FedAvg family

X = vec(1.0, -1.0)
D0, D1 = (2.0, 4.0), (-1.0, 3.0)
P4 = (0.5, 0.25, 1.0, 0.8)


def test_fedavg_all_divides_by_all_clients() -> None:
    s = make("fedavg_all", ClientInfo((1,) * 4, 0.1), server_lr=2.0)
    out = s.aggregate(X, [upd(0, *D0), upd(3, *D1)], ctx(0, 2)).vector
    # 2 * ([2,4] + [-1,3]) / 4 = [0.5, 3.5]
    assert out.tolist() == [1.5, 2.5]
    assert torch.equal(s.aggregate(X, [], ctx(1)).vector, X)


def test_fedavg_known_weights_by_inverse_probability() -> None:
    s = make("fedavg_known", ClientInfo((1,) * 4, 0.1, P4), server_lr=2.0)
    out = s.aggregate(X, [upd(0, *D0), upd(1, *D1)], ctx(0, 2)).vector
    # 2 * (1/4) * ([2,4]/0.5 + [-1,3]/0.25) = 0.5 * ([4,8] + [-4,12]) = [0, 10]
    assert out.tolist() == [1.0, 9.0]
    assert torch.equal(s.aggregate(X, [], ctx(1)).vector, X)


def test_fedavg_unbiased_is_fedavg_known_in_the_mifa_lr_convention() -> None:
    gamma = 0.25
    clients = ClientInfo((1,) * 4, gamma, P4)
    updates = [upd(0, *D0), upd(1, *D1)]
    known = make("fedavg_known", clients, server_lr=2.0).aggregate(X, updates, ctx(0, 2)).vector
    # Delta_i = -delta_i / gamma; G = (1/4)(Delta_0/0.5 + Delta_1/0.25) = -[0, 20]/0.25 = [0, -80]
    unbiased = make("fedavg_unbiased", clients, server_lr=2.0 * gamma).aggregate(X, updates, ctx(0, 2)).vector
    assert unbiased.tolist() == known.tolist() == [1.0, 9.0]
    # server_lr omitted: eta = gamma, i.e. fedavg_known with eta = 1
    default = make("fedavg_unbiased", clients).aggregate(X, updates, ctx(0, 2)).vector
    assert (
        default.tolist() == make("fedavg_known", clients).aggregate(X, updates, ctx(0, 2)).vector.tolist() == [1.0, 4.0]
    )


@pytest.mark.parametrize("name", ["fedavg_known", "fedavg_unbiased", "umifa", "umifam"])
def test_algorithms_dividing_by_p_refuse_clients_without_one(name: str) -> None:
    with pytest.raises(ValueError, match=r"participation probability p.*bernoulli, markov or cyclic"):
        make(name, ClientInfo((1, 1, 1), 0.1))
    with pytest.raises(ValueError, match=r"2 of 3 clients .*clients 0, 2"):
        make(name, ClientInfo((1, 1, 1), 0.1, (None, 0.5, None)))
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        make(name, ClientInfo((1, 1), 0.1, (0.0, 0.5)))
    make(name, ClientInfo((1, 1), 0.1, (1.0, 0.5)))  # fine


def _scenario(algorithm: dict, policy: dict) -> dict:
    return {
        "name": "t",
        "stop": {"rounds": 1},
        "task": {"dataset": {"name": "digits"}, "model": {"name": "logistic"}},
        "devices": [
            {
                "group": "a",
                "count": 2,
                "compute": {"flops_per_s": 1e9},
                "link": {"uplink": "5Mbps"},
                "availability": copy.deepcopy(policy),
            }
        ],
        "server": {"algorithm": algorithm},
    }


def test_validation_names_policies_without_p() -> None:
    with pytest.raises(ScenarioError) as info:
        scenario_from_dict(_scenario({"name": "umifa"}, {"policy": "always"}))
    (msg,) = [m for path, m in info.value.problems if path.startswith("server.algorithm")]
    assert "devices[0] (group 'a')" in msg and "'always'" in msg and "bernoulli" in msg
    scenario_from_dict(_scenario({"name": "umifa"}, {"policy": "bernoulli", "p": 0.3}))
    scenario_from_dict(_scenario({"name": "mifa"}, {"policy": "always"}))


# ------------------------------------------------------------------ FedAU


def _weights_over(seq: list[int], K: int | None) -> tuple[list[float], float]:
    w = IntervalWeights(1, K)
    read = []
    for took_part in seq:
        read.append(float(w.weights[0]))
        w.step(np.array([bool(took_part)]))
    return read, float(w.weights[0])


SEQ = [1, 0, 0, 0, 0, 0, 0, 1, 0, 1]


def test_interval_weights_with_cutoff() -> None:
    # K=3: intervals recorded 1 (t0), 3 (t3, cut), 3 (t6, cut), 1 (t7), 2 (t9)
    read, final = _weights_over(SEQ, K=3)
    assert read == [1, 1, 1, 1, 2, 2, 2, pytest.approx(7 / 3), 2, 2]
    assert final == pytest.approx(10 / 5)


def test_interval_weights_without_cutoff() -> None:
    # K=None: intervals 1 (t0), 7 (t7), 2 (t9)
    read, final = _weights_over(SEQ, K=None)
    assert read == [1, 1, 1, 1, 1, 1, 1, 1, 4, 4]
    assert final == pytest.approx(10 / 3)


def test_interval_weights_first_interval_counts_the_rounds_before_it() -> None:
    # never participated: weight 1; first participation at round 4 records an interval of 5
    read, final = _weights_over([0, 0, 0, 0, 1], K=None)
    assert read == [1] * 5 and final == 5
    # a cutoff of 1 records every round as an interval of 1
    read, final = _weights_over([0, 1, 0, 0, 1, 1], K=1)
    assert read == [1] * 6 and final == 1


def test_interval_weights_vectorised_masks_and_indices() -> None:
    a, b = IntervalWeights(3, K=2), IntervalWeights(3, K=2)
    for mask in ([True, False, False], [False, False, True], [True, False, True], [False, False, False]):
        a.step(np.array(mask))
        b.step([i for i, m in enumerate(mask) if m])
    assert a.weights.tolist() == b.weights.tolist()
    # client 0: 1, (r1 miss) then 2 at r2; r3 miss -> counter 1.  client 1: cut at r1 (2), cut at r3 (2).
    # client 2: interval 2 at r1, 1 at r2; r3 miss.
    assert a.weights.tolist() == [1.5, 2.0, 1.5]


def test_fedau_aggregate_by_hand() -> None:
    s = make("fedau", ClientInfo((1,) * 3, 0.1), server_lr=0.5)
    x0 = vec(0.0, 0.0)
    rounds = [
        [upd(0, 3.0, 0.0), upd(1, 0.0, 6.0)],  # weights 1,1,1 -> x += 0.5/3 * [3, 6]
        [upd(2, 6.0, -3.0)],  # weights still 1 (client 2 has no interval yet) -> x += 0.5/3 * [6, -3]
        [upd(0, 0.0, 3.0), upd(2, 3.0, 3.0)],  # weights 1 (client 0: [1]) and 2 (client 2: [2])
    ]
    xs = run_rounds(s, x0, rounds)
    assert xs[0] == pytest.approx([0.5, 1.0])
    assert xs[1] == pytest.approx([1.5, 0.5])
    assert xs[2] == pytest.approx([1.5 + 0.5 / 3 * 6, 0.5 + 0.5 / 3 * 9])  # [2.5, 2.0]
    # client 0: [1, 2]; client 1: [1], two missed; client 2: [2, 1]
    assert s.interval_weights.weights.tolist() == [1.5, 1.0, 1.5]
    # an empty round changes nothing in x but counts as missed by everyone
    x3 = s.aggregate(torch.tensor(xs[2], dtype=F64), [], ctx(3)).vector
    assert x3.tolist() == pytest.approx([2.5, 2.0])
    assert s.interval_weights.missed.tolist() == [1, 3, 1]


def test_fedau_cutoff_changes_the_weight_of_a_long_absence() -> None:
    s = make("fedau", ClientInfo((1,) * 2, 0.1), K=2)
    x = vec(0.0)
    for r, updates in enumerate([[upd(0, 1.0)], [upd(0, 1.0)], [upd(0, 1.0)], [upd(0, 1.0), upd(1, 4.0)]]):
        x = s.aggregate(x, updates, ctx(r, len(updates))).vector
    # client 1 missed rounds 0-2: K=2 records 2 at round 1, counter 1 at round 2, so weight 2 in round 3
    # round 3: x += (1/2)(1*1 + 2*4) = 4.5 on top of 3 * (1/2)
    assert x.tolist() == pytest.approx([1.5 + 4.5])


# ------------------------------------------------------------------ MIFA family

# two clients, gamma = 0.5 (Delta = -2 delta), eta = 0.5
GAMMA, ETA = 0.5, 0.5
MIFA_ROUNDS = [
    [upd(0, 1.0, 2.0)],  # Delta_0 = [-2, -4]
    [upd(1, 2.0, 0.0)],  # Delta_1 = [-4, 0]
    [],
    [upd(0, 0.0, 1.0), upd(1, -1.0, 0.0)],  # Delta = [0, -2], [2, 0]
]


def test_mifa_memory_by_hand() -> None:
    s = make("mifa", ClientInfo((1, 1), GAMMA), server_lr=ETA)
    xs = run_rounds(s, vec(0.0, 0.0), MIFA_ROUNDS)
    # G: [-1, -2], [-3, -2], [-3, -2], [1, -1]
    assert xs == [[0.5, 1.0], [2.0, 2.0], [3.5, 3.0], [3.0, 3.5]]
    assert s.memory.tolist() == [[0.0, -2.0], [2.0, 0.0]]


def test_mifa_default_server_lr_adds_the_mean_remembered_delta() -> None:
    # eta omitted = gamma: x += mean_i of each client's last delta (FedAU's "MIFA" baseline with eta 1)
    s = make("mifa", ClientInfo((1, 1), GAMMA))
    xs = run_rounds(s, vec(0.0, 0.0), MIFA_ROUNDS)
    assert xs == [[0.5, 1.0], [2.0, 2.0], [3.5, 3.0], [3.0, 3.5]]


def test_umifa_by_hand() -> None:
    clients = ClientInfo((1, 1), GAMMA, (0.5, 0.25))
    s = make("umifa", clients, server_lr=ETA)
    xs = run_rounds(s, vec(0.0, 0.0), MIFA_ROUNDS)
    # r0: Ghat_0 = Delta_0/0.5 = [-4,-8]; G = [-2,-4]            -> x = [1, 2]
    # r1: Ghat_1 = Delta_1/0.25 = [-16,0]; G = ([-2,-4]+[-16,0])/2 = [-9,-2] -> [5.5, 3]
    # r2: table [-2,-4], [-4,0]: G = [-3,-2]                     -> [7, 4]
    # r3: Ghat_0 = 2[0,-2] - [-2,-4] = [2,0]; Ghat_1 = 4[2,0] - 3[-4,0] = [20,0]; G = [11,0] -> [1.5, 4]
    assert xs == [[1.0, 2.0], [5.5, 3.0], [7.0, 4.0], [1.5, 4.0]]
    assert s.memory.tolist() == [[0.0, -2.0], [2.0, 0.0]]  # the table keeps the plain updates

    literal = make("umifa", clients, server_lr=ETA, store="estimate")
    xs = run_rounds(literal, vec(0.0, 0.0), MIFA_ROUNDS)
    # the table keeps the estimates: after r0 it holds [-4,-8], [0,0]
    # r1: Ghat_1 = [-16,0]; G = ([-4,-8]+[-16,0])/2 = [-10,-4] -> [6, 4]; r2 the same G -> [11, 6]
    # r3: Ghat_0 = 2[0,-2] - [-4,-8] = [4,4]; Ghat_1 = 4[2,0] - 3[-16,0] = [56,0]; G = [30,2] -> [-4, 5]
    assert xs == [[1.0, 2.0], [6.0, 4.0], [11.0, 6.0], [-4.0, 5.0]]
    assert literal.memory.tolist() == [[4.0, 4.0], [56.0, 0.0]]


def test_mifam_momentum_by_hand() -> None:
    s = make("mifam", ClientInfo((1, 1), GAMMA), server_lr=ETA, beta=0.5)
    xs = run_rounds(s, vec(0.0, 0.0), MIFA_ROUNDS)
    # v: [-1,-2], [-3.5,-3], [-4.75,-3.5], [-1.375,-2.75]
    assert xs == [[0.5, 1.0], [2.25, 2.5], [4.625, 4.25], [5.3125, 5.625]]
    assert s.velocity.tolist() == [-1.375, -2.75]


def test_momentum_with_beta_zero_is_the_plain_rule() -> None:
    clients = ClientInfo((1, 1), GAMMA, (0.5, 0.25))
    for plain, momentum in (("mifa", "mifam"), ("umifa", "umifam")):
        a = run_rounds(make(plain, clients, server_lr=ETA), vec(0.0, 0.0), MIFA_ROUNDS)
        b = run_rounds(make(momentum, clients, server_lr=ETA, beta=0.0), vec(0.0, 0.0), MIFA_ROUNDS)
        assert a == b


def test_wait_for_all_holds_the_model_until_every_client_was_seen() -> None:
    s = make("mifa", ClientInfo((1, 1), GAMMA), server_lr=ETA, wait_for_all=True)
    rounds = [[upd(0, 1.0, 2.0)], [], [upd(0, 2.0, 2.0)], [upd(1, 2.0, 0.0)], []]
    xs = run_rounds(s, vec(0.0, 0.0), rounds)
    assert xs[:3] == [[0.0, 0.0]] * 3  # client 1 not seen yet
    # r3: table [-4,-4] (client 0's latest), [-4,0]: G = [-4,-2] -> [2, 1]; r4 again -> [4, 2]
    assert xs[3:] == [[2.0, 1.0], [4.0, 2.0]]

    u = make("umifa", ClientInfo((1, 1), GAMMA, (0.5, 0.25)), server_lr=ETA, wait_for_all=True)
    xs = run_rounds(u, vec(0.0, 0.0), [[upd(0, 1.0, 2.0)], [upd(1, 2.0, 0.0)], [upd(0, 0.0, 1.0)]])
    # while waiting the table takes the plain Delta; r1 fills it: G = ([-2,-4]+[-4,0])/2 = [-3,-2] -> [1.5, 1]
    # r2: Ghat_0 = 2[0,-2] - [-2,-4] = [2,0]; G = ([2,0]+[-4,0])/2 = [-1,0] -> [2, 1]
    assert xs == [[0.0, 0.0], [1.5, 1.0], [2.0, 1.0]]


def test_mifa_memory_uses_each_job_lr_and_the_round_lr_schedule() -> None:
    # lr_t = 0.5/(t+1): the memory keeps gradient-like Delta = -delta/gamma_job and is stepped with gamma_t
    clients = ClientInfo((1,), 0.5, lr_schedule="inverse_round")
    s = make("mifa", clients)
    x = s.aggregate(vec(0.0), [upd(0, 1.0, lr=0.125)], ctx(3, 1)).vector  # Delta = -8, eta_3 = 0.125: x += 1
    assert x.tolist() == [1.0]
    x = s.aggregate(x, [], ctx(4)).vector  # the remembered -8 at eta_4 = 0.1
    assert x.tolist() == pytest.approx([1.8])


def test_lr_schedule() -> None:
    assert [scheduled_lr(0.6, "inverse_round", t) for t in range(3)] == pytest.approx([0.6, 0.3, 0.2])
    assert scheduled_lr(0.6, "constant", 7) == 0.6
    with pytest.raises(ValueError, match="inverse_round"):
        scheduled_lr(0.6, "cosine", 1)
    assert LocalSpec(steps=1, lr_schedule="inverse_round").lr_schedule == "inverse_round"
    assert LocalSpec(steps=1).lr_schedule == "constant"
    with pytest.raises(ValidationError):
        LocalSpec(steps=1, lr_schedule="cosine")


def test_learner_passes_the_scheduled_lr() -> None:
    from netfl.learn.data.datasets import Dataset
    from netfl.learn.federation.learner import Learner
    from netfl.registry.learning_params import LocalSpec
    from netfl.rng import RandomStreams

    seen: list[ClientUpdate] = []

    class Recorder(ALGORITHMS["fedavg"]):
        def aggregate(self, x, updates, context):
            seen.extend(updates)
            return x

    g = torch.Generator().manual_seed(0)
    data = Dataset(
        "toy",
        torch.rand(8, 1, 2, 2, generator=g),
        torch.arange(8) % 2,
        torch.rand(4, 1, 2, 2, generator=g),
        torch.arange(4) % 2,
        2,
        (1, 2, 2),
    )
    parts = [np.arange(0, 4), np.arange(4, 8)]
    learner = Learner(
        [
            task_setup(
                data,
                parts,
                "logistic",
                [],
                LocalSpec(steps=1, batch_size=2, lr=0.4, lr_schedule="inverse_round"),
            )
        ],
        strategy=Recorder(Recorder.Params(), ClientInfo((4, 4), 0.4)),
        streams=RandomStreams(1),
    )
    jobs = (learner.submit(0, 0).job, learner.submit(1, 3).job)
    learner.aggregate(RoundContext(3, 0.0, (0, 1), (0, 1), jobs))
    assert [u.lr for u in seen] == [0.4, 0.1]


# ----------------------------------------------------- U-MIFA is unbiased


def _mc_mean_G(name: str, trials: int, batches: int, rounds: int, seed: int, **params) -> tuple[np.ndarray, np.ndarray]:
    """Per round: the mean over trials of G_t and its standard error, from the strategies' own steps."""
    p = np.array([0.2, 0.5, 0.7, 0.9])
    n = len(p)
    a = torch.tensor([[1.0, -2.0], [3.0, 0.5], [-1.0, 1.0], [0.0, 4.0]], dtype=F64)
    c = torch.tensor([[0.5, 1.0], [-1.0, 0.0], [2.0, -0.5], [1.0, 1.0]], dtype=F64)
    gamma = 0.5
    per_batch = trials // batches
    rng = np.random.default_rng(seed)
    means = np.zeros((batches, rounds, 2))
    for b in range(batches):
        clients = ClientInfo((1,) * (n * per_batch), gamma, tuple(np.tile(p, per_batch)))
        s = make(name, clients, server_lr=1.0, **params)  # x_{t+1} = x_t - G_t
        x = torch.zeros(2, dtype=F64)
        for t in range(rounds):
            delta = -gamma * (a + t * c)  # Delta_i(t) = a_i + t c_i, the same stream in every trial
            active = np.flatnonzero(rng.random(n * per_batch) < np.tile(p, per_batch))
            updates = [ClientUpdate(int(j), 1, delta[j % n], t, gamma) for j in active]
            x_new = s.aggregate(x, updates, ctx(t, len(updates))).vector
            means[b, t] = (x - x_new).numpy()  # G_t averaged over this batch's trials
            x = x_new
    return means.mean(axis=0), means.std(axis=0, ddof=1) / np.sqrt(batches)


@pytest.mark.parametrize("store", ["update", "estimate"])
def test_umifa_expectation_is_the_full_update(store: str) -> None:
    rounds = 4
    mean, se = _mc_mean_G("umifa", trials=16000, batches=16, rounds=rounds, seed=5, store=store)
    a = np.array([[1.0, -2.0], [3.0, 0.5], [-1.0, 1.0], [0.0, 4.0]])
    c = np.array([[0.5, 1.0], [-1.0, 0.0], [2.0, -0.5], [1.0, 1.0]])
    for t in range(rounds):
        full = (a + t * c).mean(axis=0)  # mean of the current Delta_i over all clients
        assert np.all(np.abs(mean[t] - full) < 4.5 * se[t] + 1e-12), (t, mean[t], full, se[t])
    assert np.all(se > 0)


def test_mifa_expectation_is_biased_at_the_start() -> None:
    # contrast: from a zero memory, E[G_0] = mean_i p_i Delta_i(0), not mean_i Delta_i(0)
    mean, se = _mc_mean_G("mifa", trials=8000, batches=16, rounds=1, seed=6)
    p = np.array([0.2, 0.5, 0.7, 0.9])
    a = np.array([[1.0, -2.0], [3.0, 0.5], [-1.0, 1.0], [0.0, 4.0]])
    assert np.all(np.abs(mean[0] - (p[:, None] * a).mean(axis=0)) < 4.5 * se[0])
    assert np.any(np.abs(mean[0] - a.mean(axis=0)) > 10 * se[0])


# --------------------------------------------------- the MIFA notes' quadratic toy


@pytest.mark.parametrize("seed", [0, 1])
def test_quadratic_toy_error_floor_and_momentum(seed: int) -> None:
    # 10 clients, p_i = 0.1, eta = gamma = 0.02, f_i = 1/2 ||w - b_i||^2
    toy = QuadraticToy.spread(num_clients=10, dim=5, p=0.1, lr=0.02, local_steps=1, seed=seed)
    arrivals = toy.arrivals(1500, seed=seed + 10)
    x0 = toy.optimum + 5.0

    def errors(name: str, **params) -> np.ndarray:
        return toy.run(make(name, toy.client_info(), server_lr=0.02, **params), arrivals, x0)

    unbiased = errors("fedavg_unbiased")
    mifa, umifa, umifam = errors("mifa"), errors("umifa"), errors("umifam", beta=0.9)
    floor = unbiased[-500:].mean()  # unbiased FedAvg stalls at a noise floor ~ eta (1/p - 1) sigma_G^2
    assert floor > 1e-2
    assert mifa[-1] < 0.1 * floor and umifa[-1] < 0.1 * floor
    assert mifa[-100:].max() < 1e-6 and umifa[-100:].max() < 1e-6  # they reach the optimum

    def rounds_to(err: np.ndarray, level: float = 1e-3) -> int:
        below = np.flatnonzero(err < level)
        return int(below[0]) if len(below) else len(err)

    assert rounds_to(umifam) < rounds_to(umifa)
    assert rounds_to(unbiased) == len(unbiased)  # never


def test_quadratic_toy_local_steps_in_closed_form() -> None:
    toy = QuadraticToy(b=torch.tensor([[2.0], [4.0]], dtype=F64), p=(1.0, 1.0), lr=0.5, local_steps=2)
    # two GD steps from 0 towards 2 with lr 0.5: 1, 1.5
    assert toy.delta(0, vec(0.0)).tolist() == [1.5]
    # full participation, MIFA with eta = gamma is FedAvg with 2 local steps
    errs = toy.run(make("mifa", toy.client_info()), np.ones((1, 2), dtype=bool), vec(0.0))
    assert errs.tolist() == [pytest.approx((0.75 * 3 - 3) ** 2)]
