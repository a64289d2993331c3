"""A results folder claimed for the whole of a run, so that two netfl processes never write one folder at once.

A run checks its folder before it starts (new, empty, or an earlier run it may replace) and writes it at the
end, maybe hours later. Without a claim, a second run started meanwhile passes the same check, and whichever
ends last silently replaces the other. The claim is a lock file beside the folder (``.NAME.lock``, holding
the owner's pid) locked with ``flock`` for as long as the run goes on; the kernel drops the lock when the
process ends, however it ends (a crash, SIGKILL), so a claim never outlives its process and the next run
simply takes the file over. The folder is checked under the claim, so for every other netfl process the check
and the write are one step: a second run into the folder is refused at once (exit code 2).
"""

from __future__ import annotations

import fcntl
import itertools
import os
from pathlib import Path

from netfl.errors import NetflError
from netfl.results.folders import RUN, kinds_of
from netfl.results.staging import check_out_dir, process_alive

__all__ = ["Claim", "FolderBusy", "claim_folder", "claim_out_dir", "holder", "lock_path"]


class FolderBusy(NetflError):
    """Another live process holds the claim on the folder."""


def lock_path(folder: Path) -> Path:
    return folder.parent / f".{folder.name}.lock"


class Claim:
    """``path``, claimed by this process until :meth:`release` (or the end of a ``with`` block)."""

    def __init__(self, path: Path, fd: int, created: list[Path]):
        self.path, self._fd, self._created = path, fd, created

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            lock_path(self.path).unlink(missing_ok=True)  # while still locked: see claim_folder
        finally:
            os.close(self._fd)
            self._fd = None
            _remove_empty(self._created)

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def claim_folder(folder: Path, *, noun: str = "run") -> Claim:
    """Claim ``folder`` (creating the folders above it if need be); :class:`FolderBusy` if another process
    holds it, NetflError if nothing can be written beside it."""
    folder = Path(folder)
    lock = lock_path(folder)
    created: list[Path] = []
    try:
        created = _make_parents(folder.parent)
        while True:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = os.read(fd, 32).decode(errors="replace").strip()
                os.close(fd)
                raise FolderBusy(
                    f"{folder}: another netfl process{f' (pid {owner})' if owner.isdigit() else ''} is writing this "
                    f"{noun} folder now; wait until it ends, or choose another folder (--out DIR)"
                ) from None
            # The holder before us unlinks the file as it releases it: a lock on a file no longer at that path
            # would claim nothing, so lock whatever file is there now.
            try:
                if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    except FolderBusy:
        _remove_empty(created)
        raise
    except OSError as exc:
        _remove_empty(created)
        raise NetflError(
            f"{folder}: cannot write the results there ({exc.strerror or exc}); choose another folder (--out DIR)"
        ) from None
    return Claim(folder, fd, created)


def holder(folder: Path) -> int | None:
    """The pid of the live process that claims ``folder`` now (a run or a sweep writing it), or None; the claim
    is looked at, never taken. A lock file whose pid is gone is a claim that ended (SIGKILL); one whose pid is
    alive is confirmed by its lock (the pid may have been reused), tried shared and let go at once."""
    lock = lock_path(Path(folder))
    try:
        text = lock.read_text(errors="replace").strip()
    except OSError:
        return None
    if not text.isdigit() or not process_alive(int(text)):
        return None
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return int(text)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def claim_out_dir(
    out_dir: Path, *, overwrite: bool = False, chosen: bool = True, overwrite_option: str | None = "--overwrite"
) -> Claim:
    """The folder a run will be written to, claimed and checked before the run starts (an hour of simulation is
    never lost to a folder that cannot take its results, nor to another run writing it).

    An earlier run there is replaced only with ``overwrite`` (never a report, a study or the user's files:
    :func:`~netfl.results.staging.check_out_dir`); otherwise a folder the user ``chosen`` is an error, which
    names ``overwrite_option`` where the command has one, and a default folder (``results/<name>``) becomes the
    first free ``results/<name>-2``, ``-3``...
    """
    out_dir = Path(out_dir)
    if chosen or not _another_kind(out_dir):  # else a default folder taken by a report or a study: the next one
        check_out_dir(out_dir)
    later = (out_dir.with_name(f"{out_dir.name}-{n}") for n in itertools.count(2))
    for candidate in itertools.chain([out_dir], [] if chosen else later):
        try:
            claim = claim_folder(candidate)
        except FolderBusy:
            if chosen:
                raise
            continue
        try:
            replaceable = False
            if candidate == out_dir and (chosen or not _another_kind(candidate)):
                check_out_dir(candidate)  # again, now that no other netfl process can change it
                replaceable = overwrite
            free = not candidate.exists() or (candidate.is_dir() and not any(candidate.iterdir()))
            if free or replaceable:
                return claim
        except BaseException:
            claim.release()
            raise
        claim.release()
        if chosen:
            replace = f"add {overwrite_option} to replace it, or " if overwrite_option else ""
            raise NetflError(f"{out_dir}: holds an earlier run; {replace}choose another folder (--out DIR)")
    raise AssertionError("unreachable: the candidate folders never run out")


def _another_kind(folder: Path) -> bool:
    """``folder`` holds a netfl report or study: never a run's to replace."""
    return bool(kinds_of(folder) - {RUN})


def _make_parents(folder: Path) -> list[Path]:
    """Create ``folder`` and the folders above it that are missing; return those created, deepest first."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir()
    return missing


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders a claim created, deepest first, as long as they are still empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return
