"""Built-in availability policies: the registry a topology's ``policy:`` names.

Per-round patterns live in :mod:`~netfl.policies.rounds`, continuous-time
ones in :mod:`~netfl.policies.sessions` and trace replay in
:mod:`~netfl.policies.traces`.
"""

from __future__ import annotations

from netfl.policies.base import AvailabilityPolicy, SessionPolicy
from netfl.policies.rounds import Bernoulli, Cyclic, Markov
from netfl.policies.sessions import Daily, Diurnal, Eligible, OnOff
from netfl.policies.traces import FedScaleTrace, IntervalTrace


class Always(SessionPolicy):
    """Always online: a mains-powered, always-connected device (battery permitting)."""

    def online(self, now, state) -> bool:
        return True


BUILTIN_POLICIES: dict[str, type[AvailabilityPolicy]] = {
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
}

__all__ = ["Always", "Bernoulli", "Markov", "Cyclic", "OnOff", "Daily", "Diurnal", "Eligible", "FedScaleTrace",
           "IntervalTrace", "BUILTIN_POLICIES"]
