"""The models clients can train, by name: the one list the scenario checks ``model.name`` against.

:func:`netfl.learn.models.build_model` builds them (with torch) and documents each.
"""

from __future__ import annotations

__all__ = ["MODEL_NAMES"]

MODEL_NAMES: tuple[str, ...] = ("logistic", "mlp", "lenet5", "cnn", "mlp_softmax")
