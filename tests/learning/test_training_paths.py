"""Every training path against one job at a time by the book (netfl.learn.training.reference.train_one), for every
model family a user trains: an MLP (built-in and written as a user would), a CNN, LeNet-5, a module with
BatchNorm, a recurrent module with per-token outputs; with unequal job lengths, weight decay and gradient
corrections; and the same bits for one and two worker threads. The tests taking a ``device`` run on the CPU and,
where a GPU is, on ``cuda`` (tests/device_support.py)."""

from __future__ import annotations

import pytest
import torch
from device_support import DEVICES, float32_exact, peak_bytes, tolerance
from torch import nn

from netfl.learn.models.builtin import build_model
from netfl.learn.models.flat_model import Network
from netfl.learn.training.fused_mlp import linear_relu_chain
from netfl.learn.training.objective import Correction
from netfl.learn.training.reference import minibatch_indices, train_one
from netfl.learn.training.runtime import use_threads
from netfl.learn.training.stacked import (
    CPU_CHUNK_BYTES,
    GPU_MEMORY_SHARE,
    FunctionalKernel,
    activation_bytes,
    jobs_per_chunk,
    train_stacked,
)
from netfl.learn.training.trainer import Trainer, TrainJob, choose_path


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
        correction = Correction(0.3, (0.1 * torch.randn(size, generator=g)).to(x.device)) if corrected else None
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
    fused, batched = ["fused"] if name in ("mlp", "user_mlp") else [], ["batched"] if name == "gru" else []
    return fused + ["replicas", "stacked"] + batched


@pytest.fixture
def restore_threads():
    yield
    use_threads(1)


def _trainer(network: Network, x: torch.Tensor, y: torch.Tensor, device: str, path: str) -> Trainer | None:
    """The trainer on ``path``, or None for a path a GPU's vmap cannot batch the module on (then the automatic
    choice must not be that path either)."""
    try:
        return Trainer(network, x, y, device=torch.device(device), path=path)
    except ValueError as exc:
        if device == "cpu" or path != "stacked" or "vmap cannot batch it" not in str(exc):
            raise
        assert Trainer(network, x, y, device=torch.device(device)).path == "replicas"
        return None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("corrected", [False, True], ids=["plain", "corrected"])
@pytest.mark.parametrize("name", FAMILIES)
def test_every_path_equals_one_job_at_a_time(name: str, corrected: bool, device: str, restore_threads) -> None:
    module, x, y = _family(name)
    network = Network(module.to(device))  # as the learner holds it: the module where the data is
    x, y = x.to(device), y.to(device)
    start, buffers = network.initial_params(), network.initial_buffers()
    jobs = _jobs(network, x, corrected)
    weight_decay = 0.01
    close = tolerance(device)
    with float32_exact():
        expected = _reference(network, start, buffers, x, y, jobs, weight_decay)
        for path in _paths(name):
            trainer = _trainer(network, x, y, device, path)
            if trainer is None:
                continue
            for threads in (1, 2):
                use_threads(threads)
                got = trainer.train(start, jobs, lr=0.1, weight_decay=weight_decay, start_buffers=buffers)
                for (end, end_buffers), (want, want_buffers) in zip(got, expected):
                    assert end.device == want.device == start.device
                    torch.testing.assert_close(end, want, **close, msg=f"{name} on {path}")
                    if network.buffers:
                        torch.testing.assert_close(end_buffers, want_buffers, **close)
                if threads == 1:
                    one_thread = [(e.clone(), None if b is None else b.clone()) for e, b in got]
                elif device == "cpu":  # the same bits whatever the thread count (a GPU's atomics may reorder sums)
                    for (e1, b1), (e2, b2) in zip(one_thread, got):
                        assert torch.equal(e1, e2), f"{name} on {path}: 1 and 2 threads differ"
                        assert b1 is None or torch.equal(b1, b2)
    assert not torch.equal(expected[0][0], expected[1][0])  # jobs of different lengths ended apart
    assert torch.equal(network.initial_params(), start)  # the module itself is only a recipe: never trained


@pytest.mark.parametrize("device", DEVICES)
def test_each_module_trains_on_the_path_it_allows(device: str) -> None:
    """An MLP is fused anywhere; on a CPU a recurrent module is batched and every other module trains on replicas,
    on a GPU stacked by vmap (a recurrent module where vmap can batch it, else on replicas)."""
    chosen = {}
    for name in FAMILIES:
        module, x, y = _family(name)
        chosen[name] = Trainer(Network(module.to(device)), x.to(device), y.to(device), device=torch.device(device)).path
    other = "replicas" if device == "cpu" else "stacked"
    expected = {n: "fused" if n in ("mlp", "user_mlp") else other for n in FAMILIES}
    if device != "cpu":
        assert chosen["gru"] in ("stacked", "replicas")
        expected["gru"] = chosen["gru"]
    else:
        expected["gru"] = "batched"
    assert chosen == expected


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


