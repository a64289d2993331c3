"""Each FL algorithm's parameters (``server.algorithm``'s keys besides ``name``): one pydantic model per
algorithm, with its fields' defaults, bounds and descriptions; unknown keys are refused.

:mod:`netfl.registry.algorithms` names each in its entry, and the algorithm's strategy class
(:mod:`netfl.learn.federation.algorithms`) sets the same class as its ``Params``. No torch.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, model_validator

from netfl.numbers import Float32, NoBooleanNumbers

__all__ = [
    "AFAParams",
    "FedAUParams",
    "FedAsyncParams",
    "FedAvgAllParams",
    "FedAvgKnownParams",
    "FedAvgParams",
    "FedAvgUnbiasedParams",
    "FedBuffParams",
    "FedCVaRParams",
    "FedNovaParams",
    "FedProxParams",
    "MIFAParams",
    "MIFAmParams",
    "MMFLParams",
    "ScaffoldParams",
    "StrategyParams",
    "UMIFAParams",
    "UMIFAmParams",
]


class StrategyParams(NoBooleanNumbers):
    """Base of every algorithm's parameters: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    #: Keys a user may well give here by mistake, each refused with a message of its own: where it belongs, or why not.
    refused_keys: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _refused_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, message in cls.refused_keys.items():
                if key in data:
                    raise ValueError(message)
        return data


class FedAvgParams(StrategyParams):
    server_lr: Float32 = Field(1.0, gt=0, description="eta: scales the averaged update")
    weighting: Literal["samples", "uniform"] = Field("samples", description="weight by local data size or equally")


class FedProxParams(FedAvgParams):
    mu: Float32 = Field(
        0.01, ge=0, description="proximal coefficient: clients minimise f_k(w) + mu/2 ||w - w_global||^2 (0 is FedAvg)"
    )


class ScaffoldParams(StrategyParams):
    server_lr: Float32 = Field(1.0, gt=0, description="eta_g: x += eta_g * mean of the arrived model updates")


class FedAvgAllParams(StrategyParams):
    server_lr: Float32 = Field(1.0, gt=0, description="eta: scales the averaged update")


class FedAvgKnownParams(StrategyParams):
    server_lr: Float32 = Field(1.0, gt=0, description="eta: scales the weighted update")


class FedAvgUnbiasedParams(StrategyParams):
    server_lr: Float32 | None = Field(
        None, gt=0, description="eta on the gradient-like G; omitted: the round's client lr gamma_t"
    )


class FedAUParams(StrategyParams):
    server_lr: Float32 = Field(1.0, gt=0, description="eta: scales the weighted update")
    K: int | None = Field(
        None,
        ge=1,
        description="cutoff: a run of K missed rounds is recorded as an interval "
        "of K; omitted/null: no cutoff (K = infinity)",
    )


class MIFAParams(StrategyParams):
    server_lr: Float32 | None = Field(
        None,
        gt=0,
        description="eta on the gradient-like G_t; omitted: the round's client lr gamma_t (the reference's choice)",
    )
    wait_for_all: bool = Field(
        False,
        description="leave the model unchanged until every client has sent one "
        "update (the MIFA reference's default); false: start from "
        "a zero memory",
    )


class MIFAmParams(MIFAParams):
    beta: float = Field(0.9, ge=0, lt=1, description="momentum: v_t = beta v_{t-1} + G_t, x -= eta v_t")


_STORE_DESCRIPTION = (
    "what an arriving client's table row keeps: `update` its Delta_i (SAGA; stable), "
    "`estimate` the unbiased estimate Delta_i/p_i - (1/p_i - 1) G_i itself (the notes' literal "
    "recursion; its error grows by (1-p)/p per round, so it diverges for p < 1/2)"
)


class UMIFAParams(MIFAParams):
    store: Literal["update", "estimate"] = Field("update", description=_STORE_DESCRIPTION)


class UMIFAmParams(MIFAmParams):
    store: Literal["update", "estimate"] = Field("update", description=_STORE_DESCRIPTION)


