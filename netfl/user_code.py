"""Code that users hand to netfl, named ``path/to/file.py:Name`` (policies, models, data loaders), imported and
called behind one fence.

netfl runs such a file as Python code: its module level runs at import and its functions run when netfl calls
them. Whatever goes wrong there -- a missing file or name, a syntax error, an exception at import or in a call --
becomes a :class:`~netfl.errors.UserCodeError` (or the caller's subclass of it) naming the file and the line in
it, so that a run stops with one message instead of a traceback. That covers every ``BaseException`` (``sys.exit``,
a user's own subclass) but ``KeyboardInterrupt``, which stays the interrupt it is (Ctrl-C arriving while user code
runs). ``os._exit``, which would end the process at once with the user's status (0: "success", with nothing
written), raises instead while the calling thread is inside the fence. Nothing here imports torch or simpy.

A run on another machine (a Ray worker) may not have the user's files: the driver sends their text with the run
and the worker imports them from it (:func:`sources_shipped`), under the same path, so that messages and
tracebacks name the user's file and line as on the driver.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import linecache
import os
import sys
import threading
import traceback
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from netfl.errors import UserCodeError

__all__ = [
    "PYTHON_ONLY",
    "UserReference",
    "call",
    "defined_at",
    "guarded",
    "import_file",
    "is_user_reference",
    "load_attribute",
    "parse_reference",
    "python_file_present",
    "python_only_problem",
    "reference_of",
    "sources_shipped",
    "where",
]

T = TypeVar("T")


def is_user_reference(name: Any) -> bool:
    """Whether ``name`` reads ``something.py:Name`` (a user's file and a name in it)."""
    return isinstance(name, str) and ":" in name and name.rsplit(":", 1)[0].endswith(".py")


@dataclass(frozen=True)
class UserReference:
    """``file.py:name``, with the file resolved against the folder it is relative to (a topology's)."""

    path: Path
    name: str
    text: str  # as the user wrote it

    def __str__(self) -> str:
        return self.text


#: How scenario.yaml records code given in Python that no file holds (a notebook's class, a script's main).
PYTHON_ONLY = "<python>"


def reference_of(obj: Any) -> str:
    """``file.py:Name`` for a class or function of an importable module file (so that the scenario can be run
    again from a folder), else ``<python>:Name`` (a script's ``__main__``, a notebook, a local function or a
    mapping of arrays: not in any file netfl could import)."""
    name = getattr(obj, "__qualname__", type(obj).__name__)
    module = getattr(obj, "__module__", None)
    try:
        file = inspect.getsourcefile(obj) if module not in (None, "__main__") else None
    except TypeError:
        file = None
    if file is None or "<" in name or not file.endswith(".py"):
        return f"{PYTHON_ONLY}:{name}"
    return f"{Path(file).resolve()}:{name}"


def python_only_problem(reference: str, what: str) -> str | None:
    """The message for a scenario whose ``what`` was given in Python and recorded as ``<python>:Name``."""
    if not reference.startswith(f"{PYTHON_ONLY}:"):
        return None
    name = reference.split(":", 1)[1]
    return (
        f"the {what} was given in Python ({name}), not in a file, so this scenario cannot build it again; put it "
        f"in a file and name it: path: file.py:{name}"
    )


def parse_reference(reference: str, base_dir: Path | None) -> UserReference:
    """``file.py:Name`` -> the file (relative paths from ``base_dir``, else the working directory) and the name."""
    file_part, name = reference.rsplit(":", 1)
    path = Path(file_part).expanduser()
    if not path.is_absolute():
        path = (base_dir if base_dir is not None else Path.cwd()) / path
    return UserReference(path, name, reference)


def where(exc: BaseException, path: Path) -> str:
    """``file:line`` of the deepest frame of ``exc``'s traceback that lies in the user's file (the file alone if
    none does: the error was raised by what the user's code called into, with no frame of theirs recorded)."""
    target = path.resolve()
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _same_file(f.filename, target)]
    return f"{path}:{frames[-1].lineno}" if frames else str(path)


def defined_at(fn: Callable[..., Any], path: Path) -> str:
    """``file:line`` where the user's function or method ``fn`` of the file ``path`` is defined, for an answer
    that is wrong without raising (the file alone when ``fn`` has no code of its own)."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    return f"{path}:{code.co_firstlineno}" if code is not None else str(path)


def _same_file(filename: str, target: Path) -> bool:
    try:
        return Path(filename).resolve() == target
    except (OSError, RuntimeError):
        return False


_modules: dict[tuple[str, Any, Any], ModuleType] = {}

#: The user's files sent with a run from another machine: their path there (as the scenario resolves it) -> text.
_shipped: dict[str, bytes] = {}


@contextmanager
def sources_shipped(files: dict[str, bytes]) -> Iterator[None]:
    """Inside: the user's Python files ``files`` (path -> text, as the driver read them) are imported from that
    text, whatever this machine holds at those paths, so that a run on a worker runs the driver's code."""
    saved = dict(_shipped)
    _shipped.update(files)
    try:
        yield
    finally:
        _shipped.clear()
        _shipped.update(saved)


def python_file_present(path: Path) -> bool:
    """Whether the user's Python file ``path`` can be imported: on this disk, or sent with the run."""
    return str(path) in _shipped or path.is_file()


