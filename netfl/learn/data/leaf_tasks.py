"""LEAF's Shakespeare and Sent140 as built-in tasks: the user's LEAF JSON read with LEAF's numbering
(:mod:`netfl.learn.data.vocabulary`) and checked as a data set of the user's own is."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from netfl.errors import DataError
from netfl.learn.data.datasets import Dataset
from netfl.learn.data.leaf_data import read_leaf
from netfl.learn.data.user_arrays import dataset_from_arrays
from netfl.registry.datasets import DATASETS, data_folder, missing_files

__all__ = ["load_leaf_task"]


def load_leaf_task(
    name: str,
    *,
    data_dir: Path | None,
    test_fraction: float = 0.2,
    seed: int = 0,
    targets: str = "sample",
    vocabulary: str | Path | None = None,
) -> Dataset:
    """Built-in data set ``name`` (``shakespeare``, ``sent140``) from the LEAF folder ``data_dir``; each LEAF user a
    client, the labels checked against the task's classes (80 characters, 2 sentiments). ``test_fraction`` and
    ``seed`` hold out a test set when the folder has no test/ samples; ``targets`` and ``vocabulary`` as
    :func:`netfl.learn.data.leaf_data.read_leaf` takes them."""
    info = DATASETS[name]
    problem = missing_files(name, data_dir)
    if problem is not None:
        raise DataError(problem)
    leaf = read_leaf(data_folder(name, data_dir), targets=targets, vocabulary=vocabulary, kind=info.leaf)
    arrays = dict(leaf.arrays)
    for key in ("y", "y_test"):
        labels = arrays.get(key)
        if info.leaf == "words" and labels is not None and ((labels < 0) | (labels >= info.num_classes)).any():
            bad = int(labels[(labels < 0) | (labels >= info.num_classes)][0])
            raise DataError(
                f"{data_folder(name, data_dir)}: the {'test' if key == 'y_test' else 'training'} files' labels y "
                f"hold {bad}; {name}'s are 0 (negative) and 1 (positive), as LEAF's preprocessing writes them"
            )
    arrays["num_classes"] = np.asarray(
        info.num_classes if leaf.vocabulary.classes is None else len(leaf.vocabulary.classes)
    )
    return dataset_from_arrays(
        name, arrays, test_fraction=test_fraction, seed=seed, client_names=leaf.users, vocabulary=leaf.vocabulary
    )
