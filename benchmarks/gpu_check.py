"""netfl on a GPU, checked and measured in one short run: the tests, the speed against a plain loop, the world.

    python benchmarks/gpu_check.py --prepare-wheels DIR [--list]          # here, with a network
    python benchmarks/gpu_check.py --wheels DIR [--device cuda] [--small]  # there, without one

The first fills DIR with the wheels a bare GPU machine lacks (benchmarks/gpu_wheels.py). The second, on the
GPU machine (PyTorch with CUDA and the scientific stack installed, no internet), installs them into a folder
of its own (put first on PYTHONPATH: the machine's torch stays) and then, in at most 8 minutes on one H100:

* tests -- the test suite's GPU cases (``pytest -m gpu`` on the files that use tests/device_support.py): every
  training path, every algorithm family, a user module with BatchNorm and dropout, checkpoint and resume
  across CPU and GPU, the stacked chunks' memory against ``torch.cuda.max_memory_allocated``;
* speed -- W1, W2 and the user's ResNet (benchmarks/workloads.py) in netfl (netfl_rate.py) against the plain
  loop (plain_loop.py) on the same device, and a workload only a GPU makes practical (W2's CNN with 1000
  clients a round); client updates per second, the ratio, GFLOP/s against the card's matrix-product and
  convolution peaks measured in the same run (peaks.py), and peak GPU memory against the card's;
* world -- scenarios run on the CPU and on the device: the same events, device statistics and timeline
  (events.parquet, devices.parquet, timeline.parquet), accuracies within ``--accuracy-tolerance``.

It writes one summary (JSON, ``--summary``) and exits 1 if anything failed. ``--device cpu --small`` is the
smoke run the test suite makes (tests/test_gpu_check.py): every step at a small size on the CPU, where the GPU
tests are skipped. Standard library only in this process (it runs before anything is installed); the steps
run in child processes with the installed packages.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import math
import os
import platform
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
DEFAULT_WORK = BENCH / "results" / "gpu-check"
BUDGET_S = 450  # of the 8 minutes a GPU machine is lent for: what the steps may take, install included
WORKLOADS = ("w1", "w2", "resnet")
LARGE = {"workload": "w2", "clients": 1000, "rounds": 2}  # the CNN, 1000 clients a round: a GPU's workload


def sizes(small: bool) -> dict:
    """Clients and rounds of the speed runs (None: the workload's own), the large run, and the world's scenarios
    (topology, overrides)."""
    resnet = f"task.model={{path: {BENCH / 'user_resnet.py'}:SmallResNet}}"  # BatchNorm, a user's file
    if small:
        return {
            "clients": 4,
            "rounds": 1,
            "test_samples": 500,
            "large": {"workload": "w2", "clients": 6, "rounds": 1},
            "warm_up": False,
            "world": {"quickstart-resnet": ("quickstart.yaml", ["stop.rounds=2", resnet])},
        }
    return {
        "clients": 100,
        "rounds": None,
        "test_samples": None,
        "large": LARGE,
        "warm_up": True,
        "world": {
            "quickstart": ("quickstart.yaml", []),
            "quickstart-resnet": ("quickstart.yaml", ["stop.rounds=20", resnet]),
            "fashion-mnist": ("fashion-mnist.yaml", ["stop.rounds=10"]),
        },
    }


# ------------------------------------------------------------------ the parent: steps in child processes


class Check:
    """The steps' results, the failures, and the time left."""

    def __init__(self, args: argparse.Namespace):
        self.args, self.started = args, time.monotonic()
        self.summary: dict = {"device": args.device, "small": args.small, "steps": {}, "failures": []}
        self.env = dict(os.environ)

    def left_s(self) -> float:
        return self.args.budget_s - (time.monotonic() - self.started)

    def fail(self, step: str, message: str) -> None:
        print(f"FAILED {step}: {message}", flush=True)
        self.summary["failures"].append(f"{step}: {message}")

    def child(self, argv: list[str], step: str, timeout_s: float | None = None) -> subprocess.CompletedProcess | None:
        """Run ``argv`` from the repository root with the installed packages; None (a failure) if it ran out of
        time."""
        limit = max(1.0, min(timeout_s or math.inf, self.left_s() - 5))
        try:
            return subprocess.run(argv, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired as exc:
            self.fail(step, f"out of time after {limit:.0f} s")
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
            self.summary["steps"].setdefault(step, {})["partial_stdout"] = out[-4000:]
            return None

    def python(self, *argv: str) -> list[str]:
        return [sys.executable, "-P", *argv]  # -P: the tree's netfl/ folder must not shadow the installed package


def install(check: Check) -> bool:
    args = check.args
    step: dict = {}
    check.summary["steps"]["install"] = step
    if args.wheels is not None:
        sys.path.insert(0, str(BENCH))
        import gpu_wheels

        site = args.work / "site"
        try:
            step["wheels"] = gpu_wheels.install(args.wheels, site)
        except (SystemExit, subprocess.CalledProcessError) as exc:
            check.fail("install", str(exc))
            return False
        check.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), check.env.get("PYTHONPATH")]))
        check.env["PATH"] = os.pathsep.join([str(site / "bin"), check.env.get("PATH", "")])
        data = args.wheels / "fashion-mnist"
        if "FASHION_MNIST_DIR" not in check.env and not Path("/usr/share/datasets/fashion-mnist").exists():
            if data.exists():
                check.env["FASHION_MNIST_DIR"] = str(data)
    probe = check.child(check.python(__file__, "--child", "probe", "--device", args.device), "install", 120)
    if probe is None:
        return False
    if probe.returncode:
        check.fail("install", f"netfl does not import here: {probe.stderr.strip().splitlines()[-1:]}")
        return False
    step.update(json.loads(probe.stdout.strip().splitlines()[-1]))
    check.summary["environment"] = step
    if args.device.startswith("cuda") and not step["cuda"]:
        check.fail("install", f"torch {step['torch']} sees no CUDA GPU")
        return False
    print(f"netfl from {step['netfl']}; torch {step['torch']}; {step['card']}", flush=True)
    return True


