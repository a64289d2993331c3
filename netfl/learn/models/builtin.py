"""The models clients train, and their analytic cost.

The built-in image and feature models are plain ``nn.Sequential`` stacks (no buffers, no
batch norm), and LEAF's text models an embedding and an ``nn.LSTM``; a user's own module may be anything
(:mod:`netfl.learn.models.user`).
The simulator never times torch: a device's compute time is
``training FLOPs / device speed`` and upload time is ``model bytes / link
rate``, which is why FLOP and byte counts are computed here, on the module itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from netfl.learn.models.flops import forward_flops
from netfl.registry.models import MODEL_NAMES, TEXT_MODELS, input_problem

__all__ = [
    "MODEL_NAMES",
    "build_model",
    "forward_flops_per_sample",
    "training_flops_per_sample",
    "model_num_bytes",
]


def build_model(
    name: str,
    input_shape: Sequence[int],
    num_classes: int,
    *,
    hidden: Sequence[int] = (200,),
    tokens: int | None = None,
    per_token: bool = False,
) -> nn.Module:
    """Build model ``name`` for samples of shape ``input_shape`` and ``num_classes`` outputs.

    - ``"logistic"``: Flatten + Linear (multinomial logistic regression).
    - ``"mlp"``: Flatten, then Linear + ReLU per size in ``hidden``, then Linear.
    - ``"mlp_softmax"``: ``mlp`` followed by a Softmax, as in the Fed-CVaR-Avg
      reference code's toy model (PeriklisTheodoropoulos/risk-aware-FL). Its
      outputs are probabilities that the training loss (cross-entropy on
      logits) softmaxes a second time: the loss cannot fall below
      ``log(1 + (C - 1)/e)`` and its gradient never vanishes, so training on
      one class keeps pushing the others away. Kept to reproduce that
      paper's toy; use ``mlp`` otherwise.
    - ``"lenet5"``: LeNet-5 as used in FL papers: conv5×5-6 (pad 2), ReLU,
      maxpool 2, conv5×5-16, ReLU, maxpool 2, FC120, ReLU, FC84, ReLU, FC.
      On inputs too small for an unpadded second conv (e.g. 8×8 digits) the
      second conv gets padding 2 so the model still applies.
    - ``"cnn"``: the FedAU Fashion-MNIST CNN: conv3×3-32 (pad 1), ReLU,
      maxpool 2, conv3×3-32 (pad 1), ReLU, maxpool 2, FC128, ReLU, FC.

    - ``"shakespeare_lstm"``: LEAF's Shakespeare model: Embedding(``tokens``, 8),
      an LSTM of ``len(hidden)`` layers of ``hidden[0]`` (LEAF: two of 256),
      Linear to ``num_classes`` on the last position, or on every position
      when ``per_token`` (labels per token, ``targets: every_token``).
    - ``"sent140_lstm"``: LEAF's Sent140 model: Embedding(``tokens``,
      ``hidden[0]``), the same LSTM (LEAF: two of 100), then Linear 128 and
      Linear ``num_classes`` with no activation between, on the last position.

    ``logistic`` and the MLPs take samples of any shape (flattened); the
    convolutional ones need images (C, H, W), the text ones token ids (T,) below
    ``tokens`` (default ``num_classes``: characters that are their own classes).
    Flatten sizes come from a dry forward pass, so any image size works. Raises
    ValueError for an unknown name or a shape the model does not take.
    """
    if name in TEXT_MODELS:
        problem = input_problem(name, input_shape)
        if problem is not None:
            raise ValueError(problem)
        return TextLSTM(name, tokens or num_classes, num_classes, tuple(int(h) for h in hidden), per_token)
    features = math.prod(int(v) for v in input_shape)
    if name == "logistic":
        return nn.Sequential(nn.Flatten(), nn.Linear(features, num_classes))
    if name in ("mlp", "mlp_softmax"):
        layers: list[nn.Module] = [nn.Flatten()]
        width = features
        for size in hidden:
            layers += [nn.Linear(width, int(size)), nn.ReLU()]
            width = int(size)
        layers.append(nn.Linear(width, num_classes))
        if name == "mlp_softmax":
            layers.append(nn.Softmax(dim=1))
        return nn.Sequential(*layers)
    if name not in MODEL_NAMES:
        raise ValueError(f"unknown model {name!r} (accepted: {', '.join(MODEL_NAMES)})")
    problem = input_problem(name, input_shape)
    if problem is not None:
        raise ValueError(problem)
    c, h, w = (int(v) for v in input_shape)
    if name == "lenet5":
        pad2 = 0 if min(h, w) // 2 >= 5 else 2
        features = nn.Sequential(
            nn.Conv2d(c, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5, padding=pad2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
        )  # fmt: skip
        flat = _flat_size(features, (c, h, w))
        return nn.Sequential(
            *features,
            nn.Linear(flat, 120), nn.ReLU(),
            nn.Linear(120, 84), nn.ReLU(),
            nn.Linear(84, num_classes),
        )  # fmt: skip
    if name == "cnn":
        features = nn.Sequential(
            nn.Conv2d(c, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
        )  # fmt: skip
        flat = _flat_size(features, (c, h, w))
        return nn.Sequential(*features, nn.Linear(flat, 128), nn.ReLU(), nn.Linear(128, num_classes))
    raise ValueError(f"unknown model {name!r} (accepted: {', '.join(MODEL_NAMES)})")


class TextLSTM(nn.Module):
    """LEAF's stacked-LSTM models (TalwalkarLab/leaf, models/shakespeare and models/sent140 stacked_lstm.py):
    token ids (B, T) -> embedding -> LSTM -> scores of the last position (B, C), or of every one (B, T, C).
    PyTorch's LSTM initialisation (LEAF's TensorFlow cells add 1 to the forget gate's bias)."""

    def __init__(self, name: str, tokens: int, num_classes: int, hidden: tuple[int, ...], per_token: bool):
        super().__init__()
        if not hidden or len(set(hidden)) != 1:
            raise ValueError(f"{name}'s LSTM layers are one width: hidden lists it once per layer, e.g. [256, 256]")
        width = hidden[0]
        self.per_token = per_token
        self.embed = nn.Embedding(tokens, 8 if name == "shakespeare_lstm" else width)
        self.lstm = nn.LSTM(self.embed.embedding_dim, width, num_layers=len(hidden), batch_first=True)
        if name == "shakespeare_lstm":
            self.head: nn.Module = nn.Linear(width, num_classes)
        else:  # LEAF's two dense layers, without an activation between them
            self.head = nn.Sequential(nn.Linear(width, 128), nn.Linear(128, num_classes))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        states, _ = self.lstm(self.embed(tokens))
        return self.head(states if self.per_token else states[:, -1])


