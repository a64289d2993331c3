"""Every training path against one job at a time by the book (netfl.learn.training.train_one), for every
model family a user trains: an MLP (built-in and written as a user would), a CNN, LeNet-5, a module with
BatchNorm, a recurrent module with per-token outputs; with unequal job lengths, weight decay and gradient
corrections; and the same bits for one and two worker threads."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from netfl.learn.fused_mlp import linear_relu_chain
from netfl.learn.models import build_model
from netfl.learn.network import Network
from netfl.learn.objective import Correction
from netfl.learn.runtime import use_threads
from netfl.learn.stacked import CPU_CHUNK_BYTES, activation_bytes, jobs_per_chunk
from netfl.learn.trainer import Trainer, TrainJob, choose_path
from netfl.learn.training import minibatch_indices, train_one


class UserMLP(nn.Module):
    """The built-in mlp with hidden [16, 8], written as a user would."""

    def __init__(self, inputs: int = 64, classes: int = 4):
        super().__init__()
        self.fc1, self.fc2, self.out = nn.Linear(inputs, 16), nn.Linear(16, 8), nn.Linear(8, classes)

    def forward(self, x):
        x = torch.relu(self.fc1(x.flatten(1)))
        return self.out(nn.functional.relu(self.fc2(x)))


class SmallBN(nn.Module):
    """Conv, BatchNorm, ReLU, pool, Linear: a user's module with buffers."""

    def __init__(self, classes: int = 4):
        super().__init__()
        self.conv = nn.Conv2d(1, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.fc = nn.Linear(6 * 4 * 4, classes)

    def forward(self, x):
        return self.fc(nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2).flatten(1))


class CharGRU(nn.Module):
    """Embedding, GRU, Linear: a score per token (B, T, C) for next-token prediction."""

    def __init__(self, vocabulary: int = 7):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, 5)
        self.gru = nn.GRU(5, 12, batch_first=True)
        self.out = nn.Linear(12, vocabulary)

    def forward(self, x):
        h, _ = self.gru(self.embed(x))
        return self.out(h)


def _family(name: str) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    torch.manual_seed(3)
    if name == "gru":
        tokens = torch.randint(0, 7, (40, 9), generator=g)
        return CharGRU(), tokens, torch.randint(0, 7, (40, 9), generator=g)
    x, y = torch.rand(40, 1, 8, 8, generator=g), torch.randint(0, 4, (40,), generator=g)
    modules = {
        "mlp": lambda: build_model("mlp", (1, 8, 8), 4, hidden=(16, 8)),
        "user_mlp": UserMLP,
        "cnn": lambda: build_model("cnn", (1, 8, 8), 4),
        "lenet5": lambda: build_model("lenet5", (1, 8, 8), 4),
        "batchnorm": SmallBN,
    }
    return modules[name](), x, y


FAMILIES = ["mlp", "user_mlp", "cnn", "lenet5", "batchnorm", "gru"]


def _jobs(network: Network, x: torch.Tensor, corrected: bool) -> list[TrainJob]:
    size = network.params.size
    g = torch.Generator().manual_seed(11)
    jobs = []
    for j, steps in enumerate([3, 1, 4, 2]):
        minibatches = minibatch_indices(len(x), 5, steps, torch.Generator().manual_seed(20 + j))
        correction = Correction(0.3, 0.1 * torch.randn(size, generator=g)) if corrected else None
        jobs.append(TrainJob(minibatches, seed=100 + j, correction=correction))
    return jobs


def _reference(network, start, buffers, x, y, jobs, weight_decay):
    return [
        train_one(
            network,
            start,
            x,
            y,
            job.minibatches,
            lr=0.1,
            weight_decay=weight_decay,
            buffers=buffers,
            correction=job.correction,
        )
        for job in jobs
    ]


def _paths(name: str) -> list[str]:
    return (["fused"] if name in ("mlp", "user_mlp") else []) + ["replicas", "stacked"]


@pytest.fixture
def restore_threads():
    yield
    use_threads(1)


@pytest.mark.parametrize("corrected", [False, True], ids=["plain", "corrected"])
@pytest.mark.parametrize("name", FAMILIES)
def test_every_path_equals_one_job_at_a_time(name: str, corrected: bool, restore_threads) -> None:
    module, x, y = _family(name)
    network = Network(module)
    start, buffers = network.initial_params(), network.initial_buffers()
    jobs = _jobs(network, x, corrected)
    weight_decay = 0.01
    expected = _reference(network, start, buffers, x, y, jobs, weight_decay)
    for path in _paths(name):
        trainer = Trainer(network, x, y, device=torch.device("cpu"), path=path)
        for threads in (1, 2):
            use_threads(threads)
            got = trainer.train(start, jobs, lr=0.1, weight_decay=weight_decay, start_buffers=buffers)
            for (end, end_buffers), (want, want_buffers) in zip(got, expected):
                torch.testing.assert_close(end, want, rtol=2e-5, atol=2e-6, msg=f"{name} on {path}")
                if network.buffers:
                    torch.testing.assert_close(end_buffers, want_buffers, rtol=2e-5, atol=2e-6)
            if threads == 1:
                one_thread = [(e.clone(), None if b is None else b.clone()) for e, b in got]
            else:  # the same bits whatever the thread count
                for (e1, b1), (e2, b2) in zip(one_thread, got):
                    assert torch.equal(e1, e2), f"{name} on {path}: 1 and 2 threads differ"
                    assert b1 is None or torch.equal(b1, b2)
    assert not torch.equal(expected[0][0], expected[1][0])  # jobs of different lengths ended apart
    assert torch.equal(network.initial_params(), start)  # the module itself is only a recipe: never trained


