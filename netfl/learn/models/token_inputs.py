"""Token ids checked against the embeddings that read them, before anything trains.

A model that embeds its input fails deep in its forward pass on data it cannot read: floats where ids are
expected (``Expected tensor for argument #1 'indices' to have ... Long``), or an id past the embedding's rows
(``index out of range in self``), on whichever minibatch first holds one. Here the sample with the largest
value of each split is run once, with a look at what every ``nn.Embedding`` and ``nn.EmbeddingBag`` is given,
so that such data is refused at once, naming the data set, the array and the sample.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from netfl.errors import DataError
from netfl.learn.models.user import ModelRecipe

__all__ = ["check_token_inputs"]


class _Refused(Exception):
    """Stops the forward pass at the first embedding given what it cannot read."""


def check_token_inputs(module: nn.Module, recipe: ModelRecipe, name: str, splits: dict[str, torch.Tensor]) -> None:
    """DataError when a split of data set ``name`` (``splits``: array name -> samples, e.g. x and x_test) gives
    an embedding of ``module`` floats, or ids below 0 or past its rows. Other failures are left to
    :func:`netfl.learn.models.user.check_model`, which names the model's file and line."""
    if not any(isinstance(m, (nn.Embedding, nn.EmbeddingBag)) for m in module.modules()):
        return
    trial = copy.deepcopy(module).eval()
    layers = {
        m: n or type(m).__name__ for n, m in trial.named_modules() if isinstance(m, (nn.Embedding, nn.EmbeddingBag))
    }
    for field, x in splits.items():
        if not len(x) or not x.numel():
            continue
        flat = x.reshape(len(x), -1)
        found: list[str] = []
        for row in dict.fromkeys((int(flat.max(dim=1).values.argmax()), int(flat.min(dim=1).values.argmin()))):
            _look(trial, layers, recipe, name, field, x, row, found)
            if found:
                raise DataError(found[0])


def _look(
    trial: nn.Module,
    layers: dict[nn.Module, str],
    recipe: ModelRecipe,
    name: str,
    field: str,
    x: torch.Tensor,
    row: int,
    found: list[str],
) -> None:
    """Run sample ``row`` of ``x`` through ``trial``; what an embedding cannot read is added to ``found``."""

    def look(layer: nn.Module, args: tuple) -> None:
        ids = args[0] if args else None
        if not isinstance(ids, torch.Tensor):
            return
        what = f"the model's {layers[layer]} ({type(layer).__name__}, {layer.num_embeddings} rows)"
        if ids.is_floating_point():
            found.append(
                f"{name}: {field} holds {str(ids.dtype).replace('torch.', '')} values, but {what} takes token "
                f"ids: store {field} as integers (int64), 0 to {layer.num_embeddings - 1}"
            )
        elif ids.numel() and (int(ids.max()) >= layer.num_embeddings or int(ids.min()) < 0):
            bad = int(ids.max()) if int(ids.max()) >= layer.num_embeddings else int(ids.min())
            found.append(
                f"{name}: {field} holds token id {bad}, outside {what}: ids run from 0 to "
                f"{layer.num_embeddings - 1} (a bigger vocabulary needs a bigger embedding)"
            )
        if found:
            raise _Refused

    hooks = [layer.register_forward_pre_hook(look) for layer in layers]
    try:
        with torch.no_grad(), recipe.guard():
            trial(x[row : row + 1])
    except Exception:  # _Refused (as the user's fence passes it on), or a failure check_model reports
        pass
    finally:
        for hook in hooks:
            hook.remove()
