"""The data budget: how many bytes a data set of the user's own may take while it loads, checked before it does.

A small file can declare a large array: a ``.npz`` is a zip of ``.npy`` members, and an 8.9 MB one whose ``x``
declares 250 000 x 2 048 float32 (2 GB) compresses well and would be read until the process is killed. Each
member's ``.npy`` header says its shape and dtype before a byte of data is read, so the arrays are sized from
the headers (:func:`npz_sizes`) and refused, naming the file, the array, its shape and bytes, when loading them
would exceed the budget. A ``.pt`` file is memory-mapped and a loader's arrays are sized as they come back,
before netfl copies or converts anything; LEAF's arrays are sized from the sample counts before they are built.

What is counted is the peak of loading (:func:`loading_peak`), not the file: each array in the dtype netfl holds
it in (float32 inputs, int64 token ids and labels: a uint8 ``x`` takes eight times its bytes as token ids), the
arrays it still holds as given while it converts them, and the test share it copies aside while it splits the
samples in place. netfl reads a ``.npz`` member by member straight into those dtypes, and splits arrays it read
itself in place, so a data set of float32 inputs peaks at about 1.2 times its size (``test_fraction`` 0.2).

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
from typing import Any, Literal

import numpy as np
import torch

from netfl.errors import DataError
from netfl.units import format_si, parse_quantity

__all__ = [
    "DataBudget",
    "check_arrays",
    "check_npz",
    "check_sizes",
    "data_budget",
    "held_dtype",
    "loading_peak",
    "npz_sizes",
]

ENV = "NETFL_DATA_BUDGET"
#: The default budget's share of the machine's memory: a quarter, leaving the rest to training (the model, its
#: batches, the engine) and to the rest of the machine.
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


#: How netfl came by the arrays, which decides what loading them holds at once: ``read`` -- netfl read them
#: from a ``.npz`` straight into the dtypes it holds them in; ``own`` -- arrays no one else holds (a ``.pt``
#: netfl loaded, LEAF's arrays it built), converted where their dtype differs and split in place; ``given`` --
#: the user's arrays (a loader's, a mapping from Python), which netfl copies rather than changes.
Form = Literal["read", "own", "given"]
#: The keys whose rows are split into training and test samples when the data has no test split of its own.
SPLIT_KEYS = ("x", "y", "client")


def held_dtype(key: str, dtype: np.dtype) -> np.dtype:
    """The dtype netfl holds array ``key`` in (netfl.learn.data.user_arrays converts to it): float32 inputs
    (floats and booleans), int64 token ids (integers) and labels, anything else as it is (refused later)."""
    if key in ("x", "x_test"):
        if dtype.kind in "fb":
            return np.dtype(np.float32)
        if dtype.kind in "iu":
            return np.dtype(np.int64)
    elif key in ("y", "y_test", "client") and dtype.kind in "iub":
        return np.dtype(np.int64)
    return dtype


def loading_peak(
    sizes: dict[str, tuple[tuple[int, ...], str, int]],
    form: Form,
    test_fraction: float = 0.2,
    reordered: tuple[str, ...] = (),
) -> tuple[int, int]:
    """The bytes the arrays take once loaded and at the peak of loading them, from each one's shape, dtype and
    bytes as given (see :data:`Form`); ``reordered``: the arrays stored in Fortran order, copied once whole
    into row order."""
    held_total = peak = transient = 0
    split = "x_test" not in sizes
    for key, (shape, dtype_name, given) in sizes.items():
        dtype = _dtype(dtype_name)
        converted = dtype is not None and held_dtype(key, dtype) != dtype
        held = math.prod(shape) * held_dtype(key, dtype).itemsize if converted else given
        held_total += held
        if form == "read":
            peak += held
        elif form == "own":
            peak += held + (given if converted else 0)
        else:  # the user's arrays stay; netfl's copies are new where converted or split
            peak += given + (held if converted or (split and key in SPLIT_KEYS) else 0)
        if form != "given" and split and key in SPLIT_KEYS:
            transient = max(transient, math.ceil(held * test_fraction) + 1)  # the test rows set aside
        if (key in ("y", "y_test") and dtype.kind == "f") or key in reordered:
            transient = max(transient, held)  # float labels checked whole, then converted; a row-order copy
    return held_total, peak + transient


def npz_sizes(file: Path) -> dict[str, tuple[tuple[int, ...], np.dtype, int]]:
    """Each array of a ``.npz`` as its header declares it: shape, dtype and bytes, read without its data.
    DataError when a member is not a ``.npy`` array."""
    return {name: (shape, dtype, size) for name, (shape, _, dtype, size) in _npz_headers(file).items()}


def _npz_headers(file: Path) -> dict[str, tuple[tuple[int, ...], bool, np.dtype, int]]:
    out = {}
    with zipfile.ZipFile(file) as archive:
        for info in archive.infolist():
            name = info.filename.removesuffix(".npy")
            with archive.open(info) as member:
                shape, fortran, dtype = npy_header(member, f"{file}: {name}")
            out[name] = (shape, fortran, dtype, math.prod(shape) * dtype.itemsize)
    return out


def npy_header(member: Any, what: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """A ``.npy`` stream's shape, Fortran order and dtype, the stream left at the first byte of data; DataError
    naming ``what`` when it is no ``.npy`` array."""
    try:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(member, max_header_size=10_000)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(member, max_header_size=10_000)
    except ValueError as exc:
        raise DataError(f"{what} is not a readable .npy array ({exc})") from None
    return tuple(int(v) for v in shape), bool(fortran), dtype


def check_npz(file: Path, budget: DataBudget | None = None, *, test_fraction: float = 0.2) -> None:
    """DataError when loading the arrays a ``.npz`` declares would exceed the budget, before any is read."""
    headers = _npz_headers(file)
    sized = {k: (shape, dtype.name, size) for k, (shape, _, dtype, size) in headers.items()}
    reordered = tuple(k for k, (shape, fortran, _, _) in headers.items() if fortran and len(shape) > 1)
    _within(str(file), sized, budget, "read", test_fraction, reordered)


def check_arrays(
    name: str, arrays: Any, budget: DataBudget | None = None, *, form: Form = "given", test_fraction: float = 0.2
) -> None:
    """DataError when loading the arrays and tensors of ``arrays`` (a mapping, as a loader returns) would exceed
    the budget."""
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
    _within(name, sizes, budget, form, test_fraction)


def check_sizes(
    name: str,
    sizes: dict[str, tuple[tuple[int, ...], str, int]],
    budget: DataBudget | None = None,
    *,
    test_fraction: float = 0.2,
) -> None:
    """DataError when arrays still to be built -- each named with its shape, dtype and bytes -- would exceed the
    budget while they load (LEAF's, sized from the sample counts: netfl's own arrays)."""
    _within(name, sizes, budget, "own", test_fraction)


def _within(
    name: str,
    sizes: dict[str, tuple[tuple[int, ...], str, int]],
    budget: DataBudget | None,
    form: Form,
    test_fraction: float,
    reordered: tuple[str, ...] = (),
) -> None:
    budget = budget or data_budget()
    held, peak = loading_peak(sizes, form, test_fraction, reordered)
    if peak <= budget.bytes:
        return
    largest = sorted(sizes.items(), key=lambda item: -item[1][2])
    arrays = "; ".join(
        f"{key} {' x '.join(f'{v:,}' for v in shape)} {dtype} ({format_si(size, 'B', 3)})"
        for key, (shape, dtype, size) in largest[:4]
    )
    raise DataError(
        f"{name}: its arrays take {format_si(held, 'B', 3)} once loaded and {format_si(peak, 'B', 3)} while they "
        f"load -- {arrays} -- over the data budget of {budget.describe()}"
    )


def _dtype(name: str) -> np.dtype | None:
    """numpy's dtype of that name; None for one of torch's that numpy lacks (bfloat16), counted as given."""
    try:
        return np.dtype(name)
    except TypeError:
        return None
