"""A task's local training, declared once: ``task.local`` (:class:`LocalSpec`), read by the learner's jobs
(:class:`netfl.learn.federation.task_model.TaskModel` and :mod:`netfl.learn.federation.jobs`).

A field is the whole declaration: YAML key, type, default, bounds, description. The scenario's schema takes the class
as the type of ``TaskSpec.local``, the docs' table and the JSON schema are generated from it, and the learner reads
the same frozen object, so nothing is copied or renamed on the way. Here, below both the configuration and the
learner (``tests/config/test_layers.py``), because both read it.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from netfl.numbers import Float32, Strict
from netfl.registry.choices import LrSchedule

__all__ = ["LocalSpec"]


class LocalSpec(Strict):
    """Local training: ``steps`` minibatch SGD steps, or ``epochs`` passes over the client's data."""

    steps: int | None = Field(None, gt=0, description="minibatch SGD steps of each local training; steps or epochs")
    epochs: float | None = Field(
        None, gt=0, description="passes over the device's own samples instead of steps (0.5: half of them)"
    )
    batch_size: int = Field(16, gt=0, description="samples per minibatch")
    lr: Float32 = Field(0.05, gt=0, description="the client's learning rate (its SGD step size)")
    weight_decay: Float32 = Field(0.0, ge=0, description="L2 weight decay of the client's SGD steps")
    lr_schedule: LrSchedule = Field(
        "constant", description="client lr per round t: constant, or lr / (t + 1) (MIFA's reference)"
    )

    @model_validator(mode="after")
    def _steps_or_epochs(self):
        if (self.steps is None) == (self.epochs is None):
            raise ValueError("give exactly one of steps or epochs")
        return self
