"""The house: the whole tree is linted and formatted as pyproject.toml configures ruff (CI runs this), and no module
under netfl/ reaches another object's private names (SimPy's above all) but those listed here, each with its reason."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    found = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (it is in the test extra: pip install -e '.[test]')")
    return [found]


@pytest.mark.parametrize("command", [["check", "."], ["format", "--check", "."]], ids=["lint", "format"])
def test_the_tree_passes_ruff(command: list[str]) -> None:
    done = subprocess.run(_ruff() + command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"ruff {' '.join(command)} found problems:\n{done.stdout}{done.stderr}"


# ------------------------------------------------------------------------------------------------ private names

#: (module, the private access as written) -> why it stays: each is a library's name with no public equivalent.
ALLOWED_PRIVATE = {
    **{
        (
            "netfl/learn/models/flops.py",
            name,
        ): "the functions torch's own layers call (F.linear is torch._C._nn.linear, "
        "nn.RNN calls torch._VF.gru...): a TorchFunctionMode sees them under these names, so FLOPs are counted by them"
        for name in ("torch._C", "torch._C._nn", "torch._VF")
    },
    **{
        (
            module,
            f"torch.{name}",
        ): "torch's multi-tensor kernels (what torch.optim's foreach path calls), no public name"
        for module, names in {
            "netfl/learn/training/replicas.py": ("_foreach_copy_", "_foreach_zero_", "_foreach_mul_", "_foreach_add_"),
            "netfl/learn/training/stacked.py": ("_foreach_mul_", "_foreach_add_"),
            "netfl/learn/training/batched.py": ("_foreach_mul_", "_foreach_add_"),
        }.items()
        for name in names
    },
    **{
        ("netfl/learn/training/client_embeddings.py", name): "an embedding bag's sparse gradient comes uncoalesced, "
        "and torch's sparse docs name _indices()/_values() as the way to read an uncoalesced tensor (indices() "
        "would coalesce it: a sort and merge per step)"
        for name in ("grad._indices", "grad._values")
    },
    **{
        ("netfl/study/local.py", name): "multiprocessing's forkserver and resource tracker have no public stop; "
        "each use is guarded (getattr, hasattr) and skipped where a Python lacks it"
        for name in (
            "server._stop",
            "tracker._stop",
            'getattr(multiprocessing.forkserver, "_forkserver")',
            'getattr(server, "_forkserver_pid")',
            'hasattr(server, "_stop")',
            'getattr(multiprocessing.resource_tracker, "_resource_tracker")',
            'getattr(tracker, "_pid")',
            'hasattr(tracker, "_stop")',
        )
    },
    **{
        ("netfl/user_code.py", name): "os._exit is public and documented (the underscore is historic); posix._exit "
        "is the same function, fenced alike"
        for name in ("os._exit", "posix._exit", 'getattr(posix, "_exit")')
    },
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _simpy_private_names() -> frozenset[str]:
    """The private names of SimPy's environment, events and processes (class and instance attributes)."""
    import simpy

    env = simpy.Environment()
    objects = [env, env.event(), env.timeout(1), env.process(x for x in ())]
    names = set()
    for obj in objects:
        names |= {n for n in dir(obj) if _private(n)} | {n for n in vars(obj) if _private(n)}
    return frozenset(names)


def private_reaches(source: str, simpy_private: frozenset[str]) -> list[str]:
    """Each private name ``source`` reaches outside its own object, as written: ``x._name`` (``x`` not ``self`` or
    ``cls``), ``getattr(x, "_name")`` and its kin, an import of a private name from SimPy, and, inside a class
    derived from a SimPy one, ``self._name`` where SimPy's classes have that private name."""
    tree = ast.parse(source)
    found = []
    simpy_classes = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and any("simpy" in ast.unparse(base) for base in node.bases)
    ]
    inherited = {id(n) for cls in simpy_classes for n in ast.walk(cls)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not own or (id(node) in inherited and node.attr in simpy_private):
                found.append(ast.unparse(node))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            found.append(f"{node.func.id}({ast.unparse(node.args[0])}, {node.args[1].value!r})".replace("'", '"'))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "simpy":
            private_module = any(_private(part) for part in node.module.split("."))
            found += [f"from {node.module} import {a.name}" for a in node.names if private_module or _private(a.name)]
        elif isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.startswith("simpy") and "._" in a.name]
    return found


def test_no_module_reaches_another_objects_private_names() -> None:
    simpy_private = _simpy_private_names()
    found = {
        (path.relative_to(ROOT).as_posix(), reach)
        for path in sorted((ROOT / "netfl").rglob("*.py"))
        for reach in private_reaches(path.read_text(), simpy_private)
    }
    unexpected = sorted(found - ALLOWED_PRIVATE.keys())
    assert not unexpected, "private names reached from outside their object (make them public, or allow one here "
    "with its reason):\n" + "\n".join(f"{module}: {reach}" for module, reach in unexpected)
    assert sorted(ALLOWED_PRIVATE.keys() - found) == []  # an allowance no longer needed goes


@pytest.mark.parametrize(
    "source, reach",
    [
        ("def f(fleet):\n    return fleet._accrue(1.0)\n", "fleet._accrue"),
        ("x = channel._bandwidth(None)\n", "channel._bandwidth"),
        ("from simpy.core import _Infinity\n", "from simpy.core import _Infinity"),
        ("import simpy\nq = simpy.core._queue\n", "simpy.core._queue"),
        ("v = getattr(process, '_generator')\n", 'getattr(process, "_generator")'),
        (
            "import simpy\nclass E(simpy.Environment):\n    def step(self):\n        return self._now\n",
            "self._now",
        ),
    ],
)
def test_the_check_sees_each_kind_of_reach(source: str, reach: str) -> None:
    assert private_reaches(source, _simpy_private_names()) == [reach]


def test_the_check_leaves_an_objects_own_names_alone() -> None:
    own = "import simpy\nclass A:\n    def f(self):\n        return self._now\nclass E(simpy.Environment):\n"
    own += "    def g(self):\n        return self._mine + self.now\n"
    assert private_reaches(own, _simpy_private_names()) == []
