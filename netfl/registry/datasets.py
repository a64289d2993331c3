"""The data sets netfl can load: names, labels, input shapes and the files they need, known without loading
any data.

The one list of data sets: the scenario checks ``dataset.name`` and the
labels a partition names against it, ``netfl validate`` checks that the
files a data set needs are where the run would look (:func:`missing_files`),
and :mod:`netfl.learn.data.datasets` (which loads them, with torch) takes its
names, label counts, file names and default folder from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from netfl.user_code import python_file_present

__all__ = [
    "DATASETS",
    "DATASET_NAMES",
    "NUM_CLASSES",
    "DatasetInfo",
    "FASHION_MNIST_DIR",
    "IDX_FILES",
    "CIFAR10_FILES",
    "USER_DATA_FORMATS",
    "data_folder",
    "leaf_files",
    "missing_files",
    "missing_user_data",
    "user_data_file",
    "user_data_format",
]

#: Where Debian's ``dataset-fashion-mnist`` package installs the IDX files.
FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
#: The four IDX files of MNIST and Fashion-MNIST (each plain or gzipped, ``.gz``): train images and labels,
#: test images and labels.
IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
#: The CIFAR-10 python batches, in the data folder or its ``cifar-10-batches-py`` folder.
CIFAR10_FILES = tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch",)
_DATA_DIR_HINT = "pass their folder with --data-dir or dataset.data_dir"


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    num_classes: int
    input_shape: tuple[int, ...]  # one sample's shape as the loader returns it: (C, H, W), or (T,) token ids
    summary: str
    samples: int  # training samples of the published files; or all samples, when ``split`` draws the test set
    split: bool = False  # the test set is drawn from the samples (dataset.test_fraction), not published apart
    files: tuple[str, ...] = ()  # what the loader reads from the data folder (none: bundled or generated)
    gzipped: bool = False  # each file may also be ``<name>.gz``
    subfolder: str | None = None  # looked for first inside the data folder
    default_dir: Path | None = None  # where the files are when no data folder is given
    get: str = ""  # how to get the files
    leaf: str | None = None  # LEAF's JSON of this sample kind (characters, words) in the data folder; sized once read

    def training_samples(self, test_fraction: float) -> int:
        """How many samples the run trains on (before dataset.max_train_samples; published files may differ)."""
        return self.samples - round(self.samples * test_fraction) if self.split else self.samples


DATASETS: dict[str, DatasetInfo] = {
    d.name: d
    for d in (
        DatasetInfo(
            "digits", 10, (1, 8, 8), "scikit-learn's bundled 8x8 handwritten digits (no files needed)", 1797, split=True
        ),
        DatasetInfo(
            "fashion-mnist",
            10,
            (1, 28, 28),
            "Fashion-MNIST, the four IDX files",
            60000,
            files=IDX_FILES,
            gzipped=True,
            default_dir=FASHION_MNIST_DIR,
            get="Install it with `apt-get install dataset-fashion-mnist` (Debian/Ubuntu) or download the four IDX "
            "files from the Fashion-MNIST project and ",
        ),
        DatasetInfo(
            "mnist",
            10,
            (1, 28, 28),
            "MNIST, the four IDX files",
            60000,
            files=IDX_FILES,
            gzipped=True,
            get="Download the four IDX files from the MNIST project and ",
        ),
        DatasetInfo(
            "cifar10",
            10,
            (3, 32, 32),
            "CIFAR-10, the python batches",
            50000,
            files=CIFAR10_FILES,
            subfolder="cifar-10-batches-py",
            get="Download and unpack the CIFAR-10 python version (cifar-10-batches-py) and ",
        ),
        DatasetInfo(
            "blobs3", 3, (1, 1, 2), "Fed-CVaR-Avg's 2-D toy: three Gaussian blobs, generated", 3000, split=True
        ),
        DatasetInfo(
            "shakespeare",
            80,
            (80,),
            "LEAF's Shakespeare: 80 characters of a speaking role's lines, the next character to predict, one "
            "client per role; LEAF's JSON (train/ and test/)",
            4_226_158,
            leaf="characters",
            get="Make LEAF's JSON with LEAF's own scripts (TalwalkarLab/leaf, data/shakespeare/preprocess.sh) and ",
        ),
        DatasetInfo(
            "sent140",
            2,
            (25,),
            "LEAF's Sent140: a tweet's first 25 words, its sentiment (0 negative, 1 positive), one client per "
            "Twitter user; LEAF's JSON (train/ and test/)",
            1_600_498,
            leaf="words",
            get="Make LEAF's JSON with LEAF's own scripts (TalwalkarLab/leaf, data/sent140/preprocess.sh) and ",
        ),
    )
}

DATASET_NAMES: tuple[str, ...] = tuple(DATASETS)

#: Labels of each data set (so that a partition's labels can be checked before the data is loaded).
NUM_CLASSES: dict[str, int] = {name: d.num_classes for name, d in DATASETS.items()}


def data_folder(name: str, data_dir: Path | None) -> Path | None:
    """The folder data set ``name``'s files are read from: ``data_dir`` (or its subfolder, if the data set has
    one and it exists), else the data set's default; None when it needs a folder and none was given."""
    info = DATASETS[name]
    folder = Path(data_dir) if data_dir is not None else info.default_dir
    if folder is not None and info.subfolder is not None and (folder / info.subfolder).is_dir():
        folder = folder / info.subfolder
    return folder


