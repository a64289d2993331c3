"""Study runs as Ray tasks: on a local Ray instance (``--ray``) or an existing cluster (``--ray-address``).

Each run is one task asking for ``threads`` CPUs, so Ray never places more
runs on a machine than it has cores, and, training on a GPU, for a share of
one (``gpus_per_run``, fractional as Flower's ``num_gpus``): Ray places it on
a node with a GPU, makes the GPU it assigned the task's only visible one
(``CUDA_VISIBLE_DEVICES``), and the run trains on it as ``cuda:0``. A task runs into a temporary folder on
its worker and returns the folder's files; the driver writes them under the
study folder, so the layout is the same as a local sweep's whatever machine
ran the run. The user's Python files a run names (its strategy, model, policies,
data loader) travel with it (:mod:`netfl.study.travelling_code`); workers need
netfl, and the data sets the study reads, installed as on the driver. Ray
itself is the optional extra ``pip install -e ".[ray]"``.
"""

from __future__ import annotations

import os
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
        gpus_per_run: float | None = None,
        local_cpus: int | None = None,
        local_gpus: int | None = None,
    ):
        """``gpus_per_run``: the share of a GPU each run asks for (:func:`gpu_request` says what is accepted);
        ``local_cpus``, ``local_gpus``: the local instance's resources [default: Ray's, from the machine]."""
        self.address, self.threads, self.data_dir, self.device = address, threads, data_dir, device
        self.gpus_per_run, self.local_cpus, self.local_gpus = gpus_per_run, local_cpus, local_gpus

    def describe(self) -> str:
        where = f"the Ray cluster at {self.address}" if self.address else "a local Ray instance"
        gpus = f" and {self.gpus_per_run:g} GPU" if self.gpus_per_run else ""
        return f"Ray tasks on {where}, {self.threads} CPU(s){gpus} each"

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
                num_gpus=None if self.address else self.local_gpus,
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
        if self.gpus_per_run:
            has = ray.cluster_resources().get("GPU", 0)
            if has < self.gpus_per_run:  # Ray would hold the tasks as infeasible, and the sweep would wait for good
                where = f"the Ray cluster at {self.address}" if self.address else "the local Ray instance"
                raise NetflError(
                    f"--gpus-per-run {self.gpus_per_run:g}: {where} has {has:g} GPU(s); run where Ray sees a GPU, "
                    "or train on the CPU (--device cpu, no --gpus-per-run)"
                )
        task = ray.remote(**task_options(self.threads, self.gpus_per_run))(run_task)
        pending = {
            task.remote(
                plan,
                threads=self.threads,
                data_dir=self.data_dir,
                device=self.device,
                on_gpu=bool(self.gpus_per_run),
                sources=_sources(plan),
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
            stopping = received.take()
            if stopping:
                for ref in pending:
                    ray.cancel(ref, force=True)
        if stopping:
            raise KeyboardInterrupt


def _sources(plan: RunPlan) -> dict[str, bytes]:
    """The user's files the run names, read on the driver to travel with the task."""
    source = plan.scenario.source
    return users_sources(plan.document(), source.parent if source is not None else None)


def gpu_request(
    gpus_per_run: float | None, device: str, *, on_ray: bool, device_given: bool
) -> tuple[float | None, str]:
    """The share of a GPU each run asks Ray for, and the device the sweep names, from ``--gpus-per-run`` and
    ``--device``; a one-line error for what cannot work. On Ray, ``--device cuda`` alone asks for a whole GPU per
    run; ``--gpus-per-run`` alone trains on the GPU (``--device cpu`` with it is refused). A share is Ray's
    (at least 0.0001) of one GPU, since a run trains on one device: more than 0, at most 1."""
    cuda = device == "cuda" or device.startswith("cuda:")
    if gpus_per_run is None:
        if on_ray and cuda:
            _one_ray_device(device)
            return 1.0, "cuda"
        return None, device
    if not on_ray:
        raise NetflError(
            "--gpus-per-run is the GPU share each run asks Ray for: use it with --ray or --ray-address (a local "
            "sweep trains every run on --device)"
        )
    if not 0.0001 <= gpus_per_run <= 1:
        raise NetflError(
            f"--gpus-per-run {gpus_per_run:g}: a run trains on one GPU, so its share is from 0.0001 (Ray's "
            "smallest) to 1 (0.25: four runs to a GPU)"
        )
    if device_given and not cuda:
        raise NetflError(
            f"--gpus-per-run with --device {device}: a GPU share for runs that do not train on a GPU; use --device "
            "cuda, or drop --gpus-per-run"
        )
    if device_given:
        _one_ray_device(device)
    return gpus_per_run, "cuda"


def _one_ray_device(device: str) -> None:
    if device != "cuda":
        raise NetflError(
            f"--device {device} on Ray: Ray picks the GPU each run trains on (the one it assigned); use --device cuda"
        )


def task_options(threads: int, gpus_per_run: float | None) -> dict[str, Any]:
    """What each run's task asks Ray for: ``threads`` CPUs and, training on a GPU, that share of one; never
    retried (a run that failed fails again the same)."""
    return {"num_cpus": threads, "max_retries": 0, **({"num_gpus": gpus_per_run} if gpus_per_run else {})}


def gpu_assignment() -> dict[str, Any]:
    """Inside a task: the GPUs Ray assigned it and what it made visible to it (kept in the run's record)."""
    import ray

    return {
        "gpu_ids": [str(gpu) for gpu in ray.get_gpu_ids()],
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def run_task(
    plan: RunPlan,
    *,
    threads: int,
    data_dir: Path | None,
    device: str,
    on_gpu: bool,
    sources: dict[str, bytes] | None = None,
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """One run as a Ray task (:func:`~netfl.study.execute.run_plan_packed`, ``sources`` the user's files sent with
    it); ``on_gpu``: on the GPU Ray assigned, which is ``cuda:0`` inside the task (Ray made it the only visible
    one), its assignment in the record."""
    from netfl.study.execute import run_plan_packed

    if not on_gpu:
        return run_plan_packed(plan, threads=threads, data_dir=data_dir, device=device, sources=sources)
    assigned = gpu_assignment()
    if not assigned["gpu_ids"]:
        return {"status": "failed", "error": "Ray assigned the run no GPU", "ray_gpu": assigned}, {}
    record, files = run_plan_packed(plan, threads=threads, data_dir=data_dir, device="cuda:0", sources=sources)
    return {**record, "ray_gpu": assigned}, files


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
