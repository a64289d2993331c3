"""The ``netfl`` command-line interface (installed as ``netfl.cli``)."""
