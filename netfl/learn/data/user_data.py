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
runs. What the arrays take once loaded is checked against the data budget (:mod:`netfl.learn.data.data_budget`)
before netfl reads a ``.npz``'s arrays (from their headers), before it copies a ``.pt``'s or a loader's, and
before it builds a LEAF file's (from the sample counts).
A Python loader *is* code: netfl imports its file and calls it (errors name the file and line).
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from netfl import user_code
from netfl.errors import DataError
from netfl.learn.data.data_budget import check_arrays, check_npz
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
            arrays = _read_npz(file)
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
    check_arrays(label, arrays)  # before netfl converts or copies them (a .npz is sized from its headers first)
    return dataset_from_arrays(label, arrays, input_shape=input_shape, test_fraction=test_fraction, seed=seed)


def _call_loader(fn: Callable[..., Any], args: Mapping[str, Any], ref: user_code.UserReference | None) -> Any:
    what = f"{getattr(fn, '__name__', 'loader')}({', '.join(f'{k}={v!r}' for k, v in args.items())})"
    if ref is None:
        return fn(**args)  # a function handed over in Python: its traceback is the user's own
    return user_code.call(fn, path=ref.path, what=what, error=DataError, **args)


def _read_npz(file: Path) -> dict[str, Any]:
    if not zipfile.is_zipfile(file):
        raise DataError(f"{file}: not a readable .npz file (a .npz is a zip archive of arrays, as numpy.savez writes)")
    try:
        check_npz(file)  # the arrays' headers, before any is read: a small file may declare a huge array
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise DataError(f"{file}: not a readable .npz file ({exc})") from None
    key = None
    try:
        with np.load(file, allow_pickle=False) as archive:
            arrays = {}
            for key in archive.files:
                arrays[key] = archive[key]
            return arrays
    except ValueError as exc:  # object arrays need pickle, which is refused: a .npz must hold plain arrays
        raise DataError(
            f"{file}: {key} is an array of Python objects, which netfl does not unpickle ({exc}); ragged sequences "
            "(samples of different lengths) are one: pad them to one length and store plain numeric arrays "
            "(token ids as integers)"
        ) from None
    except (OSError, EOFError, KeyError) as exc:
        raise DataError(f"{file}: not a readable .npz file ({exc})") from None


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