def gpu_test_files() -> list[str]:
    """The test files with GPU cases: those that use tests/device_support.py."""
    return sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if "from device_support import" in path.read_text()
    )


def tests(check: Check) -> None:
    xml = check.args.work / "gpu-tests.xml"
    files = gpu_test_files()
    argv = check.python("-m", "pytest", "-o", "addopts=-ra", "-p", "no:cacheprovider", "-q", "-m", "gpu",
                        f"--junitxml={xml}", *files)  # fmt: skip
    started = time.monotonic()
    done = check.child(argv, "tests", 300)
    if done is None:
        return
    suites = ElementTree.parse(xml).getroot() if xml.exists() else None
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in suites.iter("testsuite") if suites is not None else ():
        for key in counts:
            counts[key] += int(suite.get(key, 0))
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    failed = [
        f"{case.get('classname')}::{case.get('name')}"
        for case in (suites.iter("testcase") if suites is not None else ())
        if case.find("failure") is not None or case.find("error") is not None
    ]
    step = {"files": files, "passed": passed, **counts, "failed": failed, "wall_s": time.monotonic() - started,
            "output_tail": done.stdout[-3000:]}  # fmt: skip
    check.summary["steps"]["tests"] = step
    print(f"tests: {passed} passed, {counts['skipped']} skipped, {len(failed)} failed ({step['wall_s']:.0f} s)")
    if done.returncode not in (0, 5) or failed:  # 5: nothing selected to run
        check.fail("tests", f"pytest exit code {done.returncode}; failed: {', '.join(failed) or done.stderr[-500:]}")
    if check.args.device.startswith("cuda") and (passed == 0 or counts["skipped"]):
        check.fail("tests", f"on a GPU every GPU case runs: {passed} passed, {counts['skipped']} skipped")


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def speed(check: Check) -> None:
    args, plan = check.args, sizes(check.args.small)
    runs = [{"label": w, "workload": w, "clients": plan["clients"], "rounds": plan["rounds"]} for w in WORKLOADS]
    runs.append({"label": f"{plan['large']['workload']}-{plan['large']['clients']}-clients", **plan["large"]})
    for run in runs:
        run["test_samples"] = plan["test_samples"]
    argv = check.python(__file__, "--child", "speed", "--device", args.device, "--plan",
                        json.dumps({"runs": runs, "warm_up": plan["warm_up"]}))  # fmt: skip
    done = check.child(argv, "speed", 360)
    results = _lines(
        done.stdout if done is not None else check.summary["steps"].get("speed", {}).get("partial_stdout", "")
    )
    peaks = next((r for r in results if r.get("kind") == "peaks"), None)
    card = check.summary.get("environment", {}).get("memory_mb")
    table, rows = [], {}
    for run in runs:
        got = {r["contestant"]: r for r in results if r.get("label") == run["label"] and "contestant" in r}
        rows[run["label"]] = got
        for contestant in ("netfl", "plain loop"):
            r = got.get(contestant)
            if r is None or "error" in r:
                check.fail("speed", f"{run['label']} {contestant}: {r['error'] if r else 'no result'}")
                continue
            if not math.isfinite(r["accuracy"]):
                check.fail("speed", f"{run['label']} {contestant}: accuracy {r['accuracy']}")
            gflops = r["updates_per_s"] * r["flops_per_update"] / 1e9
            r["gflops"] = gflops
            if peaks is not None:
                r["share_of_conv_peak"] = gflops / peaks["conv_gflops"]
                r["share_of_matmul_peak"] = gflops / peaks["matmul_gflops"]
            if card and r.get("gpu_peak_mb") is not None:
                r["share_of_gpu_memory"] = r["gpu_peak_mb"] / card
        if "netfl" in got and "plain loop" in got and "error" not in got["netfl"] and "error" not in got["plain loop"]:
            ratio = got["netfl"]["updates_per_s"] / got["plain loop"]["updates_per_s"]
            got["netfl"]["speed_up"] = ratio
            table.append((run["label"], got["netfl"], got["plain loop"], ratio))
    check.summary["steps"]["speed"] = {
        "peaks": peaks,
        "runs": rows,
        "stderr_tail": (done.stderr[-2000:] if done else ""),
    }
    if done is not None and done.returncode:
        check.fail("speed", f"exit code {done.returncode}: {done.stderr.strip()[-500:]}")
    if peaks:
        print(f"\npeaks on {args.device}: matmul {peaks['matmul_gflops']:.0f} GFLOP/s, conv {peaks['conv_gflops']:.0f}")
    print(f"{'workload':<22}{'netfl upd/s':>12}{'plain upd/s':>12}{'ratio':>7}{'netfl GFLOP/s':>14}{'of conv peak':>13}"
          f"{'netfl GPU MB':>13}{'plain GPU MB':>13}  netfl path")  # fmt: skip
    for label, netfl, plain, ratio in table:
        share = f"{100 * netfl['share_of_conv_peak']:.1f}%" if "share_of_conv_peak" in netfl else "-"
        memory = [f"{r['gpu_peak_mb']:.0f}" if r.get("gpu_peak_mb") is not None else "-" for r in (netfl, plain)]
        print(f"{label:<22}{netfl['updates_per_s']:>12.0f}{plain['updates_per_s']:>12.0f}{ratio:>7.2f}"
              f"{netfl['gflops']:>14.1f}{share:>13}{memory[0]:>13}{memory[1]:>13}  {netfl['training']}")  # fmt: skip


