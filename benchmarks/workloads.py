"""The benchmarks' workloads, shared by the contestants that do not use netfl (the plain loop, Flower).

Every workload: Fashion-MNIST (Debian's dataset-fashion-mnist), N clients with an IID split of the 60 000
training images, every client every round 10 SGD steps of batch 32 at lr 0.05 from the global model, FedAvg
weighted by samples, test accuracy on the 10 000 test images at the end. They differ by the model:

* ``w1``: an MLP 784-128-128-10, 20 rounds (``benchmarks/w1.yaml``);
* ``w2``: FedAU's CNN, netfl's built-in ``cnn`` (conv3x3-32, pool, conv3x3-32, pool, FC128, FC10), 5 rounds
  (``benchmarks/w2.yaml``);
* ``resnet``: a user's own small ResNet with BatchNorm (``benchmarks/user_resnet.py``), 3 rounds
  (``benchmarks/resnet.yaml``).

Written the way a researcher would write it in an afternoon -- numpy to read the IDX files,
``nn.Sequential``, ``torch.optim.SGD``, ``load_state_dict`` -- and kept free of netfl so that the baselines
measure only themselves.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import os
from pathlib import Path

import numpy as np

FASHION_MNIST_DIR = Path(os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
CLIENTS = 100
ROUNDS = {"w1": 20, "w2": 5, "resnet": 3}
STEPS = 10
BATCH = 32
LR = 0.05
HIDDEN = (128, 128)
SEED = 1


def arguments() -> argparse.Namespace:
    """The options every contestant takes: --workload, --clients, --rounds (default: the workload's), --threads
    (torch threads, default 1), --device and --test-samples (the first N test images; default all 10 000)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", choices=tuple(ROUNDS), default="w1")
    parser.add_argument("--clients", type=int, default=CLIENTS)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--test-samples", type=int)
    args = parser.parse_args()
    args.rounds = args.rounds or ROUNDS[args.workload]
    return args


def read_idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


@functools.cache
def load_fashion_mnist() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Images as float32 N x 1 x 28 x 28 in [0, 1], labels as int64 (read once per process: never changed)."""

    def images(name: str) -> np.ndarray:
        return read_idx(FASHION_MNIST_DIR / name).reshape(-1, 1, 28, 28).astype(np.float32) / 255.0

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


def make_model(workload: str = "w1"):
    import torch.nn as nn

    if workload == "w1":
        layers, width = [nn.Flatten()], 784
        for h in HIDDEN:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        return nn.Sequential(*layers, nn.Linear(width, 10))
    if workload == "w2":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10),
        )  # fmt: skip
    from user_resnet import SmallResNet

    return SmallResNet(10)


def local_train(model, x, y, generator) -> None:
    """STEPS minibatch SGD steps on one client's (x, y) tensors, sampling without replacement per epoch."""
    import torch

    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    order = torch.cat([torch.randperm(len(x), generator=generator) for _ in range(-(-STEPS * BATCH // len(x)))])
    for step in range(STEPS):
        idx = order[step * BATCH : (step + 1) * BATCH].to(x.device)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()


def average_into(total: dict, state: dict, weight: float) -> None:
    """FedAvg's weighted sum of state dicts; integer entries (BatchNorm's batch count) are kept, not averaged."""
    for k, v in state.items():
        if v.dtype.is_floating_point:
            total[k] += v * weight
        else:
            total[k] = v.clone()


def accuracy(model, x, y) -> float:
    import torch

    model.eval()
    with torch.no_grad():
        return float(sum((model(x[i : i + 2000]).argmax(1) == y[i : i + 2000]).sum() for i in range(0, len(x), 2000))
                     / len(x))  # fmt: skip


# ------------------------------------------------------------------ text workloads (speed.py, section text)

#: The text workloads: model (benchmarks/user_text.py), window length, local steps, batch, lr. Every one: 50
#: clients (LEAF-sized), 30 rounds, every client every round, FedAvg by samples, test accuracy at the end.
#: ``bag-10``: the embedding bag with the image workloads' local work, 10 steps a round (``bag``'s 2 steps make a
#: job whose training is a third of the plain loop's wall time, the rest its start-up: torch and its optimiser).
TEXT = {
    "char-lstm": ("CharLSTM", 40, 2, 10, 1.0),
    "gru": ("CharGRU", 40, 2, 10, 1.0),
    "transformer": ("TextTransformer", 32, 2, 10, 0.1),
    "bag": ("BagClassifier", 64, 2, 16, 0.5),
    "bag-10": ("BagClassifier", 64, 10, 16, 0.5),
}
TEXT_CLIENTS, TEXT_ROUNDS = 50, 30
SPEECHES = Path(__file__).resolve().parents[1] / "examples" / "own-model" / "shakespeare" / "speeches.txt"


@functools.cache
def text_arrays(workload: str) -> dict[str, np.ndarray]:
    """The workload's data as netfl's ``.npz`` holds it: ``x`` token ids (N, T), ``y`` a label per sample,
    ``client`` each sample's client, ``x_test``/``y_test``. Character workloads: windows of the speeches of
    examples/own-model (one every 3 characters) and the character that follows, the clients contiguous
    stretches of the text, the last tenth the test set. ``bag``: seeded synthetic documents of 64 word ids
    from a vocabulary of 5000, 4 topics of 50 words each, a topic word in 30 % of the positions (``bag-10`` too)."""
    _, length, *_ = TEXT[workload]
    if workload.startswith("bag"):
        rng = np.random.default_rng(SEED)
        n = TEXT_CLIENTS * 60 + 600
        y = rng.integers(0, 4, n)
        topics = rng.choice(5000, (4, 50), replace=False)
        x = rng.integers(0, 5000, (n, length))
        on_topic = rng.random((n, length)) < 0.3
        x[on_topic] = topics[np.repeat(y, length).reshape(n, length)[on_topic], rng.integers(0, 50, on_topic.sum())]
    else:
        lines = SPEECHES.read_text().splitlines()
        text = " ".join(line.split("|", 2)[-1].strip() for line in lines if not line.startswith("#"))
        chars = sorted(set(text))
        ids = np.array([chars.index(c) for c in text])
        starts = np.arange(0, len(ids) - length - 1, 3)
        x, y = np.stack([ids[s : s + length] for s in starts]), ids[starts + length]
    test = len(x) - len(x) // 10
    client = np.arange(test) * TEXT_CLIENTS // test
    return {"x": x[:test], "y": y[:test], "client": client, "x_test": x[test:], "y_test": y[test:],
            "num_classes": np.array(4 if workload.startswith("bag") else len(chars))}  # fmt: skip


def text_local_train(model, x, y, generator, steps: int, batch: int, lr: float) -> None:
    """``local_train`` with the text workload's steps, batch and lr."""
    import torch

    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    b = min(batch, len(x))
    order = torch.cat([torch.randperm(len(x), generator=generator) for _ in range(-(-steps * b // len(x)))])
    for step in range(steps):
        idx = order[step * b : (step + 1) * b]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()
