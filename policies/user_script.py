"""Policies written by users: ``policy: path/to/file.py:ClassName``.

The file is imported as a module of its own (relative paths start at the
topology file's folder). Whatever goes wrong in the user's code -- a syntax
error, an exception at import, an exception or a nonsensical answer while
the simulation runs -- becomes a :class:`~netfl.errors.PolicyError` naming
the file and line, so the run stops with a message instead of a traceback.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import sys
import traceback
import zlib
from pathlib import Path

import numpy as np

from netfl.errors import PolicyError
from netfl.policies.base import AvailabilityPolicy, RoundPolicy, SessionPolicy


def is_user_reference(name: str) -> bool:
    return ":" in name and name.rsplit(":", 1)[0].endswith(".py")


def _where(exc: BaseException, path: Path) -> str:
    """``file:line`` of the deepest frame of the traceback that lies in the user's file."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path.resolve()]
    return f"{path}:{frames[-1].lineno}" if frames else str(path)


_loaded: dict[tuple[str, float], type[AvailabilityPolicy]] = {}


def load_user_policy(reference: str, base_dir: Path) -> type[AvailabilityPolicy]:
    file_part, class_name = reference.rsplit(":", 1)
    path = Path(file_part)
    path = path if path.is_absolute() else base_dir / path
    if not path.is_file():
        raise PolicyError(f"policy {reference!r}: file not found: {path}")
    key = (str(path.resolve()), path.stat().st_mtime)
    if key in _loaded:
        return _wrap_class(_loaded[key], class_name, path)
    module_name = f"netfl_user_policy_{zlib.crc32(key[0].encode()):08x}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pydantic look their module up here
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(module_name, None)
        raise PolicyError(f"{exc.filename}:{exc.lineno}: syntax error: {exc.msg}") from None
    except (Exception, SystemExit) as exc:  # the user's import-time code failed
        sys.modules.pop(module_name, None)
        raise PolicyError(f"{_where(exc, path)}: {type(exc).__name__} while importing: {exc}") from None
    cls = getattr(module, class_name, None)
    if cls is None:
        defined = [n for n, v in vars(module).items() if inspect.isclass(v) and v.__module__ == module_name]
        raise PolicyError(f"{path}: no class {class_name!r}; classes defined there: {', '.join(defined) or 'none'}")
    if not (inspect.isclass(cls) and issubclass(cls, (RoundPolicy, SessionPolicy))):
        raise PolicyError(f"{path}: {class_name} must subclass netfl.policies.RoundPolicy or SessionPolicy")
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise PolicyError(f"{path}: {class_name} does not define {missing}")
    _loaded[key] = cls
    return _wrap_class(cls, class_name, path)


def _wrap_class(cls: type[AvailabilityPolicy], class_name: str, path: Path) -> type[AvailabilityPolicy]:
    """A factory-compatible subclass whose calls into user code are guarded."""
    guard = _GuardedRound if issubclass(cls, RoundPolicy) else _GuardedSession

    class Guarded(guard):  # type: ignore[misc, valid-type]
        Params = cls.Params

        def __init__(self, params, device, rng):
            self._path, self._name = path, class_name
            self.params, self.device, self.rng = params, device, rng
            self._inner = self._call("__init__", cls, params, device, rng)

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded[{class_name}]"
    return Guarded


class _Guard:
    _path: Path
    _name: str

    def _call(self, what: str, fn, *args):
        try:
            return fn(*args)
        except PolicyError:
            raise
        except (Exception, SystemExit) as exc:  # sys.exit() in a policy must not end netfl with the user's code
            raise PolicyError(
                f"{_where(exc, self._path)}: {type(exc).__name__} in {self._name}.{what}: {exc}"
            ) from None

    def _defined_at(self, fn) -> str:
        """``file:line`` of the user's method, for answers that are wrong without raising."""
        code = getattr(getattr(fn, "__func__", fn), "__code__", None)
        return f"{self._path}:{code.co_firstlineno}" if code is not None else str(self._path)

    def participation_probability(self) -> float | None:
        fn = self._inner.participation_probability
        p = self._call("participation_probability", fn)
        if p is None:
            return None
        if isinstance(p, bool) or not isinstance(p, (int, float, np.floating)) or not 0 < float(p) <= 1:
            raise PolicyError(
                f"{self._defined_at(fn)}: {self._name} gives participation probability {p!r}; "
                "expected a number in (0, 1], or None"
            )
        return float(p)

    def battery_marks(self) -> tuple[float, ...]:
        fn = self._inner.battery_marks
        marks = self._call("battery_marks", fn)
        try:
            marks = tuple(float(m) for m in marks if not isinstance(m, bool))
        except (TypeError, ValueError):
            marks = None
        if marks is None or not all(0 <= m <= 1 for m in marks):
            raise PolicyError(
                f"{self._defined_at(fn)}: {self._name}.battery_marks returned an unusable value; "
                "expected battery fractions between 0 and 1, e.g. (0.5,)"
            )
        return marks

    def _yes_no(self, fn, what: str, answer) -> bool:
        if not isinstance(answer, (bool, int, np.bool_)):
            raise PolicyError(
                f"{self._defined_at(fn)}: {self._name}.{what} returned {answer!r}; expected True or False"
            )
        return bool(answer)


class _GuardedRound(_Guard, RoundPolicy):
    def participates(self, round_index: int) -> bool:
        fn = self._inner.participates
        return self._yes_no(fn, "participates", self._call("participates", fn, round_index))


class _GuardedSession(_Guard, SessionPolicy):
    def online(self, now: float, state) -> bool:
        fn = self._inner.online
        return self._yes_no(fn, "online", self._call("online", fn, now, state))

    def next_wakeup(self, now: float) -> float:
        fn = self._inner.next_wakeup
        at = self._call("next_wakeup", fn, now)
        try:
            at = float(at)
        except (TypeError, ValueError):
            raise PolicyError(
                f"{self._defined_at(fn)}: {self._name}.next_wakeup returned {at!r}; expected a time in seconds"
            ) from None
        if math.isnan(at) or at <= now:
            raise PolicyError(
                f"{self._defined_at(fn)}: {self._name}.next_wakeup({now:g}) returned {at:g}, "
                "which is not after now (math.inf: never)"
            )
        return at
