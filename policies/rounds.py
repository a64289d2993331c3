"""Per-round participation patterns, as FedAU's reference code defines them.

Source: IBM/fedau, ``util/util.py: WorkerSampler`` (Wang & Ji, FedAU). Each
pattern has long-run participation probability ``p`` (resolved per device
from a :data:`~netfl.policies.participation.ProbabilitySource`, kept as
``self.p``) but a different correlation over rounds, which is what separates
the aggregation rules: FedAU's adaptive weights must recover ``1/p`` from
the intervals between participations whatever the pattern.

The server asks ``participates(t)`` once per round in order, starting at
round 0; the draws of a device come from its own generator only.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from netfl.policies.base import DeviceInfo, PolicyParams, RoundPolicy
from netfl.policies.participation import ProbabilitySource, resolve_probability
from netfl.units import Rounds

__all__ = ["Bernoulli", "Markov", "Cyclic"]


class _WithProbability(RoundPolicy):
    def __init__(self, params: PolicyParams, device: DeviceInfo, rng: np.random.Generator):
        super().__init__(params, device, rng)
        self.p = resolve_probability(params.p, device)


class Bernoulli(_WithProbability):
    """Independent each round with probability ``p`` (FedAU's and MIFA's Bernoulli pattern)."""

    class Params(PolicyParams):
        p: ProbabilitySource = Field(description="participation probability: a number or a per-device rule")

    def participates(self, round_index: int) -> bool:
        return bool(self.rng.random() < self.p)


class Markov(_WithProbability):
    """A two-state Markov chain per device with stationary probability ``p`` (FedAU's "markov-0.05").

    ``P(off->on) = transition`` and ``P(on->off) = transition * (1/p - 1)``;
    when the latter exceeds 1 both are divided by it (small ``p``), which
    keeps the ratio and so the stationary probability. The initial state is
    Bernoulli(p) and one transition is applied before each round is read,
    as in the reference code.
    """

    class Params(PolicyParams):
        p: ProbabilitySource = Field(description="stationary participation probability")
        transition: float = Field(0.05, gt=0, le=1, description="P(off -> on) per round before rescaling")

    def __init__(self, params: PolicyParams, device: DeviceInfo, rng: np.random.Generator):
        super().__init__(params, device, rng)
        self.to_on = params.transition
        self.to_off = params.transition * (1.0 / self.p - 1.0)
        if self.to_off > 1:
            self.to_on /= self.to_off
            self.to_off = 1.0
        self.active = bool(self.rng.random() < self.p)

    def participates(self, round_index: int) -> bool:
        if self.active:
            self.active = not (self.rng.random() < self.to_off)
        else:
            self.active = bool(self.rng.random() < self.to_on)
        return self.active


class Cyclic(_WithProbability):
    """Deterministic on/off cycles of ``period`` rounds (FedAU's "cyclic-100").

    ``on = max(1, round(period * p))`` rounds on, ``off = max(1, period - on)``
    rounds off (so ``p = 1`` still gives one off round per cycle, as in the
    reference). A device starts in its off phase with ``r = rng.integers(off)``
    off rounds left -- the reference's ``rounds_to_switch = randint(off)`` --
    so its first round on is round ``r``: round ``t`` is on iff
    ``(offset + t) mod (on + off) >= off`` with ``offset = off - r``.
    """

    class Params(PolicyParams):
        p: ProbabilitySource = Field(description="fraction of each cycle spent on")
        period: Rounds = Field("100 rounds", validate_default=True, description="nominal cycle length, in rounds")

    def __init__(self, params: PolicyParams, device: DeviceInfo, rng: np.random.Generator):
        super().__init__(params, device, rng)
        self.on = max(1, int(np.round(params.period * self.p)))  # np.round: half to even, as the reference
        self.off = max(1, params.period - self.on)
        self.offset = self.off - int(self.rng.integers(self.off))

    def participates(self, round_index: int) -> bool:
        return (self.offset + round_index) % (self.on + self.off) >= self.off
