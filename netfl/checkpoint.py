"""Checkpoint and resume: a long run survives a crash, a kill or a reboot, and resumes to the same bits.

A SimPy simulation cannot be pickled (its processes are live generators),
but it is deterministic given its seed and the learner's answers. So a
checkpoint holds the learner's state and the log of every answer the
learner gave the engine up to that point (round plans, applied counts,
evaluations: small). Resuming rebuilds the world from the scenario,
replays the engine against the logged answers -- no training, so it runs at
the engine's speed -- and, once the log is used up, restores the learner's
state and goes on for real. The resumed run's events and metrics are those
of a run that never stopped, bit for bit.

The checkpoint sits beside the results folder (``results/.<name>.checkpoint``),
is replaced atomically at every checkpoint -- and at a Ctrl-C or SIGTERM,
which stops the engine between two events (:meth:`Recording.save_now`), so a
resumed run goes on from the instant it stopped -- and removed when the run
completes. It is a pickle, like any torch checkpoint: resume only your own.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netfl.backend import Evaluation, RoundContext, RoundPlan, TrainingBackend, Work
from netfl.errors import NetflError

FORMAT = 1


@dataclass(frozen=True)
class Every:
    """Checkpoint after the aggregation that completes every ``rounds`` rounds, or the first one at or after
    every ``seconds`` of simulated time."""

    rounds: int | None = None
    seconds: float | None = None

    @classmethod
    def parse(cls, text: str) -> Every:
        """``50rounds`` (or ``"50 rounds"``) or a simulated duration (``30min``, ``2h``); a bare number is refused:
        it could mean either."""
        from netfl.units import bare_number, parse_quantity, parse_rounds

        text = str(text).strip()
        spellings = "a number of rounds with the word, 50rounds, or a simulated duration, 30min or 2h"
        number = bare_number(text)
        if number is not None:
            raise NetflError(
                f"--checkpoint-every {text}: a number without a unit could mean rounds or seconds; write "
                f"{number:g}rounds or {number:g}s ({spellings})"
            )
        rounds = parse_rounds(text)
        if rounds is not None and rounds > 0:
            return cls(rounds=rounds)
        try:
            seconds = parse_quantity(text, "time") if rounds is None else math.nan
        except (ValueError, TypeError):
            seconds = math.nan
        if not (seconds > 0 and math.isfinite(seconds)):
            raise NetflError(f"--checkpoint-every {text}: give {spellings}")
        return cls(seconds=float(seconds))

    def describe(self) -> str:
        return f"{self.rounds} rounds" if self.rounds else f"{self.seconds:g} simulated s"


def checkpoint_path(out_dir: Path) -> Path:
    """Where the run that writes ``out_dir`` keeps its checkpoint."""
    out_dir = Path(out_dir)
    return out_dir.parent / f".{out_dir.name}.checkpoint"


@dataclass
class Checkpoint:
    """What a resumed run needs: the scenario as a topology mapping and where it was read from, the run's
    options, the engine's answer log and the learner's state after the last logged answer."""

    scenario: dict[str, Any]
    source: str | None
    options: dict[str, Any]
    every: Every
    log: list[tuple[str, Any]]
    state: dict[str, Any]
    rounds: int
    sim_time_s: float  # of the last periodic checkpoint (the schedule goes on from it)
    versions: dict[str, str] = field(default_factory=dict)
    stopped_at_s: float | None = None  # a checkpoint written at an interrupt: the simulated time it stopped at

    def describe(self) -> str:
        at = self.sim_time_s if self.stopped_at_s is None else self.stopped_at_s
        return f"round {self.rounds} ({at:.0f} simulated s{', where it was interrupted' if self.stopped_at_s else ''})"

    def save(self, path: Path) -> None:
        """Replace ``path`` atomically: a kill while saving leaves the previous checkpoint whole."""
        import torch  # here, not at import: the command line parses --checkpoint-every before loading torch

        staging = path.with_name(f"{path.name}.partial-{os.getpid()}")
        try:
            torch.save({"format": FORMAT, **self.__dict__, "every": self.every.__dict__}, staging)
            os.replace(staging, path)
        except OSError as exc:
            staging.unlink(missing_ok=True)
            raise NetflError(f"{path}: cannot write the checkpoint: {exc}") from None

    @classmethod
    def load(cls, path: Path) -> Checkpoint:
        import torch

        try:
            data = torch.load(path, weights_only=False)  # our own pickle: see the module docstring
        except FileNotFoundError:
            raise NetflError(f"{path}: no checkpoint (run with --checkpoint-every to make one)") from None
        except Exception as exc:  # noqa: BLE001 -- a truncated or foreign file, however torch words it
            raise NetflError(f"{path}: not a netfl checkpoint ({type(exc).__name__}: {exc})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise NetflError(f"{path}: not a netfl checkpoint of format {FORMAT}")
        data.pop("format")
        data["every"] = Every(**data["every"])
        return cls(**data)


#: Saves a checkpoint: (answer log, aggregations done, simulated time of the periodic checkpoint, the simulated time
#: of an interrupt or None).
Save = Callable[[list, int, float, "float | None"], None]


class Recording:
    """The learner as the engine sees it, each answer logged; ``due(context)`` after each aggregation decides
    whether to checkpoint, ``save(log, rounds, sim_time, stopped_at)`` does it."""

    def __init__(
        self,
        learner: TrainingBackend,
        every: Every | None,
        save: Save,
        log: list[tuple[str, Any]] | None = None,
        done: tuple[int, float] = (0, 0.0),
    ):
        self.learner, self.every, self._save = learner, every, save
        self.log: list[tuple[str, Any]] = log if log is not None else []
        self._rounds, self._last_time = done

    def _answer(self, name: str, value: Any) -> Any:
        self.log.append((name, value))
        return value

    def plan_round(self, round_index: int, available: Sequence[int]) -> RoundPlan:
        return self._answer("plan_round", self.learner.plan_round(round_index, available))

    def plan_after_probe(self, round_index: int, reported: Sequence[int]) -> RoundPlan:
        return self._answer("plan_after_probe", self.learner.plan_after_probe(round_index, reported))

    def submit(self, client: int, round_index: int, steps: int | None = None) -> Work:
        return self._answer("submit", self.learner.submit(client, round_index, steps))

    def cancel(self, job: int) -> None:
        return self._answer("cancel", self.learner.cancel(job))

    def aggregate(self, context: RoundContext) -> int:
        applied = self._answer("aggregate", self.learner.aggregate(context))
        self._rounds += 1
        if self._due(context.sim_time_s):
            self._last_time = context.sim_time_s
            self._save(self.log, self._rounds, context.sim_time_s, None)
        return applied

    def save_now(self, now: float) -> bool:
        """Checkpoint where the run stands, at simulated time ``now`` (an interrupt that stopped the engine between
        two events: every answer logged so far is in the learner's state); the periodic schedule goes on as it
        was. True: saved."""
        self._save(self.log, self._rounds, self._last_time, now)
        return True

    def evaluate(self) -> Evaluation:
        return self._answer("evaluate", self.learner.evaluate())

    def _due(self, now: float) -> bool:
        if self.every is None:
            return False
        if self.every.rounds:
            return self._rounds % self.every.rounds == 0
        return now - self._last_time >= self.every.seconds


class Replaying:
    """The engine's answers from a checkpoint's log, then (``then()`` restores the learner) the live learner:
    the engine, deterministic, walks the same path to the checkpoint without training anything."""

    def __init__(self, log: list[tuple[str, Any]], live: Recording, then: Callable[[], None]):
        self._log, self._next, self.live, self._then = log, 0, live, then
        if not log:
            then()

    @property
    def replaying(self) -> bool:
        return self._next < len(self._log)

    def save_now(self, now: float) -> bool:
        """As :meth:`Recording.save_now` once the log is used up; while replaying, the learner is not restored yet
        and the checkpoint resumed from still holds: nothing is saved (False)."""
        return False if self.replaying else self.live.save_now(now)

    def _replay(self, name: str) -> Any:
        logged, value = self._log[self._next]
        if logged != name:
            raise NetflError(
                f"the checkpoint does not match this run: at answer {self._next} the engine asked "
                f"{name}, the checkpoint holds {logged} (was the scenario or netfl changed?)"
            )
        self._next += 1
        self.live.log.append((name, value))  # the resumed run's own log starts as the checkpoint's
        if not self.replaying:
            self._then()
        return value

    def plan_round(self, round_index: int, available: Sequence[int]) -> RoundPlan:
        return self._replay("plan_round") if self.replaying else self.live.plan_round(round_index, available)

    def plan_after_probe(self, round_index: int, reported: Sequence[int]) -> RoundPlan:
        return self._replay("plan_after_probe") if self.replaying else self.live.plan_after_probe(round_index, reported)

    def submit(self, client: int, round_index: int, steps: int | None = None) -> Work:
        return self._replay("submit") if self.replaying else self.live.submit(client, round_index, steps)

    def cancel(self, job: int) -> None:
        return self._replay("cancel") if self.replaying else self.live.cancel(job)

    def aggregate(self, context: RoundContext) -> int:
        return self._replay("aggregate") if self.replaying else self.live.aggregate(context)

    def evaluate(self) -> Evaluation:
        return self._replay("evaluate") if self.replaying else self.live.evaluate()
