"""The Flower strategy a scenario's ``server.algorithm.flower`` names: a class in the user's file
(``my_strategy.py:MyStrategy``) or an import path (``flwr.serverapp.strategy.FedAdam``), imported behind netfl's
fence, and its keyword arguments checked against its ``__init__``'s signature before anything runs.

Flower is an optional extra: it is imported here, when a scenario names a Flower strategy, and never when netfl
is imported. Nothing here imports torch (Flower does not either).
"""

from __future__ import annotations

import importlib
import inspect
import os
from pathlib import Path
from typing import Any

from netfl import user_code
from netfl.errors import StrategyError
from netfl.registry.flower import FLOWER_EXTRA, SUPPLIED, FlowerClass

__all__ = ["FlowerClass", "flower_class", "flower_kwargs_problems", "flower_apis"]


def flower_apis() -> tuple[type, type]:
    """Flower's two strategy bases (the message API's, the older one), or a StrategyError saying how to install
    Flower."""
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # no phoning home
    try:
        from flwr.server.strategy import Strategy as Legacy
        from flwr.serverapp.strategy import Strategy as Message
    except ImportError:
        raise StrategyError(f"a Flower strategy needs Flower, which is not installed: {FLOWER_EXTRA}") from None
    return Message, Legacy


def flower_class(reference: str, base_dir: Path | None) -> FlowerClass:
    """The Flower strategy class ``reference`` names (a StrategyError naming the file or import path otherwise)."""
    message, legacy = flower_apis()
    if user_code.is_user_reference(reference):
        ref = user_code.parse_reference(reference, base_dir)
        cls = user_code.load_attribute(ref, what="Flower strategy", error=StrategyError)
        where = f"{ref.path}: {ref.name}"
    else:
        module_name, _, name = reference.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            raise StrategyError(f"{reference}: no module {exc.name!r} to import (an import path such as "
                                "flwr.serverapp.strategy.FedAdam, or my_strategy.py:MyStrategy)") from None  # fmt: skip
        except Exception as exc:  # noqa: BLE001 -- the module's own import-time code failed
            raise StrategyError(f"{reference}: {type(exc).__name__} while importing {module_name}: {exc}") from None
        cls = getattr(module, name, None)
        where = reference
        if cls is None:
            raise StrategyError(f"{reference}: module {module_name} has no {name!r}")
    if not (inspect.isclass(cls) and issubclass(cls, (message, legacy))):
        raise StrategyError(
            f"{where} is not a Flower strategy (a subclass of flwr.serverapp.strategy.Strategy, or of "
            "flwr.server.strategy.Strategy)"
        )
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise StrategyError(f"{where} does not define {missing} (what a Flower strategy must define)")
    source = Path(inspect.getsourcefile(cls) or reference)
    return FlowerClass(cls, source, issubclass(cls, message))


def flower_kwargs_problems(found: FlowerClass, kwargs: dict[str, Any]) -> list[tuple[str, str]]:
    """The keys of ``server.algorithm`` that the strategy's ``__init__`` does not take, and the arguments it needs
    that are not given, as (sub-path, message) pairs."""
    cls = found.cls
    try:
        signature = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return []
    params = [p for name, p in signature.parameters.items() if name != "self"]
    named = _accepted(cls)
    where = f"{cls.__qualname__}.__init__ ({_defined(cls.__init__, found.source)})"
    taken = ", ".join(named or ()) or "none"
    problems = []
    if named is not None:
        problems += [(f".{key}", f"{where} takes no {key!r}; its parameters: {taken}")
                     for key in kwargs if key not in named]  # fmt: skip
    for p in params:
        needed = p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        if needed and p.name not in kwargs and p.name not in SUPPLIED:
            problems.append(("", f"{where} needs {p.name!r}; give it as a key of server.algorithm"))
    return problems


def _defined(function: Any, fallback: Path) -> str:
    """``file:line`` where ``function`` is defined (the class's own file where Python cannot say)."""
    try:
        return f"{inspect.getsourcefile(function)}:{inspect.getsourcelines(function)[1]}"
    except (OSError, TypeError):
        return str(fallback)


def _accepted(cls: type) -> list[str] | None:
    """The keyword arguments ``cls(...)`` takes: its ``__init__``'s, and, where that passes ``**kwargs`` on, those
    of the ``__init__`` above it in the MRO (a subclass of Flower's FedAvg that forwards the rest); None: any."""
    names: dict[str, None] = {}  # in the order of the signatures
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        if klass is object:
            return None  # every __init__ on the way forwarded **kwargs to object's: nothing to check against
        try:
            params = list(inspect.signature(init).parameters.values())[1:]
        except (TypeError, ValueError):
            return None
        names.update((p.name, None) for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            return list(names)
    return None
