"""Server optimisers (``server.optimizer``): what the server does with an algorithm's aggregated update.

An algorithm whose server step is ``x <- x + Delta`` (Delta the aggregated
client update, FedAvg's direction) hands Delta, the *pseudo-gradient*, to
the optimiser named here, which takes the step instead (Reddi et al.,
Adaptive Federated Optimization). Names, papers and parameters only (no
torch); the rules are implemented and documented in
:mod:`netfl.learn.federation.server_optimizers`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from netfl.numbers import Float32
from netfl.problems import params_problems
from netfl.registry import Entry, describe_params
from netfl.registry.algorithm_params import StrategyParams

__all__ = ["SERVER_OPTIMIZERS", "describe_server_optimizers", "validate_server_optimizer"]


REDDI = "Reddi, Charles, Zaheer, Garrett, Rush, Konecny, Kumar & McMahan, Adaptive Federated Optimization, ICLR 2021"
REDDI_PAPER = REDDI + " (Algorithm 2: FedAdagrad, FedAdam, FedYogi)"
FEDAVGM_PAPER = (
    "Hsu, Qi & Brown, Measuring the Effects of Non-Identical Data Distribution for Federated Visual "
    "Classification, 2019 (FedAvgM)"
)


def _lr(default: float | None = None, more: str = ""):
    description = "eta: the server's step size" + more
    return Field(gt=0, description=description) if default is None else Field(default, gt=0, description=description)


def _beta1():
    return Field(0.9, ge=0, lt=1, description="beta1: m_t = beta1 m_{t-1} + (1 - beta1) Delta_t (the paper's 0.9)")


def _beta2():
    return Field(0.99, ge=0, lt=1, description="beta2: the second-moment decay (the paper's 0.99)")


def _tau():
    return Field(
        1e-3,
        gt=0,
        le=1e19,
        description="tau: adaptivity; the step divides by sqrt(v_t) + tau and v starts at tau^2 (the paper tunes "
        "1e-1 ... 1e-5); at most 1e19, whose square float32 still holds",
    )


_TUNED = "; required: the paper tunes it on a log grid, with tau"


class SgdParams(StrategyParams):
    lr: Float32 = _lr(1.0, " (1: the algorithm's own step)")


class MomentumParams(StrategyParams):
    lr: Float32 = _lr(1.0)
    beta1: float = Field(0.9, ge=0, lt=1, description="beta: v_t = beta v_{t-1} + Delta_t, x += eta v_t")


class AdagradParams(StrategyParams):
    lr: Float32 = _lr(more=_TUNED)
    beta1: float = _beta1()
    tau: float = _tau()


class AdamParams(StrategyParams):
    lr: Float32 = _lr(more=_TUNED)
    beta1: float = _beta1()
    beta2: float = _beta2()
    tau: float = _tau()
    bias_correction: Literal[False, True, "flower"] = Field(
        False,
        description="false: none, as the paper; true: Adam's (Kingma & Ba): m and v start at 0 and the step uses "
        "m_t/(1 - beta1^t) and v_t/(1 - beta2^t); flower: Flower's FedAdam's: v starts at 0 and the step size is "
        "eta sqrt(1 - beta2^(t+1)) / (1 - beta1^(t+1)), tau outside it (t: the steps taken, Flower's server round "
        "where every round applies updates)",
    )


class YogiParams(StrategyParams):
    lr: Float32 = _lr(more=_TUNED)
    beta1: float = _beta1()
    beta2: float = _beta2()
    tau: float = _tau()
    refused_keys = {
        "bias_correction": "bias_correction is Adam's (Kingma & Ba); Yogi, in Reddi et al. and its own paper, has none"
    }


SERVER_OPTIMIZERS: dict[str, Entry] = {
    e.name: e
    for e in (
        Entry(
            "sgd",
            SgdParams,
            "x += eta Delta_t",
            REDDI + " (FedAvg's step scaled by a server learning rate)",
        ),
        Entry(
            "momentum",
            MomentumParams,
            "FedAvgM: v_t = beta v_{t-1} + Delta_t, x += eta v_t (v starts at 0)",
            FEDAVGM_PAPER,
        ),
        Entry(
            "adagrad",
            AdagradParams,
            "FedAdagrad: m_t = beta1 m + (1 - beta1) Delta_t, v_t = v + Delta_t^2, x += eta m_t / (sqrt(v_t) + tau)",
            REDDI_PAPER,
        ),
        Entry(
            "adam",
            AdamParams,
            "FedAdam: m_t as FedAdagrad, v_t = beta2 v + (1 - beta2) Delta_t^2, x += eta m_t / (sqrt(v_t) + tau)",
            REDDI_PAPER,
        ),
        Entry(
            "yogi",
            YogiParams,
            "FedYogi: m_t as FedAdagrad, v_t = v - (1 - beta2) Delta_t^2 sign(v - Delta_t^2), "
            "x += eta m_t / (sqrt(v_t) + tau)",
            REDDI_PAPER,
        ),
    )
}


def describe_server_optimizers() -> list[dict[str, Any]]:
    """One entry per optimiser for listings: ``name``, ``summary``, ``paper``, ``params``."""
    return [
        {"name": name, "summary": e.summary, "paper": e.paper, "params": describe_params(e.params)}
        for name, e in SERVER_OPTIMIZERS.items()
    ]


def validate_server_optimizer(spec: Any) -> list[tuple[str, str]]:
    """Problems with a ``server.optimizer`` spec's name and parameters as (sub-path, message) pairs."""
    entry = SERVER_OPTIMIZERS.get(spec.name)
    if entry is None:
        return [(".name", f"unknown server optimizer {spec.name!r}; accepted: {', '.join(SERVER_OPTIMIZERS)}")]
    return params_problems(entry.params, spec.params)
