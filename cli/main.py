"""The ``netfl`` command: the group that gathers every command (the installed script's entry point).

The commands live by group: run_commands.py (validate, simulate, resume, rerun), study_commands.py (sweep, report),
catalogue_commands.py (algorithms, policies), trace_commands.py (trace convert), fit_commands.py (fit).
The options they share are declared once in options.py; exit codes and user errors are handled in exits.py.
"""

from __future__ import annotations

import click

from netfl.cli.catalogue_commands import algorithms, policies
from netfl.cli.fit_commands import fit
from netfl.cli.run_commands import rerun, resume, simulate, validate
from netfl.cli.study_commands import report, sweep
from netfl.cli.trace_commands import trace
from netfl.version import DISTRIBUTION, __version__


class _Netfl(click.Group):
    """The group, giving back the signal handlers it found as each command ends (netfl.signals)."""

    def main(self, *args, **kwargs):
        from netfl.signals import handlers_given_back

        with handlers_given_back():
            return super().main(*args, **kwargs)


@click.group(cls=_Netfl, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, message=f"netfl %(version)s (the {DISTRIBUTION} distribution)")
def main() -> None:
    """netfl: a discrete-event network simulator for federated learning."""


for command in (validate, simulate, resume, rerun, sweep, report, algorithms, policies, trace, fit):
    main.add_command(command)


if __name__ == "__main__":
    main()
