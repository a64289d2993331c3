"""Data sets of the user's own: arrays in a ``.npz`` or ``.pt`` file, LEAF's JSON layout, or a Python loader.

Every form gives the same arrays -- ``x`` (N samples of any shape), ``y`` (one integer label per sample (N,),
or per token (N, T)), optionally ``client`` (each sample's client, for ``partition: {kind: natural}``),
``x_test``/``y_test`` (a test split of its own) and ``num_classes`` -- and becomes a
:class:`~netfl.learn.data.datasets.Dataset`:

* floating inputs become float32 and integer inputs int64 (token ids; scale images to floats yourself);
* labels must be whole numbers in ``0..num_classes-1`` (``num_classes`` defaults to the largest label + 1),
  or -100 for a position to ignore (PyTorch's ``ignore_index``);
* without ``x_test``, ``test_fraction`` of the samples are held out by a seeded draw, stratified by label
  when there is one label per sample (as for the built-in ``digits``);
* ``client`` ids (numbers or names) are numbered 0.. in ascending order (LEAF: in the order its files list
  the users), and the clients keep only the training samples.

A ``.pt`` file is read with ``torch.load(weights_only=True)``: tensors, arrays and plain values only, no code
runs. What the arrays take while they load is checked against the data budget
(:mod:`netfl.learn.data.data_budget`) before netfl reads a ``.npz``'s arrays (from their headers), before it
copies a ``.pt``'s or a loader's, and before it builds a LEAF file's (from the sample counts). A ``.npz`` is
read a block at a time straight into the dtypes netfl holds (no whole array read, then converted), and the
arrays netfl read itself are split in place: loading peaks at about the data's size plus its test share.
A Python loader *is* code: netfl imports its file and calls it (errors name the file and line).
"""

from __future__ import annotations

import re
import zipfile
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from netfl import user_code
from netfl.errors import DataError
from netfl.learn.data.data_budget import check_arrays, check_npz, held_dtype, npy_header
from netfl.learn.data.datasets import Dataset
from netfl.learn.data.leaf_data import LeafData, read_leaf
from netfl.learn.data.user_arrays import ARRAY_KEYS, IGNORE_LABEL, dataset_from_arrays
from netfl.registry.datasets import user_data_file, user_data_format

__all__ = ["ARRAY_KEYS", "IGNORE_LABEL", "LeafData", "dataset_from_arrays", "load_user_dataset", "read_leaf"]


def load_user_dataset(
    path: str | None,
    *,
    base_dir: Path | None,
    loader: Any = None,
    args: Mapping[str, Any] | None = None,
    input_shape: tuple[int, ...] | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
    targets: str = "sample",
    vocabulary: str | Path | None = None,
) -> Dataset:
    """The data set a ``dataset.path`` names (relative to ``base_dir``), or that ``loader`` (a function, or a
    mapping of arrays, given from Python) holds. Raises DataError (UserCodeError for a loader's own failure)."""
    label = path or getattr(loader, "__name__", "data given in Python")
    if targets != "sample" and (loader is not None or user_data_format(path) != "leaf"):
        raise DataError(f"{label}: targets: {targets} applies to LEAF character data (Shakespeare)")
    if vocabulary is not None and (loader is not None or user_data_format(path) != "leaf"):
        raise DataError(f"{label}: vocabulary applies to LEAF text (a folder or JSON file of characters or words)")
    if loader is not None:
        arrays = _call_loader(loader, args or {}, None) if callable(loader) else loader
    else:
        form = user_data_format(path)
        file = user_data_file(path, base_dir)
        if form == "npz":
            arrays = _read_npz(file, test_fraction)
        elif form == "torch":
            arrays = _read_torch(file)
        elif form == "leaf":
            leaf = read_leaf(file, targets=targets, vocabulary=vocabulary)
            return dataset_from_arrays(
                label,
                leaf.arrays,
                input_shape=input_shape,
                test_fraction=test_fraction,
                seed=seed,
                client_names=leaf.users,
                vocabulary=leaf.vocabulary,
                own=True,
            )
        elif form == "python":
            ref = user_code.parse_reference(path, base_dir)
            fn = user_code.load_attribute(
                ref, what="data loader", error=DataError, accept=callable, expected="a function"
            )
            arrays = _call_loader(fn, args or {}, ref)
        else:
            raise DataError(
                f"{path}: netfl cannot tell what kind of data this is (.npz, .pt, a LEAF folder or file.py:function)"
            )
    # no one else holds what netfl read from a file: converted and split in place; a loader's arrays are copied
    own = loader is None and user_data_format(path) in ("npz", "torch")
    if not (own and user_data_format(path) == "npz"):  # a .npz was sized from its headers, before it was read
        check_arrays(label, arrays, form="own" if own else "given", test_fraction=test_fraction)
    return dataset_from_arrays(label, arrays, input_shape=input_shape, test_fraction=test_fraction, seed=seed, own=own)


