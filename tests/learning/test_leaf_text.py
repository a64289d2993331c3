"""LEAF's text tasks (Shakespeare, Sent140) on small LEAF-format files written here: LEAF's numbering, the class
names metrics.csv carries, the vocabulary written to the run folder, a short run of each built-in task, and bad
sequence input refused in one line naming the file and the field."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from cli_support import assert_user_error, run

import netfl
from netfl.errors import DataError
from netfl.learn.data.leaf_data import read_leaf
from netfl.learn.data.leaf_tasks import load_leaf_task
from netfl.learn.data.user_data import load_user_dataset
from netfl.learn.data.vocabulary import LEAF_CHARACTERS
from netfl.learn.models.builtin import build_model
from netfl.results.metrics_file import class_label
from netfl.results.tracking import Label, Tracking, track_run

#: TalwalkarLab/leaf, models/utils/language_utils.py: ALL_LETTERS, copied by hand from LEAF's source.
LEAF_ALL_LETTERS = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
LINE = "To be, or not to be: that is the question.\nWhether 'tis nobler in the mind to suffer [x]"  # 84+ chars


def _leaf(folder: Path, split: str, users: dict[str, tuple[list, list]]) -> Path:
    (folder / split).mkdir(parents=True, exist_ok=True)
    data = {
        "users": list(users),
        "num_samples": [len(x) for x, _ in users.values()],
        "user_data": {u: {"x": x, "y": y} for u, (x, y) in users.items()},
    }
    file = folder / split / f"all_data_{split}.json"
    file.write_text(json.dumps(data))
    return file


def _speeches(n: int, offset: int = 0) -> tuple[list[str], list[str]]:
    """n samples as LEAF's Shakespeare has them: 80 characters, and the character after them."""
    text = LINE * 4
    starts = [(offset + 3 * i) % (len(text) - 81) for i in range(n)]
    return [text[s : s + 80] for s in starts], [text[s + 80] for s in starts]


def _shakespeare(folder: Path, users: int = 4) -> Path:
    _leaf(folder, "train", {f"PLAY_{u}_ROLE": _speeches(6, 7 * u) for u in range(users)})
    _leaf(folder, "test", {f"PLAY_{u}_ROLE": _speeches(2, 7 * u + 1) for u in range(users)})
    return folder


TWEETS = [
    "I love this day !",
    "so sad , I hate rain",
    "what a great game tonight",
    "I hate mondays ; so tired",
    "love love love it",
    "worst service ever , never again",
]


def _sent140(folder: Path, users: int = 4) -> Path:
    def samples(u: int, n: int) -> tuple[list, list]:
        picks = [(u + i) % len(TWEETS) for i in range(n)]
        x = [["1467810369", "Mon Apr 06 22:19:45 PDT 2009", "NO_QUERY", f"user{u}", TWEETS[p]] for p in picks]
        return x, [int("love" in TWEETS[p] or "great" in TWEETS[p]) for p in picks]

    _leaf(folder, "train", {f"user{u}": samples(u, 5) for u in range(users)})
    _leaf(folder, "test", {f"user{u}": samples(u + 2, 2) for u in range(users)})
    return folder


# ------------------------------------------------------------------------------------ LEAF's numbering


def test_the_default_character_vocabulary_is_leafs_all_letters(tmp_path: Path) -> None:
    assert LEAF_CHARACTERS == LEAF_ALL_LETTERS and len(LEAF_CHARACTERS) == 80
    _leaf(tmp_path / "s", "train", {"HAMLET": (["\n Aa}\n A", "z}Aa\n ab"], ["a", "}"])})
    data = read_leaf(tmp_path / "s")
    # LEAF's word_to_indices is ALL_LETTERS.find: newline 0, space 1, A 25, a 53, } 79, z 78, b 54
    assert data.arrays["x"].tolist() == [[0, 1, 25, 53, 79, 0, 1, 25], [78, 79, 25, 53, 0, 1, 53, 54]]
    assert data.arrays["y"].tolist() == [53, 79] and int(data.arrays["num_classes"]) == 80
    assert data.vocabulary.tokens == tuple(LEAF_ALL_LETTERS) and data.vocabulary.classes == tuple(LEAF_ALL_LETTERS)
    used = read_leaf(tmp_path / "s", vocabulary="used")  # the characters the files use, sorted
    assert used.vocabulary.tokens == ("\n", " ", "A", "a", "b", "z", "}") and int(used.arrays["num_classes"]) == 7


