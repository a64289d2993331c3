"""The built-in algorithms' parameters (``Params`` of each), public so that a strategy of your own can extend a
built-in's (``class MyProxParams(FedProxParams): ...``) and the built-ins import them from here like any user.
They follow semantic versioning with :mod:`netfl.algorithms`."""

from netfl.registry.algorithm_params import *  # noqa: F403 -- the registry's models, re-exported as they are
from netfl.registry.algorithm_params import __all__  # noqa: F401 -- one list of them, the registry's
