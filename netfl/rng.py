"""Seeded random streams: one independent generator per concern.

Every random draw in netfl comes from ``streams.numpy(concern, *keys)``
where the concern is a fixed name ("availability", "selection", ...) and the
keys are e.g. a device index. A stream depends only on the scenario seed and
its names, so adding a draw to one concern never shifts another's draws and
the same seed gives the same event log, bit for bit.
"""

from __future__ import annotations

import zlib

import numpy as np


def _key(name: str | int) -> int:
    # crc32 is stable across processes (unlike hash()), which determinism needs.
    return int(name) if isinstance(name, (int, np.integer)) else zlib.crc32(name.encode("utf-8"))


class RandomStreams:
    def __init__(self, seed: int):
        self.seed = int(seed)

    def seed_sequence(self, concern: str, *keys: str | int) -> np.random.SeedSequence:
        return np.random.SeedSequence(entropy=self.seed, spawn_key=tuple(_key(k) for k in (concern, *keys)))

    def numpy(self, concern: str, *keys: str | int) -> np.random.Generator:
        return np.random.default_rng(self.seed_sequence(concern, *keys))

    def integer_seed(self, concern: str, *keys: str | int) -> int:
        """A 63-bit seed for libraries with their own generators (torch)."""
        return int(self.seed_sequence(concern, *keys).generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))
