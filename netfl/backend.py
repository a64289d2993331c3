"""The narrow interface between the engine and the learner.

The engine decides *when* things happen; the learner decides *what* the
models become. The engine only ever hands over job ids and client indices,
so batching many jobs together (lazy, vmapped training) is the learner's
business alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence


@dataclass(frozen=True)
class RoundContext:
    """What the server knew when it aggregated a round."""

    round_index: int
    sim_time_s: float
    available: tuple[int, ...]  # clients eligible at the round's start
    selected: tuple[int, ...]  # clients asked to train
    delivered: tuple[int, ...]  # job ids whose update reached the server in time


@dataclass(frozen=True)
class Evaluation:
    accuracy: float
    loss: float
    per_class_accuracy: tuple[float, ...] = ()


class TrainingBackend(Protocol):
    @property
    def model_bytes(self) -> int:
        """Size of the model (and of an update) on the wire."""

    def job_flops(self, client: int, steps: int | None = None) -> float:
        """Floating-point operations of one local-training job of ``client`` (``steps`` local steps, or the task's)."""

    def submit(self, client: int, round_index: int, steps: int | None = None) -> int:
        """A job: ``client`` trains from the current global model. Returns its id; may be computed lazily."""

    def cancel(self, job: int) -> None:
        """The job's update never reached the server (dropout, deadline)."""

    def aggregate(self, context: RoundContext) -> int:
        """Combine the delivered jobs' updates into the next global model; return how many were applied."""

    def evaluate(self) -> Evaluation:
        """Test the current global model."""
