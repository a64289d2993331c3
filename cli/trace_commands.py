"""``netfl trace``: the commands about availability traces (``convert``: a FedScale trace to netfl's CSV)."""

from __future__ import annotations

from pathlib import Path

import click

from netfl.cli import options
from netfl.cli.exits import fail, user_errors


@click.group()
def trace() -> None:
    """Availability traces."""


@trace.command("convert")
@click.argument("pickle_file", type=options.PATH)
@click.argument("csv_file", type=options.PATH)
@click.option(
    "--devices",
    type=click.IntRange(min=1),
    help="write N devices, device n replaying client n mod the number of clients (as the fedscale_trace policy "
    "does) [default: one per client]",
)
@click.option(
    "--allow-pickle",
    is_flag=True,
    help="unpickle PICKLE_FILE, which runs whatever code it holds (required: only for a trace from a source you trust)",
)
def trace_convert(pickle_file: Path, csv_file: Path, devices: int | None, allow_pickle: bool) -> None:
    """Convert a FedScale device-behaviour trace (pickle) to netfl's CSV intervals.

    Unpickling runs code stored in the file, so it needs --allow-pickle: convert
    only traces you trust, once, and point topologies at the CSV (policy: trace_csv).
    """
    from netfl.policies.traces import fedscale_client_count, fedscale_to_csv

    if not allow_pickle:
        fail(
            f"{pickle_file}: a FedScale trace is a Python pickle, and unpickling runs whatever code the file "
            "holds; add --allow-pickle to convert it if you trust its source"
        )
    with user_errors():
        period = fedscale_to_csv(pickle_file, csv_file, num_devices=devices, allow_pickle=True)
        clients = fedscale_client_count(pickle_file, allow_pickle=True)
    count = devices or clients
    again = f" (devices {clients} to {count - 1} replay clients again: device n is client n mod {clients})"
    click.echo(
        f"wrote {csv_file}: {count} devices from the trace's {clients} clients{again if count > clients else ''}; "
        f"the trace repeats every {period:g} s: use availability: "
        f"{{policy: trace_csv, file: {csv_file}, period: {period:g}}}"
    )
