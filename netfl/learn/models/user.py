"""How a task's module is made -- a built-in by name, or the user's own ``torch.nn.Module`` -- and the check
that it fits its data.

A user's model is a class or a function in a Python file (``model: {path: my_models.py:Net, args: {width:
64}}``), or the class or function itself from Python. netfl calls it with ``args`` as keyword arguments,
plus ``num_classes`` and ``input_shape`` (one sample's shape) when it accepts them and ``args`` does not
give them, once per task with torch's generator seeded from the scenario, so the initial model is the same
in every run of a seed. The file is code that netfl runs; whatever it raises is reported with its file and
line (:mod:`netfl.user_code`).
"""

from __future__ import annotations

import copy
import inspect
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from netfl import user_code
from netfl.errors import ModelError, NetflWarning
from netfl.learn.models.builtin import build_model
from netfl.learn.models.flat_model import task_loss
from netfl.registry.models import TEXT_MODELS, input_problem

__all__ = ["ModelRecipe", "builtin_recipe", "check_model", "user_recipe"]


@dataclass(frozen=True)
class ModelRecipe:
    """How to make a task's module (``build``: a fresh module each call, initialised from torch's global
    generator) and what the task's spec says of it."""

    label: str
    build: Callable[[], nn.Module] = field(repr=False)
    flops_per_sample: float | None = None  # training FLOPs per sample; None: 3 x the forward counted
    buffers: str = "average"  # "average" or "local" (netfl.config.schema.ModelSpec.buffers)
    source: Path | None = None  # the user's file, if the module comes from one (for messages)

    def guard(self, what: str | None = None) -> AbstractContextManager:
        """What the module runs inside, wherever it runs: for a module of the user's file, the fence that makes
        anything it raises (``sys.exit`` and ``os._exit`` included) one ModelError naming the file and line;
        nothing for a built-in one."""
        if self.source is None:
            return nullcontext()
        return user_code.guarded(path=self.source, what=what or self.label, error=ModelError)


def builtin_recipe(
    name: str,
    input_shape: Sequence[int],
    num_classes: int,
    *,
    hidden: Sequence[int] = (200,),
    flops_per_sample: float | None = None,
    buffers: str = "average",
    tokens: int | None = None,
    per_token: bool = False,
) -> ModelRecipe:
    """A built-in model; ModelError when it does not take samples of ``input_shape`` (``tokens``: how many token
    ids a text model embeds; ``per_token``: the labels are per token)."""
    problem = input_problem(name, input_shape)  # now, not when the model is first built
    if problem is not None:
        raise ModelError(problem)
    if name in TEXT_MODELS and len(set(hidden)) != 1:
        raise ModelError(f"{name}'s LSTM layers are one width: hidden lists it once per layer, e.g. [256, 256]")
    return ModelRecipe(
        name,
        lambda: build_model(name, input_shape, num_classes, hidden=tuple(hidden), tokens=tokens, per_token=per_token),
        flops_per_sample,
        buffers,
    )


def user_recipe(
    factory: Any,
    args: Mapping[str, Any],
    input_shape: Sequence[int],
    num_classes: int,
    *,
    base_dir: Path | None = None,
    flops_per_sample: float | None = None,
    buffers: str = "average",
) -> ModelRecipe:
    """The user's model: ``factory`` is ``file.py:Name`` (relative to ``base_dir``) or the class or function
    itself. The file is imported now (its errors are ModelErrors naming the file and line)."""
    if isinstance(factory, str):
        ref = user_code.parse_reference(factory, base_dir)
        fn = user_code.load_attribute(
            ref, what="model", error=ModelError, accept=callable, expected="a torch.nn.Module class or a function"
        )
        label, source = factory, ref.path
    else:
        fn, label = factory, getattr(factory, "__qualname__", repr(factory))
        source = _source_file(factory)
    kwargs = dict(args)
    accepted = _accepted(fn)
    for key, value in (("num_classes", num_classes), ("input_shape", tuple(int(v) for v in input_shape))):
        if key not in kwargs and (key in accepted or "**" in accepted):
            kwargs[key] = value
    call = f"{label.rsplit(':', 1)[-1]}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"

    def build() -> nn.Module:
        if source is not None:
            module = user_code.call(fn, path=source, what=call, error=ModelError, **kwargs)
        else:
            try:
                module = fn(**kwargs)
            except Exception as exc:  # a function given in Python without a file: its message is all there is
                raise ModelError(f"{call}: {type(exc).__name__}: {exc}") from None
        if not isinstance(module, nn.Module):
            where = f"{source}: " if source is not None else ""
            raise ModelError(f"{where}{call} returned {type(module).__name__}, not a torch.nn.Module")
        return module

    return ModelRecipe(label + _args_text(args), build, flops_per_sample, buffers, source)


