"""What is learnt (``task``, or ``tasks``): the data set and its partition over the devices, the model, and each
device's local training."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from netfl.numbers import Strict
from netfl.problems import one_of
from netfl.registry import registered
from netfl.registry.choices import DataTargets
from netfl.registry.datasets import DATASET_NAMES, DATASETS
from netfl.registry.learning_params import LocalSpec
from netfl.registry.models import MODEL_NAMES, default_hidden
from netfl.registry.partitions import PartitionSpec
from netfl.user_code import is_user_reference, python_only_problem

__all__ = ["DatasetSpec", "LocalSpec", "ModelSpec", "TaskSpec"]


class DatasetSpec(Strict):
    """A built-in data set (``name``) or one of the user's (``path``): arrays in a ``.npz`` or ``.pt`` file, a
    folder in LEAF's JSON layout, or ``file.py:function`` returning arrays (see :mod:`netfl.learn.data.user_data`).
    From Python, ``loader`` takes the function itself, or a mapping of arrays."""

    name: Annotated[str, BeforeValidator(registered(DATASET_NAMES, own="path"))] | None = Field(
        None, description="a built-in data set; give name or path"
    )
    path: str | None = Field(
        None,
        description="your data: a .npz or .pt file (x, y, optional client, x_test, y_test, num_classes), a LEAF "
        "folder (train/ and test/ of JSON) or JSON file, or file.py:function returning those arrays; relative "
        "to the topology file",
    )
    args: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of a file.py:function loader")
    loader: Any = Field(None, exclude=True, description="from Python: a function returning the arrays, or them")
    input_shape: list[Annotated[int, Field(gt=0)]] | None = Field(
        None, min_length=1, description="reshape each sample to this shape, e.g. [1, 28, 28] for LEAF's FEMNIST"
    )
    targets: DataTargets = Field(
        "sample",
        description="LEAF character data (shakespeare): sample labels each sample with the next character (LEAF's "
        "y); every_token labels every position with the character after it, for models with per-token outputs",
    )
    vocabulary: str | None = Field(
        None,
        description="what LEAF text's token ids stand for: characters (shakespeare) leaf, LEAF's 80 in its order "
        "(the default), used (those the files use, sorted) or a vocabulary file; words (sent140) a vocabulary "
        "file (a JSON list of words, or one word a line), by default the training files' 10000 most frequent; "
        "relative to the topology file",
    )
    data_dir: Path | None = Field(
        None,
        description="the folder holding a built-in data set's files, relative to the topology file; --data-dir "
        "replaces it",
    )
    test_fraction: float = Field(
        0.2, gt=0, lt=1, description="held-out share when the data has no test split of its own (digits, blobs3)"
    )
    max_train_samples: int | None = Field(
        None, gt=0, description="train on a seeded random subset of this many samples (CPU-scale studies)"
    )
    partition: PartitionSpec = Field(
        PartitionSpec(), description="how the training samples are split among the devices (its table)"
    )

    @model_validator(mode="after")
    def _one_source(self):
        given = [k for k, v in (("name", self.name), ("path", self.path), ("loader", self.loader)) if v is not None]
        if len(given) != 1:
            raise ValueError(
                "give the data set's name (a built-in: " + one_of(DATASET_NAMES) + ") or the path of your own "
                "(data.npz, data.pt, a LEAF folder, or loader.py:function)"
                + (f", not both {' and '.join(given)}" if given else "")
            )
        if self.path is not None and python_only_problem(self.path, "data set"):
            raise ValueError(python_only_problem(self.path, "data set"))
        if self.args and self.path is None and self.loader is None:
            raise ValueError("args are the keyword arguments of a file.py:function loader; a built-in takes none")
        leaf = DATASETS[self.name].leaf if self.name is not None else None
        if self.name is not None and self.input_shape is not None:
            raise ValueError("input_shape applies to a data set of your own (path)")
        if self.name is not None and leaf is None and (self.targets != "sample" or self.vocabulary is not None):
            raise ValueError("targets and vocabulary apply to text: shakespeare, sent140 or your own LEAF folder")
        if leaf == "words" and self.targets != "sample":
            raise ValueError("targets: every_token applies to characters (shakespeare); sent140 has a label per tweet")
        if leaf == "words" and self.vocabulary in ("leaf", "used"):
            raise ValueError(
                f"vocabulary: {self.vocabulary} names characters; sent140's is a file of words, or none (netfl builds "
                "one from the training files)"
            )
        if self.data_dir is not None and self.name is None:
            raise ValueError("data_dir is where a built-in data set's files are; give your own data set's path")
        return self

    @property
    def label(self) -> str:
        """How messages and listings name the data set."""
        if self.name is not None:
            return self.name
        if self.path is not None:
            return self.path
        return getattr(self.loader, "__name__", "data given in Python")

    @property
    def builtin(self) -> bool:
        return self.name is not None

    @property
    def sized_once_read(self) -> bool:
        """A data set whose size only its files tell (the user's, or LEAF's built-in tasks): costed once loaded."""
        return self.name is None or DATASETS[self.name].leaf is not None


class ModelSpec(Strict):
    """A built-in model (``name``) or the user's own ``torch.nn.Module`` (``path: file.py:Name``, a class or a
    factory function, called with ``args``). From Python, ``factory`` takes the class or function itself."""

    name: Annotated[str, BeforeValidator(registered(MODEL_NAMES, own="path"))] | None = Field(
        None, description="a built-in model; give name or path"
    )
    hidden: list[Annotated[int, Field(gt=0)]] = Field(
        [200],
        description="hidden layer sizes of the built-in mlp; the LSTM layers of shakespeare_lstm ([256, 256]) and "
        "sent140_lstm ([100, 100])",
    )
    path: str | None = Field(
        None, description="your model: file.py:Name, a torch.nn.Module class or a function returning one"
    )
    args: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of your class or function")
    factory: Any = Field(None, exclude=True, description="from Python: the class or function itself")
    flops_per_sample: float | None = Field(
        None,
        gt=0,
        description="training FLOPs (forward and backward) per sample, instead of 3 x the forward "
        "FLOPs counted on the module",
    )
    buffers: Literal["average", "local"] = Field(
        "average",
        description="buffers such as BatchNorm's running statistics: average (they travel with the model and "
        "the server takes the sample-weighted mean of those the updates carry) or local (each device keeps "
        "its own, as in FedBN; nothing travels)",
    )

    @model_validator(mode="before")
    @classmethod
    def _class_given(cls, data: Any):
        if callable(data) and not isinstance(data, (str, dict)):  # model: Net, from Python
            return {"factory": data}
        return data

    @model_validator(mode="after")
    def _one_source(self):
        given = [k for k, v in (("name", self.name), ("path", self.path), ("factory", self.factory)) if v is not None]
        if len(given) != 1:
            raise ValueError(
                "give the model's name (a built-in: " + one_of(MODEL_NAMES) + ") or the path of your own "
                "(my_models.py:Net)" + (f", not both {' and '.join(given)}" if given else "")
            )
        if self.path is not None and python_only_problem(self.path, "model"):  # code given in Python, recorded
            raise ValueError(python_only_problem(self.path, "model"))
        if self.path is not None and not is_user_reference(self.path):
            raise ValueError(f"path {self.path!r} must read file.py:Name (a class or function in a Python file)")
        if self.name is None and "hidden" in self.model_fields_set:
            raise ValueError("hidden sizes the built-in mlp and LSTMs; pass your model's own arguments in args")
        if self.name is not None and self.args:
            raise ValueError(f"args are your model's keyword arguments; the built-in {self.name} takes hidden")
        if self.factory is not None and not callable(self.factory):
            raise ValueError("factory must be a torch.nn.Module class or a function returning a module")
        return self

    @property
    def label(self) -> str:
        """How messages and listings name the model: ``lenet5``, ``my_models.py:Net(width=64)``."""
        if self.name is not None:
            return self.name
        base = self.path or getattr(self.factory, "__qualname__", "a model given in Python")
        return base + (f"({', '.join(f'{k}={v!r}' for k, v in self.args.items())})" if self.args else "")

    @property
    def builtin(self) -> bool:
        return self.name is not None

    @property
    def layers(self) -> tuple[int, ...]:
        """A built-in's ``hidden`` sizes: as given, else the model's own (the mlp's 200, LEAF's LSTM widths)."""
        return tuple(self.hidden) if "hidden" in self.model_fields_set else default_hidden(self.name or "")


class TaskSpec(Strict):
    dataset: DatasetSpec = Field(description="the data set and how it is split among the devices (its table)")
    model: ModelSpec = Field(description="the model trained: a built-in one or your own (its table)")
    local: LocalSpec = Field(LocalSpec(steps=5), description="each device's local training (its table)")

    @property
    def measured(self) -> bool:
        """Its model or data is costed on the built module and the loaded data (torch), not from the registries."""
        return not self.model.builtin or self.dataset.sized_once_read