def test_each_module_trains_on_the_path_it_allows() -> None:
    chosen = {}
    for name in FAMILIES:
        module, x, y = _family(name)
        chosen[name] = Trainer(Network(module), x, y, device=torch.device("cpu")).path
    assert chosen == {n: "fused" if n in ("mlp", "user_mlp") else "replicas" for n in FAMILIES}


def test_a_user_mlp_is_recognised_however_it_is_written() -> None:
    assert linear_relu_chain(UserMLP(), flat_input=False) == ["fc1", "fc2", "out"]
    assert linear_relu_chain(build_model("mlp_softmax", (1, 8, 8), 4), flat_input=False) is None  # a softmax
    assert linear_relu_chain(SmallBN(), flat_input=False) is None

    class Skip(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 64)

        def forward(self, x):
            x = x.flatten(1)
            return self.fc(x) + x  # a skip connection: not a chain

    assert linear_relu_chain(Skip(), flat_input=False) is None
    vector = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2))
    assert linear_relu_chain(vector, flat_input=True) == ["0", "2"]  # samples already vectors: no flatten needed
    assert linear_relu_chain(vector, flat_input=False) is None


def test_a_path_the_module_does_not_allow_is_refused() -> None:
    module, x, y = _family("batchnorm")
    with pytest.raises(ValueError, match="fused kernel trains Linear/ReLU stacks"):
        Trainer(Network(module), x, y, device=torch.device("cpu"), path="fused")
    with pytest.raises(ValueError, match="unknown training path 'fast'"):
        Trainer(Network(module), x, y, device=torch.device("cpu"), path="fast")


class Noisy(nn.Module):
    """Dropout layers, and noise drawn from torch's global generator in forward."""

    def __init__(self, global_noise: bool):
        super().__init__()
        self.global_noise = global_noise
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 4))

    def forward(self, x):
        if self.global_noise:
            x = x + 0.1 * torch.randn_like(x)
        return self.net(x)


@pytest.mark.parametrize("global_noise", [False, True], ids=["dropout", "global-generator"])
def test_random_modules_give_the_same_bits_with_any_thread_count(global_noise: bool, restore_threads) -> None:
    """Dropout layers draw from a generator seeded per job; a module drawing from torch's global generator is
    found and trains one job at a time, torch's generator seeded per job."""
    torch.manual_seed(0)
    network = Network(Noisy(global_noise))
    _, x, y = _family("mlp")
    trainer = Trainer(network, x, y, device=torch.device("cpu"))
    assert trainer.path == "replicas" and trainer.global_random == global_noise
    assert ("seeded per job" in trainer.describe()) == global_noise
    jobs = _jobs(network, x, corrected=False)
    runs = []
    for threads in (1, 2, 1):
        use_threads(threads)
        torch.manual_seed(99)  # whatever state torch's generator is in, the jobs' seeds decide
        runs.append([end for end, _ in trainer.train(network.initial_params(), jobs, lr=0.1, weight_decay=0.0)])
    for other in runs[1:]:
        assert all(torch.equal(a, b) for a, b in zip(runs[0], other))
    other_seeds = [TrainJob(j.minibatches, seed=j.seed + 1) for j in jobs]
    moved = trainer.train(network.initial_params(), other_seeds, lr=0.1, weight_decay=0.0)
    assert not torch.equal(moved[0][0], runs[0][0])  # the seed is what decides the masks


def test_the_path_is_chosen_by_the_module_and_the_device() -> None:
    """On a GPU a module vmap can batch is stacked (a round of small CNNs: a few large kernels); elsewhere and
    otherwise, replicas; an MLP is fused anywhere."""

    def choose(device: str, *, fused=False, vmap=True, random=False, forced=None):
        def cannot(path: str) -> str:
            return "" if path != "stacked" or (vmap and not random) else "vmap cannot batch it"

        return choose_path(forced=forced, device_type=device, cannot=cannot, fused=fused, global_random=random,
                           channels_last=False)[0]  # fmt: skip

    assert choose("cuda") == "stacked" and choose("cpu") == "replicas"
    assert choose("cuda", vmap=False) == "replicas" and choose("cuda", random=True) == "replicas"
    assert choose("cuda", fused=True) == choose("cpu", fused=True) == "fused"
    assert choose("cpu", forced="stacked") == "stacked"
    with pytest.raises(ValueError, match="training path stacked: vmap cannot batch it"):
        choose("cpu", forced="stacked", vmap=False)


def test_a_gpu_chunk_fills_half_the_free_memory_and_a_cpu_chunk_the_cache() -> None:
    assert jobs_per_chunk(100 * 2**20, torch.device("cuda"), free_bytes=8 * 2**30) == 40  # 4 GiB / 100 MiB
    assert jobs_per_chunk(100 * 2**30, torch.device("cuda"), free_bytes=8 * 2**30) == 1  # at least one job
    assert jobs_per_chunk(2**20, torch.device("cpu")) == CPU_CHUNK_BYTES // 2**20


def test_a_jobs_activations_are_measured_on_its_minibatch() -> None:
    network = Network(nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)))
    x, y = torch.rand(5, 4), torch.tensor([0, 1, 0, 1, 1])
    assert activation_bytes(network, x, y) == 2 * 4 * 5 * (3 + 3 + 2)  # every output and its gradient, float32
