"""The built-in availability policies, in the order listings show them: fills the catalog.

Per-round patterns live in :mod:`~netfl.policies.rounds`, continuous-time
ones in :mod:`~netfl.policies.sessions`, eligibility in
:mod:`~netfl.policies.eligible` and trace replay in
:mod:`~netfl.policies.traces`; :mod:`~netfl.policies.catalog` looks them up.
"""

from __future__ import annotations

from netfl.policies.catalog import BUILTIN_POLICIES
from netfl.policies.device_logs import DeviceLogs
from netfl.policies.eligible import Eligible
from netfl.policies.population import POPULATION_MODELS
from netfl.policies.rounds import Bernoulli, Cyclic, Markov
from netfl.policies.rows import PopulationRow
from netfl.policies.sessions import Always, Daily, Diurnal, OnOff
from netfl.policies.traces import FedScaleTrace, IntervalTrace

BUILTIN_POLICIES.update(
    {
        "always": Always,
        "bernoulli": Bernoulli,
        "markov": Markov,
        "cyclic": Cyclic,
        "sessions": OnOff,
        "daily": Daily,
        "diurnal": Diurnal,
        "eligible": Eligible,
        "fedscale_trace": FedScaleTrace,
        "trace_csv": IntervalTrace,
        "device_logs": DeviceLogs,
    }
)
# the population forms defined beside their policies (traces), not in netfl.policies.population
POPULATION_MODELS.update(
    {
        name: cls.population
        for name, cls in BUILTIN_POLICIES.items()
        if issubclass(cls, PopulationRow) and name not in POPULATION_MODELS
    }
)

__all__ = ["BUILTIN_POLICIES"]
