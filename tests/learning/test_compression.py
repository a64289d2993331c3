"""Update compression: top-k with error feedback over three rounds (Stich, Cordonnier & Jaggi, Sparsified SGD with
Memory), QSGD's unbiasedness by Monte Carlo and its exact byte count (Alistarh et al., QSGD)."""

from __future__ import annotations

import math

import pytest
import torch

from netfl.config.schema import CompressorSpec
from netfl.learn.federation.compression import (
    CompressionSettings,
    Compressor,
    CompressorSettings,
    Uplink,
    qsgd,
    topk_count,
)

F64 = torch.float64


def vec(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=F64)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


DELTAS = [vec(3.0, -1.0, 0.5, 2.0), vec(0.0, 2.0, -1.0, 1.0), vec(1.0, 0.0, 0.0, -3.0)]


def test_topk_with_error_feedback_over_three_rounds_by_hand() -> None:
    """k = 1 of 4. Round 1: p = [3, -1, .5, 2], sent [3, 0, 0, 0], e = [0, -1, .5, 2]. Round 2: p = Delta + e =
    [0, 1, -.5, 3], sent [0, 0, 0, 3], e = [0, 1, -.5, 0]. Round 3: p = [1, 1, -.5, -3], sent [0, 0, 0, -3],
    e = [1, 1, -.5, 0]. What was sent plus what is remembered is what was computed."""
    uplink = Uplink(Compressor(CompressorSettings("topk", fraction=0.25, error_feedback=True)))
    sent = [uplink.send(7, d, gen()) for d in DELTAS]
    assert [s.tolist() for s in sent] == [[3, 0, 0, 0], [0, 0, 0, 3], [0, 0, 0, -3]]
    assert uplink.memory[7].tolist() == [1.0, 1.0, -0.5, 0.0]
    torch.testing.assert_close(sum(sent) + uplink.memory[7], sum(DELTAS), rtol=0, atol=0)
    plain = Uplink(Compressor(CompressorSettings("topk", fraction=0.25)))
    assert [plain.send(7, d, gen()).tolist() for d in DELTAS] == [[3, 0, 0, 0], [0, 2, 0, 0], [0, 0, 0, -3]]
    assert plain.memory == {}
    assert 9 not in uplink.memory  # each device its own memory


def test_topk_bytes_are_values_and_indices() -> None:
    c = Compressor(CompressorSettings("topk", fraction=0.01))
    assert topk_count(1000, 0.01) == 10 and c.bytes(1000) == 80  # 10 float32 values + 10 int32 indices
    assert topk_count(7850, 0.01) == 79 and c.bytes(7850) == 632  # ceil(78.5)
    assert topk_count(5, 0.01) == 1  # at least one coordinate


def test_qsgd_bytes_exactly() -> None:
    """One float32 norm per bucket + per coordinate a sign bit and ceil(log2(s + 1)) level bits, packed."""
    assert Compressor(CompressorSettings("qsgd", levels=16)).bytes(1000) == 4 + 750  # 6 bits x 1000
    assert Compressor(CompressorSettings("qsgd", levels=15)).bytes(1000) == 4 + 625  # log2(16) = 4: 5 bits
    assert Compressor(CompressorSettings("qsgd", levels=1)).bytes(9) == 4 + 3  # 2 bits x 9 = 18 bits: 3 bytes
    assert Compressor(CompressorSettings("qsgd", levels=16, bucket=512)).bytes(1000) == 8 + 750


def test_qsgd_is_unbiased_by_monte_carlo_and_lands_on_its_levels() -> None:
    """20 000 independent quantisations of v (one per bucket): the mean is v within 4 standard errors; each value is
    ||v|| sign(v_i) l / s for l in 0..s, one of the two levels around |v_i| s / ||v||."""
    v = vec(0.3, -0.4, 0.0, 1.2)  # ||v|| = 1.3
    s, n = 4, 20_000
    q = qsgd(v.repeat(n), s, gen(3), bucket=4).view(n, 4)
    # Var of coordinate i: ||v||^2 / s^2 * f (1 - f) with f the fractional part of |v_i| s / ||v||
    frac = (v.abs() * s / 1.3) % 1
    stderr = 1.3 / s * torch.sqrt(frac * (1 - frac) / n)
    assert bool(((q.mean(0) - v).abs() <= 4 * stderr + 1e-12).all())
    levels = q / 1.3 * s
    torch.testing.assert_close(levels, levels.round(), rtol=0, atol=1e-9)
    lower = torch.floor(v.abs() * s / 1.3)
    assert bool(((levels.abs() == lower) | (levels.abs() == lower + 1)).all())
    assert bool((q[:, 2] == 0).all()) and bool((q[:, 0] >= 0).all()) and bool((q[:, 1] <= 0).all())
    assert torch.equal(qsgd(torch.zeros(5, dtype=F64), s, gen()), torch.zeros(5, dtype=F64))


def test_qsgd_variance_is_within_the_papers_bound() -> None:
    """E||Q(v) - v||^2 <= min(d / s^2, sqrt(d) / s) ||v||^2 (Alistarh et al., Lemma 3.1)."""
    d, s, n = 64, 2, 4000
    v = torch.randn(d, generator=gen(1), dtype=F64)
    q = qsgd(v.repeat(n), s, gen(2), bucket=d).view(n, d)
    mse = ((q - v) ** 2).sum(1).mean()
    assert float(mse) <= min(d / s**2, math.sqrt(d) / s) * float(v @ v)


def test_compressor_form_is_checked() -> None:
    with pytest.raises(ValueError, match="one compressor"):
        CompressorSpec(topk=0.1, qsgd={"levels": 4})
    with pytest.raises(ValueError, match="one compressor"):
        CompressorSpec(error_feedback=True)


def test_compressor_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="topk or qsgd"):
        CompressorSettings("randk", fraction=0.1)
    with pytest.raises(ValueError, match="needs its fraction"):
        CompressorSettings("topk")
    with pytest.raises(ValueError, match="needs its levels"):
        CompressorSettings("qsgd", fraction=0.1)


def test_every_registered_compressor_is_implemented() -> None:
    """The registry's names (netfl algorithms lists them) are exactly the implemented ones, each sending fewer
    bytes than the float32 vector it compresses."""
    from netfl.learn.federation.compression import IMPLEMENTATIONS
    from netfl.registry.compression import COMPRESSORS

    assert list(IMPLEMENTATIONS) == list(COMPRESSORS)
    for kind in COMPRESSORS:
        compressor = Compressor(CompressorSettings(kind, fraction=0.1, levels=4))
        v = torch.randn(1000, generator=gen(0), dtype=F64)
        assert compressor.apply(v, gen(1)).shape == v.shape
        assert 0 < compressor.bytes(1000) < 4000, kind


def test_the_scenario_compression_becomes_plain_settings() -> None:
    """The assemble layer copies ``server.compression`` into the learn layer's dataclasses, field by field."""
    from netfl.assemble.learning import compression_settings
    from netfl.config.schema import CompressionSpec

    spec = CompressionSpec(uplink={"topk": 0.1, "error_feedback": True}, downlink={"qsgd": {"levels": 16, "bucket": 8}})
    assert compression_settings(spec) == CompressionSettings(
        CompressorSettings("topk", fraction=0.1, error_feedback=True), CompressorSettings("qsgd", levels=16, bucket=8)
    )
    assert compression_settings(None) is None
