"""Where and how torch computes: the training device and the CPU threads.

Threads are chosen on purpose, not left to torch's default (an OpenMP pool
of one thread per core inside every operation). The models of FL studies
are small, so a training step is many small kernels, and an OpenMP pool
spins at every barrier: when another process shares the cores -- a second
run, a sweep's workers, a colleague -- those spinning threads fight it and
a run slows several-fold (``benchmarks/speed.py``: beside a second run,
two intra-op threads took 2 to 17 times as long as one).

So netfl parallelises *across jobs* instead: ``threads`` worker threads
train side by side, each with one torch thread inside its operations --
cache-sized chunks of jobs through the fused kernel of Linear/ReLU models
(:mod:`netfl.learn.training.fused_mlp`), whole jobs on each thread's own replica of
any other module (:mod:`netfl.learn.training.replicas`) -- and the test set's
chunks at an evaluation. The pieces are independent, so alone the cores
are all busy, and shared nothing spins: each worker simply gets less CPU.
How the work is cut does not depend on the thread count, so the results
are the same bits whatever ``threads`` is. The default is every CPU this
process may use, less those other processes keep busy while the run goes
on (:mod:`netfl.learn.training.cpu_share`); ``--threads N`` sets a fixed count.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import torch

from netfl.cpus import available_cpus
from netfl.learn.training.cpu_share import CpuShare

__all__ = ["available_cpus", "on_device", "parallel_map", "threads_in_use", "torch_device", "use_threads"]

T = TypeVar("T")
R = TypeVar("R")

_pool: ThreadPoolExecutor | None = None
_threads = 1
_share: CpuShare | None = None  # the default thread count: yield the CPUs other processes keep busy


def _one_torch_thread() -> None:
    torch.set_num_threads(1)  # OpenMP's thread count is per thread: every worker sets its own


def use_threads(threads: int | None = None) -> int:
    """Train with ``threads`` worker threads, one torch thread each; return the count. None: every available
    CPU, fewer while other processes keep some of them busy.

    The inter-op pool can be sized only before its first use; later calls leave it as it is.
    """
    global _pool, _threads, _share
    adaptive = threads is None
    threads = available_cpus() if threads is None else int(threads)
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    _one_torch_thread()
    try:
        torch.set_num_interop_threads(1)  # netfl never asks torch for inter-op parallelism
    except RuntimeError:
        pass  # already started (a second run in the same process)
    if threads != _threads or (threads > 1) != (_pool is not None):
        if _pool is not None:
            _pool.shutdown(wait=True)
        _pool = (
            ThreadPoolExecutor(threads, thread_name_prefix="netfl-train", initializer=_one_torch_thread)
            if threads > 1
            else None
        )
        _threads = threads
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    _share = CpuShare(affinity) if adaptive and threads > 1 and affinity else None
    return threads


def threads_in_use() -> int:
    """The worker threads (with the default count, the most that train at once)."""
    return _threads


def adapts_to_other_work() -> bool:
    """Whether the threads that train at once follow the CPUs other processes leave free."""
    return _share is not None


def parallel_map(work: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``[work(item) for item in items]``, spread over the worker threads that may train now; results in order."""
    lanes = min(_threads if _share is None else _share.free(_threads), len(items))
    if _pool is None or lanes < 2:
        return [work(item) for item in items]
    if lanes == _threads:
        return list(_pool.map(work, items))
    return _in_lanes(work, items, lanes)


def _in_lanes(work: Callable[[T], R], items: Sequence[T], lanes: int) -> list[R]:
    """``items`` worked through by ``lanes`` of the pool's threads, each taking the next item when done."""
    results: list = [None] * len(items)
    order = iter(range(len(items)))
    lock = threading.Lock()

    def lane() -> None:
        while True:
            with lock:
                i = next(order, None)
            if i is None:
                return
            results[i] = work(items[i])

    for future in [_pool.submit(lane) for _ in range(lanes)]:
        future.result()  # the first lane's error, as map would raise it
    return results


def torch_device(name: str | torch.device) -> torch.device:
    """The torch device to train on, or a ValueError that says what this torch build offers."""
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"{name!r} is not a torch device ({exc}); use cpu, cuda or cuda:<index>") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"{name!r}: this torch ({torch.__version__}) cannot use a CUDA GPU here; install a "
                "CUDA build of torch (README, GPU) on a machine with an NVIDIA GPU, or use cpu"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"{name!r}: there are {torch.cuda.device_count()} CUDA device(s)")
    elif device.type != "cpu":
        raise ValueError(f"{name!r}: netfl trains on cpu or cuda")
    return device


def on_device(state: Any, device: torch.device) -> Any:
    """A copy of ``state`` (anything picklable: a checkpoint's learner state) with every tensor on ``device``: a
    round trip through torch's serialisation with ``map_location``, which reaches the tensors inside any object
    (jobs in flight, a strategy's memory, server optimisers) and keeps tensors that were shared shared."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, map_location=device, weights_only=False)  # our own state, just written
