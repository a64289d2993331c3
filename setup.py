"""The packages of the wheel, found rather than listed: cli/ and policies/ sit at the top of the repository but
import as netfl.cli and netfl.policies (never as top-level ``cli`` / ``policies``), which pyproject.toml's
``packages.find`` cannot map. Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

#: Import name -> the folder it is read from.
ROOTS = {"netfl": "netfl", "netfl.cli": "cli", "netfl.policies": "policies"}

setup(
    package_dir=ROOTS,
    packages=[f"{name}.{sub}" if sub else name for name, folder in ROOTS.items() for sub in ["", *find_packages(folder)]],
)
