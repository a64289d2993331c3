"""A researcher's own algorithm, from their own file: named by ``path:``, checked, fenced, run in simulate, sweeps,
rerun, checkpoints and from Python -- and the built-ins, copied into a user's folder, give the same bytes."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from cli_support import TINY, assert_user_error, run
from test_checkpoint import StopAt

import netfl
from netfl.checkpoint import Checkpoint, Every, checkpoint_path
from netfl.config import load_scenario
from netfl.registry.algorithms import ALGORITHMS
from netfl.runner import run_scenario
from netfl.signals import Interrupted
from netfl.study import load_study, run_sweep
from netfl.study.local import LocalRunner

REPO = Path(__file__).resolve().parents[2]
BUILTINS = REPO / "netfl" / "learn" / "federation" / "algorithms"
SAME = ("events.parquet", "metrics.csv", "devices.parquet", "algorithm.csv")

TRIMMED = """\
import torch
from pydantic import Field

from netfl.algorithms import Aggregate, Strategy, StrategyParams


class TrimmedMeanParams(StrategyParams):
    trim: float = Field(0.1, ge=0, lt=0.5, description="fraction trimmed at each end, per coordinate")


class TrimmedMean(Strategy):
    \"\"\"Coordinate-wise trimmed mean of the updates (Yin et al., ICML 2018).\"\"\"

    Params = TrimmedMeanParams
    edge_rule = True

    def __init__(self, params, clients):
        super().__init__(params, clients)
        self.calls = 0  # checkpointed with the rest of the instance

    def aggregate(self, x, updates, context):
        self.calls += 1
        if not updates:
            return Aggregate(x, {"updates": 0, "calls": self.calls})
        ordered = torch.stack([u.delta for u in updates]).sort(dim=0).values
        k = int(self.params.trim * len(updates))
        kept = ordered[k : len(updates) - k]
        return Aggregate(x + kept.mean(dim=0), {"updates": len(updates), "trimmed": 2 * k, "calls": self.calls})
