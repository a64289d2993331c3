"""A study file expands into exactly the runs it says: cases x grid points x seeds, each validated up front."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import TINY

from netfl.errors import ScenarioError
from netfl.study import load_study


def write(tmp_path: Path, study: str, topology: str = TINY) -> Path:
    (tmp_path / "tiny.yaml").write_text(topology)
    path = tmp_path / "study.yaml"
    path.write_text(study)
    return path


def test_cases_cross_the_grid_and_the_seeds_in_order(tmp_path: Path) -> None:
    study = load_study(
        write(
            tmp_path,
            """\
base: tiny.yaml
set: {stop.rounds: 3}
cases:
  fedavg: {server.algorithm.name: fedavg}
  fedau: {server.algorithm: {name: fedau, K: 5}}
grid:
  devices[0].count: [2, 6]
  devices[0].link.uplink: {slow: 1Mbps, fast: 50Mbps}
seeds: 2
""",
        )
    )
    assert study.name == "study"
    assert len(study.runs) == 2 * 2 * 2 * 2
    assert study.cases[:4] == [
        "fedavg, count=2, uplink=slow",
        "fedavg, count=2, uplink=fast",
        "fedavg, count=6, uplink=slow",
        "fedavg, count=6, uplink=fast",
    ]
    first, last = study.runs[0], study.runs[-1]
    assert (first.case, first.seed) == ("fedavg, count=2, uplink=slow", 1)  # counts up from the topology's seed 1
    assert first.folder == Path("runs/fedavg/count=2/uplink=slow/seed1")
    assert (last.case, last.seed, last.folder) == (
        "fedau, count=6, uplink=fast",
        2,
        Path("runs/fedau/count=6/uplink=fast/seed2"),
    )
    assert last.settings == {
        "server.algorithm": {"name": "fedau", "K": 5},
        "devices[0].count": 6,
        "devices[0].link.uplink": "50Mbps",
        "seed": 2,
    }
    scenario = last.scenario
    assert scenario.stop.rounds == 3 and scenario.devices[0].count == 6 and scenario.seed == 2
    assert scenario.server.algorithm.name == "fedau" and scenario.devices[0].link.uplink.params == (50e6,)
    assert study.out == Path("results/study")


def test_seeds_as_a_list_and_varying_only_the_world(tmp_path: Path) -> None:
    study = load_study(write(tmp_path, "name: worlds\nbase: tiny.yaml\nseeds: [4, 9]\nvary: world_seed\n"))
    assert [(r.case, r.seed) for r in study.runs] == [("worlds", 4), ("worlds", 9)]
    assert [r.scenario.seeds for r in study.runs] == [(4, 1), (9, 1)]  # (world, training): training held at 1
    assert [r.folder for r in study.runs] == [Path("runs/seed4"), Path("runs/seed9")]  # one case: no case folder


def test_an_inline_base_and_an_out_folder_beside_the_study(tmp_path: Path) -> None:
    inline = "\n".join("  " + line for line in TINY.splitlines())
    study = load_study(write(tmp_path, f"out: here\nbase:\n{inline}\n"))
    assert study.out == tmp_path / "here" and len(study.runs) == 1
    assert study.runs[0].scenario.devices[0].count == 4


def test_two_axes_ending_in_the_same_key_are_named_by_their_paths(tmp_path: Path) -> None:
    study = load_study(
        write(
            tmp_path,
            "base: tiny.yaml\ngrid:\n  devices[0].link.uplink: [1Mbps]\n"
            "  devices[0].link.downlink: [2Mbps]\n  task.local.lr: [0.5]\n",
        )
    )
    assert study.cases == ["uplink=1Mbps, downlink=2Mbps, lr=0.5"]
    two_groups = TINY + (
        "  - group: phones\n    count: 2\n    compute: {flops_per_s: 1GFLOPS}\n    link: {uplink: 1Mbps}\n"
    )
    study = load_study(
        write(
            tmp_path, "base: tiny.yaml\ngrid:\n  devices[0].count: [3]\n  devices[1].count: [5]\n", topology=two_groups
        )
    )
    assert study.cases == ["devices[0].count=3, devices[1].count=5"]
    assert study.runs[0].folder == Path("runs/devices_0_.count=3/devices_1_.count=5/seed1")


@pytest.mark.parametrize(
    "study, expected",
    [
        ("base: tiny.yaml\nseed: 3\n", "seed: unknown key"),
        ("cases: {}\n", "base: required"),
        ("base: missing.yaml\n", "missing.yaml: 1 problem(s)\n  file not found"),
        ("base: tiny.yaml\nseeds: 0\n", "seeds: at least 1"),
        ("base: tiny.yaml\nseeds: true\n", "seeds"),
        ("base: tiny.yaml\nseeds: [1, 1]\n", "distinct"),
        ("base: tiny.yaml\nvary: both\n", "vary"),
        ("base: tiny.yaml\ngrid: {seed: [1, 2]}\n", "grid.seed: seeds already sets seed"),
        ("base: tiny.yaml\ngrid: {task.local.lr: []}\n", "give at least one value"),
        ("base: tiny.yaml\ngrid: {server.algorithm: [{name: fedau}]}\n", "name each value"),
        ("base: tiny.yaml\nset: {devices.0: 1}\n", "set.devices.0: cannot read the path"),
        ("base: tiny.yaml\ncases: {a/b: {}}\n", "case 'a/b'"),
        ("base: tiny.yaml\ncases: {bad: {server.algorithm.name: nope}}\n", "bad, seed 1: server.algorithm.name"),
        ("base: tiny.yaml\ncases:\n  bad:\n    devices[3].count: 1\n", "bad: devices[3].count: devices has 1 entry"),
        ("base: tiny.yaml\ngrid: {task.local.lr: [0.1, -1]}\n", "lr=-1, seed 1: task.local.lr"),
        ("base: tiny.yaml\ngrid: {task.local.lr: {a b: 0.1, a_b: 0.2}}\n", "two runs would share this folder"),
        ("- base\n", "a study file is a mapping"),
    ],
)
def test_a_bad_study_names_the_file_the_run_and_the_path(tmp_path: Path, study: str, expected: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        load_study(write(tmp_path, study))
    assert expected in str(caught.value), str(caught.value)
    if "missing.yaml" not in expected:
        assert str(caught.value).startswith(str(tmp_path / "study.yaml"))


def test_every_run_is_checked_before_any_starts(tmp_path: Path) -> None:
    """Two bad cases are both reported, each with its own case name."""
    with pytest.raises(ScenarioError) as caught:
        load_study(write(tmp_path, "base: tiny.yaml\ncases: {a: {task.local.lr: -1}, b: {stop.rounds: 0}, ok: {}}\n"))
    paths = [path for path, _ in caught.value.problems]
    assert paths == ["a, seed 1: task.local.lr", "b, seed 1: stop.rounds"]


def test_command_line_overrides_apply_to_every_run_after_its_case(tmp_path: Path) -> None:
    path = write(tmp_path, "base: tiny.yaml\ncases: {a: {stop.rounds: 7}, b: {}}\nseeds: 3\n")
    study = load_study(path, overrides=["stop.rounds=2", "task.local.lr=0.5"], seeds=1)
    assert [(r.case, r.seed, r.scenario.stop.rounds, r.scenario.tasks[0].local.lr) for r in study.runs] == [
        ("a", 1, 2, 0.5),
        ("b", 1, 2, 0.5),
    ]
    with pytest.raises(ScenarioError, match=r"a: --set devices\[5\]\.count: devices has 1 entry"):
        load_study(path, overrides=["devices[5].count=1"])
