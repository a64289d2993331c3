"""What travels, alone: the downlink's broadcast (one draw per version and sender, kept while needed) and the
uplink's compressed updates with the devices' error memories taken in job order."""

from __future__ import annotations

import torch

from netfl.learn.federation.algorithms import ClientUpdate
from netfl.learn.federation.compression import CompressionSettings, Compressor, CompressorSettings
from netfl.learn.federation.model_transfer import ModelTransfer
from netfl.rng import RandomStreams

STREAMS = RandomStreams(5)
QSGD = CompressorSettings("qsgd", levels=2)


def test_without_compression_everything_goes_as_it_is() -> None:
    transfer = ModelTransfer(None, STREAMS)
    v = torch.arange(4.0)
    assert transfer.received(v, 0, 3, -1) is v and transfer.uplink_compressor is None
    updates = [ClientUpdate(0, 1, v, 0)]
    assert transfer.sent([7], updates) is updates


def test_a_broadcast_is_drawn_once_per_version_and_sender() -> None:
    transfer = ModelTransfer(CompressionSettings(downlink=QSGD), STREAMS)
    v = torch.tensor([0.3, -0.7, 0.1, 0.9])
    first = transfer.received(v, 0, 1, -1)
    assert transfer.received(v, 0, 1, -1) is first  # every device hears the same broadcast
    seed = STREAMS.integer_seed("downlink", 0, 1)
    expected = Compressor(QSGD).apply(v, torch.Generator().manual_seed(seed))
    assert torch.equal(first, expected)
    edge = transfer.received(v, 0, 1, 2)  # an edge server's broadcast: its own draw
    seed = STREAMS.integer_seed("downlink", 0, 1, 2)
    assert torch.equal(edge, Compressor(QSGD).apply(v, torch.Generator().manual_seed(seed)))
    second, third = transfer.received(v, 0, 2, -1), transfer.received(v, 0, 3, -1)
    transfer.forget({2, 3})  # version 1 forgotten: drawn afresh (the same draw) if ever asked again
    again = transfer.received(v, 0, 1, -1)
    assert again is not first and torch.equal(again, first)
    assert transfer.received(v, 0, 2, -1) is second
    transfer.forget({2, 3}, older_than=3)  # with edges: earlier versions are never heard again
    assert transfer.received(v, 0, 2, -1) is not second and transfer.received(v, 0, 3, -1) is third


def test_uplink_takes_each_memory_in_job_order() -> None:
    """Top-1 of 2 with error feedback: client 4's job 3 goes first although listed second. Job 3: p = [1, 3],
    sent [0, 3], e = [1, 0]; job 8: p = [2, 0] + e = [3, 0], sent [3, 0], e = [0, 0]."""
    transfer = ModelTransfer(
        CompressionSettings(uplink=CompressorSettings("topk", fraction=0.5, error_feedback=True)), STREAMS
    )
    updates = [ClientUpdate(4, 1, torch.tensor([2.0, 0.0]), 0), ClientUpdate(4, 1, torch.tensor([1.0, 3.0]), 0)]
    sent = transfer.sent([8, 3], updates)
    assert [u.delta.tolist() for u in sent] == [[3.0, 0.0], [0.0, 3.0]]
    assert transfer.uplink.memory[4].tolist() == [0.0, 0.0]
    assert transfer.uplink_compressor.kind == "topk"
