"""The FL algorithms, selectable by name in ``server.algorithm``: names, papers and parameters.

Each :class:`AlgorithmEntry` says what an algorithm is called, where it
comes from, which parameters it takes (its ``Params`` model: fields,
defaults, descriptions; unknown keys are rejected) and what it needs from
the scenario; its strategy class in :mod:`netfl.learn.algorithms` (torch)
takes all of that from here and is imported only when a run builds it.
The rules themselves are documented on the strategy classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from netfl.numbers import NoBooleanNumbers
from netfl.problems import params_problems
from netfl.registry import Entry, describe_params

__all__ = [
    "ALGORITHMS",
    "ROUND_OPTIONS",
    "AlgorithmEntry",
    "StrategyParams",
    "describe_algorithms",
    "validate_algorithm",
]

_IMPL = "netfl.learn.algorithms"

FEDAU_PAPER = (
    "Wang & Ji, A Lightweight Method for Tackling Unknown Participation Statistics in Federated "
    "Averaging, ICLR 2024 (reference code IBM/fedau)"
)
MIFA_NOTES = (
    "Federated Learning with Partial Client Participation (notes, July 2021: FedAvg unbiased, MIFA, "
    "U-MIFA, MIFAm, U-MIFAm); MIFA: Gu, Huang, Zhang & Huang, Fast Federated Learning in the "
    "Presence of Arbitrary Device Unavailability, NeurIPS 2021 (code hmgxr128/MIFA_code)"
)
AFL_PAPER = "Yang, Zhang, Khanduri & Liu, Anarchic Federated Learning, ICML 2022 (slides; no public code)"
CVAR_PAPER = (
    "Theodoropoulos et al., Federated Learning Under Restricted User Availability (Fed-CVaR-Avg; "
    "code PeriklisTheodoropoulos/risk-aware-FL)"
)
FEDPROX_PAPER = (
    "Li, Sahu, Zaheer, Sanjabi, Talwalkar & Smith, Federated Optimization in Heterogeneous Networks "
    "(FedProx), MLSys 2020"
)
SCAFFOLD_PAPER = (
    "Karimireddy, Kale, Mohri, Reddi, Stich & Suresh, SCAFFOLD: Stochastic Controlled Averaging for "
    "Federated Learning, ICML 2020 (option II control variates)"
)
FEDBUFF_PAPER = (
    "Nguyen, Malik, Zhan, Yousefpour, Rabbat, Malek & Huba, Federated Learning with Buffered "
    "Asynchronous Aggregation (FedBuff), AISTATS 2022"
)
OVER_COMMIT_PAPER = (
    "Bonawitz et al., Towards Federated Learning at Scale: System Design, MLSys 2019 (select 130% "
    "of the devices needed, keep the first to report)"
)
MMFL_PAPER = (
    "Zhang, Li, Gong, Siew, Joe-Wong & El-Azouzi, Optimal Variance-Reduced Client Sampling for "
    "Multiple Models Federated Learning (poster; code haoran-zh/mmfl-Dec)"
)


@dataclass(frozen=True)
class AlgorithmEntry(Entry):
    # True where the rule divides by each client's participation probability p_i
    needs_participation: bool = False
    # True where the algorithm trains several models at once (one per entry of the scenario's ``tasks``)
    multi_task: bool = False
    # model-sized vectors the server keeps for every client (a memory of updates, control variates): what a run
    # holds grows with the number of devices (checked before a run, netfl.config.budget)
    client_state: int = 0


# ------------------------------------------------------------------------------------------ parameters


class StrategyParams(NoBooleanNumbers):
    """Base of every algorithm's parameters: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class FedAvgParams(StrategyParams):
    server_lr: float = Field(1.0, gt=0, description="eta: scales the averaged update")
    weighting: Literal["samples", "uniform"] = Field("samples", description="weight by local data size or equally")


class FedProxParams(FedAvgParams):
    mu: float = Field(
        0.01, ge=0, description="proximal coefficient: clients minimise f_k(w) + mu/2 ||w - w_global||^2 (0 is FedAvg)"
    )


class ScaffoldParams(StrategyParams):
    server_lr: float = Field(1.0, gt=0, description="eta_g: x += eta_g * mean of the arrived model updates")


class FedAvgAllParams(StrategyParams):
    server_lr: float = Field(1.0, gt=0, description="eta: scales the averaged update")


class FedAvgKnownParams(StrategyParams):
    server_lr: float = Field(1.0, gt=0, description="eta: scales the weighted update")


