"""--set overrides, the run folder's scenario.yaml, and the world and training seeds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from netfl.assemble import build_simulation
from netfl.cli.main import main
from netfl.config import load_scenario, scenario_document, scenario_from_dict
from netfl.config.overrides import OverrideError, apply_overrides
from netfl.errors import ScenarioError

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "topologies" / "quickstart.yaml"
TOPOLOGIES = sorted((REPO / "topologies").glob("*.yaml")) + [
    REPO / "examples" / "custom_policy.yaml",
    REPO / "examples" / "population_policy.yaml",
]
BASE = {
    "name": "x",
    "seed": 1,
    "devices": [{"group": "a", "availability": {"policy": "bernoulli", "p": 0.5}}],
    "server": {},
}


@pytest.mark.parametrize(
    "text,path,value",
    [
        ("seed=3", ["seed"], 3),
        ("devices[0].availability.p=0.3", ["devices", 0, "availability", "p"], 0.3),
        ("server.algorithm.name=fedau", ["server", "algorithm", "name"], "fedau"),  # mappings created on the way
        ("eval.every=5min", ["eval", "every"], "5min"),
        (
            "devices[0].availability={policy: markov, p: 0.2, q: 0.1}",
            ["devices", 0, "availability"],
            {"policy": "markov", "p": 0.2, "q": 0.1},
        ),
        ("devices[0].hidden=[64, 32]", ["devices", 0, "hidden"], [64, 32]),
        ("name=", ["name"], None),
    ],
)
def test_an_override_sets_one_yaml_typed_value(text, path, value):
    data = apply_overrides(BASE, [text])
    node = data
    for key in path:
        node = node[key]
    assert node == value and type(node) is type(value)
    assert BASE["devices"][0]["availability"] == {"policy": "bernoulli", "p": 0.5}  # the input is not changed


def test_overrides_apply_in_order():
    assert apply_overrides(BASE, ["seed=3", "seed=4"])["seed"] == 4


@pytest.mark.parametrize(
    "text,message",
    [
        ("seed", "seed: write path=value"),
        ("devices[3].count=2", "devices[3].count: devices has 1 entry (positions 0..0)"),
        ("seed.world=3", "seed.world: seed is 1, not a mapping with keys"),
        ("name[0]=a", "name[0]: name is 'x', not a list"),
        ("tasks[0].local.lr=1", "tasks[0].local.lr: tasks does not exist, so it has no position 0"),
        ("devices[0]count=2", "devices[0]count: cannot read the path at 'count'"),
        ("[0].a=1", "a path starts with a key"),
        ("name=[unclosed", "name: the value '[unclosed' is not valid YAML"),
    ],
)
def test_a_bad_override_names_its_path_and_the_problem(text, message):
    with pytest.raises(OverrideError) as err:
        apply_overrides(BASE, [text])
    assert message in str(err.value)


def test_an_overridden_value_is_validated_like_the_file_with_its_yaml_path():
    with pytest.raises(ScenarioError) as err:
        load_scenario(QUICKSTART, overrides=["server.algorithm.name=fedau", "server.algorithm.K=0"])
    assert err.value.problems == [("server.algorithm.K", "must be >= 1 (got 0)")]
    with pytest.raises(ScenarioError) as err:
        load_scenario(QUICKSTART, overrides=["devices[5].count=1"])
    assert err.value.problems == [("--set devices[5].count", "devices has 2 entries (positions 0..1)")]


def test_the_cli_reports_a_bad_override_in_one_line_and_exit_2():
    result = CliRunner().invoke(main, ["validate", str(QUICKSTART), "--set", "devices[0].count=many"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "devices[0].count" in result.output


@pytest.mark.parametrize("topology", TOPOLOGIES, ids=lambda p: p.stem)
def test_the_scenario_document_loads_back_to_the_same_scenario(topology):
    scenario = load_scenario(topology, overrides=["world_seed=5", "eval.every=90s", "stop.accuracy=0.8"])
    text = yaml.safe_dump(scenario_document(scenario), sort_keys=False)
    again = scenario_from_dict(yaml.safe_load(text), source=str(topology), base_dir=topology.parent)
    assert again == scenario


def test_a_run_folder_holds_its_resolved_scenario_and_running_it_repeats_the_run(tmp_path):
    runner = CliRunner()
    first, second = tmp_path / "first", tmp_path / "second"
    args = ["--set", "stop.rounds=3", "--set", "server.algorithm={name: fedau, K: 5}", "--threads", "1", "-q"]
    assert runner.invoke(main, ["simulate", str(QUICKSTART), "--out", str(first), *args]).exit_code == 0
    saved = yaml.safe_load((first / "scenario.yaml").read_text())
    assert saved["stop"] == {"rounds": 3, "sim_time": 7200.0}
    assert saved["server"]["algorithm"] == {"name": "fedau", "K": 5}
    copy = REPO / "topologies" / f".resolved-{tmp_path.name}.yaml"  # beside the original: same relative paths
    copy.write_text((first / "scenario.yaml").read_text())
    try:
        result = runner.invoke(main, ["simulate", str(copy), "--out", str(second), "--threads", "1", "-q"])
    finally:
        copy.unlink()
    assert result.exit_code == 0, result.output
    assert (first / "metrics.csv").read_bytes() == (second / "metrics.csv").read_bytes()
    assert (first / "events.parquet").read_bytes() == (second / "events.parquet").read_bytes()


def _world_and_training(**seeds):
    overrides = [f"{k}={v}" for k, v in seeds.items()] + ["stop.rounds=1"]
    sim, learner = build_simulation(load_scenario(QUICKSTART, overrides=overrides))
    task = learner.tasks[0]
    sizes = np.array([task.client_size(c) for c in range(len(sim.world.devices))])
    return sim.world.devices.flops_per_s.copy(), sizes, learner.global_vector.clone()


def test_the_world_seed_moves_the_world_and_the_training_seed_the_training():
    base_world, base_sizes, base_model = _world_and_training(seed=1)
    world, sizes, model = _world_and_training(seed=1, world_seed=2)
    assert not np.array_equal(world, base_world)
    assert np.array_equal(sizes, base_sizes) and bool((model == base_model).all())
    world, sizes, model = _world_and_training(seed=1, training_seed=2)
    assert np.array_equal(world, base_world)
    assert not np.array_equal(sizes, base_sizes) and not bool((model == base_model).all())
    world, sizes, model = _world_and_training(seed=5, world_seed=1, training_seed=1)  # seed sets only the rest
    assert np.array_equal(world, base_world) and np.array_equal(sizes, base_sizes)
