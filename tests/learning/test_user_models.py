"""A user's own torch.nn.Module: built from a file with its arguments, costed on the module itself, checked
against its data, and every refusal naming the user's file and line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from learn_support import BATCHNORM_MLP
from torch import nn

from netfl.errors import ModelError
from netfl.learn.models.builtin import build_model, forward_flops_per_sample, model_num_bytes
from netfl.learn.models.flat_model import Network
from netfl.learn.models.user import builtin_recipe, check_model, user_recipe
from netfl.registry.models import MODEL_NAMES, TEXT_MODELS, model_cost

MODELS = '''
import torch
from torch import nn


class Small(nn.Module):
    """conv 1->6 3x3 (pad 1), BatchNorm, ReLU, pool 2, Linear 96->classes."""

    def __init__(self, num_classes, input_shape, width=6):
        super().__init__()
        self.conv = nn.Conv2d(input_shape[0], width, 3, padding=1)
        self.bn = nn.BatchNorm2d(width)
        self.fc = nn.Linear(width * (input_shape[1] // 2) * (input_shape[2] // 2), num_classes)

    def forward(self, x):
        return self.fc(nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2).flatten(1))


def make_mlp(hidden=8, **kwargs):
    return nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, kwargs["num_classes"]))


class Broken(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x)  # 64 features arrive: a shape error, on line 29


class FailsToBuild(nn.Module):
    def __init__(self, depth=2):
        super().__init__()
        raise ValueError(f"depth {depth} is too deep")


def not_a_module(**kwargs):
    return "a string"


class Frozen(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Linear(64, 16)
        self.features.requires_grad_(False)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(torch.relu(self.features(x.flatten(1))))
'''


@pytest.fixture
def models(tmp_path: Path) -> Path:
    (tmp_path / "models.py").write_text(MODELS)
    return tmp_path


def _data(n: int = 8, classes: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.rand(n, 1, 8, 8, generator=g), torch.arange(n) % classes


def test_the_built_in_models_keep_their_numbers() -> None:
    """Counted on the module, each built-in's forward FLOPs equal the analytic count netfl has always used."""
    for name in (name for name in MODEL_NAMES if name not in TEXT_MODELS):  # LEAF's: measured once read
        for shape in ((1, 28, 28), (3, 32, 32), (1, 8, 8)):
            model = build_model(name, shape, 10, hidden=(200, 50))
            assert forward_flops_per_sample(model, shape) == model_cost(name, shape, 10, (200, 50)).forward_flops
    pinned = {"logistic": 15_690, "mlp": 317_810, "lenet5": 839_558, "cnn": 4_499_722}  # Fashion-MNIST, hidden [200]
    for name, flops in pinned.items():
        assert forward_flops_per_sample(build_model(name, (1, 28, 28), 10), (1, 28, 28)) == flops