def world(check: Check) -> None:
    args = check.args
    small = ["--small"] if args.small else []
    argv = check.python(__file__, "--child", "world", "--device", args.device, "--work", str(args.work),
                        "--accuracy-tolerance", str(args.accuracy_tolerance), *small)  # fmt: skip
    done = check.child(argv, "world", 240)
    if done is None:
        return
    results = _lines(done.stdout)
    check.summary["steps"]["world"] = {"cases": results, "stderr_tail": done.stderr[-2000:]}
    if done.returncode or not results:
        check.fail("world", f"exit code {done.returncode}: {done.stderr.strip()[-500:]}")
    for r in results:
        verdict = "identical" if r["identical"] else f"DIFFERENT ({', '.join(r['differs'])})"
        print(f"world {r['case']}: events, devices, timeline {verdict}; {r['rounds']} rounds; "
              f"accuracy differs by at most {r['accuracy_max_diff']:.4f}")  # fmt: skip
        if not r["identical"]:
            check.fail("world", f"{r['case']}: {', '.join(r['differs'])} differ from the CPU run's")
        if not r["accuracy_max_diff"] <= args.accuracy_tolerance:
            check.fail("world", f"{r['case']}: accuracy differs by {r['accuracy_max_diff']:.4f} from the CPU run's")


