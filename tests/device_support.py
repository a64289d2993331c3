"""Tests that take a device: each runs on the CPU everywhere (so it cannot rot) and on ``cuda`` where a GPU is.

A test parametrised with :data:`DEVICES` (or :data:`DEVICE_PAIRS`) runs its ``cpu`` case in every run of the
suite; its ``cuda`` cases carry the ``gpu`` marker and are skipped without CUDA. On a GPU machine
``pytest -m gpu`` runs the GPU cases alone (``benchmarks/gpu_check.py`` does, on the files that import this
module).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

CUDA = torch.cuda.is_available()


def on_gpu(*values, id: str | None = None):  # noqa: A002 -- pytest's own name for it
    """A parameter set that needs a CUDA GPU: marked ``gpu``, skipped without one."""
    marks = (pytest.mark.gpu, pytest.mark.skipif(not CUDA, reason="no CUDA GPU here"))
    return pytest.param(*values, marks=marks, id=id)


DEVICES = ["cpu", on_gpu("cuda", id="cuda")]
#: (where a run writes its checkpoint, where it resumes)
DEVICE_PAIRS = [
    pytest.param("cpu", "cpu", id="cpu-cpu"),
    on_gpu("cpu", "cuda", id="cpu-cuda"),
    on_gpu("cuda", "cpu", id="cuda-cpu"),
]


def tolerance(device: str) -> dict[str, float]:
    """``assert_close`` tolerances for two ways of computing the same training on ``device``: float32 rounding on
    the CPU; on a GPU (TF32 off, :func:`float32_exact`) reductions in another order, atomics included."""
    return {"rtol": 2e-5, "atol": 2e-6} if device == "cpu" else {"rtol": 1e-3, "atol": 1e-4}


@contextmanager
def float32_exact() -> Iterator[None]:
    """Convolutions and matrix products in float32 on a GPU (cuDNN rounds convolutions to TF32 by default), so
    that two paths agree to float32 rounding; nothing changes on the CPU."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
        + ("keepcost",)
    ]


def _malloc_in_use() -> Callable[[], int] | None:
    """glibc's bytes in use (heap and mmapped blocks), or None where there is no ``mallinfo2``."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
    except (OSError, AttributeError):
        return None

    def in_use() -> int:
        info = libc.mallinfo2()
        return info.uordblks + info.hblkhd

    return in_use


class _CpuPeak(TorchDispatchMode):
    """The most bytes malloc held above the start, sampled after every torch operation."""

    def __init__(self, in_use: Callable[[], int]):
        super().__init__()
        self.in_use, self.base, self.top = in_use, in_use(), 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.top = max(self.top, self.in_use() - self.base)
        return out


def peak_bytes(device: str, work: Callable[[], object]) -> int:
    """The most memory ``work()`` held at once above what was allocated before it: on a GPU what
    ``torch.cuda.max_memory_allocated`` shows; on the CPU glibc's bytes in use after each torch operation
    (skipped where glibc's ``mallinfo2`` is missing)."""
    if device != "cpu":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        work()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - base
    in_use = _malloc_in_use()
    if in_use is None:
        pytest.skip("no glibc mallinfo2 to measure the CPU's memory")
    with _CpuPeak(in_use) as mode:
        work()
    return mode.top
