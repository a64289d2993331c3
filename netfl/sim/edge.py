"""Edge servers: the middle tier of hierarchical aggregation (Liu, Zhang, Song & Letaief, Client-Edge-Cloud
Hierarchical Federated Learning, ICC 2020, HierFAVG).

A device belongs to the first edge node on its route to the server. Its
job's download comes from that edge and its upload ends there (the wired
hops between the device's access point and the edge are timed; those
between the edge and the cloud are not crossed). Every round each edge
aggregates its own devices' updates into its edge model (the learner does
it, in :meth:`~netfl.backend.TrainingBackend.aggregate`); every
``cloud_every`` rounds the edges that are up send their models to the cloud
over their wired route (``bits / rate + latency`` per hop, in parallel), the
cloud averages them (:meth:`~netfl.backend.TrainingBackend.aggregate_cloud`)
and sends the result back down the same routes; the round ends when every
edge has it.

An edge may go down, by an availability policy of its own (a per-round one
is asked at each round's start, a continuous-time one runs as a device's
does). Down at a round's start, its devices sit the round out (they cannot
reach it); down at a cloud aggregation, it neither sends nor receives, and
keeps its own model until it is up at a later one. An edge that goes down in
the middle of a round finishes that round. Edge servers are mains-powered
infrastructure: their links' times are simulated, their energy is not (a
device's download and upload energy is, as always).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import simpy

from netfl.policies.base import AvailabilityPolicy, RoundPolicy, SessionPolicy, policy_origin
from netfl.sim.device.availability import after_now


class EdgeServer:
    """One edge server: its name, its index in the tier (the learner's edge number) and whether it is up."""

    charging = False  # what a session policy may read of the node it decides for (DeviceState)
    mains = True
    battery_fraction = 1.0

    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        index: int,
        policy: AvailabilityPolicy | None,
        log: Callable[..., None],
    ):
        self.env, self.name, self.index, self.policy, self._log = env, name, index, policy, log
        self.online = True
        if isinstance(policy, SessionPolicy):
            env.process(self._sessions())

    def up(self, round_index: int) -> bool:
        """Whether the edge is up at the start of ``round_index`` (a per-round policy is asked now)."""
        if isinstance(self.policy, RoundPolicy):
            self._set(bool(self.policy.participates(round_index)))
        return self.online

    def _set(self, online: bool) -> None:
        if online != self.online:
            self.online = online
            self._log("edge_online" if online else "edge_offline", edge=self.name, cause="policy")

    def _sessions(self):
        policy: SessionPolicy = self.policy  # type: ignore[assignment]
        while True:
            self._set(bool(policy.online(self.env.now, self)))
            at = after_now(policy, self.env.now, policy.next_wakeup(self.env.now), f"the policy of edge {self.name}")
            if math.isinf(at):
                return
            yield self.env.timeout(at - self.env.now)

    def describe_process(self, name: str) -> str | None:
        return f"edge {self.name}'s availability policy {policy_origin(self.policy)}" if name == "_sessions" else None


class EdgeTier:
    """The edges of a world, the edge of each device, and when the cloud aggregates."""

    def __init__(self, edges: Sequence[EdgeServer], device_edges: Sequence[int], cloud_every: int, model_bytes: float):
        self.edges = list(edges)
        self.device_edges = np.asarray(device_edges, dtype=np.int64)  # each device's edge index
        self.cloud_every = cloud_every
        self.model_bytes = model_bytes  # an edge model on the wire (the learner's model and buffers)

    def reachable(self, devices: np.ndarray, round_index: int) -> np.ndarray:
        """Those of ``devices`` whose edge is up at the start of ``round_index``."""
        up = np.array([edge.up(round_index) for edge in self.edges], dtype=bool)
        return devices[up[self.device_edges[devices]]]

    def cloud_round(self, round_index: int) -> bool:
        """Whether the cloud aggregates at the end of ``round_index`` (after every ``cloud_every`` edge rounds)."""
        return (round_index + 1) % self.cloud_every == 0
