"""A Flower strategy as netfl's algorithm (``server.algorithm: {flower: ...}``): the entry validation reads, without
torch and without Flower.

The strategy's keyword arguments are its ``__init__``'s, checked against its signature once the class is
imported (:mod:`netfl.config.flower_choice`), so the parameters model here takes any key. What the entry declares
holds for every Flower strategy: Flower's server runs rounds (``configure_train`` then ``aggregate_train``), so the
adapter runs in ``server.mode: sync`` only; a Flower strategy takes its own server step (FedAdam, FedYogi, FedAvgM
are Flower strategies themselves), so ``server.optimizer`` is refused; and it keeps whatever state it likes across
rounds, so edge servers cannot run it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ConfigDict

from netfl.registry.algorithm_params import StrategyParams
from netfl.registry.algorithms import AlgorithmEntry

__all__ = ["FLOWER_EXTRA", "OWN_SERVER_STEP", "SUPPLIED", "FlowerClass", "FlowerParams", "flower_entry"]

#: How a user installs Flower beside netfl (pyproject.toml's optional extra).
FLOWER_EXTRA = 'pip install "netfl-sim[flower]"'


#: What netfl supplies itself when the strategy's __init__ takes it and the scenario does not give it: the older
#: FedOpt family's initial_parameters, netfl's initial model.
SUPPLIED = ("initial_parameters",)


class FlowerClass:
    """A Flower strategy class with what messages name it by: ``cls``, the file that defines it (``source``, for
    the fence) and whether it is the message API's (``message_api``) or the older ``aggregate_fit`` one."""

    def __init__(self, cls: type, source: Path, message_api: bool):
        self.cls, self.source, self.message_api = cls, source, message_api


class FlowerParams(StrategyParams):
    """The Flower strategy's keyword arguments, as given (checked against its ``__init__``'s signature)."""

    model_config = ConfigDict(extra="allow", frozen=True)


OWN_SERVER_STEP = (
    "a Flower strategy takes its own server step: use Flower's FedAdam, FedYogi, FedAdagrad or FedAvgM (flower: "
    "flwr.serverapp.strategy.FedAdam) instead of a server optimiser"
)


def flower_entry(label: str, summary: str) -> AlgorithmEntry:
    """The entry of the Flower strategy ``label`` names (``summary``: its docstring's first line)."""
    return AlgorithmEntry(
        label,
        FlowerParams,
        summary or "a Flower strategy",
        "",
        own_server_step=OWN_SERVER_STEP,
        mode=("sync", f"{label} is a Flower strategy, which runs in rounds (configure_train, aggregate_train): "
              "use server.mode: sync"),
    )  # fmt: skip
