"""Study runs in local processes, ``jobs`` at a time, each in a fresh process of its own.

A fresh process per run keeps runs independent (a run's memory, torch state
or crash never reaches the next; each gives the bytes ``netfl simulate``
gives) and lets Ctrl-C stop exactly the running ones. Where the system has
it, runs are forked from a ``forkserver`` that imported netfl and torch once
(a run starts in milliseconds, not the seconds a fresh interpreter takes to
import torch); the server itself starts clean, so the driver's own state
(threads, a test's torch) is never forked into a run. Elsewhere: ``spawn``.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from netfl.results.writer import recover_folder
from netfl.study.spec import RunPlan

#: (plan, record) for each run that ends, as it ends.
OnDone = Callable[[RunPlan, dict[str, Any]], None]


class LocalRunner:
    """Runs at most ``jobs`` runs at once, ``threads`` training threads each."""

    def __init__(self, *, jobs: int, threads: int, data_dir: Path | None = None, device: str = "cpu"):
        self.jobs, self.threads, self.data_dir, self.device = jobs, threads, data_dir, device

    def describe(self) -> str:
        return f"{self.jobs} local process{'es' if self.jobs > 1 else ''}, {self.threads} thread(s) each"

    def run(self, runs: list[tuple[RunPlan, Path]], on_done: OnDone, tick: Callable[[int], None]) -> None:
        """Run every ``(plan, folder)``; ``on_done`` as each ends; ``tick(running)`` about once a second.
        Ctrl-C stops the running ones (their folders are left as they were) and raises KeyboardInterrupt."""
        context = _context()
        waiting = deque(runs)
        running: dict[Any, tuple[Any, Connection, RunPlan, Path]] = {}
        try:
            while waiting or running:
                while waiting and len(running) < self.jobs:
                    plan, folder = waiting.popleft()
                    receive, send = context.Pipe(duplex=False)
                    process = context.Process(
                        target=_run_in_child,
                        name=f"netfl-run {plan.label}",
                        daemon=True,
                        args=(plan, folder, self.threads, self.data_dir, self.device, send),
                    )
                    process.start()
                    send.close()
                    running[process.sentinel] = (process, receive, plan, folder)
                tick(len(running))
                for sentinel in wait(list(running), timeout=1.0):
                    process, receive, plan, folder = running.pop(sentinel)
                    record = _receive(receive)
                    process.join()
                    if record is None:
                        recover_folder(folder, process.pid)
                        record = {"status": "failed", "error": _died(process.exitcode)}
                    on_done(plan, record)
        except KeyboardInterrupt:
            for process, _, _, _ in running.values():
                process.terminate()
            for process, _, _, folder in running.values():
                process.join()
                recover_folder(folder, process.pid)
            raise


def _context() -> multiprocessing.context.BaseContext:
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["netfl.study.execute", "netfl.runner"])
    return context


def _run_in_child(
    plan: RunPlan, folder: Path, threads: int, data_dir: Path | None, device: str, send: Connection
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides what Ctrl-C stops
    from netfl.study.execute import run_plan

    send.send(run_plan(plan, folder, threads=threads, data_dir=data_dir, device=device))
    send.close()


def _receive(connection: Connection) -> dict[str, Any] | None:
    try:
        return connection.recv() if connection.poll() else None
    except (EOFError, OSError):
        return None
    finally:
        connection.close()


def _died(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name if -exitcode in signal.valid_signals() else str(-exitcode)
        hint = " (killed: out of memory?)" if name == "SIGKILL" else ""
        return f"the run's process was ended by {name}{hint}"
    return f"the run's process ended with exit code {exitcode} before reporting"
