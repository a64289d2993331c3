"""`netfl report` of runs no sweep named: runs whose scenario.yaml differs in the seeds alone are one case, cases
are named by the keys their scenarios differ in and paired by seed, and the report says which keys those are;
cases that differ in more than one key are said, with the keys. Hand-written run folders for the arithmetic and
the messages; real tiny runs written by ``netfl.run`` in a loop and by ``netfl simulate`` for the wiring."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from cli_support import TINY, assert_user_error, run

import netfl

BASE = {
    "name": "hand",
    "seed": 0,
    "stop": {"rounds": 15},
    "tasks": [{"dataset": {"name": "digits"}, "model": {"name": "mlp", "hidden": [64]}}],
    "devices": [{"group": "phones", "count": 4, "availability": {"policy": "bernoulli", "p": 0.5}}],
    "server": {"algorithm": {"name": "fedavg", "server_lr": 1.0}, "round": {"participants": 2}},
}


def scenario(**settings) -> dict:
    """BASE with ``settings`` (dotted paths, list positions as integers: ``devices.0.count``) applied."""
    document = copy.deepcopy(BASE)
    for path, value in settings.items():
        *parents, last = [int(k) if k.isdigit() else k for k in path.split(".")]
        node = document
        for key in parents:
            node = node[key]
        node[last] = value
    return document


def hand_run(folder: Path, document: dict, times: tuple[float, ...], *, study: dict | None = None) -> Path:
    """A run folder as netfl writes it: scenario.yaml (``document``), summary.json (its seeds), metrics.csv with
    test accuracy 0.1, 0.6, 0.75 at ``times`` (rounds 0, 5, 10)."""
    folder.mkdir(parents=True)
    (folder / "scenario.yaml").write_text(
        "# The scenario of this run as netfl ran it\n" + yaml.safe_dump(document, sort_keys=False)
    )
    rows = list(zip(times, (0, 5, 10), (0.1, 0.6, 0.75)))
    pd.DataFrame(rows, columns=["sim_time_s", "round", "test_accuracy"]).to_csv(folder / "metrics.csv", index=False)
    seed = document.get("seed", 0)
    summary = {
        "scenario": document["name"],
        "seed": seed,
        "world_seed": document.get("world_seed", seed),
        "training_seed": document.get("training_seed", seed),
        "rounds": 10,
        "final_test_accuracy": 0.75,
        "best_test_accuracy": 0.75,
        "sim_time_s": times[-1],
        "complete": True,
    }
    if study is not None:
        summary["study"] = study
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def report(*args) -> tuple:
    result = run("report", *args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


#: time to 75 % accuracy per seed (the third evaluation), fedavg and fedau: fedau is 10, 4 and 4 s earlier.
TIMES = {"fedavg": {1: 20, 2: 12, 3: 16}, "fedau": {1: 10, 2: 8, 3: 12}}


def write_loop(root: Path) -> None:
    """A user's loop: each algorithm, seeds 1 to 3, each run in a folder named as the user likes."""
    for algorithm, times in TIMES.items():
        for seed, t in times.items():
            document = scenario(**{"seed": seed, "server.algorithm.name": algorithm})
            hand_run(root / f"{algorithm}-{seed}", document, (0, t / 2, t))


def test_a_users_loop_is_paired_by_seed_and_the_differing_key_said(tmp_path: Path) -> None:
    write_loop(tmp_path / "runs")
    result = report(tmp_path / "runs", "--target", "0.75")
    lines = result.stdout.splitlines()
    assert lines[0] == f"6 run(s) in 2 case(s): {tmp_path / 'runs' / 'report' / 'report.html'}"
    assert lines[1] == "Cases differ in server.algorithm.name: fedau, fedavg; paired by seed."  # folders' order
    assert result.stderr == ""
    runs = pd.read_csv(tmp_path / "runs" / "report" / "run_summary.csv")
    assert sorted(zip(runs["case"], runs["seed"])) == [(a, s) for a in ("fedau", "fedavg") for s in (1, 2, 3)]
    paired = pd.read_csv(tmp_path / "runs" / "report" / "paired.csv")
    row = paired[(paired.measure == "time_to_target_s") & (paired.case == "fedavg")].iloc[0]
    assert row["reference"] == "fedau" and row["seeds"] == 3
    assert row["difference"] == pytest.approx((10 + 4 + 4) / 3)  # fedavg − fedau, seed by seed
    cases = pd.read_csv(tmp_path / "runs" / "report" / "cases.csv").set_index("case")
    assert cases.loc["fedau", "overrides"] == "server.algorithm.name=fedau" and cases.loc["fedau", "seeds"] == 3
    page = (tmp_path / "runs" / "report" / "report.html").read_text()
    assert "Cases differ in server.algorithm.name: fedau, fedavg; paired by seed." in page