# ------------------------------------------------------------------ children (with the installed packages)


def child_probe(args: argparse.Namespace) -> None:
    import importlib.metadata

    import torch

    import netfl

    cuda = torch.cuda.is_available()
    card = torch.cuda.get_device_properties(0) if cuda else None
    out = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "cuda": cuda,
        "cuda_version": torch.version.cuda,
        "card": card.name if card else f"CPU ({platform.processor() or platform.machine()})",
        "memory_mb": card.total_memory / 2**20 if card else None,
        "netfl": str(Path(netfl.__file__).parent),
        "versions": {n: importlib.metadata.version(n) for n in ("netfl-sim", "simpy", "pydantic", "pyyaml", "numpy")},
    }
    print(json.dumps(out))


def _script(path: Path, argv: list[str]) -> dict:
    """One benchmark script run in this process (its JSON line), after freeing what the last one left on the GPU."""
    import gc
    import runpy

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    saved, sys.argv = sys.argv, [str(path), *argv]
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv = saved
    return json.loads(printed.getvalue().strip().splitlines()[-1])


def child_speed(args: argparse.Namespace) -> None:
    """Every run in this process (torch and netfl imported once), netfl and the plain loop alternated, each with
    one CPU thread; a JSON line per result as it comes."""
    sys.path.insert(0, str(BENCH))
    plan = json.loads(args.plan)
    print(json.dumps({"kind": "peaks", **_script(BENCH / "peaks.py", ["--device", args.device])}), flush=True)
    scripts = {"netfl": BENCH / "netfl_rate.py", "plain loop": BENCH / "plain_loop.py"}
    if plan["warm_up"]:  # CUDA's lazily loaded kernels and cuDNN's first choices, for both contestants alike
        for workload in WORKLOADS:
            for path in scripts.values():
                _script(path, ["--workload", workload, "--clients", "2", "--rounds", "1", "--device", args.device,
                               "--test-samples", "500"])  # fmt: skip
    flops: dict[str, float] = {}
    for run in plan["runs"]:
        argv = ["--workload", run["workload"], "--clients", str(run["clients"]), "--device", args.device,
                "--threads", "1", *(["--rounds", str(run["rounds"])] if run["rounds"] else []),
                *(["--test-samples", str(run["test_samples"])] if run["test_samples"] else [])]  # fmt: skip
        for contestant, path in scripts.items():
            started = time.perf_counter()
            try:
                result = _script(path, argv)
            except Exception as exc:  # noqa: BLE001 -- one failed run must not lose the others' figures
                result = {"error": f"{type(exc).__name__}: {exc}"}
            result.update(run, contestant=contestant, wall_s=time.perf_counter() - started)
            if "flops_per_update" in result:
                flops[run["label"]] = result["flops_per_update"]
            result.setdefault("flops_per_update", flops.get(run["label"], math.nan))  # the same model and batch
            print(json.dumps(result), flush=True)


