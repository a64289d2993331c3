"""Loading and validating scenario files: every problem names its YAML path and what is accepted."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pydantic
import pytest
import yaml

from netfl.config import Scenario, load_scenario, scenario_from_dict
from netfl.config.schema import Every
from netfl.distributions import Distribution
from netfl.errors import NetflError, ScenarioError

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "topologies" / "quickstart.yaml"

BASE: dict[str, Any] = {
    "name": "tiny",
    "stop": {"rounds": 3},
    "task": {"dataset": {"name": "digits"}, "model": {"name": "logistic"}},
    "devices": [
        {"group": "phones", "count": 2, "compute": {"flops_per_s": "1GFLOPS"}, "link": {"uplink": "5Mbps"}},
        {
            "group": "boards",
            "count": 3,
            "compute": {"flops_per_s": 2e6},
            "battery": {"capacity": "2kJ"},
            "link": {"uplink": "250kbps"},
        },
    ],
}


def scenario(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data.update(copy.deepcopy(changes))
    return data


def edited(edit: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    edit(data)
    return data


def problems_of(data: Any, **kwargs: Any) -> list[tuple[str, str]]:
    with pytest.raises(ScenarioError) as info:
        scenario_from_dict(data, **kwargs)
    assert info.value.problems, "a ScenarioError must list at least one problem"
    return info.value.problems


def problem_at(problems: list[tuple[str, str]], path: str) -> str:
    """The message for ``path``; fails listing what was reported instead."""
    found = [msg for p, msg in problems if p == path]
    assert found, f"no problem at {path!r}; got {problems}"
    return found[0]


# ------------------------------------------------------------------------ good input


def test_quickstart_loads() -> None:
    s = load_scenario(QUICKSTART)
    assert isinstance(s, Scenario)
    assert s.name == "quickstart"
    assert s.seed == 7
    assert s.stop.rounds == 60 and s.stop.sim_time == 7200.0
    assert s.num_devices == 20
    assert [g.group for g in s.devices] == ["phones", "boards"]
    phones, boards = s.devices
    assert phones.battery.capacity == 55e3
    assert phones.battery.min_level == pytest.approx(0.2)
    assert phones.power.idle == pytest.approx(0.05)
    assert phones.link.uplink == Distribution("constant", (5e6,))
    assert phones.link.latency == pytest.approx(0.03)
    assert boards.compute.flops_per_s == Distribution("uniform", (2e6, 8e6))
    assert phones.availability.policy == "bernoulli" and phones.availability.params == {"p": 0.5}
    assert s.task.dataset.partition.kind == "dirichlet" and s.task.dataset.partition.alpha == 0.5
    assert s.server.algorithm.name == "fedavg" and s.server.algorithm.params == {"server_lr": 1.0}
    assert s.server.round.deadline == 3.0
    assert s.eval.every == Every(rounds=5)
    assert s.source == QUICKSTART


@pytest.mark.parametrize("path", sorted((REPO / "topologies").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_topology_loads(path: Path) -> None:
    s = load_scenario(path)
    assert s.num_devices > 0 and s.source == path


def test_minimal_scenario_gets_defaults() -> None:
    s = scenario_from_dict(
        {
            "name": "min",
            "stop": {"sim_time": "1h"},
            "task": {"dataset": {"name": "digits"}, "model": {"name": "mlp"}},
            "devices": [{"group": "g", "count": 1, "compute": {"flops_per_s": 1e9}, "link": {"uplink": 1e6}}],
        }
    )
    assert s.seed == 0
    assert s.stop.sim_time == 3600.0 and s.stop.rounds is None
    assert len(s.tasks) == 1 and s.task is s.tasks[0]
    assert s.task.dataset.partition.kind == "iid"
    assert s.task.dataset.test_fraction == 0.2
    assert s.task.model.hidden == [200]
    assert s.task.local.steps == 5 and s.task.local.batch_size == 16 and s.task.local.lr == 0.05
    g = s.devices[0]
    assert g.battery is None  # mains powered
    assert g.availability.policy == "always" and g.availability.params == {}
    assert g.link.downlink is None and g.link.latency == 0.0
    assert (g.power.compute, g.power.transmit, g.power.idle) == (2.0, 0.2, 0.05)
    assert s.server.algorithm.name == "fedavg" and s.server.mode == "sync"
    assert s.server.round.participants is None and math.isinf(s.server.round.deadline)
    assert s.eval.every == Every(rounds=1)
    assert s.output.dir is None
    assert s.source is None  # not from a file


def test_battery_defaults() -> None:
    s = scenario_from_dict(edited(lambda d: d["devices"][0].update(battery={})))
    b = s.devices[0].battery
    assert b.capacity == 55e3 and b.min_level == 0.0
    assert b.initial == Distribution("constant", (1.0,))


def test_task_and_tasks_are_both_accepted() -> None:
    one = scenario_from_dict(scenario())
    data = scenario()
    data["tasks"] = [data.pop("task")]
    many = scenario_from_dict(data)
    assert one.tasks == many.tasks
    assert len(one.tasks) == 1


def test_task_and_tasks_together_are_rejected() -> None:
    data = scenario()
    data["tasks"] = [copy.deepcopy(data["task"])]
    msg = problem_at(problems_of(data), "")
    assert "task" in msg and "tasks" in msg and "not both" in msg


def test_eval_every_accepts_rounds_text() -> None:
    assert scenario_from_dict(scenario(eval={"every": "10 rounds"})).eval.every == Every(rounds=10)
    assert scenario_from_dict(scenario(eval={"every": "1 round"})).eval.every == Every(rounds=1)


@pytest.mark.parametrize(
    "value, spelled",
    [(900, "'900 rounds' or '900s'"), ("900", "'900 rounds' or '900s'"), (2.5, "write '2.5s'")],
)
def test_eval_every_refuses_a_bare_number_naming_both_spellings(value: Any, spelled: str) -> None:
    message = problem_at(problems_of(scenario(eval={"every": value})), "eval.every")
    assert "without a unit could mean rounds or seconds" in message and spelled in message


def test_a_scenario_written_back_spells_its_rounds_out() -> None:
    from netfl.config import scenario_document

    document = scenario_document(scenario_from_dict(scenario(eval={"every": "10 rounds"})))
    assert document["eval"]["every"] == "10 rounds"
    assert scenario_from_dict(document).eval.every == Every(rounds=10)


def test_eval_every_accepts_a_simulated_time() -> None:
    assert scenario_from_dict(scenario(eval={"every": "5min"})).eval.every == Every(seconds=300.0)
    assert scenario_from_dict(scenario(eval={"every": "90s"})).eval.every == Every(seconds=90.0)


def test_scenario_is_frozen() -> None:
    s = scenario_from_dict(scenario())
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        s.seed = 3  # type: ignore[misc]


# ------------------------------------------------------------------- one problem each


def test_unknown_top_level_key_lists_accepted_keys() -> None:
    msg = problem_at(problems_of(scenario(rouns=3)), "rouns")
    assert "unknown key" in msg
    for key in ("name", "seed", "stop", "task", "tasks", "devices", "server", "eval", "output"):
        assert key in msg
    assert "source" not in msg  # internal, not for users


def test_unknown_nested_key() -> None:
    data = edited(lambda d: d["devices"][0].update(battery={"capacityy": "55kJ"}))
    msg = problem_at(problems_of(data), "devices[0].battery.capacityy")
    assert "unknown key" in msg
    assert "capacity" in msg and "initial" in msg and "min_level" in msg


def test_unknown_key_in_task_speaks_of_task() -> None:
    data = edited(lambda d: d["task"].update(local={"step": 3}))
    msg = problem_at(problems_of(data), "task.local.step")
    assert "steps" in msg and "epochs" in msg


def test_wrong_type() -> None:
    data = edited(lambda d: d["devices"][0].update(count="many"))
    msg = problem_at(problems_of(data), "devices[0].count")
    assert "integer" in msg


def test_mapping_expected_names_accepted_keys_not_internal_classes() -> None:
    problems = problems_of(scenario(stop=None))
    msg = problem_at(problems, "stop")
    assert "mapping" in msg and "rounds" in msg and "sim_time" in msg
    assert "StopSpec" not in msg
    msg = problem_at(problems_of(scenario(task="digits")), "task")
    assert "dataset" in msg and "TaskSpec" not in msg


@pytest.mark.parametrize("value", [0, -1, "0kJ", "-2kJ"])
def test_zero_or_negative_capacity(value: object) -> None:
    data = edited(lambda d: d["devices"][1]["battery"].update(capacity=value))
    msg = problem_at(problems_of(data), "devices[1].battery.capacity")
    assert "> 0" in msg


def test_zero_count() -> None:
    msg = problem_at(problems_of(edited(lambda d: d["devices"][0].update(count=0))), "devices[0].count")
    assert "> 0" in msg


def test_negative_rate() -> None:
    data = edited(lambda d: d["devices"][0]["link"].update(uplink="-5Mbps"))
    msg = problem_at(problems_of(data), "devices[0].link.uplink")
    assert "> 0" in msg


def test_rate_distribution_that_can_go_negative_is_rejected() -> None:
    data = edited(lambda d: d["devices"][0]["link"].update(uplink={"normal": {"mean": "5Mbps", "std": "1Mbps"}}))
    msg = problem_at(problems_of(data), "devices[0].link.uplink")
    assert "> 0" in msg and "normal" in msg


def test_bad_unit_string() -> None:
    data = edited(lambda d: d["devices"][0]["link"].update(uplink="5Mbs"))
    msg = problem_at(problems_of(data), "devices[0].link.uplink")
    assert "'5Mbs'" in msg and "Mbps" in msg and "kbps" in msg


def test_unit_of_the_wrong_kind() -> None:
    data = edited(lambda d: d["devices"][1]["battery"].update(capacity="2W"))
    msg = problem_at(problems_of(data), "devices[1].battery.capacity")
    assert "energy" in msg and "kJ" in msg and "Wh" in msg


def test_boolean_quantity() -> None:
    data = edited(lambda d: d["devices"][0]["link"].update(latency=True))
    msg = problem_at(problems_of(data), "devices[0].link.latency")
    assert "boolean" in msg


def test_missing_required_key() -> None:
    data = edited(lambda d: d["devices"][0].pop("compute"))
    msg = problem_at(problems_of(data), "devices[0].compute")
    assert "required" in msg and "missing" in msg


def test_missing_name() -> None:
    data = scenario()
    del data["name"]
    assert "missing" in problem_at(problems_of(data), "name")


def test_stop_needs_rounds_or_sim_time() -> None:
    msg = problem_at(problems_of(scenario(stop={})), "stop")
    assert "rounds" in msg and "sim_time" in msg


def test_dirichlet_needs_alpha() -> None:
    data = edited(lambda d: d["task"]["dataset"].update(partition={"kind": "dirichlet"}))
    msg = problem_at(problems_of(data), "task.dataset.partition")
    assert "alpha" in msg


def test_classes_partition_needs_classes_per_client() -> None:
    data = edited(lambda d: d["task"]["dataset"].update(partition={"kind": "classes"}))
    assert "classes_per_client" in problem_at(problems_of(data), "task.dataset.partition")


def test_unknown_dataset_lists_accepted_names() -> None:
    data = edited(lambda d: d["task"]["dataset"].update(name="imagenet"))
    msg = problem_at(problems_of(data), "task.dataset.name")
    assert "imagenet" in msg
    for name in ("digits", "fashion-mnist", "mnist", "cifar10"):
        assert name in msg


def test_unknown_model() -> None:
    data = edited(lambda d: d["task"]["model"].update(name="resnet"))
    msg = problem_at(problems_of(data), "task.model.name")
    assert "resnet" in msg and "lenet5" in msg


def test_unknown_policy_name() -> None:
    data = edited(lambda d: d["devices"][0].update(availability={"policy": "sometimes"}))
    msg = problem_at(problems_of(data), "devices[0].availability.policy")
    assert "sometimes" in msg and "bernoulli" in msg and "always" in msg


def test_bad_policy_param() -> None:
    data = edited(lambda d: d["devices"][0].update(availability={"policy": "bernoulli", "p": 1.5}))
    msg = problem_at(problems_of(data), "devices[0].availability.p")
    assert "<= 1" in msg and "1.5" in msg


def test_missing_and_unknown_policy_params() -> None:
    data = edited(lambda d: d["devices"][1].update(availability={"policy": "bernoulli", "q": 0.5}))
    problems = problems_of(data)
    assert "missing" in problem_at(problems, "devices[1].availability.p")
    msg = problem_at(problems, "devices[1].availability.q")
    assert "unknown key" in msg and "p" in msg


def test_policy_checks_can_be_skipped() -> None:
    data = edited(lambda d: d["devices"][0].update(availability={"policy": "mine"}))
    s = scenario_from_dict(data, check_references=False)
    assert s.devices[0].availability.policy == "mine"


def test_unknown_algorithm() -> None:
    msg = problem_at(problems_of(scenario(server={"algorithm": {"name": "fedfoo"}})), "server.algorithm.name")
    assert "fedfoo" in msg and "fedavg" in msg


def test_bad_algorithm_param() -> None:
    problems = problems_of(scenario(server={"algorithm": {"name": "fedavg", "server_lr": -1}}))
    assert "> 0" in problem_at(problems, "server.algorithm.server_lr")
    problems = problems_of(scenario(server={"algorithm": {"name": "fedavg", "weighting": "random"}}))
    msg = problem_at(problems, "server.algorithm.weighting")
    assert "samples" in msg and "uniform" in msg
    problems = problems_of(scenario(server={"algorithm": {"name": "fedavg", "lr": 1}}))
    msg = problem_at(problems, "server.algorithm.lr")
    assert "unknown key" in msg and "server_lr" in msg


def test_unknown_server_mode() -> None:
    msg = problem_at(problems_of(scenario(server={"mode": "anarchic"})), "server.mode")
    assert "anarchic" in msg and "sync" in msg


def test_several_problems_are_reported_together() -> None:
    def edit(d: dict[str, Any]) -> None:
        d["colour"] = "blue"
        d["devices"][0]["count"] = 0
        d["devices"][1]["battery"]["capacity"] = "lots"
        d["task"]["dataset"]["name"] = "imagenet"

    with pytest.raises(ScenarioError) as info:
        scenario_from_dict(edited(edit), source="several.yaml")
    paths = {p for p, _ in info.value.problems}
    assert {"colour", "devices[0].count", "devices[1].battery.capacity", "task.dataset.name"} <= paths
    text = str(info.value)
    assert text.startswith("several.yaml: 4 problem(s)")
    for path in paths:
        assert f"  {path}: " in text


def test_several_policy_problems_are_reported_together() -> None:
    def edit(d: dict[str, Any]) -> None:
        d["devices"][0]["availability"] = {"policy": "bernoulli", "p": 0}
        d["devices"][1]["availability"] = {"policy": "nope"}
        d["server"] = {"algorithm": {"name": "fedavg", "server_lr": 0}}

    paths = {p for p, _ in problems_of(edited(edit))}
    assert paths == {"devices[0].availability.p", "devices[1].availability.policy", "server.algorithm.server_lr"}


def test_duplicate_group_names() -> None:
    data = edited(lambda d: d["devices"][1].update(group="phones"))
    msg = problem_at(problems_of(data), "devices")
    assert "unique" in msg and "phones" in msg


def test_bad_group_name() -> None:
    data = edited(lambda d: d["devices"][1].update(group="my boards"))
    assert "A-Za-z0-9_.-" in problem_at(problems_of(data), "devices[1].group")  # the names it accepts


def test_empty_devices() -> None:
    assert "at least 1" in problem_at(problems_of(scenario(devices=[])), "devices")


def test_battery_initial_must_stay_in_unit_interval() -> None:
    data = edited(lambda d: d["devices"][1]["battery"].update(initial={"uniform": [0.5, 1.5]}))
    assert "[0, 1]" in problem_at(problems_of(data), "devices[1].battery.initial")


def test_distribution_problem_names_the_field() -> None:
    data = edited(lambda d: d["devices"][0]["compute"].update(flops_per_s={"uniform": ["4GFLOPS", "1GFLOPS"]}))
    msg = problem_at(problems_of(data), "devices[0].compute.flops_per_s")
    assert "low" in msg and "high" in msg


def test_lognormal_sigma_null_is_a_problem_not_a_crash() -> None:
    data = edited(
        lambda d: d["devices"][0]["compute"].update(flops_per_s={"lognormal": {"median": 1e9, "sigma": None}})
    )
    assert "sigma" in problem_at(problems_of(data), "devices[0].compute.flops_per_s")


def test_two_tasks_with_fedavg() -> None:
    data = scenario()
    task = data.pop("task")
    data["tasks"] = [task, copy.deepcopy(task)]
    msg = problem_at(problems_of(data), "server.algorithm")
    assert "fedavg" in msg and "2 tasks" in msg


def test_errors_under_task_speak_of_task() -> None:
    data = edited(lambda d: d["task"]["dataset"].update(name="imagenet", colour=1))
    problems = problems_of(data)
    assert all(not p.startswith("tasks") for p, _ in problems), problems
    problem_at(problems, "task.dataset.name")
    problem_at(problems, "task.dataset.colour")
    assert "missing" in problem_at(problems_of(edited(lambda d: d["task"].pop("model"))), "task.model")


def test_errors_under_tasks_speak_of_tasks() -> None:
    data = scenario()
    task = data.pop("task")
    data["tasks"] = [task, {"dataset": {"name": "imagenet"}, "model": {"name": "mlp"}}]
    problems = problems_of(data)
    assert "imagenet" in problem_at(problems, "tasks[1].dataset.name")
    assert all(p.startswith("tasks") for p, _ in problems), problems  # no "task." path for a list of tasks


def test_scenario_error_is_a_netfl_error() -> None:
    with pytest.raises(NetflError):
        scenario_from_dict(scenario(stop={}))


# ------------------------------------------------------------------------- files


def write(tmp_path: Path, text: str, name: str = "topo.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_load_from_file(tmp_path: Path) -> None:
    path = write(tmp_path, yaml.safe_dump(scenario()))
    s = load_scenario(path)
    assert s.source == path and s.num_devices == 5


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, yaml.safe_dump(scenario(stop={})), name="nostop.yaml")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.source == str(path)
    assert str(info.value).startswith(f"{path}: 1 problem(s)")
    assert "  stop: " in str(info.value)


def test_malformed_yaml_reports_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nstop: {rounds: 3\ndevices: []\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    [(where, msg)] = info.value.problems
    assert where == ""
    assert "malformed YAML" in msg
    assert "line 3" in msg and "column" in msg
    assert str(path) in str(info.value)


def test_bad_indentation_reports_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nstop:\n  rounds: 3\n sim_time: 1h\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert "line 4, column 2" in info.value.problems[0][1]


def test_yaml_list_is_not_a_scenario(tmp_path: Path) -> None:
    path = write(tmp_path, "- name: x\n- stop: {rounds: 3}\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    [(where, msg)] = info.value.problems
    assert where == ""
    assert "mapping" in msg and "list" in msg


def test_empty_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="mapping"):
        load_scenario(write(tmp_path, "# nothing here\n"))


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.problems == [("", "file not found")]
    assert str(path) in str(info.value)


def test_a_folder_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="is a folder; give a YAML file"):
        load_scenario(tmp_path)


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ScenarioError):
        load_scenario(path)


# ------------------------------------------------- values that would be silently wrong


def test_negative_seed() -> None:
    assert "must be >= 0" in problem_at(problems_of(scenario(seed=-1)), "seed")


def test_a_key_given_twice_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(yaml.safe_dump(BASE) + "seed: 1\nseed: 2\n")
    with pytest.raises(ScenarioError, match=r"line \d+, column 1: duplicate key 'seed'"):
        load_scenario(path)


@pytest.mark.parametrize("steps", [{"uniform": [-5, -1]}, {"normal": {"mean": 5, "std": 1}}, {"uniform": [0, 3]}])
def test_async_local_steps_must_draw_at_least_one(steps: dict) -> None:
    data = scenario(server={"mode": "async", "async": {"local_steps": steps}})
    assert "at least one local step" in problem_at(
        problems_of(data, check_references=False), "server.async.local_steps"
    )


def test_classes_per_client_above_the_labels_and_exclusive_out_of_range() -> None:
    data = edited(lambda d: d["task"]["dataset"].update(partition={"kind": "classes", "classes_per_client": 11}))
    assert problem_at(problems_of(data), "task.dataset.partition.classes_per_client") == "digits has 10 labels; got 11"
    data = edited(
        lambda d: d["task"]["dataset"].update(
            partition={"kind": "iid", "exclusive": [{"clients": [4, 5], "labels": [9, 10]}]}
        )
    )
    problems = problems_of(data)
    assert "device 5 does not exist: devices are 0..4" == problem_at(
        problems, "task.dataset.partition.exclusive[0].clients"
    )
    assert "label 10 does not exist" in problem_at(problems, "task.dataset.partition.exclusive[0].labels")


def _wireless(medium: dict, channel: dict, ram: dict | None = None) -> dict:
    nodes = {"ap": {"kind": "access_point", "medium": medium}}
    links = [{"from": "ap", "to": "server", "rate": "1Gbps"}]
    if ram is not None:
        nodes["relay"] = {"kind": "relay", "ram": ram}
        links = [{"from": "ap", "to": "relay", "rate": "1Gbps"}, {"from": "relay", "to": "server", "rate": "1Gbps"}]
    devices = [
        {
            "group": "phones",
            "count": 2,
            "compute": {"flops_per_s": 1e9},
            "link": {"to": "ap", "channel": {"distance_m": 50, **channel}},
        },
        {"group": "wired", "count": 1, "compute": {"flops_per_s": 1e9}, "link": {"to": "ap", "uplink": 1e6}},
    ]
    return scenario(network={"nodes": nodes, "links": links}, devices=devices)


def test_slotted_aloha_uses_the_medium_rate_not_the_channel_one() -> None:
    aloha = {"kind": "slotted_aloha", "rate": "1Mbps"}
    message = problem_at(problems_of(_wireless(aloha, {"rate": "2Mbps"})), "devices[0].link.channel.rate")
    assert "every packet uses the medium's rate and packet_size" in message
    scenario_from_dict(_wireless(aloha, {"rate": "1Mbps"}))  # the same rate is fine
    message = problem_at(problems_of(_wireless({"kind": "fdma", "q": 0.2}, {})), "network.nodes.ap.medium")
    assert message == "q applies to kind slotted_aloha only (kind is fdma)"


def test_channel_quality_rho_needs_wireless_devices() -> None:
    data = _wireless({"kind": "fdma"}, {}, ram={"rho": "channel_quality"})
    assert "group(s) wired have a fixed-rate link" in problem_at(problems_of(data), "network.nodes.relay.ram.rho")