def import_file(path: Path, *, what: str, error: type[UserCodeError] = UserCodeError) -> ModuleType:
    """Import the user's Python file ``path`` as a module of its own (once per file version: path, mtime, size;
    or the text sent with the run, :func:`sources_shipped`).

    ``what`` names it in messages (``policy``, ``model``, ``data loader``).
    """
    shipped = _shipped.get(str(path))
    if shipped is not None:
        key: tuple[str, Any, Any] = (str(path), "shipped", hashlib.sha256(shipped).hexdigest())
    elif not path.is_file():
        raise error(f"{what} file not found: {path}")
    else:
        stat = path.stat()
        key = (str(path.resolve()), stat.st_mtime, stat.st_size)
    if key in _modules:
        return _modules[key]
    module_name = f"netfl_user_{zlib.crc32(key[0].encode()):08x}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise error(f"{path}: cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses, pydantic and pickle look a class's module up here
    try:
        with _fenced():
            if shipped is None:
                spec.loader.exec_module(module)
            else:
                _exec_shipped(module, path, shipped)
    except SyntaxError as exc:
        sys.modules.pop(module_name, None)
        raise error(f"{exc.filename}:{exc.lineno}: syntax error in this {what} file: {exc.msg}") from None
    except KeyboardInterrupt:
        sys.modules.pop(module_name, None)
        raise
    except BaseException as exc:  # noqa: BLE001 -- the user's import-time code failed, whatever it raised
        sys.modules.pop(module_name, None)
        raise error(f"{where(exc, path)}: {_describe(exc, f'while importing this {what} file')}") from None
    _modules[key] = module
    return module


def _exec_shipped(module: ModuleType, path: Path, text: bytes) -> None:
    """Run the text of the user's file ``path`` sent with the run as ``module``: compiled under the file's own
    name, its lines in :mod:`linecache` (for tracebacks and :mod:`inspect`), as if read from that path."""
    source = text.decode("utf-8")
    linecache.cache[str(path)] = (len(source), None, source.splitlines(keepends=True), str(path))
    exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 -- the user's own file, as import runs it


def load_attribute(
    reference: UserReference,
    *,
    what: str,
    error: type[UserCodeError] = UserCodeError,
    accept: Callable[[Any], bool] | None = None,
    expected: str = "",
) -> Any:
    """The object ``reference.name`` of the user's file; ``accept`` tells whether it is what netfl needs
    (``expected`` says what that is, for the message)."""
    module = import_file(reference.path, what=what, error=error)
    found = getattr(module, reference.name, None)
    if found is None:
        defined = ", ".join(_defined_in(module)) or "none"
        raise error(f"{reference.path}: no {reference.name!r} in this {what} file; defined there: {defined}")
    if accept is not None and not accept(found):
        raise error(f"{reference.path}: {reference.name} is not {expected or 'usable here'}")
    return found


def _defined_in(module: ModuleType) -> list[str]:
    """The public classes and functions a module defines itself (not those it imports)."""
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and value.__module__ == module.__name__
    ]


def call(
    fn: Callable[..., T],
    *args: Any,
    path: Path,
    what: str,
    error: type[UserCodeError] = UserCodeError,
    **kwargs: Any,
) -> T:
    """``fn(*args, **kwargs)`` for a function of the user's file, anything it raises turned into ``error``
    naming the file and line and ``what`` was being done (``"SmallCNN(width=64)"``, ``"load()"``);
    ``KeyboardInterrupt`` passes through."""
    with guarded(path=path, what=what, error=error):
        return fn(*args, **kwargs)


@contextmanager
def guarded(*, path: Path, what: str, error: type[UserCodeError] = UserCodeError) -> Iterator[None]:
    """Inside: user code of the file ``path`` runs (a module's forward pass, a loader), in this thread; anything
    it raises becomes ``error`` naming the file and line and ``what`` was being done, and ``os._exit`` raises
    instead of ending the process. ``KeyboardInterrupt`` passes through."""
    try:
        with _fenced():
            yield
    except (UserCodeError, KeyboardInterrupt):
        raise
    except BaseException as exc:  # noqa: BLE001 -- sys.exit() or a BaseException of the user's must not end netfl
        raise error(f"{where(exc, path)}: {_describe(exc, f'in {what}')}") from None


class ProcessExit(BaseException):
    """Raised in place of ``os._exit(status)`` called from user code (see :func:`_fenced`)."""

    def __init__(self, status: Any):
        super().__init__(status)
        self.status = status


def _describe(exc: BaseException, doing: str) -> str:
    """``ZeroDivisionError in Policy.online: division by zero``; an ``os._exit`` said as what it would have done."""
    if isinstance(exc, ProcessExit):
        return f"os._exit({exc.status!r}) {doing}, which would end netfl at once and write nothing; netfl refuses it"
    return f"{type(exc).__name__} {doing}: {exc}"


class _Depth(threading.local):
    value = 0  # how deep this thread is inside user code


_inside = _Depth()
_real_exit = os._exit


def _exit_guard(status: int) -> None:
    """``os._exit`` while netfl runs: refused from user code (it raises :class:`ProcessExit` there, which the fence
    turns into the user's error), the real one everywhere else (a forked worker process ending)."""
    if _inside.value:
        raise ProcessExit(status)
    _real_exit(status)


@contextmanager
def _fenced() -> Iterator[None]:
    """Inside: this thread runs user code, and ``os._exit`` raises instead of ending the process."""
    if os._exit is not _exit_guard:  # installed on first use, not at import: importing netfl changes nothing
        os._exit = _exit_guard
        posix = sys.modules.get("posix")
        if posix is not None and getattr(posix, "_exit", None) is _real_exit:
            posix._exit = _exit_guard
    _inside.value += 1
    try:
        yield
    finally:
        _inside.value -= 1
