"""The FL algorithms, selectable by name in ``server.algorithm``: names, papers, parameters and needs.

Each :class:`AlgorithmEntry` says what an algorithm is called, where it
comes from, which parameters it takes (its ``Params`` model of
:mod:`netfl.registry.algorithm_params`: fields, defaults, descriptions;
unknown keys are rejected) and what it needs from the scenario. Its
strategy class in :mod:`netfl.learn.federation.algorithms` (torch) names
the entry it implements (``name``) and takes the rest from here; that
package gathers its classes by module (:func:`netfl.registry.implementations`)
and is imported only when a run builds a strategy. The rules themselves are
documented on the strategy classes.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any

from netfl.registry import Entry, describe_params
from netfl.registry.algorithm_params import (
    AFAParams,
    FedAsyncParams,
    FedAUParams,
    FedAvgAllParams,
    FedAvgKnownParams,
    FedAvgParams,
    FedAvgUnbiasedParams,
    FedBuffParams,
    FedCVaRParams,
    FedNovaParams,
    FedProxParams,
    MIFAmParams,
    MIFAParams,
    MMFLParams,
    ScaffoldParams,
    StrategyParams,
    UMIFAmParams,
    UMIFAParams,
)
from netfl.registry.server_params import RoundSpec
from netfl.units import Fraction

__all__ = [
    "ALGORITHMS",
    "ROUND_OPTIONS",
    "AlgorithmEntry",
    "StrategyParams",
    "declared_entry",
    "describe_algorithms",
]


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


def declared_entry(cls: type) -> AlgorithmEntry:
    """The entry of a strategy class that is no built-in (a user's, from its file or from Python), made from the
    class's own declarations (``Params``, ``name``, ``summary``, ``paper`` and the flags; see
    :class:`netfl.algorithms.Strategy`); a TypeError naming the attribute and what it accepts when one is off."""
    qualname = cls.__qualname__

    def declared(attribute: str, kind: type | tuple[type, ...], accepts: str) -> Any:
        value = getattr(cls, attribute)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise TypeError(f"{qualname}.{attribute} = {value!r}: {accepts}")
        return value

    params = getattr(cls, "Params", StrategyParams)
    if not (isinstance(params, type) and issubclass(params, StrategyParams)):
        raise TypeError(
            f"{qualname}.Params = {params!r}: a subclass of netfl.algorithms.StrategyParams (a pydantic model of "
            "the algorithm's keys)"
        )
    name = declared("name", str, "a string (how listings name the algorithm)") or qualname
    doc = (cls.__doc__ or "").strip().splitlines()
    summary = declared("summary", str, "one line of text") or (doc[0] if doc else name)
    mode = getattr(cls, "mode", None)
    if mode not in (None, "sync", "async"):
        raise TypeError(f"{qualname}.mode = {mode!r}: 'sync', 'async', or None (either)")
    client_state = declared("client_state", int, "an int >= 0 (model-sized vectors kept per client)")
    if client_state < 0:
        raise TypeError(f"{qualname}.client_state = {client_state}: an int >= 0 (model-sized vectors kept per client)")
    return AlgorithmEntry(
        name,
        params,
        summary,
        declared("paper", str, "a string (where the rule comes from)"),
        needs_participation=declared("needs_participation", bool, "True or False"),
        multi_task=declared("multi_task", bool, "True or False"),
        client_state=client_state,
        own_server_step=declared("own_server_step", str, "a string (why a server optimiser cannot take the step)"),
        edge_rule=declared("edge_rule", bool, "True or False"),
        mode=(mode, f"{name} declares mode = {mode!r}: use server.mode: {mode}") if mode else None,
    )


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
            "FedAvg: weighted mean of the updates that arrived (by data size or uniform)",
            "McMahan et al., Communication-Efficient Learning of Deep Networks from Decentralized Data, AISTATS 2017",
            edge_rule=True,
        ),
        AlgorithmEntry(
            "fedprox",
            FedProxParams,
            "FedProx: FedAvg whose clients add the proximal term mu/2 ||w - w_global||^2 to their local loss",
            FEDPROX_PAPER,
            edge_rule=True,
        ),
        AlgorithmEntry(
            "scaffold",
            ScaffoldParams,
            "SCAFFOLD: local gradients corrected by the control variates c - c_i; clients send their model and "
            "control-variate updates (twice the model's bytes each way)",
            SCAFFOLD_PAPER,
            client_state=1,
        ),
        AlgorithmEntry(
            "fedavg_all",
            FedAvgAllParams,
            "average all: sum of the arrived updates divided by the number of all clients",
            FEDAU_PAPER + ', baseline "average all"',
        ),
        AlgorithmEntry(
            "fedavg_known",
            FedAvgKnownParams,
            "known participation statistics: arrived updates weighted 1/p_i, divided by all N",
            FEDAU_PAPER + ', baseline "known participation statistics"',
            needs_participation=True,
        ),
        AlgorithmEntry(
            "fedavg_unbiased",
            FedAvgUnbiasedParams,
            "FedAvg unbiased (MIFA notes): G = mean over all N of Delta_i/p_i for arrived i; x -= eta G",
            MIFA_NOTES + ', "FedAvg (unbiased)"',
            needs_participation=True,
        ),
        AlgorithmEntry(
            "fedau",
            FedAUParams,
            "FedAU: updates weighted by each client's mean participation interval (cutoff K), over all N",
            FEDAU_PAPER,
        ),
        AlgorithmEntry(
            "mifa",
            MIFAParams,
            "MIFA: step on the mean over all N clients of each client's latest (remembered) update",
            MIFA_NOTES,
            client_state=1,
            own_server_step="mifa " + _MEMORY_STEP,
        ),
        AlgorithmEntry(
            "umifa",
            UMIFAParams,
            "U-MIFA: MIFA with unbiased estimates Delta_i/p_i - (1/p_i - 1) G_i for arrived clients (needs p)",
            MIFA_NOTES + ", U-MIFA",
            needs_participation=True,
            client_state=1,
            own_server_step="umifa " + _MEMORY_STEP,
        ),
        AlgorithmEntry(
            "mifam",
            MIFAmParams,
            "MIFAm: MIFA plus server momentum v_t = beta v_{t-1} + G_t, x -= eta v_t",
            MIFA_NOTES + ", MIFAm",
            client_state=1,
            own_server_step="mifam " + _MEMORY_STEP,
        ),
        AlgorithmEntry(
            "umifam",
            UMIFAmParams,
            "U-MIFAm: U-MIFA plus server momentum v_t = beta v_{t-1} + G_t, x -= eta v_t (needs p)",
            MIFA_NOTES + ", U-MIFAm",
            needs_participation=True,
            client_state=1,
            own_server_step="umifam " + _MEMORY_STEP,
        ),
        AlgorithmEntry(
            "afa_cd",
            AFAParams,
            "AFA-CD (Anarchic FL, cross-device): x -= eta*eta_L * mean of the arrived G_i = -delta_i/(K_i eta_L)",
            AFL_PAPER + ", AFA-CD",
        ),
        AlgorithmEntry(
            "afa_cs",
            AFAParams,
            "AFA-CS (Anarchic FL, cross-silo): x -= eta*eta_L * mean over all M workers of their latest G_i",
            AFL_PAPER + ", AFA-CS",
            client_state=1,
            own_server_step="afa_cs " + _MEMORY_STEP,
        ),
        AlgorithmEntry(
            "fedbuff",
            FedBuffParams,
            "FedBuff: asynchronous; every K = async.buffer arrivals, x += eta_g * mean of w(s_i) delta_i with "
            "w(s) = 1/sqrt(1+s) for an update s versions stale",
            FEDBUFF_PAPER,
        ),
        AlgorithmEntry(
            "fednova",
            FedNovaParams,
            "FedNova: normalised averaging, x += eta * tau_eff * sum_i p_i Delta_i / tau_i with tau_i client i's "
            "local steps and tau_eff = sum_i p_i tau_i (with server.round.partial_work: the steps that fit)",
            FEDNOVA_PAPER,
            edge_rule=True,
        ),
        AlgorithmEntry(
            "fedasync",
            FedAsyncParams,
            "FedAsync: each arriving update mixed in, x = (1 - alpha_t) x + alpha_t x_i with alpha_t = alpha S(s) "
            "for an update s versions stale (staleness constant, polynomial or hinge)",
            FEDASYNC_PAPER,
            own_server_step="fedasync's mixing weight alpha_t is its server step",
            mode=("async", "fedasync mixes each update into the model as it arrives: use server.mode: async"),
        ),
        AlgorithmEntry(
            "fed_cvar",
            FedCVaRParams,
            "Fed-CVaR-Avg: clients minimise (1-g) t + (1-g)/alpha relu(f - t) + g f over (theta, t); "
            "server adopts what arrived",
            CVAR_PAPER,
            own_server_step="fed_cvar adopts the one model the relay passes (and its threshold t): there is no "
            "averaged update to optimise",
        ),
        AlgorithmEntry(
            "mmfl",
            MMFLParams,
            "multi-model FL: each client sends at most one model's update per round; optimal variance-reduced "
            "sampling p_{s|i} from update norms, or random / round-robin",
            MMFL_PAPER,
            multi_task=True,
        ),
    )
}


def _round_option(name: str, summary: str, paper: str) -> dict[str, str]:
    """A ``server.round`` field as the listing shows it: its type and default read from :class:`RoundSpec`."""
    field = RoundSpec.model_fields[name]
    kind = "fraction" if typing.get_args(Fraction)[1] in field.metadata else field.annotation.__name__
    default = str(field.default).lower() if isinstance(field.default, bool) else f"{field.default:g}"
    return {"name": name, "type": kind, "default": default, "summary": summary, "paper": paper}


#: Settings of ``server.round`` that change how a synchronous round runs with any algorithm, listed with the
#: algorithms (``netfl algorithms``) because they come from papers too; each one's type and default are its
#: declaration's (:class:`~netfl.registry.server_params.RoundSpec`).
ROUND_OPTIONS: tuple[dict[str, str], ...] = (
    _round_option(
        "over_commit",
        "ask ceil((1 + over_commit) x participants) of the eligible devices, aggregate the first "
        "participants updates to arrive and stop the rest (dropout, cause over_commit); needs "
        "participants; not with a RAM relay, an algorithm that divides by p, or mmfl",
        OVER_COMMIT_PAPER,
    ),
    _round_option(
        "partial_work",
        "a device that would miss the deadline trains only the local steps it can finish in time (from "
        "its speed, the FLOPs of a step, the time left after its download, and its upload at the throughput its "
        "previous upload achieved, or its link's nominal rate) and uploads them (train_start: partial "
        "steps=done/asked); a job that fits no step stops (dropout, cause deadline); needs a deadline; fednova "
        "normalises by the steps done, fedavg is the biased baseline; partial_margin (fraction, default 0) plans "
        "each upload that much longer, for a shared uplink on which everyone who planned to the deadline sends "
        "at once",
        PARTIAL_WORK_NOTE,
    ),
    _round_option(
        "cloud_every",
        "with edge nodes (network.nodes.NAME.kind: edge, HierFAVG): every round each edge aggregates "
        "its own devices' updates by the algorithm's rule (fedavg, fedprox or fednova) into its edge model; "
        "every cloud_every rounds the edges send their models over their wired links, the cloud averages them "
        "by the edges' data and sends the result back down",
        HIERFAVG_PAPER,
    ),
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
