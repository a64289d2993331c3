"""The availability-policy protocol, shared by built-ins and user scripts.

A policy decides when one device can take part. There is one policy object
per device, built with the policy's validated parameters, a description of
the device and a random generator seeded from the scenario seed (use only
that generator, so the same seed gives the same run).

Two time bases, because the literature uses both:

* ``RoundPolicy`` -- a participation indicator per server round, as in the
  FedAU and MIFA papers (``1{device n participates in round t}``). The
  server asks ``participates(t)`` once per round, in round order.
* ``SessionPolicy`` -- continuous time: the device is online over intervals
  of simulated seconds. The engine asks ``initially_online()`` once, then
  ``next_change(now, online)`` for the absolute time of the next toggle
  (``math.inf`` for never). A device that goes offline mid-task loses that
  task's work.

Parameters are declared as a pydantic model named ``Params`` (unknown keys
are rejected with the YAML path of the offending key)::

    class EveryOther(RoundPolicy):
        class Params(PolicyParams):
            phase: int = 0

        def participates(self, round_index: int) -> bool:
            return round_index % 2 == self.params.phase
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict


class PolicyParams(BaseModel):
    """Base of every policy's ``Params``: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class DeviceInfo:
    """What a policy may know about its device when it is built."""

    index: int
    group: str
    num_samples: int
    label_distribution: np.ndarray  # fraction of the device's samples per class


class AvailabilityPolicy(ABC):
    """Common base; subclass RoundPolicy or SessionPolicy, not this."""

    time_base: ClassVar[str]
    Params: ClassVar[type[PolicyParams]] = PolicyParams

    def __init__(self, params: PolicyParams, device: DeviceInfo, rng: np.random.Generator):
        self.params = params
        self.device = device
        self.rng = rng


class RoundPolicy(AvailabilityPolicy):
    time_base = "round"

    @abstractmethod
    def participates(self, round_index: int) -> bool:
        """Whether the device is available in round ``round_index`` (asked once per round, in order)."""


class SessionPolicy(AvailabilityPolicy):
    time_base = "continuous"

    def initially_online(self) -> bool:
        return True

    def next_change(self, now: float, online: bool) -> float:
        """Absolute simulated time of the next toggle after ``now``; ``math.inf`` for never."""
        return math.inf
