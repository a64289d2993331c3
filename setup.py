"""The packages of the wheel, found rather than listed: cli/ and policies/ sit at the top of the repository but
import as netfl.cli and netfl.policies (never as top-level ``cli`` / ``policies``), which pyproject.toml's
``packages.find`` cannot map. Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

#: Import name -> the folder it is read from.
ROOTS = {"netfl": "netfl", "netfl.cli": "cli", "netfl.policies": "policies"}


def packages() -> list[str]:
    """Every package under each root: the root, and each folder below it holding an ``__init__.py``."""
    return [f"{name}.{sub}" if sub else name for name, folder in ROOTS.items() for sub in ["", *find_packages(folder)]]


if __name__ == "__main__":
    setup(package_dir=ROOTS, packages=packages())
