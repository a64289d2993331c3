"""A loss explosion: training that blew up without a NaN, caught where the engine receives evaluations.

A learning rate far too large can drive the test loss from 2.3 to 264, or 4e5, while every number stays
finite: the learner's NaN and inf checks never fire, and the run would end "complete" with a model at chance.
:class:`LossWatch` stands between the engine and the learner (a :class:`~netfl.backend.BackendWrapper`: it
passes every call on) and looks at each evaluation. The rule, for each model trained:

* the test loss is at least :data:`EXPLOSION_FACTOR` times the initial one (the evaluation before round 1),
* and the test accuracy is at chance: at most ``1/C +`` :data:`CHANCE_MARGIN` for ``C`` classes.

A model that learns does not meet both, and one that meets both has not merely stalled: its loss grew by an
order of magnitude while it predicts no better than a guess. The first evaluation that meets the rule is
warned about as the run goes on and recorded (summary.json's ``loss_explosion``); with
``server.on_loss_explosion: stop`` the run stops there as on a NaN (``stopped_by: diverged``). Watching
changes no answer, so a run without an explosion gives the same bytes as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from netfl.backend import BackendWrapper, Diverged, Divergence, Evaluation, RoundContext, TrainingBackend

EXPLOSION_FACTOR = 10.0
CHANCE_MARGIN = 0.05


@dataclass(frozen=True)
class LossExplosion:
    """The first evaluation that met the rule: after ``rounds`` rounds, at ``sim_time_s``; ``task`` is the model's
    index when several train (None with one)."""

    rounds: int
    sim_time_s: float
    task: int | None
    test_loss: float
    initial_test_loss: float
    test_accuracy: float
    classes: int

    def describe(self) -> str:
        model = f"model {self.task}'s " if self.task is not None else ""
        return (
            f"after round {self.rounds} ({self.sim_time_s:g} simulated s), {model}test loss {self.test_loss:.3g} is "
            f"{self.test_loss / self.initial_test_loss:.3g}x the initial {self.initial_test_loss:.3g}, with test "
            f"accuracy {100 * self.test_accuracy:.1f}% at chance ({self.classes} classes): training has exploded"
        )

    def record(self) -> dict[str, Any]:
        """summary.json's ``loss_explosion``."""
        return {
            "round": self.rounds,
            "sim_time_s": self.sim_time_s,
            "task": self.task,
            "test_loss": self.test_loss,
            "initial_test_loss": self.initial_test_loss,
            "test_accuracy": self.test_accuracy,
            "chance": 1 / self.classes,
        }


def exploded(evaluation: Evaluation, initial: Evaluation) -> int | None:
    """Which model's loss exploded in ``evaluation`` against the ``initial`` one (0 for a run of one model), or
    None."""
    pairs = list(zip(evaluation.tasks, initial.tasks)) if evaluation.tasks else [(evaluation, initial)]
    for s, (now, first) in enumerate(pairs):
        classes = len(now.per_class_accuracy)
        if (
            classes
            and first.loss > 0
            and math.isfinite(now.loss)
            and now.loss >= EXPLOSION_FACTOR * first.loss
            and now.accuracy <= 1 / classes + CHANCE_MARGIN
        ):
            return s
    return None


class LossWatch(BackendWrapper):
    """``backend`` as the engine sees it, each evaluation checked; ``warn(message)`` at the first explosion,
    which stops the run (:class:`~netfl.backend.Diverged`) when ``stop``. ``clock`` gives the simulated time
    (the simulation's, once it exists)."""

    def __init__(self, backend: TrainingBackend, *, stop: bool, warn: Callable[[str], None] | None = None):
        super().__init__(backend)
        self.stop, self.warn = stop, warn
        self.clock: Callable[[], float] = lambda: math.nan
        self.explosion: LossExplosion | None = None
        self._initial: Evaluation | None = None
        self._rounds = 0

    def aggregate(self, context: RoundContext) -> int:
        applied = super().aggregate(context)
        self._rounds += 1
        return applied

    def evaluate(self) -> Evaluation:
        evaluation = super().evaluate()
        if self._initial is None:
            self._initial = evaluation
        elif self.explosion is None:
            task = exploded(evaluation, self._initial)
            if task is not None:
                self._found(evaluation, task)
        return evaluation

    def _found(self, evaluation: Evaluation, task: int) -> None:
        if evaluation.tasks:
            now, first, which = evaluation.tasks[task], self._initial.tasks[task], task
        else:
            now, first, which = evaluation, self._initial, None
        self.explosion = LossExplosion(
            self._rounds, self.clock(), which, now.loss, first.loss, now.accuracy, len(now.per_class_accuracy)
        )
        if self.warn is not None:
            then = "the run stops here" if self.stop else "server.on_loss_explosion: stop would stop the run here"
            self.warn(f"warning: {self.explosion.describe()}; lower task.local.lr ({then})")
        if self.stop:
            raise Diverged(Divergence("loss_explosion", self._rounds - 1 if self._rounds else None, ()))
