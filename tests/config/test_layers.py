"""The layers import one way: configuration -> building -> simulating | learning -> results -> runner -> study,
api, cli.

Read from the source (every import statement, function-local ones too), so a
forbidden import fails here even on a path no other test happens to run; and
checked once in a fresh interpreter, for what a light import really loads.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Source folder -> the package it installs as (setup.py's ROOTS).
PACKAGES = {"netfl": "netfl", "policies": "netfl.policies", "cli": "netfl.cli"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO)
    parts = [PACKAGES[rel.parts[0]], *rel.parts[1:]]
    parts[-1] = parts[-1].removesuffix(".py")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _sources() -> dict[str, Path]:
    return {_module_name(p): p for root in PACKAGES for p in (REPO / root).rglob("*.py")}


@cache
def _direct_imports(module: str, parents: bool = True) -> frozenset[str]:
    """Every module ``module`` names in an import statement (netfl's own resolved to modules, others by top name).

    ``parents``: also the packages above a named module, whose ``__init__`` the import runs (for the layers);
    without, only the modules named (for cycles: a package's ``__init__`` may gather its own modules).
    """
    path, known = _sources()[module], _sources()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            submodules = {f"{base}.{alias.name}" for alias in node.names} & known.keys()
            found.update(submodules)
            if len(submodules) < len(node.names) or parents:  # names defined in base itself
                found.add(base)
    out = set()
    for name in found:
        if name.split(".")[0] != "netfl":
            out.add(name.split(".")[0])
        elif parents:  # importing netfl.a.b runs netfl.a's __init__ too
            parts = name.split(".")
            out.update(".".join(parts[:i]) for i in range(2, len(parts) + 1) if ".".join(parts[:i]) in known)
        elif name in known:
            out.add(name)
    out.discard(module)
    return frozenset(out)


@cache
def _reach(module: str, parents: bool = True) -> frozenset[str]:
    """Everything ``module`` imports, directly or through netfl's own modules."""
    seen, todo = set(), [module]
    while todo:
        for name in _direct_imports(todo.pop(), parents):
            if name not in seen:
                seen.add(name)
                if name in _sources():
                    todo.append(name)
    return frozenset(seen)


def _modules(prefix: str) -> list[str]:
    return sorted(m for m in _sources() if m == prefix or m.startswith(prefix + "."))


FORBIDDEN = {
    "netfl.config": {"torch", "simpy", "netfl.sim", "netfl.learn", "netfl.assemble", "netfl.runner", "netfl.api"},
    "netfl.registry": {"torch", "simpy", "netfl.sim", "netfl.learn", "netfl.assemble", "netfl.config"},
    "netfl.policies": {"torch", "simpy", "netfl.sim", "netfl.learn", "netfl.assemble", "netfl.config"},
    "netfl.sim": {"torch", "netfl.config", "netfl.learn", "netfl.assemble", "netfl.runner", "netfl.api"},
    "netfl.learn": {"simpy", "netfl.sim", "netfl.config", "netfl.assemble", "netfl.runner", "netfl.api"},
    "netfl.results": {"torch", "simpy", "netfl.sim", "netfl.learn", "netfl.assemble", "netfl.runner", "netfl.api"},
    # a study's runs load the runner (and so torch) in their own processes; the driver itself: test_sweep
    "netfl.study": {"netfl.api", "netfl.cli"},
}


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_never_imports_a_layer_above_it_or_the_others_engine(layer):
    bad = []
    for module in _modules(layer):
        for name in _reach(module):
            hit = next((f for f in FORBIDDEN[layer] if name == f or name.startswith(f + ".")), None)
            if hit is not None:
                bad.append(f"{module} -> {name}")
    assert not bad, "\n".join(sorted(bad))


def test_netfls_modules_import_each_other_without_cycles():
    cycles = sorted(m for m in _sources() if m in _reach(m, parents=False))
    assert not cycles, f"modules that import themselves through others: {cycles}"


def test_the_checker_sees_a_real_import():
    """Guard against a checker that finds nothing: the engine does reach simpy, the learner torch."""
    assert "simpy" in _reach("netfl.sim.simulation")
    assert "torch" in _reach("netfl.learn.learner")
    assert "netfl.config.schema" in _reach("netfl.assemble")


def test_importing_the_configuration_loads_neither_torch_nor_simpy():
    code = (
        "import sys, netfl.config, netfl.registry.algorithms, netfl.policies; "
        "print(sorted(m for m in ('torch', 'simpy', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


def test_every_package_is_listed_for_installation():
    """setup.py finds the wheel's packages under each root: every package on disk, under the name it imports as."""
    spec = importlib.util.spec_from_file_location("netfl_setup", REPO / "setup.py")
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)  # not as __main__: defines the roots and the finder, builds nothing
    assert setup.ROOTS == {name: folder for folder, name in PACKAGES.items()}
    on_disk = {m for m, p in _sources().items() if p.name == "__init__.py"}
    assert sorted(on_disk) == sorted(setup.packages())
