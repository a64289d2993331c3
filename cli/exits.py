"""How a ``netfl`` command ends: its exit codes, and a user's error as one line.

Every error a user can cause (bad YAML, bad field, missing data) is printed as one clear message and exits with
code 2; a traceback means a bug in netfl. A run whose training diverged (a NaN or inf) is written like any other
and exits with code 3. Ctrl-C or SIGTERM exits with 130, the shell's code for SIGINT.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import click

from netfl.errors import NetflError

#: Some of the work did not come out as asked: a sweep with failed runs, a repeat that is not identical.
EXIT_FAILED = 1
#: The user's input is wrong (netfl.errors.NetflError, or a refused option): nothing was run.
EXIT_USAGE = 2
#: The run's training diverged; its results up to there are written.
EXIT_DIVERGED = 3
#: Interrupted by Ctrl-C or SIGTERM.
EXIT_INTERRUPTED = 130


def fail(exc: Exception | str) -> NoReturn:
    """Print ``exc`` as ``error: ...`` on stderr and exit with EXIT_USAGE."""
    click.echo(f"error: {exc}", err=True)
    sys.exit(EXIT_USAGE)


@contextmanager
def user_errors() -> Iterator[None]:
    """A NetflError raised inside is the user's: printed as one line, exit EXIT_USAGE."""
    try:
        yield
    except NetflError as exc:
        fail(exc)


def exit_interrupted(message: str) -> NoReturn:
    """Stop after Ctrl-C or SIGTERM, saying what became of the work; a further signal no longer cuts this short."""
    from netfl.signals import ignore_further_signals

    ignore_further_signals()
    click.echo(message, err=True)
    sys.exit(EXIT_INTERRUPTED)
