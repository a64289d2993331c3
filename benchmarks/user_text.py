"""Text models written as a user would: the benchmarks' sequence workloads (benchmarks/speed.py, section text).

netfl loads them from this file (``model: {path: user_text.py:CharLSTM}``); the plain loop imports them. Every
model takes integer token ids (B, T) and scores one label per sample:

* ``CharLSTM`` -- embedding 8, LSTM 64, a dense layer to the characters: next-character prediction, the
  shape of LEAF's Shakespeare model at a phone's size;
* ``CharGRU`` -- the same with a GRU;
* ``TextTransformer`` -- embedding 32 and learned positions, ``nn.TransformerEncoder`` of 2 layers (4 heads,
  feed-forward 64, torch's default dropout 0.1), mean pooling, a dense layer;
* ``BagClassifier`` -- ``nn.EmbeddingBag`` (mean) of 32 over the vocabulary, a hidden layer of 32, a dense layer:
  a bag-of-words text classifier.
"""

from __future__ import annotations

import torch
from torch import nn


class CharLSTM(nn.Module):
    def __init__(self, num_classes: int, embedding: int = 8, hidden: int = 64):
        super().__init__()
        self.embed = nn.Embedding(num_classes, embedding)
        self.lstm = nn.LSTM(embedding, hidden, batch_first=True)
        self.out = nn.Linear(hidden, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        states, _ = self.lstm(self.embed(tokens))
        return self.out(states[:, -1])


class CharGRU(nn.Module):
    def __init__(self, num_classes: int, embedding: int = 8, hidden: int = 64):
        super().__init__()
        self.embed = nn.Embedding(num_classes, embedding)
        self.gru = nn.GRU(embedding, hidden, batch_first=True)
        self.out = nn.Linear(hidden, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        states, _ = self.gru(self.embed(tokens))
        return self.out(states[:, -1])


class TextTransformer(nn.Module):
    def __init__(self, num_classes: int, vocabulary: int | None = None, length: int = 32, width: int = 32):
        super().__init__()
        self.embed = nn.Embedding(vocabulary or num_classes, width)  # characters in, the next character out
        self.position = nn.Embedding(length, width)
        layer = nn.TransformerEncoderLayer(width, 4, 2 * width, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = nn.Linear(width, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        where = torch.arange(tokens.shape[1], device=tokens.device).expand_as(tokens)
        return self.out(self.encoder(self.embed(tokens) + self.position(where)).mean(1))


class BagClassifier(nn.Module):
    def __init__(self, num_classes: int, vocabulary: int = 5000, width: int = 32):
        super().__init__()
        self.bag = nn.EmbeddingBag(vocabulary, width, mode="mean")
        self.hidden = nn.Linear(width, width)
        self.out = nn.Linear(width, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(self.bag(tokens))))
