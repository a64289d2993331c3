"""netfl.keyed_random's draws, compiled: one (stream, device, draw) at a time, to the same bits.

:func:`bits`, :func:`uniform` and :func:`standard_normal` compute exactly what their namesakes in
:mod:`netfl.keyed_random` compute for one element (tests/engine/test_kernels.py compares them on many).
Keys, devices and draw numbers are uint64 here: numba would turn mixed signed and unsigned integers into floats.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_DEVICE = np.uint64(0xD1B54A32D192ED03)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_ONE, _TWO = np.uint64(1), np.uint64(2)
_UNIT = 1.0 / (1 << 53)
_NORMAL_SALT = np.uint64(0x6A09E667F3BCC909)  # keyed_random's: normals draw from their own bits

_JIT = {"cache": True, "error_model": "numpy", "nogil": True, "_nrt": False}
#: The helpers that take the engine's tuples of arrays are inlined into their callers (numba's IR): called, each
#: would be handed every array of every tuple by value (a few kilobytes at every change); the draws above take
#: numbers only. No reference counting (``_nrt``): nothing here allocates.
_INLINE = {**_JIT, "inline": "always"}


@njit(**_JIT)
def _finalise(z):
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)


@njit(**_JIT)
def bits(key, device, draw):
    """64 random bits of draw ``draw`` of device ``device`` in stream ``key`` (all uint64)."""
    z = _finalise((device * _DEVICE) ^ key)
    return _finalise(z + (draw + _ONE) * _GOLDEN)


@njit(**_JIT)
def uniform(key, device, draw):
    """U[0, 1) with 53 random bits."""
    return np.float64(bits(key, device, draw) >> _S11) * _UNIT


@njit(**_JIT)
def standard_normal(key, device, draw):
    """N(0, 1) by Box-Muller from a salted copy of the stream, as keyed_random.standard_normal."""
    salted = key ^ _NORMAL_SALT
    u1 = 1.0 - uniform(salted, device, draw * _TWO)
    u2 = uniform(salted, device, draw * _TWO + _ONE)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
