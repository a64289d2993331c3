"""Study runs in local processes, ``jobs`` at a time, each in a fresh process of its own.

A fresh process per run keeps runs independent (a run's memory, torch state
or crash never reaches the next; each gives the bytes ``netfl simulate``
gives) and lets Ctrl-C stop exactly the running ones. Where the system has
it, runs are forked from a ``forkserver`` that imported netfl, torch and
scikit-learn's data sets once (:data:`PRELOAD`: a run starts in
milliseconds, not the seconds a fresh interpreter takes to import them); the
server itself starts clean, so the driver's own state (threads, a test's
torch) is never forked into a run. Elsewhere: ``spawn``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import signal
import threading
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from netfl.results.staging import recover_folder
from netfl.signals import signals_deferred
from netfl.study.spec import RunPlan
from netfl.study.steps import reached

#: (plan, record) for each run that ends, as it ends.
OnDone = Callable[[RunPlan, dict[str, Any]], None]


#: What the forkserver imports once, before it forks any run: netfl's run path (torch with it), and
#: scikit-learn's data sets, which the built-in digits and blobs3 load from (1.5 s in every run that loads them,
#: each run in a fresh fork; a sweep of other data sets pays it once, in the forkserver).
PRELOAD = ["netfl.study.forkserver", "netfl.study.execute", "netfl.runner", "sklearn.datasets"]

#: How often the driver looks up from waiting (a signal is acted on within this), in seconds.
POLL_S = 0.2
#: How long a run stopped by the sweep may take to end on SIGTERM before it is killed, in seconds.
GRACE_S = 10.0
#: How long the sweep waits at most for multiprocessing's resource tracker to end, in seconds.
HELPERS_S = 5.0


class LocalRunner:
    """Runs at most ``jobs`` runs at once, ``threads`` training threads each."""

    def __init__(self, *, jobs: int, threads: int, data_dir: Path | None = None, device: str = "cpu"):
        self.jobs, self.threads, self.data_dir, self.device = jobs, threads, data_dir, device

    def describe(self) -> str:
        return f"{self.jobs} local process{'es' if self.jobs > 1 else ''}, {self.threads} thread(s) each"

    def run(
        self,
        runs: list[tuple[RunPlan, Path]],
        on_done: OnDone,
        tick: Callable[[int], None],
        on_start: Callable[[RunPlan], None] | None = None,
    ) -> None:
        """Run every ``(plan, folder)``; ``on_start`` as each run's process starts, ``on_done`` as each ends;
        ``tick(running)`` a few times a second.

        Ctrl-C or SIGTERM stops the running ones and raises KeyboardInterrupt: each is ended (SIGTERM, then
        SIGKILL after :data:`GRACE_S`) and its folder left as it was, except a run that ended by itself before
        it could be stopped, which is reported as it ended. The driver acts on a signal only between its own
        steps (never between starting a run and keeping track of it), and a run ends itself if the driver dies.
        """
        context = _context()
        waiting = deque(runs)
        running: dict[Any, _Child] = {}
        with signals_deferred() as received:
            while (waiting or running) and not received:
                while waiting and len(running) < self.jobs and not received:
                    plan, folder = waiting.popleft()
                    reached("queued", plan.label)
                    child = _Child.start(context, plan, folder, self)
                    if child.process is None:
                        on_done(child.plan, child.record)
                        continue
                    running[child.process.sentinel] = child
                    reached("tracked", plan.label)
                    if on_start is not None:
                        on_start(child.plan)
                    reached("announced", plan.label)
                tick(len(running))
                for sentinel in wait(list(running), timeout=POLL_S) if running else ():
                    child = running.pop(sentinel)
                    on_done(child.plan, child.finish())
            # Taken here, whenever it came (the last run's end included): every run still running is stopped.
            # One that comes after is delivered again as the section ends (an enclosing sweep notes it).
            stopping = received.take()
            if stopping:
                for child in running.values():
                    child.process.terminate()
                for child in running.values():
                    record = child.stop()
                    if record is not None:  # it ended by itself meanwhile: its outcome stands
                        on_done(child.plan, record)
        if stopping:
            raise KeyboardInterrupt

    def close(self) -> None:
        """End the helper processes multiprocessing started for the runs (the forkserver and its resource
        tracker) and reap them. Left alone, they notice that the driver has gone only after it exits, and the
        forkserver, which imported torch, takes seconds more to exit: after a Ctrl-C or SIGTERM the sweep would
        return while they still ran. Call it once every run has ended (:meth:`run` returns only then)."""
        with signals_deferred():  # never half-stopped: a signal now is delivered once they are stopped
            _stop_helpers()


def _stop_helpers() -> None:
    """The forkserver ended at once (SIGTERM: it runs no run now, and nothing of it is worth a graceful exit),
    then the resource tracker, which ends as soon as the last process holding its pipe has; each reaped. Both
    are multiprocessing's private singletons: where a Python lacks them, they are left to end by themselves."""
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    pid = getattr(server, "_forkserver_pid", None)
    if pid is not None and hasattr(server, "_stop"):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        server._stop()  # closes its pipe and waits for it
    tracker = getattr(multiprocessing.resource_tracker, "_resource_tracker", None)
    if getattr(tracker, "_pid", None) is not None and hasattr(tracker, "_stop"):
        # It ends when no process holds its pipe any more, which every run's end assures; bounded all the same,
        # so that a process netfl does not know of holding the pipe can never keep the sweep from exiting.
        stopping = threading.Thread(target=tracker._stop, name="netfl-stop-tracker", daemon=True)
        stopping.start()
        stopping.join(HELPERS_S)