def test_a_vocabulary_file_numbers_the_characters(tmp_path: Path) -> None:
    _leaf(tmp_path / "s", "train", {"HAMLET": (["abca", "cabb"], ["c", "a"])})
    (tmp_path / "chars.json").write_text(json.dumps(["c", "b", "a", "d"]))
    data = read_leaf(tmp_path / "s", vocabulary=tmp_path / "chars.json")
    assert data.arrays["x"].tolist() == [[2, 1, 0, 2], [0, 2, 1, 1]] and data.arrays["y"].tolist() == [0, 2]
    assert int(data.arrays["num_classes"]) == 4


def test_the_shakespeare_task_reads_leafs_json_with_leafs_numbering(tmp_path: Path) -> None:
    d = load_leaf_task("shakespeare", data_dir=_shakespeare(tmp_path / "shakespeare"))
    assert d.num_classes == 80 and d.input_shape == (80,) and d.train_x.dtype == torch.int64
    assert d.client_names == tuple(f"PLAY_{u}_ROLE" for u in range(4)) and len(d.test_y) == 8
    x, y = _speeches(1)
    assert d.train_x[0].tolist() == [LEAF_ALL_LETTERS.find(c) for c in x[0]]
    assert int(d.train_y[0]) == LEAF_ALL_LETTERS.find(y[0])
    per_token = load_leaf_task("shakespeare", data_dir=tmp_path / "shakespeare", targets="every_token")
    used = load_leaf_task("shakespeare", data_dir=tmp_path / "shakespeare", vocabulary="used")
    assert used.num_classes == len(used.class_names) == len(set(LINE))  # the characters the files use
    assert per_token.train_y.shape == (24, 80) and per_token.train_y[0, :-1].tolist() == d.train_x[0, 1:].tolist()


def test_leafs_reference_models_have_leafs_layers() -> None:
    model = build_model("shakespeare_lstm", (80,), 80, hidden=(256, 256))
    assert (model.embed.num_embeddings, model.embed.embedding_dim) == (80, 8)
    assert (model.lstm.hidden_size, model.lstm.num_layers) == (256, 2) and model.head.out_features == 80
    assert model(torch.zeros(3, 80, dtype=torch.int64)).shape == (3, 80)
    per_token = build_model("shakespeare_lstm", (80,), 80, hidden=(16, 16), per_token=True)
    assert per_token(torch.zeros(3, 80, dtype=torch.int64)).shape == (3, 80, 80)
    sent = build_model("sent140_lstm", (25,), 2, hidden=(100, 100), tokens=501)
    assert (sent.embed.num_embeddings, sent.embed.embedding_dim) == (501, 100)  # 500 words and LEAF's unknown id
    assert [layer.out_features for layer in sent.head] == [128, 2] and sent.lstm.num_layers == 2
    assert sent(torch.zeros(4, 25, dtype=torch.int64)).shape == (4, 2)


def test_class_columns_name_the_characters() -> None:
    assert [class_label(c) for c in ("e", " ", "\n", "0", '"')] == ["'e'", "' '", "'\\n'", "'0'", "'\\\"'"]


# --------------------------------------------------------------------------------- bad sequence input


