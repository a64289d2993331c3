"""The models clients train, and their analytic cost.

Models are plain ``nn.Sequential`` stacks (no buffers, no batch norm) so
their parameters can be stacked and trained for many clients at once with
``torch.func``. The simulator never times torch: a device's compute time is
``training FLOPs / device speed`` and upload time is ``model bytes / link
rate``, which is why FLOP and byte counts are computed here, analytically.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from netfl.registry.models import MODEL_NAMES

__all__ = [
    "MODEL_NAMES",
    "build_model",
    "forward_flops_per_sample",
    "training_flops_per_sample",
    "model_num_bytes",
]


def build_model(
    name: str,
    input_shape: tuple[int, int, int],
    num_classes: int,
    *,
    hidden: Sequence[int] = (200,),
) -> nn.Module:
    """Build model ``name`` for inputs of shape (C, H, W) and ``num_classes`` outputs.

    - ``"logistic"``: Flatten + Linear (multinomial logistic regression).
    - ``"mlp"``: Flatten, then Linear + ReLU per size in ``hidden``, then Linear.
    - ``"mlp_softmax"``: ``mlp`` followed by a Softmax, as in the Fed-CVaR-Avg
      reference code's toy model (PeriklisTheodoropoulos/risk-aware-FL). Its
      outputs are probabilities that the training loss (cross-entropy on
      logits) softmaxes a second time: the loss cannot fall below
      ``log(1 + (C - 1)/e)`` and its gradient never vanishes, so training on
      one class keeps pushing the others away. Kept to reproduce that
      paper's toy; use ``mlp`` otherwise.
    - ``"lenet5"``: LeNet-5 as used in FL papers: conv5×5-6 (pad 2), ReLU,
      maxpool 2, conv5×5-16, ReLU, maxpool 2, FC120, ReLU, FC84, ReLU, FC.
      On inputs too small for an unpadded second conv (e.g. 8×8 digits) the
      second conv gets padding 2 so the model still applies.
    - ``"cnn"``: the FedAU Fashion-MNIST CNN: conv3×3-32 (pad 1), ReLU,
      maxpool 2, conv3×3-32 (pad 1), ReLU, maxpool 2, FC128, ReLU, FC.

    Flatten sizes come from a dry forward pass, so any input size works.
    Raises ValueError for an unknown name.
    """
    c, h, w = (int(v) for v in input_shape)
    if name == "logistic":
        return nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, num_classes))
    if name in ("mlp", "mlp_softmax"):
        layers: list[nn.Module] = [nn.Flatten()]
        width = c * h * w
        for size in hidden:
            layers += [nn.Linear(width, int(size)), nn.ReLU()]
            width = int(size)
        layers.append(nn.Linear(width, num_classes))
        if name == "mlp_softmax":
            layers.append(nn.Softmax(dim=1))
        return nn.Sequential(*layers)
    if name == "lenet5":
        pad2 = 0 if min(h, w) // 2 >= 5 else 2
        features = nn.Sequential(
            nn.Conv2d(c, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5, padding=pad2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
        )  # fmt: skip
        flat = _flat_size(features, (c, h, w))
        return nn.Sequential(
            *features,
            nn.Linear(flat, 120), nn.ReLU(),
            nn.Linear(120, 84), nn.ReLU(),
            nn.Linear(84, num_classes),
        )  # fmt: skip
    if name == "cnn":
        features = nn.Sequential(
            nn.Conv2d(c, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
        )  # fmt: skip
        flat = _flat_size(features, (c, h, w))
        return nn.Sequential(*features, nn.Linear(flat, 128), nn.ReLU(), nn.Linear(128, num_classes))
    raise ValueError(f"unknown model {name!r} (accepted: {', '.join(MODEL_NAMES)})")


def _flat_size(features: nn.Module, input_shape: tuple[int, int, int]) -> int:
    with torch.no_grad():
        return int(features(torch.zeros(1, *input_shape)).shape[1])


def forward_flops_per_sample(model: nn.Module, input_shape: tuple[int, int, int]) -> int:
    """Count one sample's forward FLOPs in Linear and Conv2d layers.

    A multiply-add counts as 2 FLOPs, plus one per output for a bias:
    Linear ``2*in*out (+out)``, Conv2d ``2*(Cin/groups)*kh*kw*Cout*Hout*Wout
    (+Cout*Hout*Wout)``. Activations and pooling are ignored: they are a
    rounding error next to the matrix products.
    """
    total = 0

    def hook(module: nn.Module, _inp: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
        nonlocal total
        outputs = out.numel()  # batch of 1, so this is per sample
        if isinstance(module, nn.Linear):
            total += 2 * module.in_features * outputs
        elif isinstance(module, nn.Conv2d):
            kh, kw = module.kernel_size
            total += 2 * (module.in_channels // module.groups) * kh * kw * outputs
        if getattr(module, "bias", None) is not None:
            total += outputs

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    try:
        with torch.no_grad():
            param = next(model.parameters(), None)
            x = torch.zeros(
                1, *input_shape,
                dtype=param.dtype if param is not None else torch.float32,
                device=param.device if param is not None else None,
            )  # fmt: skip
            model(x)
    finally:
        for handle in handles:
            handle.remove()
    return total


def training_flops_per_sample(model: nn.Module, input_shape: tuple[int, int, int]) -> int:
    """FLOPs to train on one sample: 3 × forward.

    The backward pass costs about twice the forward (gradients with respect
    to both activations and weights), the usual rule of thumb.
    """
    return 3 * forward_flops_per_sample(model, input_shape)


def model_num_bytes(model: nn.Module) -> int:
    """Bytes to send the model: parameter count × 4 (float32 on the wire)."""
    return 4 * sum(p.numel() for p in model.parameters())
