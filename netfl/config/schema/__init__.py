"""The scenario's schema: pydantic models of the simulated world, and nothing else.

Each model checks what it can see on its own (ranges, units, which keys go
together); checks that need the whole scenario or a registry's verdict on a
named component live in :mod:`netfl.config.checks`. Unknown keys are errors:
a typo must never silently fall back to a default. All quantities are
converted to SI base units here (seconds, joules, watts, bit/s), so nothing
downstream parses units.

One module per part of the topology file: :mod:`~netfl.config.schema.task_spec` (``task``),
:mod:`~netfl.config.schema.device_spec` (``devices``), :mod:`~netfl.config.schema.server_spec` (``server``),
:mod:`~netfl.config.schema.network_spec` (``network``), :mod:`~netfl.config.schema.run_spec` (``eval``,
``engine``, ``events``, ``output``, ``tracking``) and :mod:`~netfl.config.schema.scenario` (the whole).
A parameter whose rules another layer applies too is declared in the registry, below both, and imported here:
the partition (:mod:`netfl.registry.partitions`), the closed choices the learner or the engine act on
(:mod:`netfl.registry.choices`), the parameters the engine reads (:mod:`netfl.registry.server_params`,
:mod:`netfl.registry.device_params`, :mod:`netfl.registry.run_params`, :mod:`netfl.registry.network_params`),
and the local training the learner reads (:mod:`netfl.registry.learning_params`).
"""

from netfl.config.schema.device_spec import (
    BatterySpec,
    ComputeSpec,
    DeviceGroupSpec,
    LinkSpec,
    LoggedLevelsSpec,
    PowerSpec,
)
from netfl.config.schema.network_spec import MediumSpec, NetworkSpec, NodeSpec, RamSpec, WiredLinkSpec
from netfl.config.schema.run_spec import (
    IDLE_EVENTS_BELOW,
    MLFLOW_SCHEMES,
    EngineSpec,
    EvalSpec,
    EventsSpec,
    OutputSpec,
    TrackingSpec,
)
from netfl.config.schema.scenario import Scenario, Seeds
from netfl.config.schema.server_spec import (
    MAX_QSGD_LEVELS,
    AlgorithmSpec,
    CompressionSpec,
    CompressorSpec,
    QsgdSpec,
    ServerOptimizerSpec,
    ServerSpec,
)
from netfl.config.schema.task_spec import DatasetSpec, LocalSpec, ModelSpec, TaskSpec
from netfl.numbers import Strict
from netfl.registry.device_params import ChannelSpec, UsageSpec
from netfl.registry.partitions import ExclusiveGroupSpec, PartitionSpec, QuantitySkewSpec
from netfl.registry.run_params import EVERY_SPELLINGS, Every, StopSpec
from netfl.registry.server_params import MAX_OVER_COMMIT, AsyncSpec, RoundSpec

__all__ = [
    "EVERY_SPELLINGS",
    "IDLE_EVENTS_BELOW",
    "MAX_OVER_COMMIT",
    "MAX_QSGD_LEVELS",
    "MLFLOW_SCHEMES",
    "AlgorithmSpec",
    "AsyncSpec",
    "BatterySpec",
    "LoggedLevelsSpec",
    "ChannelSpec",
    "CompressionSpec",
    "CompressorSpec",
    "ComputeSpec",
    "DatasetSpec",
    "DeviceGroupSpec",
    "EngineSpec",
    "EvalSpec",
    "EventsSpec",
    "Every",
    "ExclusiveGroupSpec",
    "LinkSpec",
    "LocalSpec",
    "MediumSpec",
    "ModelSpec",
    "NetworkSpec",
    "NodeSpec",
    "OutputSpec",
    "PartitionSpec",
    "PowerSpec",
    "QsgdSpec",
    "QuantitySkewSpec",
    "RamSpec",
    "RoundSpec",
    "Scenario",
    "Seeds",
    "ServerOptimizerSpec",
    "ServerSpec",
    "StopSpec",
    "Strict",
    "TaskSpec",
    "TrackingSpec",
    "UsageSpec",
    "WiredLinkSpec",
]
