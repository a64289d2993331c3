"""Availability policies: when a device can take part.

The protocol is documented in :mod:`netfl.policies.base` (one object per
device) and :mod:`netfl.policies.population_policy` (a whole group at once). A topology names a
built-in (``availability: {policy: markov, p: 0.3}``) or a user's class
(``availability: {policy: my_policies.py:Charging, level: 0.3}``, the path
relative to the topology file); the other keys of that mapping are the
policy's parameters. :mod:`netfl.policies.catalog` turns such a name into a
class; importing this package fills it with the built-ins.
"""

from __future__ import annotations

from netfl.policies import builtin  # noqa: F401  (fills the catalog with the built-ins)
from netfl.policies.base import AvailabilityPolicy, DeviceInfo, DeviceState, PolicyParams, RoundPolicy, SessionPolicy
from netfl.policies.catalog import BUILTIN_POLICIES, build_policy, check_spec, policy_class
from netfl.policies.population_policy import PopulationPolicy

__all__ = [
    "AvailabilityPolicy",
    "DeviceInfo",
    "DeviceState",
    "PolicyParams",
    "RoundPolicy",
    "SessionPolicy",
    "PopulationPolicy",
    "BUILTIN_POLICIES",
    "policy_class",
    "check_spec",
    "build_policy",
]
