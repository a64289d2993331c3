"""The FL algorithms, selectable by name in ``server.algorithm``: names, papers and parameters.

Each :class:`AlgorithmEntry` says what an algorithm is called, where it
comes from, which parameters it takes (its ``Params`` model: fields,
defaults, descriptions; unknown keys are rejected) and what it needs from
the scenario; its strategy class in :mod:`netfl.learn.federation.algorithms` (torch)
takes all of that from here and is imported only when a run builds it.
The rules themselves are documented on the strategy classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from netfl.numbers import Float32, NoBooleanNumbers
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

_IMPL = "netfl.learn.federation.algorithms"

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
FEDNOVA_PAPER = (
    "Wang, Liu, Liang, Joshi & Poor, Tackling the Objective Inconsistency Problem in Heterogeneous Federated "
    "Optimization (FedNova), NeurIPS 2020"
)
FEDASYNC_PAPER = "Xie, Koyejo & Gupta, Asynchronous Federated Optimization (FedAsync), 2019"
PARTIAL_WORK_NOTE = (
    "partial local work as in FedNova (Wang et al., Tackling the Objective Inconsistency Problem in "
    "Heterogeneous Federated Optimization, NeurIPS 2020), and in FLGo, FedML and Plato"
)
HIERFAVG_PAPER = "Liu, Zhang, Song & Letaief, Client-Edge-Cloud Hierarchical Federated Learning (HierFAVG), ICC 2020"
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
    # why a server optimiser (server.optimizer) cannot take this algorithm's step; empty: the step is x + Delta
    # with Delta the aggregated update, which the optimiser takes instead
    own_server_step: str = ""
    # whether edge servers can run the rule on their own devices' updates (hierarchical aggregation, HierFAVG):
    # the rule keeps no state across rounds and trains one model synchronously
    edge_rule: bool = False
    # the mode the algorithm needs ("sync" or "async"), with why; None: either
    mode: tuple[str, str] | None = None


# ------------------------------------------------------------------------------------------ parameters


class StrategyParams(NoBooleanNumbers):
    """Base of every algorithm's parameters: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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

    @model_validator(mode="before")
    @classmethod
    def _k_is_the_servers(cls, data: Any) -> Any:
        if isinstance(data, dict) and "K" in data:
            raise ValueError(
                "FedBuff's buffer size K is the asynchronous server's: give it as server.async.buffer "
                "(the server steps, and the model version advances, every K arrivals)"
            )
        return data


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


# ---------------------------------------------------------------------------------------------- entries

_MEMORY_STEP = (
    "steps on a memory of every client's latest update, also in rounds in which nothing arrives: that memory "
    "is its server rule, and an optimiser on top would step on stale updates again and again"
)

ALGORITHMS: dict[str, AlgorithmEntry] = {
    e.name: e
    for e in (
        AlgorithmEntry(
            "fedavg",
            FedAvgParams,
            f"{_IMPL}.fedavg:FedAvg",
            "FedAvg: weighted mean of the updates that arrived (by data size or uniform)",
            "McMahan et al., Communication-Efficient Learning of Deep Networks from Decentralized Data, AISTATS 2017",
            edge_rule=True,
        ),
        AlgorithmEntry(
            "fedprox",
            FedProxParams,
            f"{_IMPL}.fedprox:FedProx",
            "FedProx: FedAvg whose clients add the proximal term mu/2 ||w - w_global||^2 to their local loss",
            FEDPROX_PAPER,
            edge_rule=True,
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
            own_server_step="mifa " + _MEMORY_STEP,
        ),
        AlgorithmEntry(
            "umifa",
            UMIFAParams,
            f"{_IMPL}.mifa:UMIFA",
            "U-MIFA: MIFA with unbiased estimates Delta_i/p_i - (1/p_i - 1) G_i for arrived clients (needs p)",
            MIFA_NOTES + ", U-MIFA",
            needs_participation=True,
            client_state=1,
            own_server_step="umifa " + _MEMORY_STEP,
        ),
        AlgorithmEntry(
            "mifam",
            MIFAmParams,
            f"{_IMPL}.mifa:MIFAm",
            "MIFAm: MIFA plus server momentum v_t = beta v_{t-1} + G_t, x -= eta v_t",
            MIFA_NOTES + ", MIFAm",
            client_state=1,
            own_server_step="mifam " + _MEMORY_STEP,
        ),
        AlgorithmEntry(
            "umifam",
            UMIFAmParams,
            f"{_IMPL}.mifa:UMIFAm",
            "U-MIFAm: U-MIFA plus server momentum v_t = beta v_{t-1} + G_t, x -= eta v_t (needs p)",
            MIFA_NOTES + ", U-MIFAm",
            needs_participation=True,
            client_state=1,
            own_server_step="umifam " + _MEMORY_STEP,
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
            own_server_step="afa_cs " + _MEMORY_STEP,
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
            "fednova",
            FedNovaParams,
            f"{_IMPL}.fednova:FedNova",
            "FedNova: normalised averaging, x += eta * tau_eff * sum_i p_i Delta_i / tau_i with tau_i client i's "
            "local steps and tau_eff = sum_i p_i tau_i (with server.round.partial_work: the steps that fit)",
            FEDNOVA_PAPER,
            edge_rule=True,
        ),
        AlgorithmEntry(
            "fedasync",
            FedAsyncParams,
            f"{_IMPL}.fedasync:FedAsync",
            "FedAsync: each arriving update mixed in, x = (1 - alpha_t) x + alpha_t x_i with alpha_t = alpha S(s) "
            "for an update s versions stale (staleness constant, polynomial or hinge)",
            FEDASYNC_PAPER,
            own_server_step="fedasync's mixing weight alpha_t is its server step",
            mode=("async", "fedasync mixes each update into the model as it arrives: use server.mode: async"),
        ),
        AlgorithmEntry(
            "fed_cvar",
            FedCVaRParams,
            f"{_IMPL}.fedcvar:FedCVaR",
            "Fed-CVaR-Avg: clients minimise (1-g) t + (1-g)/alpha relu(f - t) + g f over (theta, t); "
            "server adopts what arrived",
            CVAR_PAPER,
            own_server_step="fed_cvar adopts the one model the relay passes (and its threshold t): there is no "
            "averaged update to optimise",
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
    {
        "name": "partial_work",
        "type": "bool",
        "default": "false",
        "summary": "a device that would miss the deadline trains only the local steps it can finish in time (from "
        "its speed, the FLOPs of a step, the time left after its download, and its upload at the throughput its "
        "previous upload achieved, or its link's nominal rate) and uploads them (train_start: partial "
        "steps=done/asked); a job that fits no step stops (dropout, cause deadline); needs a deadline; fednova "
        "normalises by the steps done, fedavg is the biased baseline; partial_margin (fraction, default 0) plans "
        "each upload that much longer, for a shared uplink on which everyone who planned to the deadline sends "
        "at once",
        "paper": PARTIAL_WORK_NOTE,
    },
    {
        "name": "cloud_every",
        "type": "int",
        "default": "1",
        "summary": "with edge nodes (network.nodes.NAME.kind: edge, HierFAVG): every round each edge aggregates "
        "its own devices' updates by the algorithm's rule (fedavg, fedprox or fednova) into its edge model; "
        "every cloud_every rounds the edges send their models over their wired links, the cloud averages them "
        "by the edges' data and sends the result back down",
        "paper": HIERFAVG_PAPER,
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
