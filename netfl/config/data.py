"""Where a run reads each task's data set, and whether the files it needs are there (its model's file too).

Checked by ``netfl validate``, before ``netfl simulate`` starts and for
every run of a sweep, so that a missing data set is one message naming the
field (or ``--data-dir``) instead of a failure once the run is under way.
Only the files' presence is checked (a few ``stat`` calls); reading them
checks their content.
"""

from __future__ import annotations

from pathlib import Path

from netfl.config.schema import Scenario
from netfl.errors import ScenarioError
from netfl.registry.datasets import missing_files, missing_user_data
from netfl.user_code import parse_reference, python_file_present


def resolve_data_dir(scenario: Scenario, override: Path | None, task: int = 0) -> Path | None:
    """--data-dir wins; a data_dir in the YAML is relative to the YAML file."""
    if override is not None:
        return override
    data_dir = scenario.tasks[task].dataset.data_dir
    if data_dir is not None and not data_dir.is_absolute() and scenario.source is not None:
        return scenario.source.parent / data_dir
    return data_dir


def data_problems(scenario: Scenario, data_dir: Path | None = None) -> list[tuple[str, str]]:
    """(path, message) for each task whose data set's files are not where the run would read them."""
    problems = []
    base_dir = scenario.source.parent if scenario.source is not None else None
    for t, task in enumerate(scenario.tasks):
        where = "task" if len(scenario.tasks) == 1 else f"tasks[{t}]"
        if task.model.path is not None:
            model = parse_reference(task.model.path, base_dir).path
            if not python_file_present(model):
                problems.append(
                    (
                        f"{where}.model.path",
                        f"{task.model.path}: file not found: {model} (a relative path starts at the topology "
                        "file's folder)",
                    )
                )
        spec = task.dataset
        if spec.vocabulary not in (None, "leaf", "used"):
            file = Path(spec.vocabulary).expanduser()
            file = file if file.is_absolute() or base_dir is None else base_dir / file
            if not file.is_file():
                problems.append(
                    (
                        f"{where}.dataset.vocabulary",
                        f"{spec.vocabulary}: file not found: {file} (leaf, used, or a vocabulary file: a JSON list "
                        "of tokens or one token a line; a relative path starts at the topology file's folder)",
                    )
                )
        if spec.path is not None:
            problem = missing_user_data(spec.path, base_dir)
            if problem is not None:
                problems.append((f"{where}.dataset.path", problem))
            continue
        if spec.name is None:  # arrays or a loader given in Python: nothing on disk to look for
            continue
        problem = missing_files(spec.name, resolve_data_dir(scenario, data_dir, t))
        if problem is not None:
            path = (
                "--data-dir"
                if data_dir is not None
                else f"{where}.dataset.data_dir"
                if spec.data_dir is not None
                else f"{where}.dataset.name"
            )
            problems.append((path, problem))
    return problems


def check_data(scenario: Scenario, data_dir: Path | None = None, source: str | None = None) -> None:
    """ScenarioError listing every task whose data files are missing (``data_dir``: the run's --data-dir)."""
    problems = data_problems(scenario, data_dir)
    if problems:
        raise ScenarioError(source or str(scenario.source or scenario.name), problems)
