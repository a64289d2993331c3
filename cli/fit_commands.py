"""``netfl fit``: a world fitted to a fleet's device-state logs (netfl/fleet_fit/)."""

from __future__ import annotations

from pathlib import Path

import click

from netfl.cli import options
from netfl.cli.exits import fail, user_errors


@click.command()
@click.argument("logs", type=options.PATH)
@click.option("--out", "out", type=options.PATH, required=True, help="the devices: fragment to write (YAML)")
@click.option(
    "--clusters",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="fit this many groups of similar devices (k-means on use, eligibility and charger times)",
)
@click.option("--per-device", is_flag=True, help="fit every device on its own (one group each: for small fleets)")
@click.option("--capacity", default="55kJ", show_default=True, help="battery capacity (logs hold percent, not joules)")
@click.option("--flops", type=float, default=1e9, show_default=True, help="compute speed to write (not in logs)")
@click.option("--uplink", default="10Mbps", show_default=True, help="uplink rate to write (not in logs)")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="seeds k-means and the check")
@click.option(
    "--simulate",
    type=click.IntRange(min=0),
    default=200,
    show_default=True,
    help="devices of the fitted world to simulate for the report (0: no report)",
)
@click.option(
    "--rule",
    default="locked and charging and wifi",
    show_default=True,
    help="when a logged device is eligible: a rule over its states, as device_logs' (docs/device-logs.md)",
)
@click.option("--report", type=options.PATH, help="the HTML fit report [default: beside --out, .html]")
def fit(
    logs: Path,
    out: Path,
    clusters: int,
    per_device: bool,
    capacity: str,
    flops: float,
    uplink: str,
    seed: int,
    simulate: int,
    report: Path | None,
    rule: str,
) -> None:
    """Fit the world's models to device-state LOGS and write them as a topology's devices: list.

    Fitted: availability (the diurnal profile of the eligible fraction -- locked, charging and on Wi-Fi -- and
    its mixing time), the owners' use (diurnal session profile and mixing, so session rate and length, and its
    power), the charger (daily window start, end and jitter), the idle draw, the charge power and the initial
    charge -- per cluster of similar devices or per device. The fragment's first lines say from how many
    devices and days. Then the fitted world is simulated and compared with the logs (KS distances, hourly
    errors): a table here, figures in the HTML report. LOGS: a FLASH .json, a .csv/.parquet long table or a
    folder (docs/device-logs.md)."""
    from netfl.fleet_fit.pipeline import fit_logs, fragment_of, write_atomically
    from netfl.fleet_fit.report import html_report, terminal_table
    from netfl.units import parse_quantity

    try:
        joules = parse_quantity(capacity, "energy")
    except ValueError as exc:
        fail(f"--capacity: {exc}")
    if out.suffix.lower() not in (".yaml", ".yml"):
        fail(f"--out {out}: the fragment is YAML; name it .yaml or .yml")
    from netfl.fleet_logs.rules import RuleError, parse_rule

    try:
        parse_rule(rule)
    except RuleError as exc:
        fail(f"--rule: {exc}")
    with user_errors():
        result = fit_logs(
            logs, clusters=None if per_device else clusters, capacity=joules, seed=seed, simulate=simulate, rule=rule
        )
    write_atomically(out, fragment_of(result, logs.name, flops=flops, uplink=uplink, rule=rule))
    click.echo(
        f"wrote {out}: {len(result.groups)} group(s) from {result.logged.devices} devices over "
        f"{result.logged.days / max(result.logged.devices, 1):.1f} days ({result.lines:,} log lines)"
    )
    if result.fit is not None:
        page = report or out.with_suffix(".html")
        write_atomically(page, html_report(result.groups, result.fit, result.logged, result.simulated, logs.name))
        click.echo(terminal_table(result.groups, result.fit, result.logged, result.simulated))
        click.echo(f"wrote {page}: the logs against the fitted world, side by side")
