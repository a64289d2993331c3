"""The batched path (netfl.learn.training.batched) against one job at a time, for each layer kind it computes, in
modules written as a user would: an LSTM with an embedding (several layers, bidirectional, batch_first either
way), a GRU and an RNN, a Transformer encoder with dropout, BatchNorm and LayerNorm mixed, an embedding bag,
attention with weights and padding masks; jobs of unequal length, weight decay and a correction. And what it
refuses: each such module falls back to replicas, saying why, never trains wrong."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from torch import nn
from torch.nn import functional as F

import netfl
from netfl.learn.models.flat_model import Network
from netfl.learn.training.objective import Correction
from netfl.learn.training.reference import minibatch_indices, train_one
from netfl.learn.training.runtime import use_threads
from netfl.learn.training.trainer import Trainer, TrainJob

V = 13  # vocabulary


class LSTMWithEmbedding(nn.Module):
    """Embedding (with a padding id), a 2-layer bidirectional LSTM, LayerNorm and BatchNorm1d mixed, dropout."""

    def __init__(self, batch_first: bool = True):
        super().__init__()
        self.batch_first = batch_first
        self.embed = nn.Embedding(V, 6, padding_idx=0)
        self.lstm = nn.LSTM(6, 8, num_layers=2, batch_first=batch_first, bidirectional=True)
        self.norm = nn.LayerNorm(16)
        self.bn = nn.BatchNorm1d(16)
        self.drop = nn.Dropout(0.25)
        self.out = nn.Linear(16, 4)

    def forward(self, tokens):
        e = self.embed(tokens if self.batch_first else tokens.t())
        states, (h_n, c_n) = self.lstm(e)
        last = states[:, -1] if self.batch_first else states[-1]
        return self.out(self.drop(self.bn(self.norm(last) + h_n[-1].repeat(1, 2))))


class LSTMWithState(nn.Module):
    """A time-major 2-layer LSTM without biases, its initial state (h0, c0) computed from the tokens."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, 5)
        self.lstm = nn.LSTM(5, 6, num_layers=2, bias=False)
        self.h0, self.c0 = nn.Linear(5, 6), nn.Linear(5, 6)
        self.out = nn.Linear(6, 4)

    def forward(self, tokens):
        e = self.embed(tokens.t())  # (T, B, 5)
        start = e.mean(0)
        h0, c0 = (torch.tanh(layer(start)).unsqueeze(0).repeat(2, 1, 1) for layer in (self.h0, self.c0))
        states, _ = self.lstm(e, (h0, c0))
        return self.out(states[-1])


