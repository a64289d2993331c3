"""Models written as a user writes them: plain torch.nn.Modules, nothing from netfl.

netfl builds each with the topology's `args` as keyword arguments, and passes `num_classes` and
`input_shape` to those that take them (below: every model asks for `num_classes`).
"""

from __future__ import annotations

import torch
from torch import nn


class SmallBNCNN(nn.Module):
    """Two blocks of 3x3 convolution, BatchNorm, ReLU and 2x2 max-pooling, then one dense layer."""

    def __init__(self, num_classes: int, input_shape: tuple[int, int, int] = (1, 28, 28), width: int = 16):
        super().__init__()
        channels, height, width_px = input_shape
        self.features = nn.Sequential(
            nn.Conv2d(channels, width, 3, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.BatchNorm2d(2 * width),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(2 * width * (height // 4) * (width_px // 4), num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))


class CharGRU(nn.Module):
    """Next-character prediction at every position: embedding, GRU, and a score per token (B, T, C)."""

    def __init__(self, num_classes: int, embedding: int = 32, hidden: int = 128):
        super().__init__()
        self.embed = nn.Embedding(num_classes, embedding)
        self.gru = nn.GRU(embedding, hidden, batch_first=True)
        self.out = nn.Linear(hidden, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        states, _ = self.gru(self.embed(tokens))
        return self.out(states)