def child_world(args: argparse.Namespace) -> None:
    """Each scenario on the CPU and on the device, written; what differs between the two."""
    import pandas as pd

    from netfl.config import load_scenario
    from netfl.runner import run_scenario

    data_dir = Path(os.environ["FASHION_MNIST_DIR"]) if "FASHION_MNIST_DIR" in os.environ else None
    for case, (topology, overrides) in sizes(args.small)["world"].items():
        scenario = load_scenario(ROOT / "topologies" / topology, overrides=overrides)
        outs = {}
        for where in ("cpu", args.device):
            outs[where] = out = args.work / "world" / f"{case}-{where}"
            uses_data = "fashion" in topology
            run_scenario(scenario, out_dir=out, device=where, data_dir=data_dir if uses_data else None)
        cpu, device = outs["cpu"], outs[args.device]
        differs = []
        for name in ("events.parquet", "devices.parquet", "timeline.parquet"):
            if (cpu / name).exists() or (device / name).exists():
                a, b = pd.read_parquet(cpu / name), pd.read_parquet(device / name)
                if not a.equals(b):
                    differs.append(name)
        with open(cpu / "metrics.csv") as f, open(device / "metrics.csv") as g:
            rows_cpu, rows_device = list(csv.DictReader(f)), list(csv.DictReader(g))
        if len(rows_cpu) != len(rows_device):
            differs.append("metrics.csv rows")
        diffs = [abs(float(a["test_accuracy"]) - float(b["test_accuracy"])) for a, b in zip(rows_cpu, rows_device)]
        summary = json.loads((device / "summary.json").read_text())
        print(json.dumps({
            "case": case, "topology": topology, "overrides": overrides, "identical": not differs, "differs": differs,
            "rounds": summary["rounds"], "accuracy_max_diff": max(diffs, default=0.0),
            "final_accuracy": {"cpu": float(rows_cpu[-1]["test_accuracy"]),
                               args.device: float(rows_device[-1]["test_accuracy"])},
            "training": summary["tasks"][0]["training"],
        }), flush=True)  # fmt: skip


# ------------------------------------------------------------------ main


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prepare-wheels", type=Path, metavar="DIR", help="fill DIR with the GPU machine's wheels")
    parser.add_argument("--list", action="store_true", help="with --prepare-wheels: print them, fetch nothing")
    parser.add_argument("--python-version", default="3.12", help="with --prepare-wheels: the GPU machine's Python")
    parser.add_argument("--wheels", type=Path, help="install these wheels (prepared by --prepare-wheels) first")
    parser.add_argument("--device", default="cuda", help="where netfl trains: cuda (default), cuda:<index> or cpu")
    parser.add_argument("--small", action="store_true", help="small sizes: a smoke run (under a minute on a CPU)")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help=f"scratch folder [{DEFAULT_WORK}]")
    parser.add_argument("--summary", type=Path, help="the summary file [WORK/summary.json]")
    parser.add_argument("--budget-s", type=float, default=BUDGET_S, help=f"seconds all steps may take [{BUDGET_S}]")
    parser.add_argument("--accuracy-tolerance", type=float, default=0.02, help="world: accuracy CPU vs device [0.02]")
    parser.add_argument("--child", choices=("probe", "speed", "world"), help=argparse.SUPPRESS)
    parser.add_argument("--plan", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.summary = args.summary or args.work / "summary.json"
    args.work, args.summary = args.work.resolve(), args.summary.resolve()
    if args.wheels is not None:
        args.wheels = args.wheels.resolve()
    return args


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    if args.child:
        {"probe": child_probe, "speed": child_speed, "world": child_world}[args.child](args)
        return 0
    if args.prepare_wheels is not None:
        sys.path.insert(0, str(BENCH))
        import gpu_wheels

        gpu_wheels.main([str(args.prepare_wheels), "--python-version", args.python_version,
                         *(["--list"] if args.list else [])])  # fmt: skip
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    check = Check(args)
    try:
        if install(check):
            for step in (tests, world, speed):
                if check.left_s() < 10:
                    check.fail(step.__name__, "not run: out of time")
                    continue
                started = time.monotonic()
                try:
                    step(check)
                except Exception as exc:  # noqa: BLE001 -- a broken step must not lose the others' results
                    check.fail(step.__name__, f"{type(exc).__name__}: {exc}")
                check.summary["steps"].setdefault(step.__name__, {})["step_wall_s"] = time.monotonic() - started
    finally:
        check.summary["wall_s"] = time.monotonic() - check.started
        check.summary["ok"] = not check.summary["failures"]
        args.summary.parent.mkdir(parents=True, exist_ok=True)
        args.summary.write_text(json.dumps(check.summary, indent=1, default=str))
    verdict = "passed" if check.summary["ok"] else f"FAILED ({len(check.summary['failures'])})"
    print(f"\ngpu check {verdict} in {check.summary['wall_s']:.0f} s; summary: {args.summary}")
    return 0 if check.summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
