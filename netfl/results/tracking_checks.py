"""Where the trackers will write, checked before a run starts (:func:`check_targets`), so that an hour of simulation
is never followed by a tracker's traceback, nor a tracker's store written into netfl's own folders.

Refused, each in one line naming the target and what to give instead:

- a target inside a folder netfl writes (a run, report or study folder, or the folder this run or sweep is about
  to write): netfl replaces those whole and reads them back, so a tracker's files do not belong there;
- a TensorBoard folder or MLflow file store that is a file, or that cannot be made or written (read-only);
- an MLflow ``sqlite:`` database that is a folder, a file that is not an SQLite database (or another program's
  database), or read-only;
- an MLflow server's ``http(s)://`` address where nothing answers within :data:`REACH_TIMEOUT_S` seconds (the
  address itself, or the proxy the environment names for it).
"""

from __future__ import annotations

import os
import socket
import sqlite3
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from netfl.errors import NetflError
from netfl.results.folders import describe, kinds_of

#: How long a tracking server is given to accept a connection before the run (MLflow's own client retries for
#: minutes).
REACH_TIMEOUT_S = 5.0
#: The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"
#: The table every MLflow database has.
MLFLOW_TABLE = "experiments"

_reached: set[tuple[str, int]] = set()  # servers that answered once in this process (a sweep checks each run)


def check_targets(
    tensorboard: Path | None,
    mlflow: str | None,
    names: tuple[str, str],
    *,
    subfolder: Path | None = None,
    own: Iterable[tuple[Path, str]] = (),
) -> None:
    """Refuse (NetflError) a target that cannot take the run. ``names``: how the message names each target
    (``--mlflow``, ``tiny.yaml: tracking.mlflow``); ``subfolder``: the run's TensorBoard subfolder; ``own``: the
    netfl folders the run will write, which may not exist yet, each with what it is ("this run's results folder")."""
    own = [(Path(folder).resolve(), what) for folder, what in own]
    if tensorboard is not None:
        board = Path(tensorboard).resolve()
        logdir = board / subfolder if subfolder is not None else board
        shown = f"{names[0]} {board}"
        _outside_netfl(logdir, own, shown, lambda outside: str(outside / "tb"))
        problem = _folder_problem(logdir)
        if problem:
            raise NetflError(f"{shown}: {problem}; give a folder TensorBoard may write (it is made if need be)")
    if mlflow is not None:
        _check_mlflow(mlflow, f"{names[1]} {mlflow}", own)


def _check_mlflow(uri: str, shown: str, own: list[tuple[Path, str]]) -> None:
    scheme = uri.partition(":")[0].lower()
    if scheme in ("http", "https"):
        _check_reachable(uri, shown)
        return
    if scheme == "file":
        store = Path(unquote(urlsplit(uri).path))
        _outside_netfl(store, own, shown, _sqlite_beside)
        problem = _folder_problem(store)
        if problem:
            raise NetflError(f"{shown}: {problem}; give a folder MLflow may write, or a database: sqlite:///mlflow.db")
        return
    if scheme == "sqlite":
        database = _sqlite_path(uri)
        if database is None:
            return  # an in-memory database: nothing on disk
        _outside_netfl(database, own, shown, _sqlite_beside)
        problem = _database_problem(database)
        if problem:
            raise NetflError(f"{shown}: {problem}; give a new file, e.g. sqlite:///mlflow.db, or an MLflow database")


def _sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///FILE`` URI (``sqlite:////abs``: an absolute one), None for memory."""
    rest = uri.partition(":")[2]
    if not rest.startswith("///"):
        return None
    path = unquote(rest[3:].partition("?")[0])
    return Path(path).resolve() if path and path != ":memory:" else None


def _sqlite_beside(outside: Path) -> str:
    return f"sqlite:///{outside / 'mlflow.db'}"


def _outside_netfl(target: Path, own: list[tuple[Path, str]], shown: str, example) -> None:
    """Refuse ``target`` inside one of netfl's folders: those given (``own``), then any marked as netfl's."""
    found = next(((folder, what) for folder, what in own if folder == target or folder in target.parents), None)
    if found is None:
        for folder in (target, *target.parents):
            kinds = kinds_of(folder)
            if kinds:
                found = folder, f"{describe(kinds)} folder"
                break
    if found is not None:
        folder, what = found
        raise NetflError(
            f"{shown}: inside {folder}/, {what}; a tracker's store may not go in netfl's own folders (netfl "
            f"replaces them whole): give one outside them, e.g. {example(folder.parent)}"
        )


