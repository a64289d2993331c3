"""The `netfl` command on the quickstart topology, end to end on real data (digits)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from cli_support import EVENT_COLUMNS
from click.testing import CliRunner

from netfl.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "topologies" / "quickstart.yaml"

SUMMARY_KEYS = {
    "scenario",
    "seed",
    "algorithm",
    "rounds",
    "final_test_accuracy",
    "best_test_accuracy",
    "sim_time_s",
    "wall_time_s",
    "energy_j",
    "updates_received",
    "updates_applied",
    "updates_dropped",
    "complete",
}
METRIC_COLUMNS = ["sim_time_s", "round", "test_accuracy", "test_loss", "participants", "energy_j"]
EVENT_KINDS = {"online", "offline", "train_start", "train_end", "upload_start", "upload_end", "aggregate"}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def quickstart_run(tmp_path_factory) -> tuple[Path, object]:
    base = tmp_path_factory.mktemp("e2e")
    out = base / "quickstart"
    result = CliRunner().invoke(main, ["simulate", str(QUICKSTART), "--out", str(out), "--quiet"])
    return out, result


def test_cli_exits_cleanly(quickstart_run) -> None:
    out, result = quickstart_run
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert sorted(p.name for p in out.iterdir()) == [
        ".netfl-run",
        "accuracy_vs_time.png",
        "algorithm.csv",
        "devices.parquet",
        "events.parquet",
        "metrics.csv",
        "scenario.yaml",
        "summary.json",
        "timeline.parquet",
        "timeline.png",
    ]
    # nothing left over from the atomic write: no hidden staging or previous folder beside the output
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []


def test_summary(quickstart_run) -> None:
    out, _ = quickstart_run
    s = json.loads((out / "summary.json").read_text())
    assert SUMMARY_KEYS <= s.keys()
    spec = yaml.safe_load(QUICKSTART.read_text())
    assert s["scenario"] == "quickstart" and s["seed"] == spec["seed"] and s["algorithm"] == "fedavg"
    assert s["complete"] is True
    assert s["rounds"] == spec["stop"]["rounds"] or s["stopped_by"] == "sim_time"
    assert 0 < s["sim_time_s"] <= 2 * 3600
    assert s["wall_time_s"] > 0
    assert s["final_test_accuracy"] > 0.7  # 10 classes: chance is 0.1
    assert s["best_test_accuracy"] >= s["final_test_accuracy"]
    assert s["updates_applied"] == s["updates_received"] > 0
    assert s["updates_dropped"] >= 0
    assert s["energy_j"] > 0
    if "energy_by_activity_j" in s:
        assert sum(s["energy_by_activity_j"].values()) == pytest.approx(s["energy_j"], rel=1e-9)


def test_metrics_csv(quickstart_run) -> None:
    out, _ = quickstart_run
    lines = (out / "metrics.csv").read_text().splitlines()
    header = lines[0].split(",")
    assert header[: len(METRIC_COLUMNS)] == METRIC_COLUMNS
    rows = [dict(zip(header, line.split(","))) for line in lines[1:]]
    assert len(rows) >= 2
    assert int(rows[0]["round"]) == 0 and float(rows[0]["sim_time_s"]) == 0.0
    times = [float(r["sim_time_s"]) for r in rows]
    assert times == sorted(times)
    assert all(0.0 <= float(r["test_accuracy"]) <= 1.0 and math.isfinite(float(r["test_loss"])) for r in rows)
    s = json.loads((out / "summary.json").read_text())
    assert float(rows[-1]["test_accuracy"]) == pytest.approx(s["final_test_accuracy"], abs=1e-6)
    assert sum(int(r["participants"]) for r in rows) == s["updates_received"]
    energy = [float(r["energy_j"]) for r in rows]  # cumulative: the last evaluation is at the stop
    assert energy[0] == 0.0 and energy == sorted(energy) and rows[-1]["energy_j"] == f"{s['energy_j']:.6f}"


def test_events_parquet(quickstart_run) -> None:
    out, _ = quickstart_run
    table = pq.read_table(out / "events.parquet")
    assert table.column_names == EVENT_COLUMNS
    events = table.to_pydict()
    assert EVENT_KINDS <= set(events["kind"])
    times = events["sim_time_s"]
    assert all(a <= b for a, b in zip(times, times[1:]))  # simulated-time order
    s = json.loads((out / "summary.json").read_text())
    assert events["kind"].count("aggregate") == s["rounds"]
    assert events["kind"].count("upload_end") == s["updates_received"]
    frame = pd.read_parquet(out / "events.parquet")  # typed: integer columns with nulls stay integers
    assert str(frame.job.dtype) == "Int64" and frame.energy_j.dtype == "float64"
    uploads = frame[frame.kind == "upload_start"]
    assert uploads.job.notna().all() and (uploads.bytes > 0).all() and uploads.task.isna().all()  # one model
    assert frame[frame.kind == "aggregate"].job.isna().all()
    # the counts are typed columns, not text in detail: one aggregate per round, its counts summing to the summary's
    aggregates = frame[frame.kind == "aggregate"]
    assert str(aggregates.received.dtype) == "Int64" and aggregates.received.sum() == s["updates_received"]
    assert aggregates.applied.sum() == s["updates_applied"] and aggregates.dropped.sum() == s["updates_dropped"]
    starts = frame[frame.kind == "round_start"]
    assert len(starts) == s["rounds"] and starts.available.notna().all() and (starts.available <= 20).all()
    assert not frame.detail.str.contains("=").any()  # no key=value left to parse in a synchronous run


def test_the_timeline_reads_the_world_at_every_evaluation(quickstart_run) -> None:
    out, _ = quickstart_run
    timeline = pd.read_parquet(out / "timeline.parquet")
    metrics = pd.read_csv(out / "metrics.csv")
    devices = pd.read_parquet(out / "devices.parquet")
    for group, rows in timeline.groupby("group", sort=False):
        assert rows.sim_time_s.round(6).tolist() == metrics.sim_time_s.round(6).tolist()  # metrics.csv has 6 decimals
        members = devices[devices.group == group]
        assert (rows.devices == len(members)).all() and (rows.available <= rows.online).all()
        assert rows.delivered.sum() == members.updates_delivered.sum()  # the last reading is at the stop
        assert rows.battery_mean.iloc[-1] == pytest.approx(members.battery_fraction.mean(), rel=1e-12)
    assert list(timeline.group.unique()) == ["phones", "boards"] and 0 < timeline.online.max() <= 12
    assert (out / "timeline.png").read_bytes()[:8] == PNG_MAGIC


def test_plot_is_a_png(quickstart_run) -> None:
    out, _ = quickstart_run
    png = out / "accuracy_vs_time.png"
    assert png.stat().st_size > 1000
    assert png.read_bytes()[:8] == PNG_MAGIC


def _console_script() -> Path:
    script = Path(sys.executable).parent / "netfl"
    if script.exists():
        return script
    found = shutil.which("netfl")
    if found is None:
        pytest.skip("the netfl console script is not installed")
    return Path(found)


@pytest.mark.slow
def test_console_script(tmp_path: Path) -> None:
    """The installed `netfl` entry point works (on a shortened quickstart, to stay fast)."""
    spec = yaml.safe_load(QUICKSTART.read_text())
    spec["stop"] = {"rounds": 3}
    topology = tmp_path / "short.yaml"
    topology.write_text(yaml.safe_dump(spec))
    out = tmp_path / "results" / "short"
    proc = subprocess.run(
        [str(_console_script()), "simulate", str(topology), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "results:" in proc.stdout
    s = json.loads((out / "summary.json").read_text())
    assert s["complete"] is True and s["rounds"] == 3 and s["stopped_by"] == "rounds"
    assert [p.name for p in out.parent.iterdir()] == ["short"]


@pytest.mark.slow
def test_custom_policy_example_runs_from_the_cli(tmp_path: Path) -> None:
    """examples/custom_policy.yaml: a user-scripted policy, charging schedule, min level, 24 simulated hours."""
    out = tmp_path / "custom"
    result = CliRunner().invoke(main, ["simulate", str(ROOT / "examples" / "custom_policy.yaml"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] and summary["sim_time_s"] == 86400.0
    assert summary["final_test_accuracy"] > 0.7
    events = pq.read_table(out / "events.parquet").to_pandas()
    kinds = set(events.kind)
    assert {"charge_start", "charge_stop", "online", "offline", "upload_end"} <= kinds
    # trains only at night (22:00-07:00), and only while plugged in
    hours = (events[events.kind == "train_start"].sim_time_s % 86400) / 3600
    assert ((hours >= 22) | (hours < 7)).all()


def test_trace_convert_cli_writes_a_csv_the_trace_policy_reads(tmp_path: Path) -> None:
    import pickle

    trace = {
        7: {"duration": 100, "active": [0.0, 50.0], "inactive": [10.0, 60.0], "finish_time": 100.0, "model": "x"},
        9: {"duration": 100, "active": [20.0], "inactive": [30.0], "finish_time": 100.0, "model": "x"},
    }
    src = tmp_path / "trace.pkl"
    src.write_bytes(pickle.dumps(trace))
    result = CliRunner().invoke(main, ["trace", "convert", str(src), str(tmp_path / "trace.csv"), "--allow-pickle"])
    assert result.exit_code == 0, result.output
    assert "period: 100" in result.output
    rows = (tmp_path / "trace.csv").read_text().split()
    assert rows[0] == "device,start_s,end_s" and rows[1:] == ["0,0.0,10.0", "0,50.0,60.0", "1,20.0,30.0"]
    missing = CliRunner().invoke(
        main, ["trace", "convert", str(tmp_path / "nope.pkl"), str(tmp_path / "x.csv"), "--allow-pickle"]
    )
    assert missing.exit_code == 2 and "Traceback" not in missing.output


@pytest.mark.parametrize(
    "name",
    [
        "campus-wifi",
        "cellular",
        "ram-relay",
        "ram-relay-physical",
        "anarchic",
        pytest.param("fashion-mnist", marks=pytest.mark.slow),
    ],
)
def test_shipped_topology_runs_from_the_cli(tmp_path: Path, name: str) -> None:
    """Each feature's scenario file runs from the CLI (cut to a few rounds to keep the suite fast)."""
    data = yaml.safe_load((ROOT / "topologies" / f"{name}.yaml").read_text())
    data["stop"] = {"rounds": 3}
    data["eval"] = {"every": "1 round", "max_test_samples": 500}
    if name == "fashion-mnist":
        if not Path("/usr/share/datasets/fashion-mnist").is_dir():
            pytest.skip("dataset-fashion-mnist is not installed")
        data["devices"] = [{**g, "count": 2} for g in data["devices"]]
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["simulate", str(path), "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] and summary["rounds"] == 3
    kinds = set(pq.read_table(out / "events.parquet").column("kind").to_pylist())
    if name in ("campus-wifi", "cellular"):
        assert {"tx_start", "tx_end"} <= kinds and summary["airtime_s"] > 0
    if name == "campus-wifi":
        assert "collision" in kinds and summary["collisions"] > 0
    if name.startswith("ram-relay"):
        assert summary["relays"]["relay"]["passed"] == 3 and "relay_drop" in kinds
    if name == "anarchic":
        assert "pull" in kinds and summary["staleness"]["mean"] is not None


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_the_docs_print_what_the_quickstart_gives(quickstart_run, page: str) -> None:
    """The numbers README.md and the getting-started page show for the quickstart are the ones a run gives (all
    but the real time)."""
    import re

    from netfl.units import format_si

    out, result = quickstart_run
    assert result.exit_code == 0, result.output
    s = json.loads((out / "summary.json").read_text())
    text = (ROOT / page).read_text()
    block = re.search(r"```text\n(quickstart: .*?)\n```", text, re.S).group(1)
    expected = re.sub(r"\([\d.]+ s real\)", "(… s real)", block)
    got = (
        f"quickstart: {s['algorithm']}, {s['rounds']} rounds in {s['sim_time_s']:.0f} simulated s (… s real)\n"
        f"  test accuracy: final {100 * s['final_test_accuracy']:.1f}%, best {100 * s['best_test_accuracy']:.1f}%\n"
        f"  updates: {s['updates_received']} received, {s['updates_applied']} applied, "
        f"{s['updates_dropped']} dropped; energy {format_si(s['energy_j'], 'J', 3)}, "
        f"of which training and radio {format_si(s['work_energy_j'], 'J', 3)}\n"
        f"  results: results/quickstart/"
    )
    assert got == expected
