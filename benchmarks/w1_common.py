"""Workload W1, shared by the baselines that do not use netfl (the plain loop, Flower).

Fashion-MNIST (Debian's dataset-fashion-mnist), N clients with an IID split
of the 60 000 training images, an MLP 784-128-128-10, every client every
round: 10 SGD steps of batch 32 at lr 0.05 from the global model; FedAvg
weighted by samples; test accuracy on the 10 000 test images at the end.

Written the way a researcher would write it in an afternoon -- numpy to
read the IDX files, ``nn.Sequential``, ``torch.optim.SGD`` -- and kept free
of netfl so that the baselines measure only themselves.
"""

from __future__ import annotations

import argparse
import gzip
import os
from pathlib import Path

import numpy as np

FASHION_MNIST_DIR = Path(os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
CLIENTS = 100
ROUNDS = 20
STEPS = 10
BATCH = 32
LR = 0.05
HIDDEN = (128, 128)
SEED = 1


def arguments() -> argparse.Namespace:
    """The options every W1 contestant takes: --clients, --rounds, --threads (torch threads, default 1)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=CLIENTS)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--threads", type=int, default=1)
    return parser.parse_args()


def read_idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load_fashion_mnist() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Images as float32 N x 784 in [0, 1], labels as int64."""

    def images(name: str) -> np.ndarray:
        return read_idx(FASHION_MNIST_DIR / name).reshape(-1, 784).astype(np.float32) / 255.0

    def labels(name: str) -> np.ndarray:
        return read_idx(FASHION_MNIST_DIR / name).astype(np.int64)

    return (
        images("train-images-idx3-ubyte.gz"),
        labels("train-labels-idx1-ubyte.gz"),
        images("t10k-images-idx3-ubyte.gz"),
        labels("t10k-labels-idx1-ubyte.gz"),
    )


def iid_parts(num_samples: int, clients: int, seed: int = SEED) -> list[np.ndarray]:
    """An IID split: a seeded permutation cut into ``clients`` equal parts."""
    perm = np.random.default_rng(seed).permutation(num_samples)
    return np.array_split(perm, clients)


def make_model():
    import torch.nn as nn

    layers, width = [nn.Flatten()], 784
    for h in HIDDEN:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    return nn.Sequential(*layers, nn.Linear(width, 10))


def local_train(model, x, y, generator) -> None:
    """STEPS minibatch SGD steps on one client's (x, y) tensors, sampling without replacement per epoch."""
    import torch

    opt = torch.optim.SGD(model.parameters(), lr=LR)
    order = torch.cat([torch.randperm(len(x), generator=generator) for _ in range(-(-STEPS * BATCH // len(x)))])
    for step in range(STEPS):
        idx = order[step * BATCH : (step + 1) * BATCH]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()


def accuracy(model, x, y) -> float:
    import torch

    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())
