"""The availability-policy protocol, shared by built-ins and user scripts.

A policy decides when one device can take part. There is one policy object
per device, built with the policy's validated parameters (``self.params``),
a :class:`DeviceInfo` (``self.device``) and a random generator seeded from
the scenario seed (``self.rng``). Use only that generator (or
``self.device.shared_rng(name)`` for a draw every device must share), so the
same seed gives the same run.

Two time bases, because the literature uses both:

* :class:`RoundPolicy` -- a participation indicator per server round, as in
  the FedAU and MIFA papers (``1{device n participates in round t}``). The
  server asks ``participates(t)`` once per round, in round order.
* :class:`SessionPolicy` -- continuous time: the device is online over
  intervals of simulated seconds. The engine asks ``online(now, state)``
  at start, at every ``next_wakeup(now)`` the policy names, and whenever the
  device's state changes (charger plugged or unplugged, battery crossing its
  threshold, one of the policy's own ``battery_marks()``, full or empty).
  ``state`` is a :class:`DeviceState`. A device that goes offline mid-task
  loses that task's work.

What a policy depends on it declares through the protocol, never through
attributes the engine would have to guess: ``participation_probability()``
(its p, for algorithms that divide by it) and ``battery_marks()`` (the
battery fractions at which its answer may change).

Parameters are declared as a pydantic model named ``Params`` (unknown keys
are rejected with the YAML path of the offending key)::

    from netfl.policies import PolicyParams, SessionPolicy

    class ChargingAndFull(SessionPolicy):
        \"\"\"Online while plugged in with the battery above a level.\"\"\"

        class Params(PolicyParams):
            level: float = 0.3

        def online(self, now, state):
            return state.charging and state.battery_fraction > self.params.level

        def next_wakeup(self, now):
            return math.inf  # nothing changes by itself: only device changes matter

A topology names a built-in (``policy: markov``) or a user's class
(``policy: path/to/file.py:ClassName``, relative to the YAML file); the
other keys of the ``availability`` mapping are its parameters.
"""

from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

import numpy as np
from pydantic import ConfigDict

from netfl.numbers import NoBooleanNumbers
from netfl.rng import RandomStreams


class PolicyParams(NoBooleanNumbers):
    """Base of every policy's ``Params``: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class DeviceInfo:
    """What a policy may know about its device when it is built."""

    index: int
    group: str
    num_samples: int
    label_distribution: np.ndarray  # fraction of the device's samples per class
    seed: int = 0  # the scenario seed
    base_dir: Path = field(default_factory=Path.cwd)  # folder of the topology file: relative paths start here

    @property
    def num_classes(self) -> int:
        return len(self.label_distribution)

    def shared_rng(self, name: str) -> np.random.Generator:
        """A generator that gives every device the same draws (e.g. one scenario-wide Dirichlet sample)."""
        return shared_rng(self.seed, name)

    def resolve(self, path: str | Path) -> Path:
        path = Path(path)
        return path if path.is_absolute() else self.base_dir / path


def shared_rng(seed: int, name: str) -> np.random.Generator:
    """The generator named ``name`` that every device of a scenario with ``seed`` shares."""
    return RandomStreams(seed).numpy("policy-shared", name)


class DeviceState(Protocol):
    """What a session policy may read about its device while the simulation runs."""

    @property
    def charging(self) -> bool: ...

    @property
    def mains(self) -> bool: ...

    @property
    def battery_fraction(self) -> float: ...  # 1.0 on mains power


class AvailabilityPolicy(ABC):
    """Common base; subclass RoundPolicy or SessionPolicy, not this."""

    time_base: ClassVar[str]
    Params: ClassVar[type[PolicyParams]] = PolicyParams

    def __init__(self, params: PolicyParams, device: DeviceInfo, rng: np.random.Generator):
        self.params = params
        self.device = device
        self.rng = rng

    def participation_probability(self) -> float | None:
        """The probability that the device is available, where the policy defines one; algorithms that divide
        by it (``fedavg_known``, ``umifa``...) ask here. The default reads ``self.p`` if the policy set one."""
        p = getattr(self, "p", None)
        return None if p is None else float(p)

    def battery_marks(self) -> tuple[float, ...]:
        """Battery fractions (0 to 1) at which the answer may change: the engine asks again when the level
        crosses one, as it does at empty, full and ``min_level``. A policy reading
        ``state.battery_fraction`` names its thresholds here."""
        return ()

    @classmethod
    def check(cls, params: PolicyParams, base_dir: Path) -> list[tuple[str, str]]:
        """Problems that valid parameters can still have once the topology's folder is known (a missing
        trace file), as (sub-path, message) pairs, so ``netfl validate`` finds them before a run starts."""
        return []

    @classmethod
    def check_devices(cls, params: PolicyParams, base_dir: Path, devices: range) -> list[tuple[str, str]]:
        """Problems that depend on the devices the policy is given (the scenario's indices ``devices``: a trace
        that lists too few of them), as :meth:`check`'s; asked once the parameters and files are sound."""
        return []


class RoundPolicy(AvailabilityPolicy):
    time_base = "round"

    @abstractmethod
    def participates(self, round_index: int) -> bool:
        """Whether the device is available in round ``round_index`` (asked once per round, in order)."""


class SessionPolicy(AvailabilityPolicy):
    time_base = "continuous"

    @abstractmethod
    def online(self, now: float, state: DeviceState) -> bool:
        """Whether the device is online at simulated time ``now`` (seconds)."""

    def next_wakeup(self, now: float) -> float:
        """Absolute time at which ``online`` may next change by itself; ``math.inf`` for never."""
        return math.inf


def policy_origin(policy: AvailabilityPolicy) -> str:
    """A policy's class and the file defining it, for messages about its answers: ``Creep (/home/me/pol.py)``."""
    name, path = getattr(policy, "_name", None), getattr(policy, "_path", None)  # a user's script, as loaded
    if name is not None and path is not None:
        return f"{name} ({path})"
    cls = type(policy)
    try:
        file = inspect.getsourcefile(cls)
    except TypeError:  # defined where no file is (an interactive session)
        file = None
    return f"{cls.__qualname__} ({file})" if file else cls.__qualname__
