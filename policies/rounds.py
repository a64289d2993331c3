"""Per-round participation patterns, as FedAU's reference code defines them.

Source: IBM/fedau, ``util/util.py: WorkerSampler`` (Wang & Ji, FedAU). Each
pattern has long-run participation probability ``p`` (resolved per device
from a :data:`~netfl.policies.participation.ProbabilitySource`) but a
different correlation over rounds, which is what separates the aggregation
rules: FedAU's adaptive weights must recover ``1/p`` from the intervals
between participations whatever the pattern.

These classes declare each pattern's parameters and meaning; its behaviour
is implemented once, by its population model
(:mod:`netfl.policies.population`), of which a device's policy is one row
(:mod:`netfl.policies.rows`). The server asks ``participates(t)`` once per
round in order, starting at round 0.
"""

from __future__ import annotations

from pydantic import Field

from netfl.policies.base import PolicyParams
from netfl.policies.participation import ProbabilitySource
from netfl.policies.population import BernoulliModel, CyclicModel, MarkovModel
from netfl.policies.rows import RoundRow
from netfl.units import Rounds

__all__ = ["Bernoulli", "Markov", "Cyclic"]


class Bernoulli(RoundRow):
    """Independent each round with probability ``p`` (FedAU's and MIFA's Bernoulli pattern)."""

    population = BernoulliModel

    class Params(PolicyParams):
        p: ProbabilitySource = Field(description="participation probability: a number or a per-device rule")


class Markov(RoundRow):
    """A two-state Markov chain per device with stationary probability ``p`` (FedAU's "markov-0.05").

    ``P(off->on) = transition`` and ``P(on->off) = transition * (1/p - 1)``;
    when the latter exceeds 1 both are divided by it (small ``p``), which
    keeps the ratio and so the stationary probability. The initial state is
    Bernoulli(p) and one transition is applied before each round is read,
    as in the reference code.
    """

    population = MarkovModel

    class Params(PolicyParams):
        p: ProbabilitySource = Field(description="stationary participation probability")
        transition: float = Field(0.05, gt=0, le=1, description="P(off -> on) per round before rescaling")


class Cyclic(RoundRow):
    """Deterministic on/off cycles of ``period`` rounds (FedAU's "cyclic-100").

    ``on = max(1, round(period * p))`` rounds on, ``off = max(1, period - on)``
    rounds off (so ``p = 1`` still gives one off round per cycle, as in the
    reference). A device starts in its off phase with ``r`` uniform in
    ``{0, ..., off - 1}`` off rounds left -- the reference's
    ``rounds_to_switch = randint(off)`` -- so its first round on is round
    ``r``: round ``t`` is on iff ``(offset + t) mod (on + off) >= off`` with
    ``offset = off - r``.
    """

    population = CyclicModel

    class Params(PolicyParams):
        p: ProbabilitySource = Field(description="fraction of each cycle spent on")
        period: Rounds = Field("100 rounds", validate_default=True, description="nominal cycle length, in rounds")
