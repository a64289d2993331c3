"""Layers that compute several clients at once, each client with its own weights: the pieces of the batched path
(:mod:`netfl.learn.training.batched`).

The clients' minibatches are concatenated along the batch dimension (client 0's samples first), so that the
user's own ``forward`` -- reshapes, slices, activations, ``scaled_dot_product_attention`` -- runs unchanged on
``K * B`` samples: everything that works sample by sample is already per client. Only layers with parameters
or buffers (and dropout, whose masks come from each client's own generator) need to know the clients apart;
each such layer's ``forward`` is replaced by its function in :data:`LAYERS`, which reads the K clients' stacked
weights from :class:`Clients` and computes all clients with batched matrix products (``bmm``), one module a
concept (``client_batch``: what they share and ``Linear``; ``client_embeddings``, ``client_recurrent``,
``client_attention``, ``client_norms``: normalisation and dropout):

* ``Linear`` -- one ``baddbmm``; ``Embedding`` / ``EmbeddingBag`` -- one lookup in the clients' tables laid
  end to end (client k's ids offset by k x the vocabulary);
* ``LSTM`` -- torch's fused kernel (oneDNN on a CPU) once per client, its weights views of the stacked ones;
  ``GRU`` / ``RNN`` -- PyTorch's equations (gate order r, z, n), every layer and direction: one batched
  product and a few element-wise operations per time step for all clients together (GRU with its backward
  written out; torch has no fused GRU on a CPU);
* ``MultiheadAttention`` -- the projections per client, attention over the K x B samples' heads;
* ``LayerNorm`` and ``BatchNorm`` -- normalisation per sample (LayerNorm) or per client's minibatch
  (BatchNorm: the clients' channels side by side), each client's affine weights and running statistics;
* ``Dropout`` -- each client's mask drawn from its own generator, of the shape a client alone would draw: the
  same masks as on the replicas (:mod:`netfl.learn.training.replicas`). Attention-weight dropout inside
  ``MultiheadAttention`` draws, per client, from a second generator that stands for torch's global one (which
  the one-at-a-time path seeds from the job), in the same order and shapes: the same masks again.

What a layer cannot do batched (a packed sequence, dropout between recurrent layers, ``max_norm``...) raises
:class:`Unbatchable`, so that the task trains one job at a time on replicas instead, saying why.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from netfl.learn.training.client_attention import attention
from netfl.learn.training.client_batch import Clients, Unbatchable, linear
from netfl.learn.training.client_embeddings import add_rows, client_tables, embedding, embedding_bag
from netfl.learn.training.client_norms import batch_norm, dropout, layer_norm
from netfl.learn.training.client_recurrent import recurrent

__all__ = ["LAYERS", "Clients", "Unbatchable", "add_rows", "client_tables", "known_batch_dim"]


def _dropout_kind(channels: int | None) -> Callable:
    def forward(m, c, names, dim, x):
        return dropout(m, c, names, dim, x, channels=channels)

    return forward


#: The layers the batched path computes, by exact type (a subclass may change ``forward``).
LAYERS: dict[type, Callable] = {
    nn.Linear: linear,
    nn.Embedding: embedding,
    nn.EmbeddingBag: embedding_bag,
    nn.LayerNorm: layer_norm,
    nn.BatchNorm1d: batch_norm,
    nn.BatchNorm2d: batch_norm,
    nn.BatchNorm3d: batch_norm,
    nn.LSTM: recurrent,
    nn.GRU: recurrent,
    nn.RNN: recurrent,
    nn.MultiheadAttention: attention,
    nn.Dropout: _dropout_kind(None),
    nn.Dropout1d: _dropout_kind(1),
    nn.Dropout2d: _dropout_kind(2),
    nn.Dropout3d: _dropout_kind(3),
}


def known_batch_dim(m: nn.Module) -> int | None:
    """The batch dimension of a layer's input where its kind fixes it (None: found by running the module)."""
    if isinstance(m, (nn.RNNBase, nn.MultiheadAttention)):
        return 0 if m.batch_first else 1
    if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.EmbeddingBag)):
        return 0
    return None