def test_a_user_modules_flops_equal_a_hand_count(models: Path) -> None:
    recipe = user_recipe("models.py:Small", {}, (1, 8, 8), 4, base_dir=models)
    module = recipe.build()
    conv = 2 * 1 * 3 * 3 * (6 * 8 * 8) + 6 * 8 * 8  # 2 Cin k k per output, + the bias
    linear = 2 * 96 * 4 + 4
    assert forward_flops_per_sample(module, torch.zeros(1, 1, 8, 8)) == conv + linear == 8_068

    class Recurrent(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.gru, self.out = nn.Embedding(20, 8), nn.GRU(8, 16, batch_first=True), nn.Linear(16, 20)

        def forward(self, x):
            return self.out(self.gru(self.embed(x))[0])

    steps = 7
    gru = steps * (2 * 48 * 8 + 2 * 48 * 16 + 48 + 48)  # 3 gates x 16: input and hidden products, two biases
    head = steps * (2 * 16 * 20 + 20)
    assert forward_flops_per_sample(Recurrent(), torch.zeros(1, steps, dtype=torch.long)) == gru + head


def test_a_class_gets_its_args_and_what_it_asks_of_the_data(models: Path) -> None:
    torch.manual_seed(0)
    small = user_recipe("models.py:Small", {"width": 3}, (1, 8, 8), 4, base_dir=models)
    assert small.label == "models.py:Small(width=3)" and small.source == models / "models.py"
    module = small.build()
    assert module.conv.out_channels == 3 and module.fc.out_features == 4
    mlp = user_recipe("models.py:make_mlp", {"hidden": 5}, (1, 8, 8), 4, base_dir=models).build()
    assert mlp[1].out_features == 5 and mlp[3].out_features == 4  # **kwargs: num_classes given too
    network = Network(module)
    assert network.buffers.names == ("bn.running_mean", "bn.running_var", "bn.num_batches_tracked")
    assert network.params.size == sum(p.numel() for p in module.parameters())


def test_the_same_seed_builds_the_same_initial_model(models: Path) -> None:
    recipe = user_recipe("models.py:Small", {}, (1, 8, 8), 4, base_dir=models)
    torch.manual_seed(3)
    a = Network(recipe.build()).initial_params()
    torch.manual_seed(3)
    assert torch.equal(a, Network(recipe.build()).initial_params())


def test_frozen_parameters_neither_train_nor_travel(models: Path) -> None:
    module = user_recipe("models.py:Frozen", {}, (1, 8, 8), 4, base_dir=models).build()
    network = Network(module)
    assert network.params.names == ("head.weight", "head.bias")
    assert model_num_bytes(module) == 4 * (16 * 4 + 4)


@pytest.mark.parametrize(
    "reference,args,message",
    [
        ("models.py:Nope", {}, "models.py: no 'Nope' in this model file; defined there: Small, make_mlp, Broken"),
        ("missing.py:Net", {}, "model file not found: "),
        ("models.py:FailsToBuild", {"depth": 9}, r"models.py:35: ValueError in FailsToBuild\(depth=9\): depth 9"),
        ("models.py:not_a_module", {}, r"not_a_module\(num_classes=4, input_shape=\(1, 8, 8\)\) returned str, not a"),
    ],
)
def test_a_model_that_cannot_be_built_names_the_file_and_line(models: Path, reference, args, message) -> None:
    with pytest.raises(ModelError, match=message):
        user_recipe(reference, args, (1, 8, 8), 4, base_dir=models).build()


def test_a_model_that_fails_on_a_sample_names_its_file_and_line(models: Path) -> None:
    recipe = user_recipe("models.py:Broken", {}, (1, 8, 8), 4, base_dir=models)
    x, y = _data()
    with pytest.raises(ModelError, match=r"models.py:29: RuntimeError in models.py:Broken on two training samples"):
        check_model(recipe.build(), recipe, x, y, 4)
    tokens = torch.zeros(8, 5, dtype=torch.long)
    with pytest.raises(ModelError, match="the samples are integers, as token ids are; store images as floats"):
        small = user_recipe("models.py:Small", {}, (1, 8, 8), 4, base_dir=models)
        check_model(small.build(), small, tokens, y, 4)


def test_outputs_that_do_not_match_the_labels_are_refused() -> None:
    x, y = _data()
    recipe = builtin_recipe("mlp", (1, 8, 8), 3)
    with pytest.raises(ModelError, match="the model scores 3 classes, but the data's labels reach 3 \\(4 classes\\)"):
        check_model(recipe.build(), recipe, x, y, 4)
    per_token = torch.zeros(8, 5, dtype=torch.long)
    full = builtin_recipe("mlp", (1, 8, 8), 4)
    with pytest.raises(ModelError, match=r"shape \(2, 4\); with one label per token \(N, T\) it must be \(B, T, C\)"):
        check_model(full.build(), full, x, per_token, 4)
    assert check_model(full.build(), full, x, y, 4) == (4,)


def test_a_model_with_nothing_to_train_is_refused(models: Path) -> None:
    recipe = builtin_recipe("logistic", (1, 8, 8), 4)
    module = recipe.build().requires_grad_(False)
    with pytest.raises(ModelError, match="the model has no trainable parameters"):
        check_model(module, recipe, *_data(), 4)


def test_a_convolutional_built_in_refuses_samples_that_are_not_images() -> None:
    with pytest.raises(ModelError, match=r"lenet5 takes images \(C, H, W\); these samples have shape \(20,\)"):
        builtin_recipe("lenet5", (20,), 4)
    assert builtin_recipe("mlp", (20,), 4).build()(torch.zeros(2, 20)).shape == (2, 4)  # vectors: any MLP


def test_batchnorm1d_is_counted_and_checked_on_two_samples_in_training_mode(tmp_path: Path) -> None:
    """BatchNorm1d in training mode refuses a batch of one; the count runs on two copies of the sample (the
    module's buffers untouched) and halves the count, equal to the hand count, on the CPU and the meta device."""
    (tmp_path / "bn1d.py").write_text(BATCHNORM_MLP)
    recipe = user_recipe("bn1d.py:NormedMLP", {}, (1, 8, 8), 4, base_dir=tmp_path)
    module = recipe.build()
    x, y = _data()
    assert check_model(module, recipe, x, y, 4) == (4,)
    before = {k: v.clone() for k, v in module.state_dict().items()}
    hand = (2 * 64 * 32 + 32) + (2 * 32 * 4 + 4)
    with recipe.guard():
        assert forward_flops_per_sample(module, x[:1]) == hand
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())  # running stats as they were
    assert module.training  # left in the mode it was in
    with torch.device("meta"):
        on_meta = recipe.build()
    assert forward_flops_per_sample(on_meta, torch.empty(1, 1, 8, 8, device="meta")) == hand
    dots = user_recipe("bn1d.py:DotHeads", {}, (1, 8, 8), 2, base_dir=tmp_path).build()
    assert forward_flops_per_sample(dots, x[:1]) == 2 * (2 * 64)  # F.linear with a 1-D weight: one output each


def test_a_failure_of_netfls_own_count_is_not_blamed_on_the_users_line(tmp_path: Path, monkeypatch) -> None:
    """A formula of the FLOP count that fails is said to be netfl's, with the way around it, and no file:line
    of the user's (whose forward pass merely called the function)."""
    from netfl.learn.models import flops

    def broken(*args, **kwargs):
        raise IndexError("tuple index out of range")

    monkeypatch.setitem(flops._FORMULAS, nn.functional.linear, broken)
    (tmp_path / "bn1d.py").write_text(BATCHNORM_MLP)
    recipe = user_recipe("bn1d.py:NormedMLP", {}, (1, 8, 8), 4, base_dir=tmp_path)
    x, _ = _data()
    with pytest.raises(ModelError) as caught, recipe.guard():
        forward_flops_per_sample(recipe.build(), x[:1])
    message = str(caught.value)
    assert message.startswith("netfl could not count the FLOPs of a call to linear in the model (IndexError")
    assert "a failure of netfl's FLOP count, not of the model: give model.flops_per_sample" in message
    assert "bn1d.py:" not in message