def test_algorithms_with_their_own_parameters_are_one_key_named_by_the_algorithm(tmp_path: Path) -> None:
    """A user's algorithm by path with its parameter against fedavg with its own: one key, server.algorithm (the
    parameters belong to each algorithm), the cases named by the class and its settings; no warning."""
    users = {"path": str(tmp_path / "my_fl.py") + ":TrimmedMean", "trim": 0.2}
    for seed in (1, 2):
        hand_run(tmp_path / "runs" / f"fedavg-{seed}", scenario(seed=seed), (0, 5, 10))
        hand_run(
            tmp_path / "runs" / f"trimmed-{seed}", scenario(**{"seed": seed, "server.algorithm": users}), (0, 4, 8)
        )
    result = report(tmp_path / "runs", "--target", "0.75")
    assert result.stdout.splitlines()[1] == (
        "Cases differ in server.algorithm: fedavg (server_lr=1.0), TrimmedMean (trim=0.2); paired by seed."
    )
    assert result.stderr == ""
    paired = pd.read_csv(tmp_path / "runs" / "report" / "paired.csv")
    assert set(paired["case"]) | set(paired["reference"]) == {"fedavg (server_lr=1.0)", "TrimmedMean (trim=0.2)"}


def test_runs_differing_in_the_seed_alone_are_one_case(tmp_path: Path) -> None:
    for seed in (1, 2, 3):
        hand_run(tmp_path / "runs" / f"try{seed}", scenario(seed=seed), (0, 5, 10))
    result = report(tmp_path / "runs")
    assert result.stdout.splitlines()[0].startswith("3 run(s) in 1 case(s):")  # nothing differs: no line said
    assert not result.stdout.splitlines()[1].startswith("Cases differ")
    runs = pd.read_csv(tmp_path / "runs" / "report" / "run_summary.csv")
    assert list(runs["case"]) == ["hand"] * 3 and list(runs["seed"]) == [1, 2, 3]  # named after the scenario


def test_the_name_and_output_folder_are_not_compared(tmp_path: Path) -> None:
    hand_run(tmp_path / "a", scenario(seed=1, name="first", output={"dir": "x"}), (0, 5, 10))
    hand_run(tmp_path / "b", scenario(seed=2, name="second"), (0, 5, 10))
    result = report(tmp_path, "--out", tmp_path / "out")
    assert result.stdout.startswith("2 run(s) in 1 case(s):")


def test_cases_differing_in_two_keys_are_said_naming_the_keys(tmp_path: Path) -> None:
    """fedavg for 15 rounds against fedau for 20: two keys at once, so their paired difference is not the
    algorithm's; said on the terminal and the page, with both keys."""
    for seed in (1, 2):
        hand_run(tmp_path / "runs" / f"fedavg-{seed}", scenario(seed=seed), (0, 5, 10))
        fedau = scenario(**{"seed": seed, "server.algorithm.name": "fedau", "stop.rounds": 20})
        hand_run(tmp_path / "runs" / f"fedau-{seed}", fedau, (0, 4, 8))
    result = report(tmp_path / "runs", "--target", "0.75")
    assert result.stdout.splitlines()[1] == (
        "Cases differ in 2 keys, stop.rounds (20, 15) and server.algorithm.name (fedau, fedavg); paired by seed."
    )
    warning = (
        "cases 'rounds=20, name=fedau' and 'rounds=15, name=fedavg' differ in 2 keys of their scenarios, not one: "
        "stop.rounds and server.algorithm.name; their paired differences mix the effects of both"
    )
    assert result.stderr == f"warning: {warning}\n"
    assert warning.replace("'", "&#x27;") in (tmp_path / "runs" / "report" / "report.html").read_text()
    paired = pd.read_csv(tmp_path / "runs" / "report" / "paired.csv")
    assert set(paired["case"]) | set(paired["reference"]) == {"rounds=20, name=fedau", "rounds=15, name=fedavg"}
    verdict = json.loads(report(tmp_path / "runs", "--format", "json").stdout)
    assert verdict["pairing"] == [
        "cases differ in 2 keys, stop.rounds (20, 15) and server.algorithm.name (fedau, fedavg); paired by seed"
    ]