def _folder_problem(folder: Path) -> str | None:
    """Why ``folder`` cannot be made or written, or None."""
    if folder.exists() or folder.is_symlink():
        if not folder.is_dir():
            return f"{folder} is a file, not a folder"
        return None if os.access(folder, os.W_OK | os.X_OK) else f"{folder}/ is read-only"
    return _parent_problem(folder)


def _parent_problem(path: Path) -> str | None:
    """Why ``path`` (missing) cannot be made, or None: the nearest folder above it that exists is a file, or
    read-only."""
    above = path.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        return f"{above} is a file, so {path} cannot be made in it"
    if not os.access(above, os.W_OK | os.X_OK):
        return f"{above}/ is read-only, so {path} cannot be made in it"
    return None


def _database_problem(database: Path) -> str | None:
    """Why MLflow could not use ``database``, or None (a missing one is made, with the folders above it)."""
    artifacts = database.parent / f"{database.stem}-artifacts"  # where netfl has MLflow keep the figures
    if artifacts.exists() and not artifacts.is_dir():
        return f"{artifacts}, where the run's figures go, is a file"
    if not (database.exists() or database.is_symlink()):
        return _parent_problem(database)
    if database.is_dir():
        return f"{database} is a folder, not a database file"
    if not database.is_file():
        return f"{database} is not a regular file"
    try:
        with database.open("rb") as f:
            header = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        return f"{database} cannot be read ({exc.strerror or exc})"
    if header and header != SQLITE_HEADER:
        return f"{database} is not an SQLite database (a file of something else)"
    if not os.access(database, os.W_OK) or not os.access(database.parent, os.W_OK | os.X_OK):
        return f"{database} is read-only (SQLite writes the file and a journal beside it)"
    if header:
        tables = _tables(database)
        if isinstance(tables, str):
            return tables
        if tables and MLFLOW_TABLE not in tables:
            return f"{database} is another program's SQLite database (no MLflow tables: {', '.join(sorted(tables))})"
    return None


def _tables(database: Path) -> set[str] | str:
    """The tables of ``database``, opened read-only; or why it cannot be read."""
    try:
        connection = sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True, timeout=REACH_TIMEOUT_S)
        try:
            return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            connection.close()
    except sqlite3.Error as exc:
        return f"{database} cannot be read as an SQLite database ({exc})"


def _check_reachable(uri: str, shown: str) -> None:
    """A TCP connection to the server (or to the proxy the environment names for it) within REACH_TIMEOUT_S."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    try:
        host, port = parts.hostname, parts.port or (443 if scheme == "https" else 80)
    except ValueError as exc:  # a port that is not a number
        raise NetflError(f"{shown}: not a server's address ({exc})") from None
    if not host:
        raise NetflError(f"{shown}: no host in the address; give http://HOST:PORT, e.g. http://127.0.0.1:5000")
    via = ""
    proxy = urllib.request.getproxies().get(scheme)
    if proxy and not urllib.request.proxy_bypass(host):
        proxied = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        if proxied.hostname:
            via = f" through the proxy {proxied.hostname}:{proxied.port or 80}"
            host, port = proxied.hostname, proxied.port or 80
    if (host, port) in _reached:
        return
    try:
        socket.create_connection((host, port), timeout=REACH_TIMEOUT_S).close()
    except ConnectionRefusedError:
        why = "connection refused: nothing listens there"
    except TimeoutError:
        why = f"no answer within {REACH_TIMEOUT_S:g} s"
    except socket.gaierror as exc:
        why = f"unknown host {host} ({exc.strerror or exc})"
    except OSError as exc:
        why = exc.strerror or str(exc)
    else:
        _reached.add((host, port))
        return
    raise NetflError(
        f"{shown}: the tracking server is unreachable{via} ({why}); start it, or give another URI (e.g. "
        "sqlite:///mlflow.db, a local database)"
    )
