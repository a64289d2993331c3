"""Update compression (``server.compression``): the compressors' names, papers and what each sends (no torch).

The rules and their byte counts are implemented in :mod:`netfl.learn.federation.compression`; the scenario's form is
:class:`netfl.config.schema.CompressionSpec`.
"""

from __future__ import annotations

TOPK_PAPER = (
    "Stich, Cordonnier & Jaggi, Sparsified SGD with Memory, NeurIPS 2018 (top-k with error feedback; "
    "Karimireddy et al., Error Feedback Fixes SignSGD and other Gradient Compression Schemes, ICML 2019)"
)
QSGD_PAPER = (
    "Alistarh, Grubic, Li, Tomioka & Vojnovic, QSGD: Communication-Efficient SGD via Gradient Quantization "
    "and Encoding, NeurIPS 2017"
)

#: name -> (what it does and what it sends, paper), for ``netfl algorithms``.
COMPRESSORS: dict[str, tuple[str, str]] = {
    "topk": (
        "{topk: 1%, error_feedback: true}: the k = ceil(fraction x d) largest-magnitude coordinates of the update "
        "(plus the device's error memory e, with error_feedback; e <- what was not sent); on the air k float32 "
        "values and k int32 indices, 8k bytes; uplink only",
        TOPK_PAPER,
    ),
    "qsgd": (
        "{qsgd: {levels: s, bucket: n}}: unbiased stochastic quantisation to s levels of |v_i| / ||v||, per "
        "bucket of n coordinates (default: the whole vector); on the air one float32 norm per bucket and, per "
        "coordinate, a sign bit and ceil(log2(s + 1)) bits, packed (the paper's Elias coding, smaller, is not "
        "counted); uplink (the update) and downlink (the model, quantised once per version as a broadcast)",
        QSGD_PAPER,
    ),
}