def _flat_size(features: nn.Module, input_shape: tuple[int, int, int]) -> int:
    with torch.no_grad():
        return int(features(torch.zeros(1, *input_shape)).shape[1])


def forward_flops_per_sample(model: nn.Module, sample: torch.Tensor | Sequence[int]) -> float:
    """One sample's forward FLOPs, counted on the module itself (:func:`netfl.learn.models.flops.forward_flops`).

    ``sample``: one input (a batch of 1, as the data holds it: images, features or token ids), or a float
    input's shape. Matrix products and convolutions count 2 FLOPs per multiply-add and a bias one more per
    output (Linear ``2 in out + out``, Conv ``2 (Cin/groups) kh kw Cout Hout Wout + Cout Hout Wout``);
    recurrent layers their gate products per step; activations, pooling and normalisation are not counted.
    The built-in models' counts equal their analytic ones (netfl.registry.models.model_cost; a test pins them).
    """
    if not isinstance(sample, torch.Tensor):
        param = next(model.parameters(), None)
        sample = torch.zeros(
            1,
            *sample,
            dtype=param.dtype if param is not None else torch.float32,
            device=param.device if param is not None else None,
        )
    return forward_flops(model, sample)


def training_flops_per_sample(model: nn.Module, sample: torch.Tensor | Sequence[int]) -> float:
    """FLOPs to train on one sample: 3 × forward.

    The backward pass costs about twice the forward (gradients with respect
    to both activations and weights), the usual rule of thumb; a model whose
    backward differs (frozen layers) gives ``model.flops_per_sample``.
    """
    return 3 * forward_flops_per_sample(model, sample)


def model_num_bytes(model: nn.Module) -> int:
    """Bytes to send the model's trainable parameters: their count × 4 (float32 on the wire)."""
    return 4 * sum(p.numel() for p in model.parameters() if p.requires_grad)