class AFAParams(StrategyParams):
    server_lr: Float32 = Field(
        1.0,
        gt=0,
        description="eta: the step is x -= eta * eta_L * G_t with eta_L the "
        "client lr (theory: sqrt(mK) for CD, sqrt(MK) for CS)",
    )


class FedBuffParams(StrategyParams):
    server_lr: Float32 = Field(
        1.0,
        gt=0,
        description="eta_g: x += eta_g * (1/K) sum_i w(s_i) delta_i over the K = server.async.buffer buffered updates",
    )
    staleness_weight: Literal["inverse_sqrt", "none"] = Field(
        "inverse_sqrt",
        description="w(s) of an update s model versions stale: 1/sqrt(1+s) (the paper's), or none (w = 1)",
    )
    refused_keys = {
        "K": "FedBuff's buffer size K is the asynchronous server's: give it as server.async.buffer "
        "(the server steps, and the model version advances, every K arrivals)"
    }


class FedNovaParams(StrategyParams):
    server_lr: Float32 = Field(
        1.0, gt=0, description="eta: x += eta * tau_eff * sum_i p_i Delta_i / tau_i (1 in the paper)"
    )
    weighting: Literal["samples", "uniform"] = Field(
        "samples", description="p_i of the aggregated clients: by local data size (the paper's) or equal"
    )


class FedAsyncParams(StrategyParams):
    alpha: float = Field(0.5, gt=0, le=1, description="alpha: the mixing weight of a fresh update")
    staleness: Literal["constant", "polynomial", "hinge"] = Field(
        "polynomial",
        description="S(s) for an update s versions stale: constant 1, polynomial (s + 1)^-a, or hinge "
        "(1 if s <= b, else 1 / (a (s - b) + 1)); alpha_t = alpha S(s)",
    )
    a: float | None = Field(None, gt=0, description="polynomial and hinge: the decay a (default 0.5 and 10)")
    b: int | None = Field(None, ge=0, description="hinge: the staleness up to which S = 1 (default 4)")
    max_staleness: int | None = Field(
        None, ge=0, description="drop (do not apply) an update more stale than this; omitted: apply every update"
    )

    @model_validator(mode="after")
    def _params_of_the_function(self):
        if self.staleness == "constant" and self.a is not None:
            raise ValueError("a is the decay of the polynomial and hinge staleness functions; constant has none")
        if self.staleness != "hinge" and self.b is not None:
            raise ValueError(f"b is the hinge's flat stretch; staleness {self.staleness} has none")
        return self

    @property
    def decay(self) -> float:
        """a, or its default for the staleness function (polynomial 0.5, hinge 10)."""
        if self.a is not None:
            return self.a
        return 10.0 if self.staleness == "hinge" else 0.5

    @property
    def flat(self) -> int:
        """b, or its default (4)."""
        return 4 if self.b is None else self.b


class FedCVaRParams(StrategyParams):
    alpha: float = Field(
        0.1,
        gt=0,
        le=1,
        description="CVaR level in (0, 1]: the share of worst users the objective focuses on; 1 is FedAvg",
    )
    gamma: float = Field(
        0.1,
        ge=0,
        le=1,
        description="trade-off in [0, 1]: weight of the plain expected loss next to the CVaR; 1 is FedAvg",
    )
    t_lr: Float32 | None = Field(
        None, gt=0, description="SGD step size of the threshold t; omitted: the task's client lr"
    )


class MMFLParams(StrategyParams):
    sampling: Literal["optimal", "random", "round_robin"] = Field(
        "optimal", description="optimal (closed-form p_{s|i} from the clients' reports), random or round_robin"
    )
    norms: Literal["update", "loss"] = Field(
        "update",
        description="optimal: what clients report -- ||update||/lr (every client trains every "
        "model) or the global models' local loss (forward passes only)",
    )
    server_lr: Float32 = Field(1.0, gt=0, description="eta: scales the aggregated update")