def test_a_model_with_weights_outside_linear_layers_is_not_traced(monkeypatch) -> None:
    import netfl.learn.training.fused_mlp as fused_mlp

    traced = []
    real = fused_mlp.fx.symbolic_trace
    monkeypatch.setattr(fused_mlp.fx, "symbolic_trace", lambda m: traced.append(m) or real(m))
    bag = nn.Sequential(nn.EmbeddingBag(50, 4), nn.Linear(4, 2))
    assert linear_relu_chain(bag, flat_input=True) is None and traced == []
    assert linear_relu_chain(nn.Sequential(nn.Linear(6, 4), nn.ReLU()), flat_input=True) is None and len(traced) == 1


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


class BNDropout(nn.Module):
    """A user's module with BatchNorm and dropout: buffers that move, and masks that must follow the job's seed."""

    def __init__(self, classes: int = 4):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(1, 6, 3, padding=1), nn.BatchNorm2d(6)
        self.drop, self.fc = nn.Dropout(0.3), nn.Linear(6 * 4 * 4, classes)

    def forward(self, x):
        h = nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2).flatten(1)
        return self.fc(self.drop(h))


@pytest.mark.parametrize("device", DEVICES)
def test_a_user_module_with_batchnorm_and_dropout_trains_reproducibly(device: str, restore_threads) -> None:
    """On replicas (vmap would share the dropout masks between jobs), the masks drawn from a generator seeded per
    job on the device: the same seeds give the same results, other seeds others; each job's BatchNorm statistics
    move; everything stays on the device."""
    torch.manual_seed(0)
    network = Network(BNDropout().to(device))
    _, x, y = _family("mlp")
    x, y = x.to(device), y.to(device)
    trainer = Trainer(network, x, y, device=torch.device(device))
    assert trainer.path == "replicas" and not trainer.global_random
    start, buffers = network.initial_params(), network.initial_buffers()
    jobs = _jobs(network, x, corrected=False)
    runs = []
    for threads in (1, 2):
        use_threads(threads)
        runs.append(trainer.train(start, jobs, lr=0.1, weight_decay=0.0, start_buffers=buffers))
    for (e1, b1), (e2, b2) in zip(*runs):
        assert e1.device == b1.device == start.device and torch.isfinite(e1).all()
        if device == "cpu":
            assert torch.equal(e1, e2) and torch.equal(b1, b2)
        else:
            torch.testing.assert_close(e1, e2, **tolerance(device))
            torch.testing.assert_close(b1, b2, **tolerance(device))
        assert not torch.equal(b1, buffers)  # the running statistics moved
    reseeded = trainer.train(start, [TrainJob(j.minibatches, seed=j.seed + 1) for j in jobs], lr=0.1, weight_decay=0.0,
                             start_buffers=buffers)  # fmt: skip
    assert (reseeded[0][0] - runs[0][0][0]).abs().max() > 1e-4  # the seed decides the masks


@pytest.mark.parametrize("device", DEVICES)
def test_a_stacked_chunk_holds_no_more_memory_than_its_sizing_counts(device: str) -> None:
    """A GPU chunk is sized by a job's bytes as counted (its parameters three times, the activations of a
    minibatch measured once): what one more job in a chunk really holds at the peak of training must fit in that
    count (else a chunk sized to half the free memory could run out of it), and not be a small part of it (else
    the GPU would be left mostly idle). Measured on the GPU by ``torch.cuda.max_memory_allocated``, on the CPU by
    malloc's bytes in use."""
    torch.manual_seed(0)
    x, y = torch.rand(200, 1, 28, 28).to(device), torch.randint(0, 10, (200,)).to(device)
    network = Network(build_model("cnn", (1, 28, 28), 10).to(device))
    start, batch = network.initial_params(), 16
    counted = 3 * start.numel() * start.element_size() + activation_bytes(network, x[:batch], y[:batch])
    trainer = Trainer(network, x, y, device=torch.device(device), path="stacked")
    if device != "cpu":
        assert trainer._per_job_bytes(start, batch) == counted
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        per_chunk = jobs_per_chunk(counted, torch.device(device))
        assert per_chunk * counted <= GPU_MEMORY_SHARE * free < (per_chunk + 1) * counted
    kernel = FunctionalKernel(network)

    def chunk_of(n: int) -> int:
        jobs = [
            TrainJob(minibatch_indices(len(x), batch, 2, torch.Generator().manual_seed(j)), seed=j) for j in range(n)
        ]

        def work() -> None:
            train_stacked(kernel, start, x, y, jobs, lr=0.1, weight_decay=0.0, per_chunk=n)

        work()  # warm-up: caches and workspaces that any chunk size keeps
        return peak_bytes(device, work)

    one, nine = chunk_of(1), chunk_of(9)
    per_job = (nine - one) / 8
    assert counted / 8 < per_job <= counted, (
        f"one more job holds {per_job / 2**20:.2f} MiB, counted {counted / 2**20:.2f}"
    )
