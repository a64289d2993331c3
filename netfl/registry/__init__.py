"""Registries: the names and parameter schemas of netfl's pluggable components.

Checking a scenario (``netfl validate``) and listing components (``netfl
algorithms``) need only what a component is called and which parameters it
takes, not its code; so an :class:`Entry` holds those, and nothing in this
package imports torch or simpy. The implementations are found where they
live, by module: each class names the entry it implements (a strategy's
``name``, a medium's ``kind``), and its package gathers them with
:func:`implementations`, which refuses a registered name without a class,
or a class naming no registered name.
"""

from __future__ import annotations

import os
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel

from netfl.problems import one_of

__all__ = ["Entry", "describe_params", "implementations", "registered"]


@dataclass(frozen=True)
class Entry:
    """One component: its name, its parameters (a pydantic model), and what listings say of it."""

    name: str
    params: type[BaseModel]
    summary: str  # one line, for listings
    paper: str  # where it comes from: authors, title, venue


def implementations(
    base: type, names: Iterable[str], modules: Iterable[types.ModuleType], key: str = "name"
) -> dict[str, type]:
    """Each of ``names`` (a registry's, in its order) -> the class implementing it: the subclass of ``base``
    defined in one of ``modules`` that sets ``key`` itself (a subclass that does not set it keeps its parent's
    entry). ImportError naming a registered name that no class implements, one that two do, or a class whose
    name is not registered: a registry and its implementations cannot drift apart."""
    names = list(names)
    where = {module.__name__ for module in modules}
    found: dict[str, list[type]] = {}
    seen, todo = set(), list(base.__subclasses__())  # base itself implements nothing
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue  # reached again through another parent
        seen.add(cls)
        todo += cls.__subclasses__()
        if cls.__module__ in where and key in vars(cls):
            found.setdefault(vars(cls)[key], []).append(cls)
    problems = [f"{name!r} has no class" for name in names if name not in found]
    problems += [f"{name!r} has {len(found[name])} classes" for name in names if len(found.get(name, ())) > 1]
    problems += [
        f"{classes[0].__qualname__} implements {name!r}, not registered"
        for name, classes in found.items()
        if name not in names
    ]
    if problems:
        place = ".".join(os.path.commonprefix([name.split(".") for name in sorted(where)]))  # the package
        raise ImportError(f"{base.__qualname__} {key}s of {place}: {'; '.join(problems)}")
    return {name: found[name][0] for name in names}


def describe_params(params: type[BaseModel]) -> list[dict[str, Any]]:
    """A Params model's fields for listings: ``{name, type, default, required, description}`` each."""
    return [
        {
            "name": field,
            "type": _type_name(info.annotation),
            "default": info.default,
            "required": info.is_required(),
            "description": info.description or "",
        }
        for field, info in params.model_fields.items()
    ]


def registered(names: Sequence[str], own: str | None = None) -> Callable[[Any], Any]:
    """A pydantic validator that accepts only ``names`` and lists them when it refuses a value.

    Use it before the type check (``BeforeValidator``), so that even a number or a list is
    answered with the accepted names rather than "should be a valid string". ``own``: the key
    that takes the user's own component instead (``path``); a refused value that looks like a
    file is pointed there.
    """
    accepted = tuple(names)

    def check(value: Any) -> Any:
        if value not in accepted:
            hint = ""
            if own is not None and isinstance(value, str) and ("." in value or "/" in value):
                hint = f"; your own goes in `{own}: {value}`"
            raise ValueError(f"{value!r} is not accepted; use {one_of(accepted)}{hint}")
        return value

    return check


def _type_name(annotation: Any) -> str:
    """A parameter's type as a user reads it: ``float``, ``int or none``, ``'samples' | 'uniform'``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return _type_name(args[0])
    if origin in (Union, types.UnionType):
        names = [_type_name(a) for a in args if a is not type(None)]
        return " or ".join(names) + (" or none" if type(None) in args else "")
    if origin is Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")
