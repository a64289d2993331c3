"""The engine server's parameters, each declared once: ``server.round`` (:class:`RoundSpec`, read by
:class:`netfl.sim.sync_server.SyncServer`) and ``server.async`` (:class:`AsyncSpec`, read by
:class:`netfl.sim.async_server.AsyncServer` and its workers).

A field is the whole declaration: its YAML key, its unit (a :mod:`netfl.units` type: ``"2min"`` arrives as 120.0
seconds), its default, its bounds and its description. The scenario's schema takes these classes as the types of
``ServerSpec.round`` and ``ServerSpec.async_``; the docs' tables and the JSON schema are generated from them; the
engine reads the same frozen object the file was validated into, so nothing is copied or renamed on the way.
Here, below both the configuration and the engine (``tests/config/test_layers.py``), because both read them.
"""

from __future__ import annotations

import math

from pydantic import Field, field_validator

from netfl.distributions import CountDistribution, Distribution
from netfl.numbers import Strict
from netfl.units import Fraction, Seconds

__all__ = ["MAX_OVER_COMMIT", "AsyncSpec", "RoundSpec"]

#: Over-commitment at most (10000%: a round asks 101 times its participants).
MAX_OVER_COMMIT = 100.0


class RoundSpec(Strict):
    participants: int | None = Field(None, gt=0, description="clients asked per round; all available if omitted")
    deadline: Seconds = Field(float("inf"), gt=0, description="aggregate what arrived by then")
    idle_wait: Seconds = Field(10.0, gt=0, description="wait before retrying when nobody is available")
    interval: Seconds = Field(0.0, ge=0, description="minimum time from one round's start to the next (pace steering)")
    over_commit: Fraction = Field(
        0.0,
        ge=0,
        le=MAX_OVER_COMMIT,
        description="ask ceil((1 + over_commit) x participants) devices and close "
        "the round at the first participants updates; the "
        "stragglers are stopped (30% is production FL's 130%); at most 10000%",
    )
    partial_work: bool = Field(
        False,
        description="a device that would miss the deadline trains only the local steps it can finish in "
        "time and uploads them (FedNova's partial work)",
    )
    partial_margin: Fraction = Field(
        0.0,
        ge=0,
        description="partial work plans each upload to take this much longer than its estimate (100%: twice as "
        "long), for a shared uplink on which the devices that planned to the deadline all send at once",
    )
    cloud_every: int = Field(
        1,
        gt=0,
        description="with edge nodes: the cloud averages the edge models every this many rounds (HierFAVG's kappa2)",
    )

    @property
    def asked(self) -> int | None:
        """How many devices a round asks: ``participants``, over-committed by ``over_commit`` (None: all available).

        Rounded to 9 decimals before the ceiling, so that 10% of 10 asks 11, not ceil(11.000000000000002) = 12.
        """
        if self.participants is None or not self.over_commit:
            return self.participants
        return math.ceil(round((1 + self.over_commit) * self.participants, 9))

    @property
    def goal(self) -> int | None:
        """Over-commit: the round closes once this many updates reached the server (``participants``) and stops
        the rest; None without over-commit (a round waits for every asked device, or the deadline)."""
        return self.participants if self.over_commit else None


class AsyncSpec(Strict):
    """Anarchic / asynchronous arrivals: workers train whenever they are available."""

    buffer: int = Field(10, gt=0, description="m: the server aggregates whenever m updates have arrived")
    local_steps: CountDistribution | None = Field(
        None,
        description="K of each job, drawn per job: {uniform: [1, 10]} is U{1..10}; a lognormal is rounded "
        "(at least 1); task.local otherwise",
    )

    @field_validator("local_steps")
    @classmethod
    def _at_least_one_step(cls, d: Distribution | None):
        if d is not None and d.kind != "lognormal" and (d.kind == "normal" or d.support_min < 1):
            raise ValueError(
                f"every job needs at least one local step; {d.describe()} can draw less than 1 "
                "(use e.g. {uniform: [1, 10]})"
            )
        return d

    pause: Seconds = Field(0.0, ge=0, description="mean of an exponential pause before a worker pulls again")
