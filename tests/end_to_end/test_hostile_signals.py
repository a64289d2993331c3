"""Ctrl-C while a user's policy loops for ever, or while the array form takes a trace's changes 2 us apart: the
run ends with exit 130 and its partial results, in either form of the engine. SimPy takes the KeyboardInterrupt
raised inside a process for that process's failure and runs the others on, so without netfl keeping the
interruption (netfl.signals.interrupts_kept) each Ctrl-C only ended one device's loop and the next began."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from cli_support import with_ctrl_c

NETFL = Path(sys.executable).parent / "netfl"
QUICKSTART = Path(__file__).resolve().parents[2] / "topologies" / "quickstart.yaml"

pytestmark = pytest.mark.slow

#: A population policy that says (by a file beside it) when the run is under way, then never answers again.
LOOPS = """\
from pathlib import Path

import numpy as np
from netfl.policies import PopulationPolicy


class Loops(PopulationPolicy):
    def start(self, devices):
        return np.ones(len(devices), dtype=bool), np.full(len(devices), 700.0)

    def next_change(self, devices, at, online):
        Path(__file__).with_name("under-way").touch()
        while True:
            pass
"""
#: A well-behaved population policy that says when the run reaches its second round (600 s).
BEACON = """\
from pathlib import Path

import numpy as np
from netfl.policies import PopulationPolicy


class Beacon(PopulationPolicy):
    def start(self, devices):
        return np.ones(len(devices), dtype=bool), np.full(len(devices), 300.0)

    def next_change(self, devices, at, online):
        if at.max() >= 300:  # taken at the next round, 600 s in; the trace group is asked after this one
            Path(__file__).with_name("under-way").touch()
        return at + 300.0
"""
#: A per-device policy whose next_wakeup never returns, after saying so.
SESSION_LOOPS = """\
from pathlib import Path

from netfl.policies import SessionPolicy


class Loops(SessionPolicy):
    def online(self, now, state):
        return True

    def next_wakeup(self, now):
        Path(__file__).with_name("under-way").touch()
        while True:
            pass
"""


def world(tmp_path: Path, groups: list[dict]) -> Path:
    """A small array-form world: 10 of the devices asked every 10 minutes, for 2 simulated hours."""
    data = {
        "name": "hostile",
        "seed": 5,
        "stop": {"sim_time": "2h"},
        "task": {
            "dataset": {"name": "digits", "partition": {"kind": "iid", "samples_per_client": 20}},
            "model": {"name": "logistic"},
            "local": {"steps": 2, "batch_size": 10, "lr": 0.1},
        },
        "devices": [
            {"compute": {"flops_per_s": 1e9}, "link": {"uplink": "10Mbps", "downlink": "50Mbps"}, **group}
            for group in groups
        ],
        "server": {
            "algorithm": {"name": "fedavg"},
            "round": {"participants": 10, "deadline": "2min", "idle_wait": "10min", "interval": "10min"},
        },
        "engine": {"devices": "arrays"},
    }
    path = tmp_path / "world.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def interrupt_when_under_way(tmp_path: Path, topology: Path, *options: str) -> tuple[Path, str]:
    """Run ``topology``, Ctrl-C it once a policy says it is under way, and return the results folder and stderr,
    with exit 130 checked (60 s to end: a hang guard, not a speed target)."""
    out = tmp_path / "out"
    process = subprocess.Popen(
        [NETFL, "simulate", topology, "--out", out, *options],
        cwd=tmp_path,
        preexec_fn=with_ctrl_c,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not (tmp_path / "under-way").exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the run never got under way"
            time.sleep(0.05)
        time.sleep(0.5)  # inside the loop by now
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, (stdout, stderr)
    assert "Traceback" not in stderr, stderr
    assert f"interrupted: partial results written to {out}/ (complete: false)" in stderr, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and summary["stopped_by"] == "interrupted"
    return out, stderr


@pytest.mark.parametrize("options", [(), ("--checkpoint-every", "2rounds")])
def test_a_population_policy_looping_for_ever_is_interrupted(tmp_path: Path, options: tuple[str, ...]) -> None:
    """Keeping checkpoints, a Ctrl-C is noted and acted on between two events; a policy's call that never ends
    is interrupted all the same, and the checkpoint is written where the run stopped."""
    (tmp_path / "loops.py").write_text(LOOPS)
    topology = world(tmp_path, [{"group": "phones", "count": 200, "availability": {"policy": "loops.py:Loops"}}])
    out, stderr = interrupt_when_under_way(tmp_path, topology, *options)
    assert ("checkpoint written where it stopped" in stderr) == bool(options), stderr
    import pyarrow.parquet as pq

    online = pq.read_table(out / "devices.parquet").column("online_fraction").to_pylist()
    assert len(online) == 200 and all(0 <= f <= 1 for f in online)


def test_a_trace_changing_every_2_us_is_interrupted_in_the_array_form(tmp_path: Path) -> None:
    (tmp_path / "beacon.py").write_text(BEACON)
    rows = "".join(f"{d},0,1e-6\n" for d in range(1, 51))  # devices 1 to 50: on for 1 us of every 2
    (tmp_path / "fast.csv").write_text("device,start_s,end_s\n" + rows)
    fast = {"policy": "trace_csv", "file": "fast.csv", "period": 2e-6}
    groups = [
        {"group": "beacon", "count": 1, "availability": {"policy": "beacon.py:Beacon"}},
        {"group": "fast", "count": 50, "availability": fast},
    ]
    interrupt_when_under_way(tmp_path, world(tmp_path, groups))


def test_a_session_policy_looping_for_ever_is_interrupted_on_the_quickstart(tmp_path: Path) -> None:
    """The 20-device quickstart, every device an actor: each device's next_wakeup loops in turn."""
    (tmp_path / "loops.py").write_text(SESSION_LOOPS)
    data = yaml.safe_load(QUICKSTART.read_text())
    for group in data["devices"]:
        group["availability"] = {"policy": "loops.py:Loops"}
    topology = tmp_path / "quickstart.yaml"
    topology.write_text(yaml.safe_dump(data))
    interrupt_when_under_way(tmp_path, topology)
