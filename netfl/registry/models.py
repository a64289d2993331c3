"""The models clients can train, by name: the one list the scenario checks ``model.name`` against, and their
sizes and costs computed without torch.

:func:`netfl.learn.models.builtin.build_model` builds them (with torch) and documents each; :func:`model_cost` gives
the same parameter count and forward FLOPs as the built model (a test pins that), so that a scenario asking
for a model too large to hold, or too costly to train, is refused before anything is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "IMAGE_MODELS",
    "MODEL_NAMES",
    "TEXT_MODELS",
    "ModelCost",
    "TextModel",
    "default_hidden",
    "input_problem",
    "model_cost",
]


@dataclass(frozen=True)
class TextModel:
    """A built-in model of token ids (LEAF's reference models): its LSTM widths by default (``model.hidden``)."""

    hidden: tuple[int, ...]
    summary: str


#: LEAF's reference models of its text tasks (TalwalkarLab/leaf, models/<task>/stacked_lstm.py, with the sizes of
#: models/baseline_constants.py), read as netfl's built-in models.
TEXT_MODELS: dict[str, TextModel] = {
    "shakespeare_lstm": TextModel(
        (256, 256),
        "LEAF's Shakespeare model: embedding 8, two LSTM layers of 256, a linear layer to the characters, on the "
        "last position (every position with targets: every_token)",
    ),
    "sent140_lstm": TextModel(
        (100, 100),
        "LEAF's Sent140 model: embedding 100 (one row per vocabulary word and one for an unknown word), two "
        "LSTM layers of 100, then dense layers of 128 and 2 (no activation between, as LEAF's) on the last "
        "position",
    ),
}
MODEL_NAMES: tuple[str, ...] = ("logistic", "mlp", "lenet5", "cnn", "mlp_softmax", *TEXT_MODELS)
#: The built-in models that take images (C, H, W); ``TEXT_MODELS`` take token ids (T,); the others flatten
#: samples of any shape.
IMAGE_MODELS: tuple[str, ...] = ("lenet5", "cnn")


def default_hidden(name: str) -> tuple[int, ...]:
    """``model.hidden`` when a topology gives none: the mlp's 200, or a text model's LSTM widths."""
    return TEXT_MODELS[name].hidden if name in TEXT_MODELS else (200,)


def input_problem(name: str, input_shape: Sequence[int]) -> str | None:
    """Why built-in model ``name`` cannot take samples of ``input_shape`` (one sample's shape), or None."""
    if name in IMAGE_MODELS and len(input_shape) != 3:
        return f"{name} takes images (C, H, W); these samples have shape {tuple(input_shape)}"
    if name in TEXT_MODELS and len(input_shape) != 1:
        return (
            f"{name} takes sequences of token ids (T,), as dataset shakespeare and sent140 give them; these "
            f"samples have shape {tuple(input_shape)}"
        )
    return None


@dataclass(frozen=True)
class ModelCost:
    parameters: int
    forward_flops: int  # per sample, counted as netfl.learn.models.builtin.forward_flops_per_sample counts them

    @property
    def bytes(self) -> int:
        """float32, as it is kept and sent."""
        return 4 * self.parameters


class _Counter:
    """Adds up parameters and FLOPs layer by layer, following the feature map's shape (C, H, W)."""

    def __init__(self, shape: tuple[int, int, int]):
        self.shape = shape
        self.parameters = 0
        self.flops = 0

    def conv(self, out_channels: int, kernel: int, padding: int) -> None:
        c, h, w = self.shape
        h, w = h + 2 * padding - kernel + 1, w + 2 * padding - kernel + 1
        if h < 1 or w < 1:
            raise ValueError("too small for its convolutions")
        self.parameters += out_channels * c * kernel * kernel + out_channels
        outputs = out_channels * h * w
        self.flops += 2 * c * kernel * kernel * outputs + outputs
        self.shape = (out_channels, h, w)

    def pool(self) -> None:
        c, h, w = self.shape
        if h < 2 or w < 2:
            raise ValueError("too small for its pooling")
        self.shape = (c, h // 2, w // 2)

    def linear(self, width: int) -> None:
        c, h, w = self.shape
        inputs = c * h * w
        self.parameters += inputs * width + width
        self.flops += 2 * inputs * width + width
        self.shape = (width, 1, 1)


def model_cost(name: str, input_shape: Sequence[int], num_classes: int, hidden: Sequence[int] = (200,)) -> ModelCost:
    """Parameters and forward FLOPs per sample of model ``name`` on inputs of shape (C, H, W).

    Raises ValueError when the model does not apply to such inputs (a convolutional model on inputs smaller
    than its kernels and pooling) or the name is unknown.
    """
    if name in TEXT_MODELS:  # its size depends on the vocabulary: measured on the module once the data is read
        problem = input_problem(name, input_shape) or f"{name} is measured once its data is read"
        raise ValueError(problem)
    c, h, w = (int(v) for v in input_shape)
    n = _Counter((c, h, w))
    if name == "logistic":
        n.linear(num_classes)
    elif name in ("mlp", "mlp_softmax"):
        for width in hidden:
            n.linear(int(width))
        n.linear(num_classes)
    elif name == "lenet5":
        n.conv(6, 5, padding=2)
        n.pool()
        n.conv(16, 5, padding=0 if min(h, w) // 2 >= 5 else 2)
        n.pool()
        for width in (120, 84, num_classes):
            n.linear(width)
    elif name == "cnn":
        for _ in range(2):
            n.conv(32, 3, padding=1)
            n.pool()
        n.linear(128)
        n.linear(num_classes)
    else:
        raise ValueError(f"unknown model {name!r} (accepted: {', '.join(MODEL_NAMES)})")
    return ModelCost(n.parameters, n.flops)
