"""netfl's strategy API: what an FL algorithm of your own is written against, and every built-in too.

An algorithm is a :class:`Strategy` subclass in a file of yours, named in a topology::

    server:
      algorithm: {path: my_fl.py:TrimmedMean, trim: 0.1}

or passed from Python (``netfl.run(world, algorithm=TrimmedMean, algorithm_args={"trim": 0.1})``). It declares its
parameters (``Params``, a :class:`StrategyParams` model) and what it needs (class attributes, see
:class:`Strategy`); netfl checks them against the scenario before anything runs and calls its hooks as the
simulated world goes (docs: "Your own algorithm"): ``select`` (who trains, seeing the eligible devices'
:class:`DeviceStates`), ``correction`` and ``extras`` (the local objective), ``download_bytes`` / ``upload_bytes``
(what travels), ``admit`` (an update that arrived, e.g. too stale), ``aggregate`` (the next global vector and
its metrics, an :class:`Aggregate`), ``evaluate``, and ``state`` / ``restore`` (checkpoints).

What this module exports follows semantic versioning: a name removed or a signature changed incompatibly is a
new major version. The modules behind it are internal and may move.
"""

from netfl.backend import DeviceStates, Evaluation, RoundContext, sample_uniform
from netfl.learn.federation.client_states import ClientStates
from netfl.learn.federation.probes import LocalLoss, Probe, TaskView, TrainedJob, UpdateNorm
from netfl.learn.federation.strategy import (
    Aggregate,
    ClientInfo,
    ClientUpdate,
    Strategy,
    as_aggregate,
    data_weights,
    norm,
    participation_probabilities,
    staleness_metrics,
    weighted_sum,
)
from netfl.learn.federation.strategy_calls import AggregationRecord
from netfl.learn.training.objective import Correction, ExtraScalars
from netfl.registry.algorithm_params import StrategyParams

__all__ = [
    "Aggregate",
    "AggregationRecord",
    "ClientInfo",
    "ClientStates",
    "ClientUpdate",
    "Correction",
    "DeviceStates",
    "Evaluation",
    "ExtraScalars",
    "LocalLoss",
    "Probe",
    "RoundContext",
    "Strategy",
    "StrategyParams",
    "TaskView",
    "TrainedJob",
    "UpdateNorm",
    "as_aggregate",
    "data_weights",
    "norm",
    "participation_probabilities",
    "sample_uniform",
    "staleness_metrics",
    "weighted_sum",
]
