"""Study runs as Ray tasks: on a local Ray instance (``--ray``) or an existing cluster (``--ray-address``).

Each run is one task asking for ``threads`` CPUs, so Ray never places more
runs on a machine than it has cores. A task runs into a temporary folder on
its worker and returns the folder's files; the driver writes them under the
study folder, so the layout is the same as a local sweep's whatever machine
ran the run. The user's Python files a run names (its strategy, model, policies,
data loader) travel with it (:mod:`netfl.study.travelling_code`); workers need
netfl, and the data sets the study reads, installed as on the driver. Ray
itself is the optional extra ``pip install -e ".[ray]"``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from netfl.errors import NetflError
from netfl.results.writer import write_files
from netfl.signals import signals_deferred
from netfl.study.local import POLL_S, OnDone
from netfl.study.spec import RunPlan
from netfl.study.travelling_code import users_sources


class RayRunner:
    """``address``: None starts a local Ray instance for the sweep; otherwise the cluster to join
    (``ray://host:10001``, ``host:6379`` or ``auto``)."""

    def __init__(
        self,
        *,
        address: str | None,
        threads: int,
        data_dir: Path | None = None,
        device: str = "cpu",
        local_cpus: int | None = None,
    ):
        self.address, self.threads, self.data_dir, self.device = address, threads, data_dir, device
        self.local_cpus = local_cpus

    def describe(self) -> str:
        where = f"the Ray cluster at {self.address}" if self.address else "a local Ray instance"
        return f"Ray tasks on {where}, {self.threads} CPU(s) each"

    def run(
        self,
        runs: list[tuple[RunPlan, Path]],
        on_done: OnDone,
        tick: Callable[[int], None],
        on_start: Callable[[RunPlan], None] | None = None,
    ) -> None:
        """As LocalRunner.run, but without ``on_start``: Ray does not say when a task it queued begins, so a report
        made meanwhile counts the sweep's unfinished runs without telling running from waiting."""
        ray = _import_ray()
        try:
            ray.init(
                address=self.address,
                num_cpus=None if self.address else self.local_cpus,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
        except Exception as exc:  # noqa: BLE001 -- Ray raises many kinds; all mean "no cluster to run on"
            raise NetflError(f"cannot start or join Ray ({self.address or 'local'}): {exc}") from None
        try:
            self._run(ray, runs, on_done, tick)
        finally:
            ray.shutdown()

    def _run(self, ray: Any, runs: list[tuple[RunPlan, Path]], on_done: OnDone, tick: Callable[[int], None]) -> None:
        from netfl.study.execute import run_plan_packed

        task = ray.remote(num_cpus=self.threads, max_retries=0)(run_plan_packed)
        pending = {
            task.remote(
                plan, threads=self.threads, data_dir=self.data_dir, device=self.device, sources=_sources(plan)
            ): (plan, folder)
            for plan, folder in runs
        }
        with signals_deferred() as received:  # acted on between steps, as LocalRunner does
            while pending and not received:
                tick(len(pending))
                done, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
                for ref in done:
                    plan, folder = pending.pop(ref)
                    on_done(plan, _land(ray, ref, folder))
            if received:
                for ref in pending:
                    ray.cancel(ref, force=True)
        if received:
            raise KeyboardInterrupt


def _sources(plan: RunPlan) -> dict[str, bytes]:
    """The user's files the run names, read on the driver to travel with the task."""
    source = plan.scenario.source
    return users_sources(plan.document(), source.parent if source is not None else None)


def _land(ray: Any, ref: Any, folder: Path) -> dict[str, Any]:
    """The task's record, its files written into ``folder``; a task Ray lost (a worker died) is a failed run."""
    try:
        record, files = ray.get(ref)
    except ray.exceptions.RayError as exc:
        return {"status": "failed", "error": f"Ray lost the run: {str(exc).splitlines()[0]}"}
    if record["status"] == "complete":
        try:
            write_files(folder, files)
        except NetflError as exc:
            return {**record, "status": "failed", "error": str(exc)}
    return record


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise NetflError('--ray needs Ray, an optional extra: pip install -e ".[ray]" (or pip install ray)') from None
    return ray