@pytest.mark.parametrize(
    "x,y,message",
    [
        (["abc", "ab"], ["a", "b"], "all_data_train.json: user_data['u'].x[1] has 2 characters, the first sample 3"),
        (
            ["abc", "aéc"],
            ["a", "b"],
            "user_data['u'].x[1] holds 'é' (position 1), which is not in LEAF's 80 characters",
        ),
        (["abc", "abc"], ["a", "~"], "all_data_train.json: user_data['u'].y[1] is '~', which is not in LEAF's 80"),
        (["abc", "abc"], ["a", "bc"], "user_data['u'].y[1] is 'bc'; a character sample's label is one character"),
        (["abc", 7], ["a", "b"], "user_data['u'].x[1] is int, not a string of characters"),
    ],
)
def test_bad_character_samples_are_refused_naming_file_user_and_field(tmp_path: Path, x, y, message) -> None:
    _leaf(tmp_path / "s", "train", {"u": (x, y)})
    with pytest.raises(DataError) as info:
        read_leaf(tmp_path / "s")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_ragged_leaf_features_are_refused_naming_the_user(tmp_path: Path) -> None:
    _leaf(tmp_path / "f", "train", {"a": ([[0.0, 1.0], [1.0, 0.0]], [0, 1]), "b": ([[0.5, 0.5, 1.0]], [1])})
    with pytest.raises(DataError, match=r"user_data\['b'\].x's samples have 3 values, the first user's 2"):
        read_leaf(tmp_path / "f")
    _leaf(tmp_path / "g", "train", {"a": ([[0.0, 1.0], [1.0]], [0, 1])})
    with pytest.raises(DataError, match=r"user_data\['a'\].x\[1\] has 1 values, x\[0\] 2"):
        read_leaf(tmp_path / "g")


def test_the_shakespeare_task_refuses_other_samples(tmp_path: Path) -> None:
    _leaf(tmp_path / "f", "train", {"a": ([[0.0, 1.0]], [0])})
    with pytest.raises(DataError, match="its samples x are numbers; this task reads strings of characters"):
        load_leaf_task("shakespeare", data_dir=tmp_path / "f")
    tweet = ["1", "date", "q", "u", "good"]
    _leaf(tmp_path / "t", "train", {"a": ([tweet, tweet], [0, 4])})
    with pytest.raises(DataError, match="the training files' labels y hold 4; sent140's are 0 .negative. and 1"):
        load_leaf_task("sent140", data_dir=tmp_path / "t")
    with pytest.raises(DataError, match="no data folder given; it reads LEAF's JSON"):
        load_leaf_task("sent140", data_dir=None)


EMBEDDING_MODEL = """
import torch
from torch import nn


class Bag(nn.Module):
    def __init__(self, num_classes, words=50):
        super().__init__()
        self.embed = nn.EmbeddingBag(words, 4)
        self.out = nn.Linear(4, num_classes)

    def forward(self, tokens):
        return self.out(self.embed(tokens))
"""


@pytest.mark.parametrize(
    "arrays,message",
    [
        (
            {"x": np.ones((6, 5), dtype=np.float32)},
            "data.npz: x holds float32 values, but the model's embed (EmbeddingBag, 50 rows) takes token ids",
        ),
        (
            {"x": np.arange(30).reshape(6, 5) % 50, "x_test": np.array([[1, 2, 50, 3, 4]])},
            "data.npz: x_test holds token id 50, outside the model's embed (EmbeddingBag, 50 rows)",
        ),
        (
            {"x": np.array([[1, 2, 3, 4, 5]] * 5 + [[1, -1, 2, 3, 4]])},
            "data.npz: x holds token id -1, outside the model's embed",
        ),
    ],
)
def test_token_ids_an_embedding_cannot_read_are_refused(tmp_path: Path, arrays: dict, message: str) -> None:
    (tmp_path / "models.py").write_text(EMBEDDING_MODEL)
    arrays = {"y": np.array([0, 1, 0, 1, 0, 1]), **arrays}
    if "x_test" in arrays:
        arrays["y_test"] = np.array([0])
    np.savez(tmp_path / "data.npz", **arrays)
    topology = {
        "name": "bag",
        "seed": 1,
        "stop": {"rounds": 1},
        "task": {
            "dataset": {"path": "data.npz"},
            "model": {"path": "models.py:Bag"},
            "local": {"steps": 1, "batch_size": 2, "lr": 0.1},
        },
        "devices": [{"group": "phones", "count": 2, "compute": {"flops_per_s": 1e9}, "link": {"uplink": "1Mbps"}}],
    }
    (tmp_path / "bag.yaml").write_text(yaml.safe_dump(topology))
    assert_user_error(run("validate", tmp_path / "bag.yaml"), message)


