"""Built-in availability policies (the availability issue extends this family)."""

from __future__ import annotations

from pydantic import Field

from netfl.policies.base import PolicyParams, RoundPolicy, SessionPolicy


class Always(SessionPolicy):
    """Always online: a mains-powered, always-connected device (battery permitting)."""

    def online(self, now, state) -> bool:
        return True


class Bernoulli(RoundPolicy):
    """Available in each round independently with probability ``p`` (FedAU/MIFA's Bernoulli pattern)."""

    class Params(PolicyParams):
        p: float = Field(gt=0, le=1, description="per-round participation probability")

    def participates(self, round_index: int) -> bool:
        return bool(self.rng.random() < self.params.p)


BUILTIN_POLICIES = {"always": Always, "bernoulli": Bernoulli}
