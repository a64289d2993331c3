"""Bad input from the command line: every mistake is one ``error:`` message naming the file and field, exit 2.

``netfl validate`` must also accept every shipped file (its summary once
crashed on wireless links), and ``--out`` must never replace a folder that
is not a netfl run (a run replaces its results folder as a whole).
"""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml
from cli_support import TINY, assert_user_error, idx_placeholders, run

from netfl.config import load_scenario
from netfl.config.loading import scenario_from_dict
from netfl.config.summary import describe_scenario
from netfl.registry.device_params import BatterySpec, ComputeSpec, PowerSpec

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "topologies").glob("*.yaml")) + sorted(  # topologies; study files have their own test
    p for p in (ROOT / "examples").glob("*.yaml") if "study" not in p.name
)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_validate_accepts_every_shipped_file(path: Path, tmp_path: Path) -> None:
    result = run("validate", path, "--data-dir", idx_placeholders(tmp_path))  # Fashion-MNIST installed or not
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"OK {path}\n") and result.stderr == ""


def test_summary_describes_wireless_links_network_async_and_charging() -> None:
    cellular = describe_scenario(load_scenario(ROOT / "topologies" / "cellular.yaml"))
    assert "link.channel kind rayleigh, distance_m uniform(50 m, 500 m), tx_power 0.2 W," in cellular
    assert "rate 1 Mbit/s, packet_size 1.5 kB" in cellular
    assert "  enb        access point: downlink 40 Mbit/s\n" in cellular and "enb -> server: 1 Gbit/s" in cellular
    assert "             medium kind fdma, bandwidth 10 MHz\n" in cellular
    anarchic = describe_scenario(load_scenario(ROOT / "topologies" / "anarchic.yaml"))
    assert "async buffer 8, local_steps uniform(1, 10), pause 20s" in anarchic
    assert "participants" not in anarchic  # no rounds for devices in async mode
    quickstart = describe_scenario(load_scenario(ROOT / "topologies" / "quickstart.yaml"))
    assert " compute 2 W, transmit 0.2 W, idle 0.05 W\n" in quickstart  # the phones' (the defaults)
    assert " compute 0.5 W, transmit 0.1 W, idle 0.005 W\n" in quickstart  # the boards' own
    assert " capacity 2 kJ, initial uniform(30%, 100%), min_level 10%, charge_power 10 W\n" in quickstart
    custom = describe_scenario(load_scenario(ROOT / "examples" / "custom_policy.yaml"))
    assert "charging daily(start=21:00, end=06:30, jitter=90min)" in custom
    relay = describe_scenario(load_scenario(ROOT / "topologies" / "ram-relay.yaml"))
    assert "ram    mode abstract, rho [0.3, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05, 0.04, 0.03, 0.03], draw all" in relay


def test_summary_shows_every_declared_device_field_in_its_unit() -> None:
    """The device part is derived from the declarations: each field of a group's mappings is shown by its key,
    a quantity in its unit, so a field added to a declaration shows without an edit of the summary."""
    data = yaml.safe_load(TINY)
    data["devices"][0]["battery"] = {
        "capacity": "10kJ",
        "health": "90%",
        "charging": {"policy": "daily", "start": "22:00", "end": "6:00"},
    }
    data["devices"][0]["link"] = {"uplink": "2Mbps", "latency": "500ms"}
    data["devices"][0]["power"] = {"receive": "80mW"}  # every field given: one left out (None) is not shown
    text = describe_scenario(scenario_from_dict(data))
    flat = " ".join(text.split())  # a long line wraps between two values
    for label, spec in (("compute", ComputeSpec), ("power", PowerSpec), ("battery", BatterySpec)):
        values = flat.split(f" {label} ", 1)[1]
        shown = [key for key in spec.model_fields if key != "levels"]  # levels: a mapping (the test below)
        assert all(f" {key} " in f" {values}" for key in shown), (label, values)
    assert "power compute 2 W, transmit 0.2 W, receive 0.08 W, idle 0.05 W battery capacity 10 kJ, " in flat
    battery = "battery capacity 10 kJ, health 90%, initial 100%, min_level 0%, charging daily(start=22:00, end=6:00), "
    assert battery in flat
    assert "charge_power 10 W link uplink 2 Mbit/s, latency 0.5s" in flat
    assert f"\n  {data['devices'][0]['group']:<10} x4: availability always\n" in text