def _args_text(args: Mapping[str, Any]) -> str:
    return f"({', '.join(f'{k}={v!r}' for k, v in args.items())})" if args else ""


def _source_file(obj: Any) -> Path | None:
    try:
        found = inspect.getsourcefile(obj)
    except TypeError:
        return None
    return Path(found) if found else None


def _accepted(fn: Any) -> set[str]:
    """The keyword names ``fn`` (a class: its ``__init__``) accepts; ``**`` when it takes any."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return set()
    names = {p.name for p in signature.parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()):
        names.add("**")
    return names


def check_model(
    module: nn.Module, recipe: ModelRecipe, x: torch.Tensor, y: torch.Tensor, num_classes: int
) -> tuple[int, ...]:
    """Run a copy of ``module`` on two training samples, forward and backward, as training will; return the
    output's shape. ModelError (naming the user's file and line when the failure is in it) when it fails, has
    nothing to train, or its outputs do not match the labels: ``(B, C)`` against labels per sample, ``(B, T,
    C)`` against labels per token, with C at least the data's number of classes."""
    with recipe.guard():
        return _checked(module, recipe, x, y, num_classes)


def _checked(
    module: nn.Module, recipe: ModelRecipe, x: torch.Tensor, y: torch.Tensor, num_classes: int
) -> tuple[int, ...]:
    trial = copy.deepcopy(module)
    if not any(p.requires_grad for p in trial.parameters()):
        raise ModelError(f"{recipe.label}: the model has no trainable parameters")
    trial.train()
    xb, yb = x[:2], y[:2]
    what = f"{recipe.label} on two training samples {tuple(xb.shape)} {str(xb.dtype).replace('torch.', '')}"
    try:
        out = trial(xb)
    except Exception as exc:  # the user's forward failed on real data: say where, and what it was given
        hint = ""
        if not xb.is_floating_point():
            hint = " (the samples are integers, as token ids are; store images as floats)"
        raise ModelError(f"{_where(exc, recipe)}: {type(exc).__name__} in {what}: {exc}{hint}") from None
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        got = type(out).__name__ if not isinstance(out, torch.Tensor) else f"a {out.dtype} tensor"
        raise ModelError(f"{recipe.label}: the model returned {got}; expected class scores (a float tensor)")
    expected = "(B, T, C)" if y.dim() == 2 else "(B, C)"
    shape_ok = out.dim() == y.dim() + 1 and tuple(out.shape[:-1]) == tuple(yb.shape)
    if not shape_ok:
        labels = "one label per token (N, T)" if y.dim() == 2 else "one label per sample (N,)"
        raise ModelError(
            f"{recipe.label}: the model's output on {tuple(xb.shape)} has shape {tuple(out.shape)}; with "
            f"{labels} it must be {expected} class scores"
        )
    if out.shape[-1] < num_classes:
        raise ModelError(
            f"{recipe.label}: the model scores {out.shape[-1]} classes, but the data's labels reach "
            f"{num_classes - 1} ({num_classes} classes)"
        )
    if not bool(torch.isfinite(out.detach()).all()):  # a run would stop at its first evaluation (exit 3)
        warnings.warn(
            NetflWarning(
                f"{recipe.label}: the model's output on two training samples is not finite (NaN or inf): the run "
                "will stop at its first evaluation, before any round (stopped_by: diverged)"
            ),
            stacklevel=2,
        )
    try:
        task_loss(out, yb).backward()
    except Exception as exc:
        raise ModelError(f"{_where(exc, recipe)}: {type(exc).__name__} in the backward pass of {what}: {exc}") from None
    return tuple(out.shape[1:])


def _where(exc: BaseException, recipe: ModelRecipe) -> str:
    return user_code.where(exc, recipe.source) if recipe.source is not None else recipe.label
