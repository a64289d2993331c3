"""The Random Access Model (RAM) relay of Fed-CVaR-Avg (Federated Learning Under Restricted User Availability).

Users send their updates to a relay, which passes only one user's update per
round to the server; which one is chosen with probabilities rho that the
server does not know. The server only aggregates (broadcasts) what it
receives. Two forms:

* ``abstract``: the RAM draws user i with probability rho_i. ``draw="all"``
  is the paper's rule, a stationary erasure channel: i is drawn among all
  users behind the relay, whatever arrived, and if i's update did not
  arrive this round nothing passes (an erasure). ``draw="arrived"`` draws
  among the users whose update reached the relay, rho renormalised over
  them, so something passes whenever anything arrived. When every user's
  update arrives (in user order), the two draw the same user from the same
  seed. rho is explicit, uniform, or proportional to each user's mean
  channel SNR ("channel_quality").
* ``first``: pass the first complete update that reached the relay (the
  physical form: with a contended medium in front of the relay, who gets
  through first is decided by collisions, backoff and channels).

Every other update is dropped at the relay (``relay_drop``; in an erasure,
its ``picked`` column names the user drawn). A round in which no user behind
the relay had work (nobody was available) is an erasure too under
``draw="all"``: whoever the RAM drew, nothing could pass (the draw itself is
not made, as its outcome cannot matter, so the relay's stream is the same).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from netfl.registry.choices import RamDraw, values


class RamRelay:
    def __init__(
        self,
        name: str,
        mode: str,
        weights: dict[int, float],
        rng: np.random.Generator,
        log: Callable[..., None],
        draw: str = "all",
    ):
        if draw not in values(RamDraw):
            raise ValueError(f"RAM draw {draw!r}: expected 'all' (the paper's erasure rule) or 'arrived'")
        self.name = name
        self.mode = mode
        self.draw = draw
        self.weights = weights  # device -> rho (over the devices behind this relay, in device order)
        self.rng = rng
        self.log = log
        self._held: list[tuple[int, int, float]] = []  # (job, device, bytes) in arrival order
        self.passed = 0
        self.dropped = 0
        self.erasures = 0  # rounds whose drawn user's update had not arrived (draw="all")

    def hold(self, job: int, device: int, size_bytes: float) -> None:
        self._held.append((job, device, size_bytes))
        self.log(device, "relay_arrive", job=job, bytes=size_bytes, relay=self.name)

    def idle_round(self) -> None:
        """A round in which nobody had work: under the paper's rule (``draw="all"``) an erasure, whoever the RAM
        drew (the draw is not made: its outcome cannot matter)."""
        if self._erases():
            self.erasures += 1

    def _erases(self) -> bool:
        """Whether a round without the drawn user's update is an erasure (the abstract RAM drawing among all)."""
        return self.mode != "first" and self.draw == "all" and bool(self.weights)

    def release(self) -> int | None:
        """End of the round: the one job passed to the server (None if nothing passes)."""
        held, self._held = self._held, []
        erased = None
        if self.mode == "first":
            pick = 0 if held else None
        elif self._erases():
            users = list(self.weights)
            w = np.array([self.weights[d] for d in users], dtype=float)
            chosen = users[int(self.rng.choice(len(users), p=w / w.sum()))]
            pick = next((i for i, (_, d, _) in enumerate(held) if d == chosen), None)
            if pick is None:
                self.erasures += 1
                erased = chosen
        elif not held:
            return None
        else:
            w = np.array([self.weights[d] for _, d, _ in held], dtype=float)
            # rho_i = 0 means never relayed: if only such users got through, nothing passes this round
            pick = int(self.rng.choice(len(held), p=w / w.sum())) if w.sum() > 0 else None
        for i, (job, device, size_bytes) in enumerate(held):
            if i == pick:
                self.passed += 1
                self.log(device, "relay_pass", job=job, bytes=size_bytes, relay=self.name)
            else:
                self.dropped += 1
                self.log(device, "relay_drop", job=job, bytes=size_bytes, relay=self.name, picked=erased)
        return None if pick is None else held[pick][0]