def test_summary_shows_logged_levels_on_a_line_of_their_own(tmp_path) -> None:
    """A battery that follows logged levels: battery.levels on its own line, and neither initial nor charge_power
    (they do not apply)."""
    data = yaml.safe_load(TINY)
    levels = tmp_path / "levels.csv"
    levels.write_text("device,time,state,value\n" + "".join(f"d{i},0,battery,50\n" for i in range(4)))
    data["devices"][0]["battery"] = {"capacity": "10kJ", "levels": {"file": str(levels)}}
    flat = " ".join(describe_scenario(scenario_from_dict(data)).split())
    assert f"battery capacity 10 kJ, min_level 0% battery.levels file {levels}, unlisted refuse link" in flat


# --------------------------------------------------------------- bad topologies

BASE: dict[str, Any] = yaml.safe_load(TINY)
AP = {"nodes": {"ap": {"kind": "access_point"}}, "links": [{"from": "ap", "to": "server", "rate": "1Gbps"}]}
RELAY = {
    "nodes": {"r": {"kind": "relay", "ram": {"rho": [0.5, 0.5]}}},
    "links": [{"from": "r", "to": "server", "rate": "1Gbps"}],
}


def device(**changes: Any) -> Callable[[dict], None]:
    return lambda d: d["devices"][0].update(changes)


def top(**changes: Any) -> Callable[[dict], None]:
    return lambda d: d.update(changes)


def both(*edits: Callable[[dict], None]) -> Callable[[dict], None]:
    return lambda d: [edit(d) for edit in edits]


