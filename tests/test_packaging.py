"""The package: its version written once and said the same everywhere, every package folder in the wheel, and CI
building, checking and running the wheel (.ci/run, which builds it for real)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import tomllib
from pathlib import Path

from cli_support import run

import netfl
from netfl.runner import software_versions
from netfl.version import DISTRIBUTION

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_written_once_and_said_everywhere() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "netfl.version.__version__"}
    assert project["project"]["name"] == DISTRIBUTION == "netfl-sim"
    assert importlib.metadata.version(DISTRIBUTION) == netfl.__version__  # as installed
    assert run("--version").output == f"netfl {netfl.__version__} (the netfl-sim distribution)\n"
    assert software_versions()["netfl"] == netfl.__version__  # what summary.json records, and rerun compares
    citation = (ROOT / "CITATION.cff").read_text()
    assert re.search(r"^cff-version: 1\.2\.0$", citation, re.M)
    assert re.search(rf'^version: "{re.escape(netfl.__version__)}"$', citation, re.M)
    assert re.search(rf"^## {re.escape(netfl.__version__)} ", (ROOT / "CHANGELOG.md").read_text(), re.M)


def test_every_package_folder_is_found_for_the_wheel() -> None:
    """setup.py finds the packages under each root (find_packages: folders holding __init__.py), so a folder of
    modules without one would be left out of the wheel."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    roots = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.AnnAssign | ast.Assign) and "ROOTS" in ast.unparse(node)
    )
    assert roots == {"netfl": "netfl", "netfl.cli": "cli", "netfl.policies": "policies"}
    for folder in roots.values():
        for module in (ROOT / folder).rglob("*.py"):
            assert (module.parent / "__init__.py").exists(), f"{module.parent} holds modules but no __init__.py"


def test_ci_runs_the_readmes_tests_then_builds_and_runs_the_wheel() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    command = 'python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 -e ".[test]" && pytest'
    assert command in readme and command in ci
    for step in (
        "python -m build",
        "twine check --strict dist/*",
        'pip" install torch==2.13.0 dist/*.whl',
        'netfl" simulate "$checkout/topologies/quickstart.yaml"',
        '"$checkout"/topologies/*.yaml',
        'netfl" validate "$topology"',
    ):
        assert step in ci, step
    assert ci.index(command) < ci.index("python -m build") and "set -euo pipefail" in ci


def test_the_licence_is_the_apache_license_as_pyproject_says() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"
