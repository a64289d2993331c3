"""The channel's spectral-efficiency cap and the RAM relay's draw, as a topology file gives them: checked and
summarised."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from netfl.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
CAMPUS = str(ROOT / "topologies" / "campus-wifi.yaml")  # devices[0]: fixed 2 Mbit/s under ALOHA; [1]: adaptive
RAM = str(ROOT / "topologies" / "ram-relay.yaml")
PHYSICAL = str(ROOT / "topologies" / "ram-relay-physical.yaml")  # RAM mode first, channels under ALOHA


def validate(path: str, *sets: str):
    return CliRunner().invoke(main, ["validate", path, *[a for s in sets for a in ("--set", s)]])


def test_the_summary_states_the_cap_and_the_draw():
    out = validate(CAMPUS).output
    flat = " ".join(out.split())  # a long line wraps between two values
    assert "link.channel kind rayleigh, distance_m uniform(5 m, 60 m), " in flat
    assert "noise_figure_db 7, packet_size 1.5 kB, max_spectral_efficiency 5.5547" in flat  # no fixed rate
    out = validate(CAMPUS, "devices[1].link.channel.max_spectral_efficiency=7.4063").output
    assert "max_spectral_efficiency 7.4063" in out
    uncapped = validate(CAMPUS, "devices[1].link.channel.max_spectral_efficiency=.inf").output
    assert "max_spectral_efficiency none (inf)" in uncapped
    assert " ram    mode abstract, rho [0.3, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05, 0.04, 0.03, 0.03], draw all\n" in (
        validate(RAM).output
    )
    assert ", draw arrived\n" in validate(RAM, "network.nodes.relay.ram.draw=arrived").output
    physical = validate(PHYSICAL).output
    assert " ram    mode first\n" in physical  # rho and draw do not apply to it: not shown
    assert " medium kind slotted_aloha, bandwidth 1 MHz, rate 1 Mbit/s, q 0.1, packet_size 1.5 kB, backoff none\n" in (
        physical
    )
    assert " medium kind tdma, bandwidth 5 MHz\n" in validate(CAMPUS).output  # slotted ALOHA's keys not shown


@pytest.mark.parametrize(
    "path, setting, where, message",
    [
        (
            CAMPUS,
            "devices[1].link.channel.max_spectral_efficiency=0",
            "devices[1].link.channel.max_spectral_efficiency",
            "must be > 0",
        ),
        (
            CAMPUS,
            "devices[1].link.channel.max_spectral_efficiency=-2",
            "devices[1].link.channel.max_spectral_efficiency",
            "must be > 0",
        ),
        (
            CAMPUS,
            "devices[1].link.channel.max_spectral_efficiency=true",
            "devices[1].link.channel.max_spectral_efficiency",
            "boolean",
        ),
        (
            CAMPUS,
            "devices[0].link.channel.max_spectral_efficiency=7",
            "devices[0].link.channel.max_spectral_efficiency",
            "caps adaptive rates, but this channel has a fixed rate",
        ),
        (
            PHYSICAL,
            "devices[0].link.channel.max_spectral_efficiency=7",
            "devices[0].link.channel.max_spectral_efficiency",
            "every packet uses the medium's fixed rate",
        ),
        (RAM, "network.nodes.relay.ram.draw=some", "network.nodes.relay.ram.draw", "use 'all' or 'arrived'"),
        (PHYSICAL, "network.nodes.relay.ram.draw=all", "network.nodes.relay.ram", "draw applies to mode abstract only"),
        (
            PHYSICAL,
            "network.nodes.relay.ram.rho=[0.5, 0.5]",
            "network.nodes.relay.ram",
            "rho applies to mode abstract only (mode first passes the first arrival)",
        ),
    ],
)
def test_bad_values_name_their_yaml_path(path, setting, where, message):
    result = validate(path, setting)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"  {where}: " in result.output and message in result.output, result.output
