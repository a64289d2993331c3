"""Random numbers addressed by (stream, device, draw number), for whole populations at once.

A million devices cannot each own a ``numpy.random.Generator`` (about a
kilobyte and tens of microseconds apiece), and drawing from one shared
generator would make device i's draws depend on which other devices were
asked before it -- so a change in the server's schedule would change the
world. Here the k-th draw of device i is a pure function of the stream's
key, i and k: a counter-based generator (the splitmix64 finaliser, applied
to a mix of the three). Any subset of devices can draw in any order, in one
vectorised call, and every device's sequence depends on the seed alone.

Keys come from :meth:`netfl.rng.RandomStreams.integer_seed`, so streams
stay independent of each other exactly as the per-concern generators are.
"""

from __future__ import annotations

import zlib

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_DEVICE = np.uint64(0xD1B54A32D192ED03)
_S30, _S27, _S31, _S11 = (np.uint64(s) for s in (30, 27, 31, 11))
_UNIT = 1.0 / (1 << 53)
_NORMAL_SALT = 0x6A09E667F3BCC909  # normals draw from their own bits: draw k of a stream may be used for both


def _finalise(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, in place on ``z`` (a fresh uint64 array, or a scalar)."""
    if not isinstance(z, np.ndarray) or z.ndim == 0:
        z = (z ^ (z >> _S30)) * _MIX1
        z = (z ^ (z >> _S27)) * _MIX2
        return z ^ (z >> _S31)
    shifted = z >> _S30  # in place, one temporary: the draws of ten million devices are a few passes each
    z ^= shifted
    z *= _MIX1
    np.right_shift(z, _S27, out=shifted)
    z ^= shifted
    z *= _MIX2
    np.right_shift(z, _S31, out=shifted)
    z ^= shifted
    return z


def bits(key: int, device: np.ndarray | int, draw: np.ndarray | int) -> np.ndarray:
    """64 random bits per (device, draw) pair of stream ``key`` (arrays broadcast)."""
    device = np.array(device, dtype=np.uint64)  # copies: the arithmetic below is in place
    draw = np.array(draw, dtype=np.uint64)
    with np.errstate(over="ignore"):
        device *= _DEVICE
        device ^= np.uint64(key & 0xFFFFFFFFFFFFFFFF)
        z = _finalise(device)
        draw += np.uint64(1)
        draw *= _GOLDEN
        return _finalise(z + draw)


def uniform(key: int, device: np.ndarray | int, draw: np.ndarray | int) -> np.ndarray:
    """U[0, 1) with 53 random bits."""
    b = bits(key, device, draw)
    if not isinstance(b, np.ndarray):
        return (b >> _S11).astype(np.float64) * _UNIT
    b >>= _S11
    u = b.astype(np.float64)
    u *= _UNIT
    return u


def exponential(key: int, device: np.ndarray | int, draw: np.ndarray | int, mean: np.ndarray | float) -> np.ndarray:
    """Exponential with the given mean, by inversion (one uniform per value)."""
    return -np.asarray(mean, dtype=np.float64) * np.log1p(-uniform(key, device, draw))


def standard_normal(key: int, device: np.ndarray | int, draw: np.ndarray | int) -> np.ndarray:
    """N(0, 1) by Box-Muller, from two uniforms of a salted copy of the stream (independent of ``uniform``)."""
    key ^= _NORMAL_SALT
    draw = np.asarray(draw, dtype=np.uint64) * np.uint64(2)
    u1 = 1.0 - uniform(key, device, draw)  # (0, 1]: log is finite
    u2 = uniform(key, device, draw + np.uint64(1))
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


def child_key(key: int, name: str) -> int:
    """The key of the sub-stream ``name`` of stream ``key`` (a component of a composite policy): a function of the
    two alone, so that one component's draws never depend on which others there are."""
    return int(bits(key, zlib.crc32(name.encode()), 0))