def test_cases_crossing_two_keys_are_not_warned_of(tmp_path: Path) -> None:
    """Every algorithm with every participants count, as a sweep's grid: each key's effect is separable."""
    for algorithm in ("fedavg", "fedau"):
        for participants in (2, 3):
            for seed in (1, 2):
                document = scenario(
                    **{"seed": seed, "server.algorithm.name": algorithm, "server.round.participants": participants}
                )
                hand_run(tmp_path / f"{algorithm}-{participants}-{seed}", document, (0, 5, 10))
    result = report(tmp_path, "--out", tmp_path / "out")
    assert result.stderr == ""
    assert result.stdout.splitlines()[:2] == [
        f"8 run(s) in 4 case(s): {tmp_path / 'out' / 'report.html'}",
        "Cases differ in 2 keys, server.algorithm.name (fedau, fedavg) and server.round.participants (2, 3), "
        "crossed; paired by seed.",
    ]
    cases = pd.read_csv(tmp_path / "out" / "cases.csv")
    assert list(cases["case"]) == [
        "name=fedau, participants=2",
        "name=fedau, participants=3",
        "name=fedavg, participants=2",
        "name=fedavg, participants=3",
    ]


def test_a_number_or_a_distribution_is_one_key(tmp_path: Path) -> None:
    """A key that is a number in one scenario and a distribution (a mapping) in another differs once, by its
    own path; a key one scenario leaves out is its default."""
    hand_run(tmp_path / "a", scenario(**{"seed": 1, "devices.0.count": 4}), (0, 5, 10))
    spread = scenario(seed=1)
    spread["devices"][0]["compute"] = {"flops_per_s": {"uniform": [1e6, 2e6]}}
    hand_run(tmp_path / "b", spread, (0, 5, 10))
    hand_run(tmp_path / "c", scenario(**{"seed": 1, "devices.0.compute": {"flops_per_s": 1e6}}), (0, 5, 10))
    result = report(tmp_path, "--out", tmp_path / "out")
    assert result.stdout.splitlines()[1] == (
        "Cases differ in devices[0].compute.flops_per_s: default, {uniform: [1000000.0, 2000000.0]}, 1000000.0; "
        "paired by seed."
    )
    cases = pd.read_csv(tmp_path / "out" / "cases.csv")
    assert sorted(cases["case"]) == [
        "flops_per_s=1000000.0",
        "flops_per_s=default",
        "flops_per_s={uniform: [1000000.0, 2000000.0]}",
    ]


def test_world_seed_varied_alone_pairs_by_it(tmp_path: Path) -> None:
    for algorithm in ("fedavg", "fedau"):
        for world in (3, 4):
            document = scenario(**{"seed": 7, "world_seed": world, "server.algorithm.name": algorithm})
            hand_run(tmp_path / f"{algorithm}-{world}", document, (0, 5, 10))
    result = report(tmp_path, "--out", tmp_path / "out")
    assert (
        result.stdout.splitlines()[1] == "Cases differ in server.algorithm.name: fedau, fedavg; paired by world_seed."
    )
    runs = pd.read_csv(tmp_path / "out" / "run_summary.csv")
    assert list(runs["seed"]) == [3, 4, 3, 4]


def test_seeds_that_no_one_number_tells_apart_are_refused(tmp_path: Path) -> None:
    """world_seed and training_seed both varied, crossed: no single seed number pairs them."""
    for world, training in ((1, 1), (1, 2), (2, 1)):
        document = scenario(seed=0, world_seed=world, training_seed=training)
        hand_run(tmp_path / f"w{world}t{training}", document, (0, 5, 10))
    result = run("report", tmp_path)
    assert_user_error(result, "a report pairs runs by one seed number", "world_seed 1, training_seed 1")
    assert not (tmp_path / "report").exists()


def test_the_same_scenario_and_seed_twice_is_refused(tmp_path: Path) -> None:
    hand_run(tmp_path / "a", scenario(seed=1), (0, 5, 10))
    hand_run(tmp_path / "b", scenario(seed=1), (0, 6, 12))
    hand_run(tmp_path / "c", scenario(seed=2), (0, 6, 12))
    result = run("report", tmp_path)
    assert_user_error(result, f"{tmp_path / 'a'} and {tmp_path / 'b'} are the same scenario with the same seed (1")


