"""The version, written once: pyproject.toml reads it (setuptools' dynamic version, from this file's source),
``netfl --version`` prints it and every run's summary.json records it. CHANGELOG.md says what each version
changed. A module of its own, importing nothing, so that the runner can record it without importing the
package's API."""

__version__ = "0.2.0"

#: The name netfl is installed under (pip install netfl-sim): "netfl" on PyPI is another project.
DISTRIBUTION = "netfl-sim"
