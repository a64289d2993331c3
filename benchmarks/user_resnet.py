"""A small ResNet with BatchNorm, written as a user would write it: the benchmarks' user-style model.

netfl loads it from this file (``model: {path: user_resnet.py:SmallResNet}``); the plain loop and Flower
import it. Three stages of one basic block each (He et al., Deep Residual Learning for Image Recognition,
CVPR 2016) at ``width``, 2x and 4x channels, the second and third halving the image; global average pooling
and a dense layer. At width 8 on 28x28 images: 19 810 parameters, 4.73 MFLOP forward per image (counted by netfl).
"""

from __future__ import annotations

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, inputs: int, outputs: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.shortcut = nn.Sequential()
        if stride != 1 or inputs != outputs:
            self.shortcut = nn.Sequential(
                nn.Conv2d(inputs, outputs, 1, stride=stride, bias=False), nn.BatchNorm2d(outputs)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class SmallResNet(nn.Module):
    def __init__(self, num_classes: int = 10, channels: int = 1, width: int = 8):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(channels, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()
        )
        self.stages = nn.Sequential(Block(width, width, 1), Block(width, 2 * width, 2), Block(2 * width, 4 * width, 2))
        self.head = nn.Linear(4 * width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.stages(self.stem(x))
        return self.head(features.mean(dim=(2, 3)))
