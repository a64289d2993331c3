"""The wheels a bare GPU machine needs to run netfl, prepared here, installed there without a network.

The GPU machine (benchmarks/README.md) has Python 3.12, PyTorch with CUDA and the scientific stack
(:data:`DEVICE_HAS`), and no internet. netfl's other dependencies -- and theirs -- are fetched here for its
Python and platform (``pip download --only-binary``), each pinned to the version this environment has (the one
netfl is tested with), and netfl itself is built as a wheel. The folder also gets Fashion-MNIST's four files
(the benchmarks' data set, where this machine has it) and a manifest naming the source tree the netfl wheel was
built from, so that a check run from another tree says so instead of measuring stale code.

    python benchmarks/gpu_wheels.py DIR [--list] [--python-version 3.12]

Only the standard library and ``packaging`` (pip's own copy where it is not installed) are used, so the same
module installs the wheels on the GPU machine (:func:`install`).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # pip's vendored copy
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
#: What the GPU machine has installed (with PyTorch's own dependencies): netfl's dependencies beyond these, and
#: theirs, are the wheels to carry.
DEVICE_HAS = (
    "torch",
    "numpy",
    "pandas",
    "pyarrow",
    "matplotlib",
    "networkx",
    "scipy",
    "scikit-learn",
    "pytest",
    "click",
)
DEVICE_PYTHON = "3.12"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "any")
FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
FASHION_FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)
SOURCES = ("netfl", "cli", "policies")  # the folders the netfl wheel is built from
MANIFEST = "manifest.json"


def _marker_environment(python_version: str) -> dict[str, str]:
    return {
        "python_version": python_version,
        "python_full_version": f"{python_version}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
        "extra": "",
    }


def missing_requirements(python_version: str = DEVICE_PYTHON) -> list[tuple[str, str]]:
    """``(distribution, version)`` for every dependency of netfl (pyproject.toml) the GPU machine lacks, and every
    dependency of those, pinned to the version installed here; in name order."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    has = {canonicalize_name(n) for n in DEVICE_HAS}
    environment = _marker_environment(python_version)
    todo = [Requirement(text) for text in project["dependencies"]]
    found: dict[str, str] = {}
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in has or name in found:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            raise SystemExit(
                f"gpu_wheels: {name} (needed by netfl) is not installed here; install netfl first"
            ) from None
        todo += [Requirement(text) for text in importlib.metadata.requires(name) or []]
    return sorted(found.items())


def download_command(directory: Path, pins: list[tuple[str, str]], python_version: str) -> list[str]:
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    return [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--python-version", python_version, "--implementation", "cp", *platforms,
        "-d", str(directory), *(f"{name}=={version}" for name, version in pins),
    ]  # fmt: skip


def tree_digest(root: Path = ROOT) -> str:
    """A digest of netfl's Python sources in ``root`` (what its wheel is built from)."""
    digest = hashlib.sha256()
    for folder in SOURCES:
        for path in sorted((root / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def prepare(directory: Path, python_version: str = DEVICE_PYTHON) -> dict:
    """Fill ``directory``: the missing dependencies' wheels, netfl's wheel, Fashion-MNIST, the manifest."""
    directory.mkdir(parents=True, exist_ok=True)
    pins = missing_requirements(python_version)
    subprocess.run(download_command(directory, pins, python_version), check=True)
    for old in [*directory.glob("netfl-*.whl"), *directory.glob("netfl_sim-*.whl")]:  # before and after the rename
        old.unlink()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(directory), str(ROOT)], check=True)
    data = []
    if all((FASHION_MNIST / f).exists() for f in FASHION_FILES):
        (directory / "fashion-mnist").mkdir(exist_ok=True)
        for name in FASHION_FILES:
            shutil.copyfile(FASHION_MNIST / name, directory / "fashion-mnist" / name)
        data.append("fashion-mnist")
    manifest = {
        "python_version": python_version,
        "platforms": list(PLATFORMS),
        "pins": [f"{n}=={v}" for n, v in pins],
        "wheels": sorted(p.name for p in directory.glob("*.whl")),
        "data": data,
        "netfl_tree": tree_digest(),
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


def install(directory: Path, site: Path) -> list[str]:
    """Install every wheel of ``directory`` into ``site`` (a folder put first on PYTHONPATH), without a network
    and without dependencies (the machine's own torch stays); return the wheels' names. A SystemExit says what
    is wrong: no manifest, or wheels built from another tree than this one."""
    manifest_path = directory / MANIFEST
    if not manifest_path.exists():
        raise SystemExit(
            f"{directory}: no {MANIFEST}; prepare the folder with benchmarks/gpu_check.sh --prepare-wheels"
        )
    manifest = json.loads(manifest_path.read_text())
    if manifest["netfl_tree"] != tree_digest():
        raise SystemExit(
            f"{directory}: its netfl wheel was built from other sources than this tree's; prepare it again"
        )
    wheels = sorted(directory.glob("*.whl"))
    shutil.rmtree(site, ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(directory), "--no-deps",
         "--target", str(site), "--quiet", *map(str, wheels)],
        check=True,
    )  # fmt: skip
    return [w.name for w in wheels]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path, help="where the wheels go")
    parser.add_argument("--list", action="store_true", help="print the wheels it would fetch, fetch nothing")
    parser.add_argument("--python-version", default=DEVICE_PYTHON, help=f"the GPU machine's Python [{DEVICE_PYTHON}]")
    args = parser.parse_args(argv)
    if args.list:
        for name, version in missing_requirements(args.python_version):
            print(f"{name}=={version}")
        print(f"netfl (built from {ROOT})")
        command = " ".join(download_command(args.directory, [], args.python_version))
        print(f"for Python {args.python_version} on {', '.join(PLATFORMS)}: {command} NAME==VERSION ...")
        return
    manifest = prepare(args.directory, args.python_version)
    print(
        f"{args.directory}: {len(manifest['wheels'])} wheels ({', '.join(manifest['wheels'])}), data {manifest['data']}"
    )


if __name__ == "__main__":
    main()