class FedAvgUnbiasedParams(StrategyParams):
    server_lr: float | None = Field(
        None, gt=0, description="eta on the gradient-like G; omitted: the round's client lr gamma_t"
    )


class FedAUParams(StrategyParams):
    server_lr: float = Field(1.0, gt=0, description="eta: scales the weighted update")
    K: int | None = Field(
        None,
        ge=1,
        description="cutoff: a run of K missed rounds is recorded as an interval "
        "of K; omitted/null: no cutoff (K = infinity)",
    )


class MIFAParams(StrategyParams):
    server_lr: float | None = Field(
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
    server_lr: float = Field(
        1.0,
        gt=0,
        description="eta: the step is x -= eta * eta_L * G_t with eta_L the "
        "client lr (theory: sqrt(mK) for CD, sqrt(MK) for CS)",
    )


class FedBuffParams(StrategyParams):
    server_lr: float = Field(
        1.0,
        gt=0,
        description="eta_g: x += eta_g * (1/K) sum_i w(s_i) delta_i over the K = server.async.buffer buffered updates",
    )
    staleness_weight: Literal["inverse_sqrt", "none"] = Field(
        "inverse_sqrt",
        description="w(s) of an update s model versions stale: 1/sqrt(1+s) (the paper's), or none (w = 1)",
    )

    @model_validator(mode="before")
    @classmethod
    def _k_is_the_servers(cls, data: Any) -> Any:
        if isinstance(data, dict) and "K" in data:
            raise ValueError(
                "FedBuff's buffer size K is the asynchronous server's: give it as server.async.buffer "
                "(the server steps, and the model version advances, every K arrivals)"
            )
        return data


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
    t_lr: float | None = Field(
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
    server_lr: float = Field(1.0, gt=0, description="eta: scales the aggregated update")


# ---------------------------------------------------------------------------------------------- entries

ALGORITHMS: dict[str, AlgorithmEntry] = {
    e.name: e
    for e in (
        AlgorithmEntry(
            "fedavg",
            FedAvgParams,
            f"{_IMPL}.fedavg:FedAvg",
            "FedAvg: weighted mean of the updates that arrived (by data size or uniform)",
            "McMahan et al., Communication-Efficient Learning of Deep Networks from Decentralized Data, AISTATS 2017",
        ),
        AlgorithmEntry(
            "fedprox",
            FedProxParams,
            f"{_IMPL}.fedprox:FedProx",
            "FedProx: FedAvg whose clients add the proximal term mu/2 ||w - w_global||^2 to their local loss",
            FEDPROX_PAPER,
        ),
        AlgorithmEntry(
            "scaffold",
            ScaffoldParams,
            f"{_IMPL}.scaffold:Scaffold",
            "SCAFFOLD: local gradients corrected by the control variates c - c_i; clients send their model and "
            "control-variate updates (twice the model's bytes each way)",
            SCAFFOLD_PAPER,
            client_state=1,
        ),
        AlgorithmEntry(
            "fedavg_all",
            FedAvgAllParams,
            f"{_IMPL}.fedavg:FedAvgAll",
            "average all: sum of the arrived updates divided by the number of all clients",
            FEDAU_PAPER + ', baseline "average all"',
        ),
        AlgorithmEntry(
            "fedavg_known",
            FedAvgKnownParams,
            f"{_IMPL}.fedavg:FedAvgKnown",
            "known participation statistics: arrived updates weighted 1/p_i, divided by all N",
            FEDAU_PAPER + ', baseline "known participation statistics"',
            needs_participation=True,
        ),
        AlgorithmEntry(
            "fedavg_unbiased",
            FedAvgUnbiasedParams,
            f"{_IMPL}.fedavg:FedAvgUnbiased",
            "FedAvg unbiased (MIFA notes): G = mean over all N of Delta_i/p_i for arrived i; x -= eta G",
            MIFA_NOTES + ', "FedAvg (unbiased)"',
            needs_participation=True,
        ),
        AlgorithmEntry(
            "fedau",
            FedAUParams,
            f"{_IMPL}.fedau:FedAU",
            "FedAU: updates weighted by each client's mean participation interval (cutoff K), over all N",
            FEDAU_PAPER,
        ),
        AlgorithmEntry(
            "mifa",
            MIFAParams,
            f"{_IMPL}.mifa:MIFA",
            "MIFA: step on the mean over all N clients of each client's latest (remembered) update",
            MIFA_NOTES,
            client_state=1,
        ),
        AlgorithmEntry(
            "umifa",
            UMIFAParams,
            f"{_IMPL}.mifa:UMIFA",
            "U-MIFA: MIFA with unbiased estimates Delta_i/p_i - (1/p_i - 1) G_i for arrived clients (needs p)",
            MIFA_NOTES + ", U-MIFA",
            needs_participation=True,
            client_state=1,
        ),
        AlgorithmEntry(
            "mifam",
            MIFAmParams,
            f"{_IMPL}.mifa:MIFAm",
            "MIFAm: MIFA plus server momentum v_t = beta v_{t-1} + G_t, x -= eta v_t",
            MIFA_NOTES + ", MIFAm",
            client_state=1,
        ),
        AlgorithmEntry(
            "umifam",
            UMIFAmParams,
            f"{_IMPL}.mifa:UMIFAm",
            "U-MIFAm: U-MIFA plus server momentum v_t = beta v_{t-1} + G_t, x -= eta v_t (needs p)",
            MIFA_NOTES + ", U-MIFAm",
            needs_participation=True,
            client_state=1,
        ),
        AlgorithmEntry(
            "afa_cd",
            AFAParams,
            f"{_IMPL}.anarchic:AFACD",
            "AFA-CD (Anarchic FL, cross-device): x -= eta*eta_L * mean of the arrived G_i = -delta_i/(K_i eta_L)",
            AFL_PAPER + ", AFA-CD",
        ),
        AlgorithmEntry(
            "afa_cs",
            AFAParams,
            f"{_IMPL}.anarchic:AFACS",
            "AFA-CS (Anarchic FL, cross-silo): x -= eta*eta_L * mean over all M workers of their latest G_i",
            AFL_PAPER + ", AFA-CS",
            client_state=1,
        ),
        AlgorithmEntry(
            "fedbuff",
            FedBuffParams,
            f"{_IMPL}.fedbuff:FedBuff",
            "FedBuff: asynchronous; every K = async.buffer arrivals, x += eta_g * mean of w(s_i) delta_i with "
            "w(s) = 1/sqrt(1+s) for an update s versions stale",
            FEDBUFF_PAPER,
        ),
        AlgorithmEntry(
            "fed_cvar",
            FedCVaRParams,
            f"{_IMPL}.fedcvar:FedCVaR",
            "Fed-CVaR-Avg: clients minimise (1-g) t + (1-g)/alpha relu(f - t) + g f over (theta, t); "
            "server adopts what arrived",
            CVAR_PAPER,
        ),
        AlgorithmEntry(
            "mmfl",
            MMFLParams,
            f"{_IMPL}.mmfl:MMFL",
            "multi-model FL: each client sends at most one model's update per round; optimal variance-reduced "
            "sampling p_{s|i} from update norms, or random / round-robin",
            MMFL_PAPER,
            multi_task=True,
        ),
    )
}


#: Settings of ``server.round`` that change how a synchronous round runs with any algorithm, listed with the
#: algorithms (``netfl algorithms``) because they come from papers too.
ROUND_OPTIONS: tuple[dict[str, str], ...] = (
    {
        "name": "over_commit",
        "type": "fraction",
        "default": "0",
        "summary": "ask ceil((1 + over_commit) x participants) of the eligible devices, aggregate the first "
        "participants updates to arrive and stop the rest (dropout, cause over_commit); needs "
        "participants; not with a RAM relay, an algorithm that divides by p, or mmfl",
        "paper": OVER_COMMIT_PAPER,
    },
)

# ------------------------------------------------------------------------------------ listing, checks


def describe_algorithms() -> list[dict[str, Any]]:
    """One entry per registered algorithm, for listings such as ``netfl algorithms``.

    Each: ``name``, ``summary``, ``paper``, ``needs_participation`` and ``params``, a
    list of ``{name, type, default, required, description}`` from the Params fields.
    """
    return [
        {
            "name": name,
            "summary": entry.summary,
            "paper": entry.paper,
            "needs_participation": entry.needs_participation,
            "params": describe_params(entry.params),
        }
        for name, entry in ALGORITHMS.items()
    ]


def validate_algorithm(spec: Any) -> list[tuple[str, str]]:
    """Problems with an AlgorithmSpec's name and parameters as (sub-path, message) pairs; empty when valid.

    What the algorithm needs from the rest of the scenario is checked in :mod:`netfl.config.checks`.
    """
    entry = ALGORITHMS.get(spec.name)
    if entry is None:
        return [(".name", f"unknown algorithm {spec.name!r}; accepted: {', '.join(ALGORITHMS)}")]
    return params_problems(entry.params, spec.params)
