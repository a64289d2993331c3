"""The server's schedule, in one of two forms that share what this module holds: synchronous rounds
(:class:`~netfl.sim.sync_server.SyncServer`, netfl/sim/sync_server.py) or anarchic asynchronous arrivals
(:class:`~netfl.sim.async_server.AsyncServer`, netfl/sim/async_server.py). Both count rounds and updates, log
as the server, stop at stop.sim_time and aggregate through the backend alike (:class:`ServerBase`).

Each server reads its parameters from their declaration, the object a
scenario's ``server.round`` or ``server.async`` was validated into
(:mod:`netfl.registry.server_params`): a new one is a field there and its
use in the server's module.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import simpy

from netfl.backend import RoundContext, TrainingBackend
from netfl.registry.server_params import AsyncSpec, RoundSpec
from netfl.sim.fleet import Fleet
from netfl.sim.network import Network
from netfl.sim.recorder import SERVER, EventRecorder


class ServerBase:
    """What both servers share: the parts they schedule, their counts, and aggregating through the backend."""

    def __init__(
        self,
        env: simpy.Environment,
        devices: Fleet,
        backend: TrainingBackend,
        recorder: EventRecorder,
        network: Network,
        params: RoundSpec | AsyncSpec,
        *,
        max_rounds: int | None,
        on_round_end: Callable[[int], None],
        stop_s: float | None = None,
    ):
        self.env = env
        self.devices = devices
        self.backend = backend
        self.recorder = recorder
        self.network = network
        self.params = params
        self.max_rounds = max_rounds
        self.stop_s = math.inf if stop_s is None else stop_s  # the run ends here (stop.sim_time)
        self.on_round_end = on_round_end
        self.round_index = 0  # the round in progress (or next to start); = the global model version
        self.rounds_done = 0
        self.updates_received = 0
        self.updates_applied = 0
        self.updates_dropped = 0
        self.staleness: list[int] = []  # one entry per applied update

    @property
    def unaggregated(self) -> tuple[int, int]:
        """(received, lost) since the last aggregation: updates that reached the server (or were lost on the way)
        that no aggregation took before the run stopped -- an asynchronous buffer not yet full. The run's totals
        count them (received, never applied); a synchronous round aggregates what it has, so none here."""
        return 0, 0

    def log(self, kind: str, detail: str = "", **fields) -> None:
        self.recorder.log(self.env.now, self.round_index, SERVER, kind, detail, **fields)

    def stopping(self) -> bool:
        """Whether the run ends at this instant (stop.sim_time): work started now would never finish, so none is
        (work finishing now still counts)."""
        return self.env.now >= self.stop_s

    def describe_process(self, name: str) -> str | None:
        """Which of the server's processes ``name`` is, for the watchdog's message (netfl/sim/watchdog.py)."""
        return {
            "run": "the server's rounds (taking no simulated time)",
            "_worker": "an asynchronous worker",
            "_carry": "an update in flight",
        }.get(name)

    def _aggregate(self, available, selected, delivered: list[int], dropped: int, versions: dict[int, int]) -> None:
        context = RoundContext(
            round_index=self.round_index,
            sim_time_s=self.env.now,
            available=available,
            selected=tuple(selected),
            delivered=tuple(delivered),
        )
        applied = self.backend.aggregate(context)
        stale = [self.round_index - versions[job] for job in delivered]
        self.staleness += stale
        self.updates_received += len(delivered)
        self.updates_applied += applied
        self.updates_dropped += dropped
        detail = "staleness=" + ",".join(map(str, stale)) if stale and max(stale) > 0 else ""
        self.log(
            "aggregate",
            detail,
            staleness=max(stale) if stale else None,
            received=len(delivered),
            applied=applied,
            dropped=dropped,
        )


def settle(event: simpy.Event, value: bool) -> None:
    """Succeed ``event`` with ``value`` unless it already has (an upload and a loss may both report a job)."""
    if not event.triggered:
        event.succeed(value)
