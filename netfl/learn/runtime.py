"""Where and how torch computes: the training device and the CPU thread pools.

Threads are chosen on purpose, not left to torch's default (one per core):
the models of FL studies are small, so a step is many small kernels, and
an OpenMP pool of several threads spins at every barrier. When another
process shares the cores -- a second run, a sweep's workers, a colleague --
those spinning threads fight it and a run slows several-fold
(``benchmarks/speed.py`` measures it: with a second run beside it, two
threads took 2 to 17 times as long as one). Alone, a second thread gains
little at these model sizes (up to about 20 % on LeNet-5). So one intra-op
thread per process is the default; ``--threads N`` asks for more on a
machine the run has to itself.
"""

from __future__ import annotations

import torch

#: Intra-op threads when the user names none (see the module docstring).
DEFAULT_THREADS = 1


def use_threads(threads: int | None = None) -> int:
    """Set torch's intra-op threads (``DEFAULT_THREADS`` if None) and one inter-op thread; return the count.

    The inter-op pool can be sized only before its first use; later calls leave it as it is.
    """
    threads = DEFAULT_THREADS if threads is None else int(threads)
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)  # netfl never runs torch ops concurrently from Python
    except RuntimeError:
        pass  # already started (a second run in the same process)
    return torch.get_num_threads()


def torch_device(name: str | torch.device) -> torch.device:
    """The torch device to train on, or a ValueError that says what this torch build offers."""
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"{name!r} is not a torch device ({exc}); use cpu, cuda or cuda:<index>") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"{name!r}: this torch ({torch.__version__}) cannot use a CUDA GPU here; install a "
                             "CUDA build of torch (README, GPU) on a machine with an NVIDIA GPU, or use cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"{name!r}: there are {torch.cuda.device_count()} CUDA device(s)")
    elif device.type != "cpu":
        raise ValueError(f"{name!r}: netfl trains on cpu or cuda")
    return device