class GRUAndRNN(nn.Module):
    """Per-token scores: embedding, a 2-layer time-major GRU with an initial state, a bidirectional ReLU RNN."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, 5)
        self.gru = nn.GRU(5, 7, num_layers=2)
        self.rnn = nn.RNN(7, 4, nonlinearity="relu", bidirectional=True, bias=False)
        self.h0 = nn.Linear(5, 7)
        self.out = nn.Linear(8, V)

    def forward(self, tokens):
        e = self.embed(tokens).transpose(0, 1)  # (T, B, 5)
        h0 = torch.tanh(self.h0(e.mean(0))).unsqueeze(0).repeat(2, 1, 1)
        states, _ = self.gru(e, h0)
        states, _ = self.rnn(states)
        return self.out(states.transpose(0, 1))


class Encoder(nn.Module):
    """A Transformer encoder classifier: embedding, learned positions, 2 layers with dropout (attention dropout
    included, which draws from torch's generator on the one-at-a-time path), a padding mask, mean pooling."""

    def __init__(self, batch_first: bool = True, norm_first: bool = False):
        super().__init__()
        self.batch_first = batch_first
        self.embed = nn.Embedding(V, 16)
        self.position = nn.Embedding(9, 16)
        layer = nn.TransformerEncoderLayer(16, 4, 24, dropout=0.2, batch_first=batch_first, norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(16), enable_nested_tensor=False)
        self.out = nn.Linear(16, 4)

    def forward(self, tokens):
        where = torch.arange(tokens.shape[1], device=tokens.device).expand_as(tokens)
        e = self.embed(tokens) + self.position(where)
        padding = tokens == 0
        if self.batch_first:
            h = self.encoder(e, src_key_padding_mask=padding)
        else:
            h = self.encoder(e.transpose(0, 1), src_key_padding_mask=padding).transpose(0, 1)
        return self.out(h.mean(1))


class AttentionWithWeights(nn.Module):
    """nn.MultiheadAttention asked for its weights (time-major, separate key/value), and a hand-written head on
    F.scaled_dot_product_attention with a causal mask."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, 8)
        self.attend = nn.MultiheadAttention(8, 2, dropout=0.1, kdim=6, vdim=6)
        self.kv = nn.Linear(8, 6)
        self.qkv = nn.Linear(8, 24)
        self.out = nn.Linear(16, 4)

    def forward(self, tokens):
        e = self.embed(tokens)
        kv = self.kv(e).transpose(0, 1)
        a, weights = self.attend(e.transpose(0, 1), kv, kv, key_padding_mask=tokens == 0)
        q, k, v = self.qkv(e).view(*e.shape[:2], 3, 2, 4).permute(2, 0, 3, 1, 4)
        b = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).flatten(2)
        return self.out(torch.cat([a.transpose(0, 1), b], -1).mean(1)) + weights.sum() * 0.01


class Bag(nn.Module):
    """A bag-of-words text classifier: EmbeddingBag (mean, a padding id), a hidden layer."""

    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(V, 8, mode="mean", padding_idx=0)
        self.hidden = nn.Linear(8, 8)
        self.out = nn.Linear(8, 4)

    def forward(self, tokens):
        return self.out(torch.relu(self.hidden(self.bag(tokens))))


MODULES = {
    "lstm": LSTMWithEmbedding,
    "lstm_time_major": lambda: LSTMWithEmbedding(batch_first=False),
    "lstm_no_bias_with_state": LSTMWithState,
    "gru_rnn": GRUAndRNN,
    "transformer": Encoder,
    "transformer_time_major_norm_first": lambda: Encoder(batch_first=False, norm_first=True),
    "attention_weights": AttentionWithWeights,
    "embedding_bag": Bag,
}


def _data(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    tokens = torch.randint(0, V, (30, 9), generator=g)
    tokens[::4, -3:] = 0  # some padding
    if name == "gru_rnn":
        return tokens, torch.randint(0, V, (30, 9), generator=g)  # a label per token
    return tokens, torch.randint(0, 4, (30,), generator=g)


def _jobs(network: Network, corrected: bool) -> list[TrainJob]:
    g = torch.Generator().manual_seed(3)
    jobs = []
    for j, steps in enumerate([3, 1, 4, 2, 3]):
        minibatches = minibatch_indices(30, 4, steps, torch.Generator().manual_seed(40 + j))
        shift = 0.1 * torch.randn(network.params.size, generator=g) if corrected else None
        jobs.append(TrainJob(minibatches, seed=70 + j, correction=Correction(0.2, shift) if corrected else None))
    return jobs


@pytest.fixture
def restore_threads():
    yield
    use_threads(1)


@pytest.mark.parametrize("corrected", [False, True], ids=["plain", "corrected"])
@pytest.mark.parametrize("name", list(MODULES))
def test_the_batched_path_equals_one_job_at_a_time(name: str, corrected: bool, restore_threads) -> None:
    torch.manual_seed(1)
    network = Network(MODULES[name]())
    x, y = _data(name)
    start, buffers = network.initial_params(), network.initial_buffers()
    jobs = _jobs(network, corrected)
    batched = Trainer(network, x, y, device=torch.device("cpu"))
    assert batched.path == "batched", batched.describe()
    alone = Trainer(network, x, y, device=torch.device("cpu"), path="replicas")
    expected = alone.train(start, jobs, lr=0.2, weight_decay=0.01, start_buffers=buffers)
    # float32 rounding; BatchNorm on minibatches of 4 amplifies it (a division by a small variance)
    close = {"rtol": 1e-4, "atol": 2e-5} if network.buffers else {"rtol": 2e-5, "atol": 2e-6}
    for threads in (1, 2):
        use_threads(threads)
        got = batched.train(start, jobs, lr=0.2, weight_decay=0.01, start_buffers=buffers)
        for (end, end_buffers), (want, want_buffers) in zip(got, expected):
            torch.testing.assert_close(end, want, **close)
            if network.buffers:
                torch.testing.assert_close(end_buffers, want_buffers, **close)
        if threads == 1:
            first = [e.clone() for e, _ in got]
        else:
            assert all(torch.equal(a, b) for a, (b, _) in zip(first, got))  # the same bits with 2 threads
    moved = [float((end - start).abs().max()) for end, _ in expected]
    assert min(moved) > 1e-3 and not torch.equal(expected[0][0], expected[4][0])  # the jobs went apart


def test_without_dropout_the_batched_path_equals_training_by_the_book() -> None:
    """The same against :func:`train_one` (functional_call through torch's own LSTM), dropout and the
    one-at-a-time path's seeding out of the picture."""
    torch.manual_seed(2)
    module = LSTMWithEmbedding()
    module.drop, module.bn = nn.Identity(), nn.Identity()  # well conditioned: float32 rounding alone
    network = Network(module)
    x, y = _data("lstm")
    start, buffers = network.initial_params(), network.initial_buffers()
    jobs = _jobs(network, corrected=False)
    got = Trainer(network, x, y, device=torch.device("cpu")).train(start, jobs, lr=0.2, weight_decay=0.0,
                                                                   start_buffers=buffers)  # fmt: skip
    for job, (end, end_buffers) in zip(jobs, got):
        want, want_buffers = train_one(network, start, x, y, job.minibatches, lr=0.2, buffers=buffers)
        torch.testing.assert_close(end, want, rtol=2e-5, atol=2e-6)
        assert end_buffers is None and want_buffers is None


class SumBag(nn.Module):
    """An embedding bag summing its ids (no padding id), two of them through one LSTM cell of a sequence."""

    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(V, 6, mode="sum")
        self.lstm = nn.LSTM(6, 5)  # time-major, over the two halves of the ids
        self.out = nn.Linear(5, 4)

    def forward(self, tokens):
        halves = torch.stack([self.bag(tokens[:, :4]), self.bag(tokens[:, 4:])])
        return self.out(self.lstm(halves)[0][-1])


@pytest.mark.parametrize("name", ["lstm", "gru_rnn", "transformer", "embedding_bag", "sum_bag"])
def test_a_chunks_first_step_computed_as_one_product_equals_each_clients_own(name: str) -> None:
    """A chunk's jobs start from one model; its first step computes every client's rows with one matrix
    product (and an embedding bag's gradient sparse): each client's gradient is still its own, and equals the
    gradient computed with each client's weights apart."""
    from netfl.learn.training.batched import BatchedKernel, _Copy, plan_for
    from netfl.learn.training.stacked import stacked_views

    torch.manual_seed(4)
    network = Network(SumBag() if name == "sum_bag" else MODULES[name]())
    x, y = _data(name)
    plan, why = plan_for(network, x, y)
    assert plan is not None, why
    k = 3
    w = network.initial_params().expand(k, -1).clone()
    grads = {}
    for shared in (False, True):
        made = _Copy(network, plan)
        leaves = {n: v.clone().requires_grad_(True) for n, v in stacked_views(w, network.params).items()}
        own = {n: v.expand(k, *v.shape).clone() for n, v in network.buffer_tensors(network.initial_buffers()).items()}
        gens = [[torch.Generator().manual_seed(s) for s in (1, 2, 3)] for _ in range(2)]
        got = BatchedKernel.gradients(made, leaves, own, x[: 4 * k], y[: 4 * k], *gens, shared=shared)
        grads[shared] = [g.to_dense() if g.is_sparse else g for g in got]
    assert any(float(g.abs().max()) > 0 for g in grads[False])
    for apart, together in zip(grads[False], grads[True]):
        torch.testing.assert_close(together, apart, rtol=1e-5, atol=1e-6)
    assert not torch.equal(grads[False][0][0], grads[False][0][1])  # the clients' gradients differ


def test_chunks_are_made_even() -> None:
    from netfl.learn.training.batched import CHUNK_JOBS, BatchPlan

    plan = BatchPlan({})
    assert plan.chunk_jobs(1000) == CHUNK_JOBS == 32
    assert [plan.chunk_jobs(1000, n) for n in (1, 5, 32, 33, 50, 64, 65, 100)] == [1, 5, 32, 17, 25, 32, 22, 25]
    assert plan.chunk_jobs(10 * 2**20, 50) == 1  # 10 MiB of parameters a job: one a chunk


def test_embedding_tables_are_read_and_updated_in_the_chunks_rows() -> None:
    """A chunk's tables are views into its rows: read as one matrix where the row length is a multiple of the
    width (what the batched kernel pads to), updated in place either way, equal to a dense update by hand."""
    from netfl.learn.training.client_layers import add_rows, client_tables

    k, rows, width = 3, 5, 4
    for length in (24, 23):  # aligned (24 = 6 x 4) and not: the tables start 23 floats apart
        w = torch.randn(k, length)
        tables = w[:, 2 : 2 + rows * width].view(k, rows, width)
        view = client_tables(tables)
        assert (view is None) == (length % width != 0)
        if view is not None:
            matrix, step = view
            assert step == 6 and torch.equal(matrix[2 * step + 3], tables[2, 3])
        client, row = torch.tensor([0, 2, 2, 1]), torch.tensor([4, 1, 1, 0])  # a duplicate row: summed
        values = torch.randn(4, width)
        grad = torch.sparse_coo_tensor(torch.stack([client, row]), values, (k, rows, width))
        expected = tables - 0.5 * grad.to_dense()
        add_rows(tables, grad, -0.5)
        torch.testing.assert_close(tables, expected)
        torch.testing.assert_close(w[:, 2 : 2 + rows * width].view(k, rows, width), expected)
    frozen = torch.randn(rows, width).expand(k, rows, width)  # a frozen table: every client reads the same
    matrix, step = client_tables(frozen)
    assert step == 0 and torch.equal(matrix, frozen[0])


class MixesTheBatch(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.out = nn.Embedding(V, 4), nn.Linear(4, 4)

    def forward(self, tokens):
        e = self.embed(tokens).mean(1)
        return self.out(e - e.mean(0))  # a batch statistic by hand: clients would see each other


class TiedWeights(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.gru = nn.Embedding(V, 4), nn.GRU(4, 4, batch_first=True)

    def forward(self, tokens):
        h, _ = self.gru(self.embed(tokens))
        return F.linear(h[:, -1], self.embed.weight)  # the embedding's weight used outside its layer


class DropoutBetweenLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.lstm, self.out = (
            nn.Embedding(V, 4),
            nn.LSTM(4, 4, 2, batch_first=True, dropout=0.3),
            nn.Linear(4, 4),
        )

    def forward(self, tokens):
        return self.out(self.lstm(self.embed(tokens))[0][:, -1])


class OwnParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.scale = nn.Embedding(V, 4), nn.Parameter(torch.ones(4))

    def forward(self, tokens):
        return self.embed(tokens).mean(1) * self.scale


class Convolves(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.conv = nn.Embedding(V, 4), nn.Conv1d(4, 4, 3)

    def forward(self, tokens):
        return self.conv(self.embed(tokens).transpose(1, 2)).mean(2)


@pytest.mark.parametrize(
    "module,reason",
    [
        (MixesTheBatch, "differs from one client alone"),
        (TiedWeights, "differs from one client alone"),
        (DropoutBetweenLayers, "LSTM with dropout between layers"),
        (OwnParameter, "the model itself (OwnParameter) holds scale, which the batched path does not compute"),
        (Convolves, "'conv' (Conv1d) holds weight, bias, which the batched path does not compute"),
    ],
)
def test_what_the_batched_path_cannot_compute_trains_on_replicas_saying_why(module, reason: str) -> None:
    torch.manual_seed(0)
    x, y = _data("lstm")
    trainer = Trainer(Network(module()), x, y, device=torch.device("cpu"))
    assert trainer.path == "replicas" and reason in trainer.describe(), trainer.describe()
    with pytest.raises(ValueError, match="training path batched: .*" + reason.split("(")[0][:20]):
        Trainer(Network(module()), x, y, device=torch.device("cpu"), path="batched")


def test_image_models_keep_their_paths() -> None:
    """The batched path is for sequence models: an MLP stays fused, a CNN on replicas."""
    x, y = torch.rand(20, 1, 8, 8), torch.randint(0, 4, (20,))
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(64, 8), nn.ReLU(), nn.Linear(8, 4))
    cnn = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(144, 4))
    assert Trainer(Network(mlp), x, y, device=torch.device("cpu")).path == "fused"
    trainer = Trainer(Network(cnn), x, y, device=torch.device("cpu"))
    assert trainer.path == "replicas" and "batched" not in trainer.describe()


CHAR_LSTM = """
import torch
from torch import nn


class CharLSTM(nn.Module):
    def __init__(self, num_classes, embedding=8, hidden=16):
        super().__init__()
        self.embed = nn.Embedding(num_classes, embedding)
        self.lstm = nn.LSTM(embedding, hidden, batch_first=True)
        self.out = nn.Linear(hidden, num_classes)

    def forward(self, tokens):
        states, _ = self.lstm(self.embed(tokens))
        return self.out(states[:, -1])
"""


def test_a_users_lstm_file_trains_batched_end_to_end(tmp_path: Path) -> None:
    (tmp_path / "char_lstm.py").write_text(CHAR_LSTM)
    g = np.random.default_rng(0)
    x = g.integers(0, 11, (240, 12))
    y = (x[:, -1] + 1) % 11  # the next character follows the last one
    np.savez(tmp_path / "text.npz", x=x, y=y, client=np.repeat(np.arange(12), 20))
    topology = {
        "name": "char-lstm",
        "seed": 1,
        "stop": {"rounds": 3},
        "task": {
            "dataset": {"path": "text.npz", "partition": {"kind": "natural"}},
            "model": {"path": "char_lstm.py:CharLSTM"},
            "local": {"steps": 4, "batch_size": 8, "lr": 0.5},
        },
        "devices": [{"group": "phones", "count": 12, "compute": {"flops_per_s": 1e9},
                     "availability": {"policy": "always"}, "link": {"uplink": "10Mbps", "downlink": "10Mbps"}}],
        "server": {"algorithm": {"name": "fedavg"}, "round": {"participants": 8}},
        "eval": {"every": "3 rounds"},
    }  # fmt: skip
    path = tmp_path / "char.yaml"
    path.write_text(yaml.safe_dump(topology))
    result = netfl.run(path, out=tmp_path / "run")
    training = result.summary["tasks"][0]["training"]
    assert training.startswith("batched (a sequence model"), training
    written = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert written["tasks"][0]["training"] == training
    assert np.isfinite(result.metrics.test_loss).all()