class _Child:
    """One run in a process of its own, and the pipe its record comes back through."""

    def __init__(self, plan: RunPlan, folder: Path):
        self.plan, self.folder = plan, folder
        self.process: Any = None
        self.receive: Connection | None = None
        self.record: dict[str, Any] = {}

    @classmethod
    def start(cls, context: Any, plan: RunPlan, folder: Path, runner: LocalRunner) -> _Child:
        """The run started; if its process could not be (the system out of processes, the forkserver gone), no
        process and a failed record."""
        child = cls(plan, folder)
        receive, send = context.Pipe(duplex=False)
        process = context.Process(
            target=_run_in_child,
            name=f"netfl-run {plan.label}",
            daemon=True,
            args=(plan, folder, runner.threads, runner.data_dir, runner.device, send),
        )
        try:
            reached("forking", plan.label)
            process.start()
            reached("forked", plan.label)
        except (OSError, EOFError) as exc:
            receive.close()
            child.record = {"status": "failed", "error": f"could not start the run's process: {exc}"}
            return child
        finally:
            send.close()
        child.process, child.receive = process, receive
        return child

    def finish(self) -> dict[str, Any]:
        """The record of a run whose process has ended (a failed one if it died before reporting)."""
        record = _receive(self.receive)
        self.process.join()
        if record is None:
            recover_folder(self.folder, self.process.pid)
            record = {"status": "failed", "error": _died(self.process.exitcode)}
        return record

    def stop(self) -> dict[str, Any] | None:
        """After SIGTERM: wait for the process to end (kill it after the grace), put its folder back as it was;
        the record if the run reported one before it ended."""
        self.process.join(GRACE_S)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        record = _receive(self.receive)
        if record is None:
            recover_folder(self.folder, self.process.pid)
        return record


def _context() -> multiprocessing.context.BaseContext:
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def _run_in_child(
    plan: RunPlan, folder: Path, threads: int, data_dir: Path | None, device: str, send: Connection
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides what Ctrl-C stops
    _end_with_the_driver()
    from netfl.study.execute import run_plan

    record = run_plan(plan, folder, threads=threads, data_dir=data_dir, device=device)
    try:
        send.send(record)
        send.close()
    except OSError:  # BrokenPipeError: the driver is gone, and there is nobody left to tell
        pass


def _end_with_the_driver() -> None:
    """A run never outlives its sweep: when the driver's process ends, however it ends (SIGKILL included), the
    pipe it holds to this process closes, and this process ends too (its folder is left for the next run into
    it to clean up, :func:`~netfl.results.staging.clean_stale_staging`)."""
    parent = multiprocessing.parent_process()
    if parent is None or parent.sentinel is None:
        return

    def watch() -> None:
        wait([parent.sentinel])
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="netfl-driver-watch", daemon=True).start()


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
