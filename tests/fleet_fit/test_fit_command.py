"""`netfl fit` end to end: logs -> fragment -> a topology that validates and simulates; the fitted world against
held-out logs; a malformed log refused in one line with nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from netfl.cli.main import main
from netfl.fleet_fit.goodness import goodness
from netfl.fleet_fit.pipeline import stream_stats
from netfl.fleet_fit.statistics import FleetStats
from netfl.fleet_fit.synthetic import HEAVY, LIGHT, fleet_logs
from netfl.fleet_logs import write_device_logs

HEAD = """\
name: fitted
seed: 1
stop: {sim_time: 2h}
task:
  dataset: {name: digits, partition: {kind: iid, samples_per_client: 10}}
  model: {name: logistic}
  local: {steps: 1, batch_size: 10, lr: 0.1}
server:
  algorithm: {name: fedavg}
  round: {participants: 2, deadline: 2min, interval: 30min}
"""


def test_fit_validate_simulate_and_held_out(tmp_path: Path):
    logs = write_device_logs(fleet_logs([(LIGHT, 12), (HEAVY, 8)], 3, seed=1), tmp_path / "logs.csv", "csv")
    out = tmp_path / "fitted.yaml"
    runner = CliRunner()
    result = runner.invoke(main, ["fit", str(logs), "--out", str(out), "--clusters", "2", "--simulate", "0"])
    assert result.exit_code == 0, result.output
    assert "20 devices over 3.0 days" in out.read_text() and not (tmp_path / "fitted.html").exists()
    topology = tmp_path / "topology.yaml"
    topology.write_text(HEAD + out.read_text())
    checked = runner.invoke(main, ["validate", str(topology)])
    assert checked.exit_code == 0, checked.output
    assert "fitted (netfl fit): 20 devices over 3.0 days" in checked.output
    ran = runner.invoke(main, ["simulate", str(topology), "--out", str(tmp_path / "run"), "--quiet"])
    assert ran.exit_code == 0, ran.output
    assert (tmp_path / "run" / "summary.json").exists()

    # the fitted world (its simulation, as the report made it) against held-out logs of the same kinds of owners
    from netfl.fleet_fit.pipeline import fit_logs
    from netfl.fleet_fit.report import html_report

    fit = fit_logs(logs, clusters=2, simulate=30, seed=3)
    page = html_report(fit.groups, fit.fit, fit.logged, fit.simulated, "logs.csv")
    assert page.count("data:image/png;base64,") == 6 and "KS distance" in page
    held_out = write_device_logs(
        fleet_logs([(LIGHT, 12), (HEAVY, 8)], 3, seed=99), tmp_path / "held.parquet", "parquet"
    )
    g = goodness(FleetStats.of(stream_stats(held_out)[0]), fit.simulated)
    # bounds: 20 held-out and 40 simulated devices over 3 days (sampling noise of hourly fractions ~0.03-0.05)
    assert g.eligible_rms <= 0.06 and g.use_rms <= 0.05 and g.level_rms <= 5.0
    assert g.ks_lengths <= 0.08 and g.ks_plug_in <= 0.25 and g.ks_plug_out <= 0.25


@pytest.mark.parametrize(
    "rows, what",
    [
        ("a,0,screen,1\na,10,battery,120\n", "logs.csv:3: device a: "),
        ("a,0,screen,1\na,10,battery,50\na,5,screen,0\n", "logs.csv:4: device a: "),
        ("a,0,screen,1\na,10,sleepy,1\n", "logs.csv:3: device a: "),
    ],
)
def test_malformed_logs_one_line_nothing_written(tmp_path: Path, rows: str, what: str):
    logs = tmp_path / "logs.csv"
    logs.write_text("device,time,state,value\n" + rows)
    out = tmp_path / "fitted.yaml"
    result = CliRunner().invoke(main, ["fit", str(logs), "--out", str(out), "--simulate", "0"])
    assert result.exit_code == 2
    message = result.output.strip()
    assert len(message.splitlines()) == 1 and what in message, message
    assert not out.exists() and not list(tmp_path.glob(".*part"))


def test_help_says_what_is_fitted_and_a_bad_rule_is_one_line(tmp_path: Path):
    shown = CliRunner().invoke(main, ["fit", "--help"])
    assert shown.exit_code == 0 and "diurnal profile of the eligible fraction" in shown.output
    logs = tmp_path / "logs.csv"
    logs.write_text("device,time,state,value\na,0,screen,1\n")
    result = CliRunner().invoke(main, ["fit", str(logs), "--out", str(tmp_path / "f.yaml"), "--rule", "locked and"])
    assert result.exit_code == 2 and result.output.startswith("error: --rule:") and len(result.output.splitlines()) == 1
    assert not (tmp_path / "f.yaml").exists()
