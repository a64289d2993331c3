"""The data budget: how many bytes a data set of the user's own may take once loaded, checked before it is.

A small file can declare a large array: a ``.npz`` is a zip of ``.npy`` members, and an 8.9 MB one whose ``x``
declares 250 000 x 2 048 float32 (2 GB) compresses well and would be read until the process is killed. Each
member's ``.npy`` header says its shape and dtype before a byte of data is read, so the arrays are sized from
the headers (:func:`npz_sizes`) and refused, naming the file, the array, its shape and bytes, when together
they exceed the budget. A ``.pt`` file is memory-mapped and a loader's arrays are sized as they come back,
before netfl copies or converts anything; LEAF's arrays are sized from the sample counts before they are built.

The budget is :data:`DEFAULT_FRACTION` (a quarter) of this machine's memory, or what the environment variable
``NETFL_DATA_BUDGET`` says (``8GB``, ``500MB``, bytes); ``netfl validate`` prints it.
"""

from __future__ import annotations

import math
import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from netfl.errors import DataError
from netfl.units import format_si, parse_quantity

__all__ = ["DataBudget", "check_arrays", "check_npz", "check_sizes", "data_budget", "npz_sizes"]

ENV = "NETFL_DATA_BUDGET"
#: The default budget's share of the machine's memory: a quarter, as netfl briefly holds about twice the arrays
#: while it converts and splits them.
DEFAULT_FRACTION = 0.25
#: The budget where the machine's memory cannot be read.
FALLBACK_BYTES = 8 * 2**30


@dataclass(frozen=True)
class DataBudget:
    bytes: float
    origin: str  # where the figure comes from, for messages

    def describe(self) -> str:
        return f"{format_si(self.bytes, 'B', 3)} ({self.origin})"


def data_budget() -> DataBudget:
    """The budget in effect: ``NETFL_DATA_BUDGET`` if set (DataError if it does not read as bytes), else a
    quarter of this machine's memory."""
    given = os.environ.get(ENV)
    if given:
        try:
            value = parse_quantity(given, "bytes")
        except ValueError as exc:
            raise DataError(f"{ENV}={given!r}: {exc}") from None
        if not value > 0 or not math.isfinite(value):
            raise DataError(f"{ENV}={given!r}: the data budget must be a positive number of bytes")
        return DataBudget(value, f"{ENV}")
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return DataBudget(FALLBACK_BYTES, f"netfl's default; set {ENV} to change it")
    return DataBudget(DEFAULT_FRACTION * memory, f"a quarter of this machine's memory; set {ENV} to change it")


def npz_sizes(file: Path) -> dict[str, tuple[tuple[int, ...], np.dtype, int]]:
    """Each array of a ``.npz`` as its header declares it: shape, dtype and bytes, read without its data.
    DataError when a member is not a ``.npy`` array."""
    out = {}
    with zipfile.ZipFile(file) as archive:
        for info in archive.infolist():
            name = info.filename.removesuffix(".npy")
            with archive.open(info) as member:
                try:
                    version = np.lib.format.read_magic(member)
                    if version == (1, 0):
                        shape, _, dtype = np.lib.format.read_array_header_1_0(member, max_header_size=10_000)
                    else:
                        shape, _, dtype = np.lib.format.read_array_header_2_0(member, max_header_size=10_000)
                except ValueError as exc:
                    raise DataError(f"{file}: {name} is not a readable .npy array ({exc})") from None
            out[name] = (tuple(int(v) for v in shape), dtype, math.prod(shape) * dtype.itemsize)
    return out


def check_npz(file: Path, budget: DataBudget | None = None) -> None:
    """DataError when the arrays a ``.npz`` declares exceed the budget, before any is read."""
    sizes = npz_sizes(file)
    _within(str(file), {k: (shape, dtype.name, size) for k, (shape, dtype, size) in sizes.items()}, budget)


def check_arrays(name: str, arrays: Any, budget: DataBudget | None = None) -> None:
    """DataError when the arrays and tensors of ``arrays`` (a mapping, as a loader returns) exceed the budget."""
    if not isinstance(arrays, Mapping):
        return
    sizes = {}
    for key, value in arrays.items():
        if isinstance(value, torch.Tensor):
            sizes[str(key)] = (
                tuple(value.shape),
                str(value.dtype).replace("torch.", ""),
                value.numel() * value.element_size(),
            )
        elif isinstance(value, np.ndarray):
            sizes[str(key)] = (value.shape, value.dtype.name, value.nbytes)
    _within(name, sizes, budget)


def check_sizes(
    name: str, sizes: dict[str, tuple[tuple[int, ...], str, int]], budget: DataBudget | None = None
) -> None:
    """DataError when arrays still to be built -- each named with its shape, dtype and bytes -- exceed the budget
    (LEAF's, sized from the sample counts)."""
    _within(name, sizes, budget)


def _within(name: str, sizes: dict[str, tuple[tuple[int, ...], str, int]], budget: DataBudget | None) -> None:
    budget = budget or data_budget()
    total = sum(size for _, _, size in sizes.values())
    if total <= budget.bytes:
        return
    largest = sorted(sizes.items(), key=lambda item: -item[1][2])
    arrays = "; ".join(
        f"{key} {' x '.join(f'{v:,}' for v in shape)} {dtype} ({format_si(size, 'B', 3)})"
        for key, (shape, dtype, size) in largest[:4]
    )
    raise DataError(
        f"{name}: its arrays take {format_si(total, 'B', 3)} once loaded -- {arrays} -- over the data budget of "
        f"{budget.describe()}"
    )