def test_leaf_numbers_given_to_an_embedding_are_refused(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(EMBEDDING_MODEL)
    _leaf(tmp_path / "leaf", "train", {u: ([[1.0, 2.0, 3.0]] * 3, [0, 1, 0]) for u in "abcd"})
    topology = TASK.format(name="sent140", extra="").replace("name: sent140, data_dir: sent140", "path: leaf")
    (tmp_path / "t.yaml").write_text(topology.replace("{name: sent140_lstm, hidden: [8, 8]}", "{path: models.py:Bag}"))
    assert_user_error(run("validate", tmp_path / "t.yaml"), "leaf: x holds float32 values, but the model's embed")


def test_ragged_token_arrays_are_refused_naming_the_field(tmp_path: Path) -> None:
    np.savez(tmp_path / "ragged.npz", x=np.array([[1, 2, 3], [1, 2]], dtype=object), y=np.array([0, 1]))
    with pytest.raises(DataError, match="ragged.npz: x is an array of Python objects.*ragged sequences"):
        load_user_dataset("ragged.npz", base_dir=tmp_path)
    with pytest.raises(DataError, match="data given in Python: x is not an array .*different lengths \\(ragged\\)"):
        load_user_dataset(None, base_dir=tmp_path, loader={"x": [[1, 2, 3], [1, 2]], "y": [0, 1]})


# ------------------------------------------------------------------------------------------ the tasks run

TASK = """
name: {name}
seed: 3
stop: {{rounds: 2}}
task:
  dataset: {{name: {name}, data_dir: {name}, partition: {{kind: natural}}{extra}}}
  model: {{name: {name}_lstm, hidden: [8, 8]}}
  local: {{steps: 2, batch_size: 4, lr: 0.5}}
devices:
  - group: phones
    count: 4
    compute: {{flops_per_s: 1e9}}
    link: {{uplink: 5Mbps, downlink: 20Mbps}}
server:
  round: {{participants: 3}}
eval: {{every: 1 rounds}}
"""


def _task(tmp_path: Path, name: str, extra: str = "") -> Path:
    (_shakespeare if name == "shakespeare" else _sent140)(tmp_path / name)
    path = tmp_path / f"{name}.yaml"
    path.write_text(TASK.format(name=name, extra=extra))
    return path


@pytest.mark.slow
def test_the_shakespeare_task_runs_and_names_its_classes_by_character(tmp_path: Path) -> None:
    result = netfl.run(_task(tmp_path, "shakespeare"), out=tmp_path / "run")
    columns = [c for c in result.metrics.columns if c.startswith("class_")]
    assert columns == [f"class_{class_label(c)}_accuracy" for c in LEAF_ALL_LETTERS]
    header = (tmp_path / "run" / "metrics.csv").read_text().splitlines()[0]
    assert "class_'e'_accuracy" in header and "class_'\\n'_accuracy" in header and "class_0_accuracy" not in header
    written = json.loads((tmp_path / "run" / "vocabulary.json").read_text())
    assert written["kind"] == "characters" and written["tokens"] == list(LEAF_ALL_LETTERS)
    assert written["classes"] == list(LEAF_ALL_LETTERS) and "LEAF's 80 characters" in written["rule"]
    assert len(result.metrics) == 3 and result.summary["tasks"][0]["model"] == "shakespeare_lstm"
    if importlib.util.find_spec("mlflow") is not None:  # MLflow's names take no quotes: the character spelt out
        from mlflow.tracking import MlflowClient

        store = (tmp_path / "store").as_uri()
        track_run(tmp_path / "run", Tracking(None, store), Label.of_run(tmp_path / "run", "shakespeare"))
        client = MlflowClient(tracking_uri=store)
        (logged,) = client.search_runs([client.get_experiment_by_name("shakespeare").experiment_id])
        names = set(logged.data.metrics)
        assert {"class_char_e_accuracy", "class_char_u0020_accuracy", "class_char_u000a_accuracy"} <= names
        last = result.metrics.iloc[-1]
        np.testing.assert_equal(logged.data.metrics["class_char_e_accuracy"], last["class_'e'_accuracy"])
        np.testing.assert_equal(logged.data.metrics["class_char_u0020_accuracy"], last["class_' '_accuracy"])


@pytest.mark.slow
def test_the_sent140_task_runs_with_a_vocabulary_file_and_writes_the_one_it_built(tmp_path: Path) -> None:
    built = netfl.run(_task(tmp_path, "sent140"), out=tmp_path / "built")
    vocabulary = json.loads((tmp_path / "built" / "vocabulary.json").read_text())
    # by frequency (love 15 times, I 10, hate and so 7: then alphabetically), as LEAF's split_line cuts them
    assert vocabulary["kind"] == "words" and vocabulary["tokens"][:4] == ["love", "I", "hate", "so"]
    assert vocabulary["unknown_id"] == vocabulary["padding_id"] == len(vocabulary["tokens"])
    assert [c for c in built.metrics.columns if c.startswith("class_")] == ["class_0_accuracy", "class_1_accuracy"]
    # the file it wrote is a vocabulary file: given back, the run is the same
    (tmp_path / "words.json").write_bytes((tmp_path / "built" / "vocabulary.json").read_bytes())
    netfl.run(_task(tmp_path, "sent140", ", vocabulary: words.json"), out=tmp_path / "again")
    assert (tmp_path / "built" / "metrics.csv").read_bytes() == (tmp_path / "again" / "metrics.csv").read_bytes()
    (tmp_path / "few.txt").write_text("I\nlove\nhate\n")
    few = netfl.run(_task(tmp_path, "sent140", ", vocabulary: few.txt"), out=tmp_path / "few")
    assert json.loads((tmp_path / "few" / "vocabulary.json").read_text())["tokens"] == ["I", "love", "hate"]
    # LEAF's embedding: a row per word and one for the unknown word (and padding); the LSTMs and dense layers
    embedding, lstm, dense = 4 * 8, 2 * (4 * 8 * (8 + 8) + 2 * 4 * 8), 8 * 128 + 128 + 128 * 2 + 2
    assert few.events.query("kind == 'upload_start'").bytes.iloc[0] == 4 * (embedding + lstm + dense)


def test_validate_names_a_missing_folder_or_vocabulary_file(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(TASK.format(name="sent140", extra=", vocabulary: missing.txt"))
    assert_user_error(
        run("validate", path),
        "task.dataset.vocabulary: missing.txt: file not found",
        "task.dataset.data_dir: sent140: no such folder",
    )
    path.write_text(TASK.format(name="sent140", extra=", targets: every_token"))
    assert_user_error(run("validate", path), "every_token applies to characters (shakespeare)")


@pytest.mark.slow
def test_the_shakespeare_task_trains_on_every_position(tmp_path: Path) -> None:
    result = netfl.run(_task(tmp_path, "shakespeare", ", targets: every_token"), out=tmp_path / "run")
    assert len(result.metrics) == 3 and result.metrics.test_accuracy.notna().all()
    # it ran: the model scored every position (B, T, 80), as its per-token labels need (check_model refuses
    # any other shape); the head is the same 8 -> 80 layer, applied per token
    params = 80 * 8 + 2 * (4 * 8 * (8 + 8) + 2 * 4 * 8) + 8 * 80 + 80
    assert result.events.query("kind == 'upload_start'").bytes.iloc[0] == 4 * params
