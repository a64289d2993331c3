"""The estimate counts what the run will hold -- the devices' state, the event log with every idle change (a
user's population policy and a trace included), the models -- against the machine's memory, not a fixed bound;
and it stays quick at a thousand groups. The hostile worlds are written here."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from cli_support import TINY, run

from netfl.config import budget, load_scenario
from netfl.config.budget import GiB, memory_bound
from netfl.config.engine_form import ROW_BYTES_PER_DEVICE
from netfl.config.schedule import BASE_BYTES, BYTES_PER_EVENT, estimate_schedule
from netfl.errors import ScenarioError

REPO = Path(__file__).resolve().parents[2]
TEN_MILLION = REPO / "topologies" / "ten-million-phones.yaml"


@pytest.fixture
def machine_of_23_gib(monkeypatch: pytest.MonkeyPatch) -> int:
    """The 23 GiB machine of the report, whatever this one has."""
    monkeypatch.setattr(budget, "_MEMORY", [23 * GiB])
    return 23 * GiB


def refusal(path: Path, *settings: str) -> dict[str, str]:
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path, overrides=settings)
    return dict(caught.value.problems)


def test_the_bound_is_this_machines_memory() -> None:
    import os

    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 0 < memory_bound() <= physical


def test_the_device_state_itself_is_estimated_and_refused_past_the_machine(machine_of_23_gib: int) -> None:
    """300 million phones at about 300 B each are some 84 GiB of rows before any event is logged."""
    found = refusal(TEN_MILLION, "devices[0].count=300000000")
    message = found["devices[0].count"]
    assert f"300,000,000 devices' state at about {ROW_BYTES_PER_DEVICE} B each (83.8 GiB)" in message
    assert "this machine has 23.0 GiB" in message and "simulate fewer devices" in message
    shipped = estimate_schedule(load_scenario(TEN_MILLION))
    assert shipped.devices_bytes == 10**7 * ROW_BYTES_PER_DEVICE
    assert shipped.held_bytes == pytest.approx(
        BASE_BYTES + shipped.devices_bytes + shipped.events * BYTES_PER_EVENT, rel=1e-3
    )
    assert "held in all (2.8 GiB of device state)" in shipped.describe()


def test_an_event_log_past_this_machine_is_refused_not_past_a_fixed_64_gib(machine_of_23_gib: int) -> None:
    """2.5 million phones with idle events: some 2.7 x 10^8 events, about 50 GiB -- under 64 GiB, over 23."""
    found = refusal(TEN_MILLION, "devices[0].count=2500000", "events.idle_devices=true")
    assert "this machine has 23.0 GiB" in found["events.idle_devices"]


POLICY = """\
import numpy as np

from netfl.policies import PolicyParams, PopulationPolicy


class Flicker(PopulationPolicy):
    class Params(PolicyParams):
        mean: float = 1.0

    def start(self, devices):
        online = self.uniform(devices) < 0.5
        return online, self.exponential(devices, self.params.mean)

    def next_change(self, devices, at, online):
        return at + self.exponential(devices, self.params.mean)
"""


def world(tmp_path: Path, availability: str, *settings: str):
    (tmp_path / "flicker.py").write_text(POLICY)
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    base = ("task.dataset.partition={kind: iid, samples_per_client: 5}", "eval.every=1h", "events.idle_devices=true")
    return load_scenario(path, overrides=(f"devices[0].availability={availability}", *base, *settings))


def test_a_users_population_policy_flipping_every_second_is_counted_quickly(tmp_path: Path) -> None:
    """Exponential stretches of mean 1 s: each device flips once a second, 3.6 x 10^6 events an hour for 1 000
    devices. The sample's steps stop once enough flips are counted, so a fast policy costs no more than a slow."""
    started = time.perf_counter()
    sc = world(
        tmp_path,
        "{policy: flicker.py:Flicker, mean: 1}",
        "devices[0].count=1000",
        "stop={sim_time: 1h}",
        "server.round.interval=10min",
    )
    idle = estimate_schedule(sc).idle_events
    assert idle == pytest.approx(1000 * 3600, rel=0.05)
    assert time.perf_counter() - started < 20  # a guard, not a speed target


def test_a_trace_with_a_short_period_is_counted(tmp_path: Path) -> None:
    """Each device online for the first second of every 2: two flips per period, one a second."""
    (tmp_path / "trace.csv").write_text("device,start_s,end_s\n" + "".join(f"{i},0,1\n" for i in range(100)))
    sc = world(
        tmp_path,
        "{policy: trace_csv, file: trace.csv, period: 2s}",
        "devices[0].count=100",
        "stop={sim_time: 1h}",
        "server.round.interval=10min",
    )
    assert estimate_schedule(sc).idle_events == pytest.approx(100 + 100 * 3600, rel=0.01)


@pytest.mark.slow
def test_the_estimate_of_a_users_population_policy_is_near_what_the_run_logs(tmp_path: Path) -> None:
    """40 boards flickering with stretches of 20 min for 6 simulated hours, in the array form."""
    settings = (
        "devices[0].count=40",
        "stop={sim_time: 6h}",
        "server.round.interval=10min",
        "eval.every=6h",
        "engine.devices=arrays",
    )
    estimate = estimate_schedule(world(tmp_path, "{policy: flicker.py:Flicker, mean: 1200}", *settings)).idle_events
    assert estimate > 40 * 6 * 3 * 0.8  # about 3 flips an hour each
    out = tmp_path / "out"
    args = [
        a for s in ("devices[0].availability={policy: flicker.py:Flicker, mean: 1200}", *settings) for a in ("--set", s)
    ]
    extra = ["--set", "task.dataset.partition={kind: iid, samples_per_client: 5}", "--set", "events.idle_devices=true"]
    result = run("simulate", tmp_path / "tiny.yaml", *args, *extra, "--out", out)
    assert result.exit_code == 0, result.output
    kinds = pq.read_table(out / "events.parquet", columns=["kind"]).column("kind").to_pylist()
    logged = sum(kind in ("online", "offline") for kind in kinds)
    assert estimate == pytest.approx(logged, rel=0.25), (estimate, logged)


def test_a_thousand_groups_validate_quickly(tmp_path: Path, machine_of_23_gib: int) -> None:
    """1 000 groups x 10^4 phones with idle events: refused (10^9 events), and alike groups sampled once."""
    import yaml

    data = yaml.safe_load(TEN_MILLION.read_text())
    phones = data["devices"][0]
    data["devices"] = [dict(phones, group=f"g{i}", count=10_000) for i in range(1000)]
    data["events"] = {"idle_devices": True}
    path = tmp_path / "groups.yaml"
    path.write_text(yaml.safe_dump(data))
    started = time.perf_counter()
    found = refusal(path)
    took = time.perf_counter() - started
    # 1.6e+09: the phone preset's ~65 sessions a day (1.1e+09 with its earlier ~39)
    assert list(found) == ["events.idle_devices"] and "1.6e+09 engine events" in found["events.idle_devices"]
    assert took < 15, took  # 27-32 s before; about 1 s here on an idle core