def missing_files(name: str, data_dir: Path | None) -> str | None:
    """Why data set ``name`` cannot be read from ``data_dir`` (None: the default folder) -- no folder, or files
    missing, each named with what to do -- or None when every file it needs is there. Only looks for the
    files (cheap); reading them checks their content."""
    info = DATASETS[name]
    if info.leaf is not None:
        return _missing_leaf(info, data_folder(name, data_dir))
    if not info.files:
        return None
    folder = data_folder(name, data_dir)
    if folder is None:
        files = ", ".join(info.files) + (" (plain or .gz)" if info.gzipped else "")
        return (
            f"{name}: no data folder given and {name} has no default location; it needs {files}. "
            f"{info.get}{_DATA_DIR_HINT}."
        )
    suffixes = ("", ".gz") if info.gzipped else ("",)
    missing = [f for f in info.files if not any((folder / f"{f}{s}").is_file() for s in suffixes)]
    if not missing:
        return None
    more = f" (and {len(missing) - 1} more: {', '.join(missing[1:])})" if len(missing) > 1 else ""
    return (
        f"{name}: file not found: {folder / missing[0]}{'(.gz)' if info.gzipped else ''}{more}. "
        f"{info.get}{_DATA_DIR_HINT}."
    )


def _missing_leaf(info: DatasetInfo, folder: Path | None) -> str | None:
    if folder is None:
        return (
            f"{info.name}: no data folder given; it reads LEAF's JSON from one (train/*.json and test/*.json). "
            f"{info.get}{_DATA_DIR_HINT}."
        )
    if not folder.is_dir() or not leaf_files(folder)[0]:
        found = "no such folder" if not folder.is_dir() else "no LEAF JSON files (train/*.json) in"
        return f"{info.name}: {found} {folder}. {info.get}{_DATA_DIR_HINT}."
    return None


# ------------------------------------------------------------------------------------------- the user's data

#: The forms a data set of the user's own may take (``dataset.path``), told apart by the path alone.
USER_DATA_FORMATS: dict[str, str] = {
    "npz": "a .npz file of arrays: x, y, optional client, x_test, y_test, client_test, num_classes",
    "torch": "a .pt or .pth file: torch.save of a dict with the same keys (read with weights_only: no code runs)",
    "leaf": "LEAF's JSON layout: a folder holding train/ and test/ of *.json (or the JSON files themselves), "
    "each {users, num_samples, user_data: {user: {x, y}}}",
    "python": "file.py:function, a loader returning a mapping with the same keys (it is code that netfl runs)",
}


def user_data_format(path: str) -> str | None:
    """Which of :data:`USER_DATA_FORMATS` ``path`` is (by its form alone), or None."""
    if ":" in path and path.rsplit(":", 1)[0].endswith(".py"):
        return "python"
    suffix = Path(path).suffix.lower()
    if suffix == ".npz":
        return "npz"
    if suffix in (".pt", ".pth"):
        return "torch"
    if suffix == ".json" or suffix == "":
        return "leaf"
    return None


def user_data_file(path: str, base_dir: Path | None) -> Path:
    """The file or folder a ``dataset.path`` names (relative paths from the topology's folder)."""
    text = path.rsplit(":", 1)[0] if user_data_format(path) == "python" else path
    file = Path(text).expanduser()
    return file if file.is_absolute() or base_dir is None else base_dir / file


def leaf_files(folder: Path) -> tuple[list[Path], list[Path]]:
    """The training and test JSON files of a LEAF folder: ``train/*.json`` and ``test/*.json`` (sorted), or, for a
    folder of JSON files alone, those files as training data and no test files."""
    if (folder / "train").is_dir():
        test = sorted((folder / "test").glob("*.json")) if (folder / "test").is_dir() else []
        return sorted((folder / "train").glob("*.json")), test
    return sorted(folder.glob("*.json")), []


def missing_user_data(path: str, base_dir: Path | None) -> str | None:
    """Why ``dataset.path`` cannot be read (an unknown form, a missing file, a LEAF folder without JSON), or None.
    Only looks; reading checks the content."""
    form = user_data_format(path)
    if form is None:
        forms = "; ".join(f"{k}: {v}" for k, v in USER_DATA_FORMATS.items())
        return f"{path}: not a form netfl reads ({forms})"
    file = user_data_file(path, base_dir)
    if form == "leaf" and file.suffix.lower() != ".json":
        if not file.is_dir():
            return f"{path}: no such folder: {file} (a LEAF folder holds train/ and test/ of *.json)"
        train, _ = leaf_files(file)
        if not train:
            return f"{path}: {file} holds no LEAF JSON files (expected train/*.json and test/*.json, or *.json)"
        return None
    if not (python_file_present(file) if form == "python" else file.is_file()):
        return f"{path}: file not found: {file}"
    return None