"""


def world(folder: Path, algorithm: str = "{path: my_fl.py:TrimmedMean, trim: 0.25}", code: str = TRIMMED) -> Path:
    (folder / "my_fl.py").write_text(code)
    topology = folder / "tiny.yaml"
    topology.write_text(TINY.replace("stop: {rounds: 2}", "stop: {rounds: 4}") + f"server:\n  algorithm: {algorithm}\n")
    return topology


def test_a_users_algorithm_runs_by_path_with_its_metrics(tmp_path: Path) -> None:
    result = run("simulate", world(tmp_path), "--out", tmp_path / "out", "--quiet")
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["algorithm"] == "my_fl.py:TrimmedMean" and summary["complete"]
    rows = (tmp_path / "out" / "algorithm.csv").read_text().splitlines()
    assert rows[0] == "sim_time_s,round,task,updates,trimmed,calls"
    assert [r.split(",")[-1] for r in rows[1:]] == ["1", "2", "3", "4"]
    assert "my_fl.py:TrimmedMean(trim=0.25)" in run("validate", tmp_path / "tiny.yaml").output


@pytest.mark.parametrize(
    ("algorithm", "code", "expected"),
    [
        ("{path: my_fl.py:TrimmedMean, trim: 0.7}", TRIMMED, "server.algorithm.trim: must be < 0.5 (got 0.7)"),
        ("{path: my_fl.py:TrimmedMean, cut: 1}", TRIMMED, "server.algorithm.cut"),
        ("{path: my_fl.py:Nothing}", TRIMMED, "no 'Nothing' in this algorithm file; defined there: TrimmedMean"),
        ("{path: gone.py:TrimmedMean}", TRIMMED, "algorithm file not found"),
        ("{path: my_fl.py:TrimmedMean}", TRIMMED.replace("edge_rule = True", "mode = 'sideways'"),
         "TrimmedMean.mode = 'sideways': 'sync', 'async', or None"),
        ("{path: my_fl.py:TrimmedMean}", TRIMMED.replace("edge_rule = True", "mode = 'async'"),
         "TrimmedMean declares mode = 'async': use server.mode: async"),
        ("{path: my_fl.py:TrimmedMean}", TRIMMED.replace("edge_rule = True", "needs_participation = True"),
         "divides each update by its client's participation probability p"),
        ("{path: my_fl.py:TrimmedMeanParams}", TRIMMED, "is not a subclass of netfl.algorithms.Strategy"),
        ("{path: my_fl.py:TrimmedMean, name: fedavg}", TRIMMED, "not both name and path"),
        ("{path: my_fl.py:TrimmedMean}", TRIMMED.replace("import torch", "import torch\n1 / 0"),
         "my_fl.py:2: ZeroDivisionError while importing this algorithm file"),
    ],
)  # fmt: skip
def test_validate_checks_a_users_algorithm_before_anything_runs(
    tmp_path: Path, algorithm: str, code: str, expected: str
) -> None:
    assert_user_error(run("validate", world(tmp_path, algorithm, code)), expected)


HOOK_FAILURES = {
    "select": ("    def select(self, round_index, available, participants, rng, devices=None):\n"
               "        raise RuntimeError('no clients for you')\n", "TrimmedMean.select: no clients for you"),
    "aggregate": ("    def aggregate(self, x, updates, context):\n        return {}['missing']\n",
                  "KeyError in TrimmedMean.aggregate"),
    "correction": ("    def correction(self, client, task):\n        raise ValueError('bad term')\n",
                   "ValueError in TrimmedMean.correction: bad term"),
    "admit": ("    def admit(self, update, context):\n        raise ValueError('stale')\n",
              "ValueError in TrimmedMean.admit: stale"),
    "upload_bytes": ("    def upload_bytes(self, model_bytes):\n        return -1\n",
                     "TrimmedMean.upload_bytes returned -1; expected a finite number of bytes >= 0"),
    "not eligible": ("    def select(self, round_index, available, participants, rng, devices=None):\n"
                     "        return [(10_000, 0)]\n", "select returned client 10000, which is not eligible"),
    "shape": ("    def aggregate(self, x, updates, context):\n        return x[:3]\n",
              "TrimmedMean.aggregate returned a vector of shape (3,); expected"),
    "dtype": ("    def aggregate(self, x, updates, context):\n        return x.double()\n",
              "TrimmedMean.aggregate returned a vector of dtype torch.float64; expected torch.float32"),
    "nan": ("    def aggregate(self, x, updates, context):\n        return x * float('nan')\n",
            "TrimmedMean.aggregate returned a vector that is not finite"),
    "metric": ("    def aggregate(self, x, updates, context):\n        return Aggregate(x, {'who': 'me'})\n",
               "a metric must be a number"),
    "evaluate": ("    def evaluate(self, task, x, test):\n        return 0.5\n",
                 "TrimmedMean.evaluate returned float; expected an Evaluation"),
    "probe": ("    from netfl.algorithms import Probe as _Probe\n"
              "    class Asked(_Probe):\n"
              "        def report(self, task, client, update):\n            raise ValueError('no report')\n"
              "    probe = Asked()\n"
              "    def assign(self, round_index, reports, participants, rng):\n"
              "        return [(c, 0) for c in reports]\n", "Asked.report: no report"),
    "probe answer": ("    from netfl.algorithms import Probe as _Probe\n"
                     "    class Asked(_Probe):\n"
                     "        def report(self, task, client, update):\n            return 'high'\n"
                     "    probe = Asked()\n"
                     "    def assign(self, round_index, reports, participants, rng):\n"
                     "        return [(c, 0) for c in reports]\n",
                     "Asked.report returned str 'high'; expected a number"),
    "extras": ("    from netfl.algorithms import ExtraScalars as _Extras\n"
               "    class Shift(_Extras):\n"
               "        def objective(self, loss, extra):\n            raise ValueError('bad objective')\n"
               "    extras = Shift([0.0])\n", "Shift.objective: bad objective"),
    "extras answer": ("    from netfl.algorithms import ExtraScalars as _Extras\n"
                      "    class Shift(_Extras):\n"
                      "        def objective(self, loss, extra):\n            return loss + extra.repeat(3)\n"
                      "    extras = Shift([0.0])\n", "Shift.objective returned (3,); expected a scalar tensor"),
}  # fmt: skip


@pytest.mark.parametrize("hook", list(HOOK_FAILURES))
def test_a_failing_hook_names_the_users_file_and_keeps_the_partial_results(tmp_path: Path, hook: str) -> None:
    method, expected = HOOK_FAILURES[hook]
    if "def aggregate" in method:  # in place of the working rule, which stays under another name
        code = TRIMMED.replace("    def aggregate(", method + "\n    def working_aggregate(")
    else:
        code = TRIMMED.replace("    def __init__(", method + "\n    def __init__(")
    result = run("simulate", world(tmp_path, code=code), "--out", tmp_path / "out", "--quiet")
    assert_user_error(result, expected, str(tmp_path / "my_fl.py"))
    if hook != "evaluate":  # the initial evaluation comes before the engine: nothing to keep yet
        assert "results up to there are in" in result.stderr
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        assert summary["complete"] is False


def _declarations(name: str) -> str:
    """A built-in's registry entry written as the class attributes a user's class declares."""
    entry = ALGORITHMS[name]
    return (
        f'    name = "my_{name}"\n    summary = {entry.summary!r}\n'
        f"    needs_participation = {entry.needs_participation}\n"
        f"    multi_task = {entry.multi_task}\n    client_state = {entry.client_state}\n"
        f"    own_server_step = {entry.own_server_step!r}\n    edge_rule = {entry.edge_rule}\n"
        f"    mode = {entry.mode[0] if entry.mode else None!r}\n"
    )


def _imports_only_the_public_api(source: str) -> list[str]:
    return [
        node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.startswith("netfl")
        and node.module not in ("netfl.algorithms", "netfl.algorithms.params")
    ]


def test_every_builtin_is_written_against_the_public_api_only() -> None:
    for module in BUILTINS.glob("*.py"):
        if module.name != "__init__.py":
            assert _imports_only_the_public_api(module.read_text()) == [], module.name


@pytest.mark.parametrize(
    ("name", "module", "cls", "overrides"),
    [
        ("fedprox", "fedavg.py", "FedProx", ["server.algorithm.mu=0.1"]),
        ("scaffold", "scaffold.py", "Scaffold", []),
        ("mifa", "mifa.py", "MIFA", []),
        ("fedbuff", "fedbuff.py", "FedBuff", ["server.mode=async", "server.async.buffer=2", "stop.rounds=6"]),
    ],
)
def test_a_builtin_copied_into_a_users_folder_gives_the_same_bytes(
    tmp_path: Path, name: str, module: str, cls: str, overrides: list[str]
) -> None:
    """Nothing a built-in does is out of a user's reach: its file, copied and renamed (its registry entry written
    out as the class's own declarations), run by path, gives the built-in's events, metrics and algorithm.csv."""
    source = (BUILTINS / module).read_text()
    source, found = re.subn(rf'(class {cls}\(.*\):\n(?:    """(?:.|\n)*?"""\n)?\n)    name = "{name}"\n',
                            lambda m: m.group(1) + _declarations(name), source)  # fmt: skip
    assert found == 1
    (tmp_path / "users").mkdir()
    (tmp_path / "users" / "copied.py").write_text(source)
    topology = tmp_path / "tiny.yaml"
    topology.write_text(TINY.replace("stop: {rounds: 2}", "stop: {rounds: 4}"))
    base = ["stop.rounds=4", *overrides]
    for label, algorithm in (
        ("builtin", f"server.algorithm.name={name}"),
        ("copy", f"server.algorithm.path=users/copied.py:{cls}"),
    ):
        keys = [o for o in base if not o.startswith("server.algorithm.")]
        params = [o for o in base if o.startswith("server.algorithm.")]
        args = [
            "simulate",
            topology,
            "--out",
            tmp_path / label,
            "--quiet",
            "--set",
            "server.algorithm={}",
            "--set",
            algorithm,
        ]
        for o in keys + params:
            args += ["--set", o]
        result = run(*args)
        assert result.exit_code == 0, result.output
    for file in SAME:
        assert (tmp_path / "builtin" / file).read_bytes() == (tmp_path / "copy" / file).read_bytes(), file
    assert json.loads((tmp_path / "copy" / "summary.json").read_text())["algorithm"] == f"copied.py:{cls}"


def test_a_users_algorithm_resumes_from_a_checkpoint_with_its_state(tmp_path: Path) -> None:
    scenario = load_scenario(world(tmp_path))
    run_scenario(scenario, out_dir=tmp_path / "whole", threads=1)
    with pytest.raises(Interrupted):
        run_scenario(
            scenario, out_dir=tmp_path / "cut", threads=1, checkpoint_every=Every(rounds=1), progress=StopAt(2)
        )
    checkpoint = Checkpoint.load(checkpoint_path(tmp_path / "cut"))
    run_scenario(scenario, out_dir=tmp_path / "cut", threads=1, resume=checkpoint)
    for file in SAME:
        assert (tmp_path / "whole" / file).read_bytes() == (tmp_path / "cut" / file).read_bytes(), file
    assert (tmp_path / "cut" / "algorithm.csv").read_text().splitlines()[-1].endswith(",4")  # calls kept


def test_a_users_algorithm_in_a_sweep_and_a_rerun(tmp_path: Path) -> None:
    world(tmp_path)
    study = tmp_path / "study.yaml"
    study.write_text(
        "name: mine\nbase: tiny.yaml\ncases:\n  trimmed: {}\n  fedavg: {server.algorithm: {name: fedavg}}\nseeds: 2\n"
    )
    outcome = run_sweep(load_study(study, out=tmp_path / "sweep"), LocalRunner(jobs=2, threads=1))
    assert [r["status"] for r in outcome.records.values()] == ["complete"] * 4
    folder = next(p for p in (tmp_path / "sweep" / "runs" / "trimmed").iterdir())
    result = run("rerun", folder, "--out", tmp_path / "again")
    assert result.exit_code == 0 and "identical" in result.output, result.output


def test_a_users_algorithms_own_metrics_reach_the_trackers(tmp_path: Path) -> None:
    """algorithm.csv's columns of the user's strategy, per aggregation, in TensorBoard and MLflow."""
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    from mlflow.tracking import MlflowClient

    topology = world(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = run("simulate", topology, "--out", tmp_path / "out", "-q", "--tensorboard", tmp_path / "tb",
                 "--mlflow", uri)  # fmt: skip
    assert result.exit_code == 0, result.output
    with (tmp_path / "out" / "algorithm.csv").open() as f:
        rows = list(__import__("csv").DictReader(f))
    expected = [(int(r["round"]), float(r["trimmed"])) for r in rows if r["trimmed"]]
    assert len(expected) == 4
    events = accumulator.EventAccumulator(str(tmp_path / "tb" / "out"), size_guidance={accumulator.SCALARS: 0})
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("algorithm/trimmed")] == expected
    client = MlflowClient(uri)
    (found,) = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
    history = client.get_metric_history(found.info.run_id, "algorithm/calls")
    assert [(m.step, m.value) for m in history] == [(int(r["round"]), float(r["calls"])) for r in rows]


@pytest.mark.slow
def test_a_users_algorithm_in_a_ray_sweep_travels_with_its_runs(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from netfl.study.ray_runner import RayRunner

    world(tmp_path)
    study = tmp_path / "study.yaml"
    study.write_text("name: mine\nbase: tiny.yaml\ncases:\n  trimmed: {}\nseeds: 1\n")
    run_sweep(load_study(study, out=tmp_path / "local"), LocalRunner(jobs=1, threads=1))
    ray = run_sweep(load_study(study, out=tmp_path / "ray"), RayRunner(address=None, threads=1, local_cpus=1))
    assert [r["status"] for r in ray.records.values()] == ["complete"]
    for plan in ray.study.runs:
        for name in SAME:
            assert (tmp_path / "ray" / plan.folder / name).read_bytes() == (
                tmp_path / "local" / plan.folder / name
            ).read_bytes(), name


def test_a_run_on_a_worker_imports_the_users_file_sent_with_it_not_its_own_disk(tmp_path: Path) -> None:
    from netfl.study.execute import run_plan_packed
    from netfl.study.travelling_code import users_sources

    world(tmp_path)
    study = tmp_path / "study.yaml"
    study.write_text("name: mine\nbase: tiny.yaml\ncases:\n  trimmed: {}\nseeds: 1\n")
    (plan,) = load_study(study, out=tmp_path / "sweep").runs
    sources = users_sources(plan.document(), tmp_path)
    assert list(sources) == [str(tmp_path / "my_fl.py")]
    (tmp_path / "my_fl.py").unlink()  # the worker's disk does not hold it
    record, files = run_plan_packed(plan, threads=1, sources=sources)
    assert record["status"] == "complete", record
    assert b"trimmed" in files["algorithm.csv"]
    broken = {path: text.replace(b"def aggregate(self, x, updates, context):",
                                 b"def aggregate(self, x, updates, context):\n        1 / 0")
              for path, text in sources.items()}  # fmt: skip
    record, _ = run_plan_packed(plan, threads=1, sources=broken)
    assert record["status"] == "failed" and f"{tmp_path / 'my_fl.py'}:" in record["error"], record


def test_a_users_algorithm_from_python_with_an_observer(tmp_path: Path) -> None:
    namespace: dict = {}
    exec(compile(TRIMMED, str(tmp_path / "inline.py"), "exec"), namespace)
    seen = []
    result = netfl.run(
        netfl.from_dict(__import__("yaml").safe_load(TINY)),
        algorithm=namespace["TrimmedMean"],
        algorithm_args={"trim": 0.25},
        on_aggregate=lambda record: seen.append((record.context.round_index, len(record.updates), record.staleness)),
    )
    assert result.summary["algorithm"] == "TrimmedMean"
    assert [s[0] for s in seen] == [0, 1] and all(len(s[2]) == s[1] for s in seen)
    assert list(result.algorithm["trimmed"]) == [2 * int(0.25 * n) for _, n, _ in seen]