def _call_loader(fn: Callable[..., Any], args: Mapping[str, Any], ref: user_code.UserReference | None) -> Any:
    what = f"{getattr(fn, '__name__', 'loader')}({', '.join(f'{k}={v!r}' for k, v in args.items())})"
    if ref is None:
        return fn(**args)  # a function handed over in Python: its traceback is the user's own
    return user_code.call(fn, path=ref.path, what=what, error=DataError, **args)


def _read_npz(file: Path, test_fraction: float) -> dict[str, Any]:
    if not zipfile.is_zipfile(file):
        raise DataError(f"{file}: not a readable .npz file (a .npz is a zip archive of arrays, as numpy.savez writes)")
    try:
        check_npz(file, test_fraction=test_fraction)  # the headers, before any is read: a small file may declare a lot
        with zipfile.ZipFile(file) as archive:
            return {
                info.filename.removesuffix(".npy"): _read_member(file, archive, info) for info in archive.infolist()
            }
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
        raise DataError(f"{file}: not a readable .npz file ({exc})") from None


#: The bytes of a ``.npz`` member read at once.
READ_BYTES = 8 * 2**20


def _read_member(file: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    """One ``.npy`` member, read a block at a time into the dtype netfl holds it in (held_dtype): the array is
    allocated once, in its final dtype, and never held twice."""
    key = info.filename.removesuffix(".npy")
    with archive.open(info) as member:
        shape, fortran, dtype = npy_header(member, f"{file}: {key}")
        if dtype.hasobject:  # object arrays need pickle, which is refused: a .npz must hold plain arrays
            raise DataError(
                f"{file}: {key} is an array of Python objects, which netfl does not unpickle; ragged sequences "
                "(samples of different lengths) are one: pad them to one length and store plain numeric arrays "
                "(token ids as integers)"
            )
        out = np.empty(shape[::-1] if fortran else shape, dtype=held_dtype(key, dtype))
        flat = out.reshape(-1)
        step = max(1, READ_BYTES // max(1, dtype.itemsize))
        for start in range(0, flat.size if dtype.itemsize else 0, step):
            count = min(step, flat.size - start)
            data = member.read(count * dtype.itemsize)
            if len(data) != count * dtype.itemsize:
                raise DataError(
                    f"{file}: {key} is truncated: its header declares {' x '.join(map(str, shape)) or 'one'} "
                    f"{dtype.name} values, the data ends after {start + len(data) // dtype.itemsize}"
                )
            flat[start : start + count] = np.frombuffer(data, dtype=dtype)
    return np.ascontiguousarray(out.T) if fortran else out


#: What netfl reads from a .pt file, and the ways to give anything else (for the message refusing one).
TORCH_ACCEPTED = (
    "netfl reads a .pt file with torch.load(weights_only=True) and no other way: a dict of tensors, numpy "
    "arrays, numbers, strings, lists and dicts (torch.save({'x': x, 'y': y}, path)); store other objects as "
    "those, or save the arrays with numpy.savez, or give a loader (dataset.path: my_data.py:load), which netfl "
    "runs as code"
)


def _read_torch(file: Path) -> Any:
    try:
        try:  # mapped, not read: the tensors are sized against the data budget before netfl copies them
            return torch.load(file, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as exc:
            if "mmap" not in str(exc):  # a file of torch's legacy format cannot be mapped: read it
                raise
            return torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:  # weights_only refuses anything but tensors and plain values; all mean "bad file"
        raise DataError(f"{file}: cannot read it: {_torch_refusal(exc)}; {TORCH_ACCEPTED}") from None


def _torch_refusal(exc: Exception) -> str:
    """What torch.load found, without its advice to load with ``weights_only=False`` (which runs the file's code,
    and which netfl never does)."""
    text = str(exc)
    found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
    if found:
        return f"it refers to {found.group(1)}, which only running code could rebuild"
    if "WeightsUnpickler error:" in text:  # torch's own finding, after its advice
        detail = text.split("WeightsUnpickler error:", 1)[1].strip().split("\n\n")[0].strip()
        return f"not a file torch.save wrote of plain values ({detail.split('. ')[0]})"
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
