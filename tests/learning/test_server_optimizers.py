"""Server optimisers (Reddi et al., Adaptive Federated Optimization; FedAvgM): each step against the paper's rule
computed by hand in plain floats, the first step included, and the learner applying them to an algorithm's
aggregate."""

from __future__ import annotations

import math

import pytest
import torch

from netfl.learn.federation.server_optimizers import ServerOptimizerChoice, build_server_optimizer

F64 = torch.float64
X0 = [1.0, -2.0, 0.5]
# three pseudo-gradients; the third coordinate changes sign and size, so that Yogi's sign(v - Delta^2) flips
DELTAS = [[0.1, -0.2, 0.0], [0.05, 0.1, -0.3], [-0.2, 0.0, 0.02]]


def vec(values) -> torch.Tensor:
    return torch.tensor(values, dtype=F64)


def steps(name: str, **params) -> list[list[float]]:
    opt = build_server_optimizer(ServerOptimizerChoice(name, params))
    x, out = vec(X0), []
    for d in DELTAS:
        x = opt.step(x, vec(d))
        out.append(x.tolist())
    assert opt.t == len(DELTAS)
    return out


def by_hand(second_moment, *, lr, beta1=0.9, tau=1e-3, correct=None) -> list[list[float]]:
    """Algorithm 2 of Reddi et al., one coordinate at a time: m_{-1} = 0, v_{-1} = tau^2."""
    out, x = [], list(X0)
    m = [0.0] * 3
    v = [0.0 if correct else tau**2] * 3
    for t, d in enumerate(DELTAS, start=1):
        for i in range(3):
            m[i] = beta1 * m[i] + (1 - beta1) * d[i]
            v[i] = second_moment(v[i], d[i] ** 2)
            mi, vi = m[i], v[i]
            if correct:
                mi, vi = mi / (1 - beta1**t), vi / (1 - correct**t)
            x[i] = x[i] + lr * mi / (math.sqrt(vi) + tau)
        out.append(list(x))
    return out


def close(got, expected) -> None:
    for a, b in zip(got, expected):
        assert a == pytest.approx(b, rel=1e-13, abs=1e-15)


def test_the_first_steps_by_hand() -> None:
    """Step 1 written out: m_0 = 0.1 Delta, v_0 from tau^2 = 1e-6, x_1 = x_0 + eta m_0 / (sqrt(v_0) + tau)."""
    d = DELTAS[0][1]  # -0.2
    m0 = 0.1 * d  # -0.02
    adam = steps("adam", lr=0.01)[0][1]
    assert adam == pytest.approx(-2.0 + 0.01 * m0 / (math.sqrt(0.99e-6 + 0.01 * 0.04) + 1e-3), rel=1e-14)
    assert adam == pytest.approx(-2.0095126, abs=1e-7)  # sqrt(4.0099e-4) = 0.0200247
    adagrad = steps("adagrad", lr=0.01)[0][1]
    assert adagrad == pytest.approx(-2.0 + 0.01 * m0 / (math.sqrt(1e-6 + 0.04) + 1e-3), rel=1e-14)
    yogi = steps("yogi", lr=0.01)[0][1]  # v_0 = tau^2 - 0.01 * 0.04 * sign(1e-6 - 0.04) = 1e-6 + 4e-4
    assert yogi == pytest.approx(-2.0 + 0.01 * m0 / (math.sqrt(1e-6 + 4e-4) + 1e-3), rel=1e-14)
    # a coordinate whose pseudo-gradient is 0 does not move in step 1 (m_0 = 0)
    assert steps("adam", lr=0.01)[0][2] == 0.5


def test_fedadagrad_fedadam_fedyogi_follow_algorithm_2_over_three_steps() -> None:
    close(steps("adagrad", lr=0.1, tau=1e-2), by_hand(lambda v, g: v + g, lr=0.1, tau=1e-2))
    close(steps("adam", lr=0.1, beta2=0.9), by_hand(lambda v, g: 0.9 * v + 0.1 * g, lr=0.1))
    yogi = by_hand(lambda v, g: v - 0.01 * g * math.copysign(1.0, v - g) if v != g else v, lr=0.1)
    close(steps("yogi", lr=0.1), yogi)


def test_adam_with_kingma_and_ba_bias_correction() -> None:
    """m and v from 0, divided by 1 - beta^t: the first step is eta Delta / (|Delta| + tau), about eta sign(Delta)."""
    got = steps("adam", lr=0.01, bias_correction=True)
    close(got, by_hand(lambda v, g: 0.99 * v + 0.01 * g, lr=0.01, correct=0.99))
    assert got[0][0] == pytest.approx(1.0 + 0.01 * 0.1 / (0.1 + 1e-3), rel=1e-14)


def test_adam_with_flowers_bias_correction() -> None:
    """Flower's FedAdam: m and v from 0, the step size eta sqrt(1 - beta2^(t+1)) / (1 - beta1^(t+1)) with tau
    outside the correction; written out coordinate by coordinate."""
    lr, beta1, beta2, tau = 0.01, 0.9, 0.99, 1e-3
    x, m, v, expected = list(X0), [0.0] * 3, [0.0] * 3, []
    for t, d in enumerate(DELTAS, start=1):
        eta = lr * math.sqrt(1 - beta2 ** (t + 1)) / (1 - beta1 ** (t + 1))
        for i in range(3):
            m[i] = beta1 * m[i] + (1 - beta1) * d[i]
            v[i] = beta2 * v[i] + (1 - beta2) * d[i] ** 2
            x[i] = x[i] + eta * m[i] / (math.sqrt(v[i]) + tau)
        expected.append(list(x))
    close(steps("adam", lr=lr, bias_correction="flower"), expected)
    first = -2.0 + lr * math.sqrt(1 - 0.99**2) / (1 - 0.9**2) * (0.1 * -0.2) / (math.sqrt(0.01 * 0.04) + tau)
    assert steps("adam", lr=lr, bias_correction="flower")[0][1] == pytest.approx(first, rel=1e-14)


def test_fedavgm_and_plain_sgd() -> None:
    """FedAvgM: v_t = beta v_{t-1} + Delta_t (no 1 - beta), x += eta v_t; sgd: x += eta Delta_t."""
    got = steps("momentum", lr=0.5, beta1=0.9)
    v1 = DELTAS[0]
    v2 = [0.9 * a + b for a, b in zip(v1, DELTAS[1])]
    v3 = [0.9 * a + b for a, b in zip(v2, DELTAS[2])]
    x1 = [x + 0.5 * a for x, a in zip(X0, v1)]
    x2 = [x + 0.5 * a for x, a in zip(x1, v2)]
    x3 = [x + 0.5 * a for x, a in zip(x2, v3)]
    close(got, [x1, x2, x3])
    close(steps("sgd", lr=2.0)[0], [x + 2.0 * d for x, d in zip(X0, DELTAS[0])])


def test_yogi_never_lets_v_go_below_zero() -> None:
    opt = build_server_optimizer(ServerOptimizerChoice("yogi", {"lr": 0.1, "tau": 1e-6}))
    x = vec([0.0, 0.0])
    for k in range(50):
        x = opt.step(x, vec([(-1.0) ** k * 10.0 ** -(k % 5), 1e-3]))
        assert bool((opt.v > 0).all())
