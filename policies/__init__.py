"""Availability policies: when a device can take part.

The protocol is documented in :mod:`netfl.policies.base`. A topology names a
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

__all__ = [
    "AvailabilityPolicy",
    "DeviceInfo",
    "DeviceState",
    "PolicyParams",
    "RoundPolicy",
    "SessionPolicy",
    "BUILTIN_POLICIES",
    "policy_class",
    "check_spec",
    "build_policy",
]
