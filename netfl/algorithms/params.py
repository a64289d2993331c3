"""The built-in algorithms' parameters (``Params`` of each), public so that a strategy of your own can extend a
built-in's (``class MyProxParams(FedProxParams): ...``) and the built-ins import them from here like any user.
They follow semantic versioning with :mod:`netfl.algorithms`."""

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
