"""The layers import one way (DESIGN.md, Layers): every package and top-level module of netfl has a layer, and a
layer imports only those listed for it in LAYERS: base <- registry, policies <- configuration, simulating,
learning <- results <- building <- runner <- study, api <- cli (simulating and learning are peers, meeting only
through netfl/backend.py).

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


#: Each layer: the packages and top-level modules in it (a package's subpackages with it), and the layers it may
#: import besides itself (DESIGN.md, Layers). Every package and top-level module on disk must be in one.
LAYERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "base": (
        tuple(
            f"netfl.{name}"
            for name in (
                "backend",  # where the engine and the learner meet
                "component_spec",
                "cpus",
                "distributions",
                "errors",
                "events",
                "fleet_logs",  # device-state logs: their data model, readers and writers
                "keyed_random",
                "numbers",
                "problems",
                "rng",
                "signals",
                "units",
                "user_code",
                "version",
            )
        ),
        (),
    ),
    "registry": (("netfl.registry",), ("base",)),
    "policies": (("netfl.policies",), ("base",)),
    "config": (("netfl.config",), ("base", "registry", "policies")),
    "sim": (("netfl.sim",), ("base", "registry", "policies")),
    "learn": (("netfl.learn", "netfl.algorithms"), ("base", "registry")),
    "results": (("netfl.results",), ("base", "config")),
    "build": (("netfl.assemble",), ("base", "registry", "policies", "config", "sim", "learn")),
    "runner": (
        ("netfl.runner", "netfl.checkpoint", "netfl.loss_watch"),
        ("base", "registry", "policies", "config", "sim", "learn", "results", "build"),
    ),
    "study": (("netfl.study",), ("base", "registry", "policies", "config", "results", "build", "runner")),
    "api": (("netfl", "netfl.api"), ("base", "config", "results", "runner")),
    "fleet_fit": (("netfl.fleet_fit",), ("base", "registry", "policies", "config", "results", "api")),
    "cli": (
        ("netfl.cli",),
        (
            "base",
            "registry",
            "policies",
            "config",
            "sim",
            "learn",
            "results",
            "build",
            "runner",
            "study",
            "api",
            "fleet_fit",
        ),
    ),
}
#: What a layer may never load, even through another (torch and simpy: the engine and the learner stay apart).
FORBIDDEN_LIBRARIES = {
    "base": {"torch", "simpy"},
    "registry": {"torch", "simpy"},
    "policies": {"torch", "simpy"},
    "config": {"torch", "simpy"},
    "sim": {"torch"},
    "learn": {"simpy"},
    "results": {"torch", "simpy"},
}


def layer_of(module: str) -> str | None:
    """The layer of ``module``: its own entry, or its closest package's (the bare ``netfl`` matches only itself)."""
    owners = {name: layer for layer, (names, _) in LAYERS.items() for name in names}
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        if name in owners and (name != "netfl" or module == "netfl"):
            return owners[name]
    return None


def arrows_up(imports: dict[str, frozenset[str] | set[str]]) -> list[str]:
    """Each ``module -> imported`` (netfl's own modules) that crosses into a layer the module's may not import."""
    bad = []
    for module, names in imports.items():
        layer = layer_of(module)
        allowed = {layer, *LAYERS[layer][1]}
        bad += [
            f"{module} -> {name}"
            for name in sorted(names)
            if name.startswith("netfl") and layer_of(name) not in allowed
        ]
    return bad


def _packages_on_disk() -> list[str]:
    """Every package (a folder with __init__.py) and every module directly under netfl/, found on disk."""
    packages = [m for m, p in _sources().items() if p.name == "__init__.py"]
    top = [m for m, p in _sources().items() if p.parent == REPO / "netfl" and p.name != "__init__.py"]
    return sorted(packages + top)


def test_every_package_and_top_level_module_has_a_layer():
    assert (
        "netfl.learn.federation.algorithms" in _packages_on_disk() and "netfl.results" in _packages_on_disk()
    )  # found
    unassigned = [name for name in _packages_on_disk() if layer_of(name) is None]
    assert not unassigned, f"give these a layer in LAYERS: {unassigned}"
    assert {layer_of(name) for name in _packages_on_disk()} == set(LAYERS)  # no layer left empty


def test_a_layer_imports_only_the_layers_it_may():
    assert arrows_up({module: _direct_imports(module) for module in _sources()}) == []


def test_the_checker_reports_an_arrow_up_the_layers():
    """The arrow the old test missed (config/summary.py importing results/progress.py), and its kin."""
    assert arrows_up({"netfl.config.summary": {"netfl.results.progress", "netfl.units"}}) == [
        "netfl.config.summary -> netfl.results.progress"
    ]
    assert arrows_up({"netfl.sim.server": {"netfl.learn.federation.learner", "netfl.backend"}}) == [
        "netfl.sim.server -> netfl.learn.federation.learner"
    ]
    assert arrows_up({"netfl.results.writer": {"netfl.runner"}, "netfl.api": {"netfl.runner"}}) == [
        "netfl.results.writer -> netfl.runner"
    ]


@pytest.mark.parametrize("layer", sorted(FORBIDDEN_LIBRARIES))
def test_a_layer_never_loads_the_others_engine(layer):
    bad = []
    for module in (m for m in _sources() if layer_of(m) == layer):
        bad += [f"{module} -> {name}" for name in sorted(_reach(module) & FORBIDDEN_LIBRARIES[layer])]
    assert not bad, "\n".join(bad)


def test_netfls_modules_import_each_other_without_cycles():
    cycles = sorted(m for m in _sources() if m in _reach(m, parents=False))
    assert not cycles, f"modules that import themselves through others: {cycles}"


def test_the_checker_sees_a_real_import():
    """Guard against a checker that finds nothing: the engine does reach simpy, the learner torch."""
    assert "simpy" in _reach("netfl.sim.simulation")
    assert "torch" in _reach("netfl.learn.federation.learner")
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
