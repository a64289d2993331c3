"""A study's runs that name the user's own model or data set, checked before any run starts.

The scenario checks of every run need no torch; a user's model file or data loader does: it must be imported,
built and run on a sample, and its size measured against netfl's budgets (:mod:`netfl.assemble.inspect`). The
driver of a sweep imports neither torch nor simpy, so this is done in one child process, once per distinct
setting of the tasks (runs that differ only by their seeds share one check: the split of the data checked is
that of the first seed). A child that dies (a crash in native code, the memory exhausted) is said as such.
"""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from netfl.errors import NetflError, ScenarioError
from netfl.study.spec import RunPlan

__all__ = ["check_users_code"]


def _key(plan: RunPlan) -> str:
    """What a run's check depends on, but its seeds."""
    document = plan.document()
    return json.dumps({k: v for k, v in document.items() if k not in ("seed", "world_seed", "training_seed", "name")},
                      sort_keys=True, default=str)  # fmt: skip


def check_users_code(runs: list[RunPlan], source: str, data_dir: Path | None = None) -> None:
    """ScenarioError naming each run (one per distinct setting) whose own model or data does not load, fit its
    data or netfl's budgets; nothing happens for studies of built-ins alone."""
    todo: dict[str, RunPlan] = {}
    for plan in runs:
        if plan.scenario.names_users_code:
            todo.setdefault(_key(plan), plan)
    if not todo:
        return
    plans = list(todo.values())
    problems: list[str | None] = []
    try:  # an executor, not a Pool: a Pool waits for ever on a child that died
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            for problem in pool.map(_check, [(plan.scenario, data_dir) for plan in plans]):
                problems.append(problem)
    except BrokenProcessPool:
        problems.append(
            "the process checking this run's model and data ended abruptly (a crash in native code, or out of "
            "memory); netfl validate on the run's topology shows where"
        )
    found = [(plan.label, message) for plan, message in zip(plans, problems) if message]
    if found:
        raise ScenarioError(source, found)


def _check(job: tuple[Any, Path | None]) -> str | None:
    """In the child: the run's tasks inspected as ``netfl validate`` does; the problem, or None."""
    from netfl.assemble.inspect import inspect_tasks  # torch is imported here, in the child

    scenario, data_dir = job
    try:
        inspect_tasks(scenario, data_dir)
    except NetflError as exc:
        return str(exc).replace("\n", " ")
    except Exception as exc:  # noqa: BLE001 -- netfl's own failure on this run: said, not a traceback in the driver
        return f"{type(exc).__name__} while checking the run's model and data: {exc}"
    return None