BAD: dict[str, tuple[Callable[[dict], None], str]] = {  # name: (edit, what the message must contain)
    "zero_rate": (device(link={"uplink": 0}), "devices[0].link.uplink"),
    "negative_flops": (device(compute={"flops_per_s": "-2GFLOPS"}), "devices[0].compute.flops_per_s"),
    "rate_as_bytes": (device(link={"uplink": "1MB/s"}), "devices[0].link.uplink"),
    "normal_speed": (device(compute={"flops_per_s": {"normal": {"mean": 1e9, "std": 1e8}}}), "can be <= 0"),
    "energy_in_watts": (device(battery={"capacity": "55kW"}), "devices[0].battery.capacity"),
    "min_level_over_one": (device(battery={"min_level": "130%"}), "devices[0].battery.min_level"),
    "negative_power": (device(power={"compute": "-2W"}), "devices[0].power.compute"),
    "unknown_power_key": (device(power={"cpu": "2W"}), "devices[0].power.cpu"),
    "count_text": (device(count="many"), "devices[0].count"),
    "p_zero": (device(availability={"policy": "bernoulli", "p": 0}), "devices[0].availability.p"),
    "p_missing": (device(availability={"policy": "markov"}), "devices[0].availability.p"),
    "unknown_policy_key": (device(availability={"policy": "always", "x": 1}), "devices[0].availability.x"),
    "negative_session": (
        device(availability={"policy": "sessions", "on": {"exponential": {"mean": "-1min"}}, "off": "5min"}),
        "devices[0].availability.on",
    ),
    "short_profile": (
        device(availability={"policy": "diurnal", "profile": [0.5] * 23}),
        "devices[0].availability.profile",
    ),
    "unquoted_clock": (
        device(battery={"charging": {"policy": "daily", "start": 1320, "end": "07:00"}}),
        "devices[0].battery.charging.start",
    ),
    "per_round_charger": (
        device(battery={"charging": {"policy": "bernoulli", "p": 0.5}}),
        "devices[0].battery.charging.policy",
    ),
    "missing_trace_csv": (
        device(availability={"policy": "trace_csv", "file": "nope.csv"}),
        "devices[0].availability.file",
    ),
    "missing_fedscale": (
        device(availability={"policy": "fedscale_trace", "file": "nope.pkl", "trust_pickle": True}),
        "devices[0].availability.file",
    ),
    "missing_nested_trace": (
        device(availability={"policy": "eligible", "idle": {"policy": "trace_csv", "file": "nope.csv"}}),
        "devices[0].availability.idle.file",
    ),
    "missing_user_file": (device(availability={"policy": "nope.py:Policy"}), "devices[0].availability.policy"),
    "negative_deadline": (top(server={"round": {"deadline": "-3s"}}), "server.round.deadline"),
    "unknown_server_key": (top(server={"rounds": {}}), "server.rounds"),
    "zero_buffer": (top(server={"mode": "async", "async": {"buffer": 0}}), "server.async.buffer"),
    "unknown_algorithm_param": (top(server={"algorithm": {"name": "fedavg", "lr": 1}}), "server.algorithm.lr"),
    "eval_minutes": (top(eval={"every": "10 minutes"}), "eval.every"),
    "eval_bare_number": (top(eval={"every": 900}), "eval.every: 900 without a unit could mean rounds or seconds"),
    "unknown_top_key": (top(output_dir="x"), "output_dir"),
    "stop_unit": (top(stop={"sim_time": "5 hours"}), "stop.sim_time"),
    "unknown_task_key": (lambda d: d["task"].update(optimizer="adam"), "task.optimizer"),
    "unknown_node": (device(link={"to": "ap", "uplink": "1Mbps"}), "devices[0].link.to"),
    "node_kind": (top(network={"nodes": {"ap": {"kind": "router"}}}), "network.nodes.ap.kind"),
    "node_without_route": (
        both(top(network={"nodes": {"ap": {"kind": "access_point"}}}), device(link={"to": "ap", "uplink": "1Mbps"})),
        "network.nodes.ap",
    ),
    "wired_rate_negative": (
        top(network={**AP, "links": [{"from": "ap", "to": "server", "rate": "-1Gbps"}]}),
        "network.links[0].rate",
    ),
    "aloha_without_rate": (
        top(network={**AP, "nodes": {"ap": {"kind": "access_point", "medium": {"kind": "slotted_aloha"}}}}),
        "network.nodes.ap.medium",
    ),
    "aloha_q_zero": (
        top(
            network={
                **AP,
                "nodes": {"ap": {"kind": "access_point", "medium": {"kind": "slotted_aloha", "rate": "1Mbps", "q": 0}}},
            }
        ),
        "network.nodes.ap.medium.q",
    ),
    "rho_wrong_length": (
        both(top(network=RELAY), device(link={"to": "r", "uplink": "1Mbps"})),
        "network.nodes.r.ram.rho",
    ),
    "rho_negative": (
        both(
            top(network={**RELAY, "nodes": {"r": {"kind": "relay", "ram": {"rho": [-1, 1, 1, 1]}}}}),
            device(link={"to": "r", "uplink": "1Mbps"}),
        ),
        "network.nodes.r.ram.rho",
    ),
    "channel_without_distance": (
        both(top(network=AP), device(link={"to": "ap", "channel": {"kind": "rayleigh"}})),
        "devices[0].link.channel.distance_m",
    ),
    "channel_zero_power": (
        both(top(network=AP), device(link={"to": "ap", "channel": {"distance_m": 10, "tx_power": 0}})),
        "devices[0].link.channel.tx_power",
    ),
    "channel_feet": (
        both(top(network=AP), device(link={"to": "ap", "channel": {"distance_m": "10 ft"}})),
        "devices[0].link.channel.distance_m",
    ),
    "rician_without_k": (
        both(top(network=AP), device(link={"to": "ap", "channel": {"kind": "rician", "distance_m": 10}})),
        "devices[0].link.channel",
    ),
    "async_with_relay": (
        both(top(network=RELAY, server={"mode": "async"}), device(link={"to": "r", "uplink": "1Mbps"})),
        "server.mode",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_topology_is_one_message_naming_the_field(tmp_path: Path, name: str) -> None:
    edit, where = BAD[name]
    data = copy.deepcopy(BASE)
    edit(data)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    assert_user_error(run("validate", path), str(path), where)
    assert_user_error(run("simulate", path, "--out", tmp_path / "out", "-q"), str(path), where)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------ --out


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.yaml").write_text(TINY)
    return tmp_path / "tiny.yaml"


@pytest.mark.parametrize("out", [".", "..", ""])
def test_out_is_never_the_current_folder_or_a_parent(tiny: Path, out: str) -> None:
    assert_user_error(run("simulate", tiny, "--out", out, "-q"), "current folder")
    assert sorted(p.name for p in tiny.parent.iterdir()) == ["tiny.yaml"]


def test_out_never_replaces_a_folder_of_other_files(tiny: Path) -> None:
    thesis = tiny.parent / "thesis"
    thesis.mkdir()
    (thesis / "chapter1.tex").write_text("precious")
    assert_user_error(run("simulate", tiny, "--out", thesis, "-q"), str(thesis), "not a netfl run")
    assert [p.name for p in thesis.iterdir()] == ["chapter1.tex"]
    empty = tiny.parent / "empty"
    empty.mkdir()
    assert run("simulate", tiny, "--out", empty, "-q").exit_code == 0
    assert (empty / "summary.json").is_file()


def test_negative_seed_is_a_usage_error(tiny: Path) -> None:
    result = run("simulate", tiny, "--seed", "-1", "-q")
    assert result.exit_code == 2 and "--seed" in result.output and "Traceback" not in result.output


# ----------------------------------------------------------------- user policies

POLICIES = """\
import sys
from netfl.policies import PolicyParams, RoundPolicy, SessionPolicy


class Quits(RoundPolicy):
    def participates(self, round_index):
        sys.exit(3)


class Maybe(RoundPolicy):
    def participates(self, round_index):
        return "maybe"


class NeedsK(SessionPolicy):
    class Params(PolicyParams):
        k: int

    def online(self, now, state):
        return True
"""


def with_policy(tmp_path: Path, availability: dict) -> Path:
    (tmp_path / "mine.py").write_text(POLICIES)
    data = copy.deepcopy(BASE)
    data["devices"][0]["availability"] = availability
    path = tmp_path / "topology.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_sys_exit_in_a_user_policy_stops_the_run_with_exit_code_2(tmp_path: Path) -> None:
    path = with_policy(tmp_path, {"policy": "mine.py:Quits"})
    assert_user_error(run("simulate", path, "--out", tmp_path / "out", "-q"), "mine.py:7", "SystemExit")


def test_a_wrong_answer_names_the_file_and_the_line_of_the_method(tmp_path: Path) -> None:
    path = with_policy(tmp_path, {"policy": "mine.py:Maybe"})
    assert_user_error(run("simulate", path, "--out", tmp_path / "out", "-q"), "mine.py:11", "'maybe'")


@pytest.mark.parametrize(
    "component,where",
    [({"policy": "mine.py:NeedsK", "k": "x"}, ".idle.k"), ({"policy": "mine.py:Maybe"}, ".idle.policy")],
)
def test_a_user_policy_inside_eligible_is_checked_by_validate(tmp_path: Path, component: dict, where: str) -> None:
    path = with_policy(tmp_path, {"policy": "eligible", "charging": False, "idle": component})
    assert_user_error(run("validate", path), f"devices[0].availability{where}")


# ------------------------------------------------------------------------ traces


def test_trace_convert_to_an_unwritable_place_is_a_user_error(tmp_path: Path) -> None:
    src = tmp_path / "trace.pkl"
    src.write_bytes(pickle.dumps({1: {"active": [0.0], "inactive": [5.0], "finish_time": 10.0}}))
    blocker = tmp_path / "file"
    blocker.write_text("")
    for target in (blocker / "x.csv", tmp_path / "missing" / "x.csv", tmp_path):
        assert_user_error(run("trace", "convert", src, target, "--allow-pickle"), str(target), "cannot write")


def csv_topology(tmp_path: Path, content: bytes) -> Path:
    (tmp_path / "trace.csv").write_bytes(content)
    data = copy.deepcopy(BASE)
    data["devices"][0]["availability"] = {"policy": "trace_csv", "file": "trace.csv", "unlisted": "offline"}
    path = tmp_path / "topology.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_interval_trace_that_is_not_text_is_a_user_error(tmp_path: Path) -> None:
    path = csv_topology(tmp_path, b"device,start_s,end_s\n0,1,2\n\xff\xfe,3,4\n")
    assert_user_error(run("simulate", path, "--out", tmp_path / "out", "-q"), "trace.csv", "UTF-8")


def test_interval_trace_saved_by_a_spreadsheet_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = csv_topology(tmp_path, "\ufeffdevice,start_s,end_s\n0,0,1000\n".encode())
    assert run("simulate", path, "--out", tmp_path / "out", "-q").exit_code == 0


def test_fedscale_trace_replays_end_to_end_from_the_cli(tmp_path: Path) -> None:
    """Device n replays sorted client n mod count; online at t iff t mod finish_time is in [active_i, inactive_i)."""
    trace = {
        20: {"duration": 30, "active": [10.0, 60.0], "inactive": [30.0, 70.0], "finish_time": 100.0, "model": "x"},
        5: {"duration": 50, "active": [0.0], "inactive": [50.0], "finish_time": 80.0, "model": "y"},
    }
    (tmp_path / "behave.pkl").write_bytes(pickle.dumps(trace))
    data = copy.deepcopy(BASE)
    data["devices"][0].update(
        count=3, availability={"policy": "fedscale_trace", "file": "behave.pkl", "trust_pickle": True}
    )
    data["stop"] = {"sim_time": 250}
    data["server"] = {"round": {"idle_wait": "1s", "interval": "10s"}}  # 25 rounds: the trace decides, not rounds
    data["eval"] = {"every": "1000 rounds"}
    path = tmp_path / "topology.yaml"
    path.write_text(yaml.safe_dump(data))
    result = run("simulate", path, "--out", tmp_path / "out", "-q")
    assert result.exit_code == 0, result.output
    events = pq.read_table(tmp_path / "out" / "events.parquet").to_pandas()
    changes = events[events.kind.isin(["online", "offline"]) & (events.cause == "policy:fedscale_trace")]

    def switches(device: int) -> list[tuple[float, str]]:
        rows = changes[changes.device == device]
        return list(zip(rows.sim_time_s.round(9), rows.kind))

    client5 = [
        (0.0, "online"),
        (50.0, "offline"),
        (80.0, "online"),
        (130.0, "offline"),
        (160.0, "online"),
        (210.0, "offline"),
        (240.0, "online"),
    ]
    client20 = [
        (10.0, "online"),
        (30.0, "offline"),
        (60.0, "online"),
        (70.0, "offline"),
        (110.0, "online"),
        (130.0, "offline"),
        (160.0, "online"),
        (170.0, "offline"),
        (210.0, "online"),
        (230.0, "offline"),
    ]
    assert switches(0) == client5 and switches(1) == client20 and switches(2) == client5  # 2 mod 2 = 0
    devices = pq.read_table(tmp_path / "out" / "devices.parquet").to_pandas()
    assert devices.online_fraction[0] == pytest.approx((50 + 50 + 50 + 10) / 250)


def test_anarchic_run_writes_its_staleness_histogram_as_data_and_plot(tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "topologies" / "anarchic.yaml").read_text())
    data["stop"] = {"rounds": 8}
    data["eval"] = {"every": "4 rounds", "max_test_samples": 300}
    path = tmp_path / "anarchic.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    assert run("simulate", path, "--out", out, "-q").exit_code == 0
    histogram = json.loads((out / "summary.json").read_text())["staleness"]["histogram"]
    assert int(max(histogram, key=int)) > 0  # workers of different speeds: some updates start stale
    rows = (out / "staleness.csv").read_text().split()
    assert rows[0] == "staleness,updates"
    assert {k: v for k, v in (r.split(",") for r in rows[1:]) if v != "0"} == {k: str(v) for k, v in histogram.items()}
    assert (out / "staleness.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_durations_below_ten_seconds_keep_their_fraction() -> None:
    from netfl.units import format_duration

    assert [format_duration(x) for x in (0.5, 0.03, 2.0, 59.6, 3723.0)] == ["0.5s", "0.03s", "2s", "1m00s", "1h02m03s"]


def test_building_a_policy_with_bad_parameters_is_a_policy_error() -> None:
    from types import SimpleNamespace

    import numpy as np

    from netfl.errors import PolicyError
    from netfl.policies import DeviceInfo, build_policy

    device = DeviceInfo(0, "g", 10, np.full(10, 0.1))
    with pytest.raises(PolicyError, match="'bernoulli'.*p"):
        build_policy(SimpleNamespace(policy="bernoulli", params={"p": "often"}), device, np.random.default_rng(0))


def test_a_bare_eval_interval_given_with_set_names_both_spellings() -> None:
    result = run("validate", ROOT / "topologies" / "quickstart.yaml", "--set", "eval.every=900")
    assert_user_error(result, "eval.every", "'900 rounds' or '900s'")


def test_a_long_list_is_shown_by_its_first_values_and_its_length() -> None:
    from netfl.config.summary import _value

    assert _value([0.3, 0.2], None) == "[0.3, 0.2]"
    shown = _value([0.01] * 1000, None)
    assert shown.startswith("[0.01, 0.01, ") and shown.endswith(", ... (1000 values)]") and len(shown) <= 80