def test_runs_without_a_scenario_and_a_sweeps_cases_keep_their_names(tmp_path: Path) -> None:
    """A run without scenario.yaml is a case of its own, named after its folder; a sweep's case keeps its name,
    and a derived case of the same name is numbered rather than merged into it."""
    write_loop(tmp_path / "runs")
    (tmp_path / "runs" / "fedau-3" / "scenario.yaml").unlink()  # an older run: a case of its own
    for seed in (1, 2):
        document = scenario(seed=seed)
        hand_run(tmp_path / "study" / f"seed{seed}", document, (0, 5, 9), study={"case": "fedavg", "seed": seed})
    result = report(tmp_path, "--out", tmp_path / "out")
    assert result.stdout.splitlines()[1] == "Cases differ in server.algorithm.name: fedau, fedavg; paired by seed."
    runs = pd.read_csv(tmp_path / "out" / "run_summary.csv")
    assert sorted(zip(runs["case"], runs["seed"])) == [
        ("fedau", 1),
        ("fedau", 2),
        ("fedau-3", 3),
        ("fedavg", 1),  # the sweep's
        ("fedavg", 2),
        ("fedavg (2)", 1),  # the loop's
        ("fedavg (2)", 2),
        ("fedavg (2)", 3),
    ]


@pytest.mark.parametrize(
    "content, expected",
    [("name: [unclosed\n", "scenario.yaml"), ("- a list\n", "not a scenario (a mapping")],
)
def test_a_damaged_scenario_yaml_is_one_message_naming_it(tmp_path: Path, content: str, expected: str) -> None:
    write_loop(tmp_path / "runs")
    (tmp_path / "runs" / "fedau-2" / "scenario.yaml").write_text(content)
    result = run("report", tmp_path / "runs")
    assert_user_error(result, str(tmp_path / "runs" / "fedau-2" / "scenario.yaml"), expected)
    assert not (tmp_path / "runs" / "report").exists()


@pytest.mark.slow
def test_real_runs_of_a_python_loop_and_the_command_line_are_paired(tmp_path: Path) -> None:
    """fedavg by ``netfl.run`` in a loop, fedau by ``netfl simulate --set`` by hand, seeds 1 and 2: one case
    each, paired by seed (the fedavg runs' scenario.yaml leaves the algorithm out: the schema's default names it)."""
    (tmp_path / "tiny.yaml").write_text(TINY)
    world = netfl.load(tmp_path / "tiny.yaml")
    outcomes = {("fedavg", s): netfl.run(world, seed=s, out=tmp_path / "runs" / f"avg{s}") for s in (1, 2)}
    for seed in (1, 2):
        sets = ["--set", f"seed={seed}", "--set", "server.algorithm.name=fedau"]
        simulated = run("simulate", tmp_path / "tiny.yaml", *sets, "--out", tmp_path / "runs" / f"au{seed}", "-q")
        assert simulated.exit_code == 0, simulated.output
        summary = json.loads((tmp_path / "runs" / f"au{seed}" / "summary.json").read_text())
        outcomes["fedau", seed] = summary
    result = report(tmp_path / "runs")
    assert result.stdout.splitlines()[:2] == [
        f"4 run(s) in 2 case(s): {tmp_path / 'runs' / 'report' / 'report.html'}",
        "Cases differ in server.algorithm.name: fedau, fedavg; paired by seed.",
    ]
    runs = pd.read_csv(tmp_path / "runs" / "report" / "run_summary.csv").set_index(["case", "seed"])
    for (case, seed), outcome in outcomes.items():
        summary = outcome if isinstance(outcome, dict) else outcome.summary
        assert runs.loc[(case, seed), "final_test_accuracy"] == pytest.approx(summary["final_test_accuracy"])
    paired = pd.read_csv(tmp_path / "runs" / "report" / "paired.csv")
    assert set(paired.loc[paired.measure == "final_test_accuracy", "seeds"]) == {2}


def test_many_pairs_differing_in_several_keys_are_counted_past_five(tmp_path: Path) -> None:
    """Four cases, each changing the rounds and the participants together: six pairs, five named, one counted."""
    for n in range(4):
        document = scenario(**{"seed": 1, "stop.rounds": 10 + n, "server.round.participants": 2 + n})
        hand_run(tmp_path / f"r{n}", document, (0, 5, 10))
    result = report(tmp_path, "--out", tmp_path / "out")
    warnings = result.stderr.splitlines()
    assert len(warnings) == 6 and all(w.startswith("warning: cases 'rounds=") for w in warnings[:5])
    assert "stop.rounds and server.round.participants" in warnings[0]
    assert warnings[5] == "warning: 1 more pair of cases differs in more than one key of their scenarios"
