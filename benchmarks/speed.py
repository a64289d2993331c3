"""netfl's speed against what a user would pick instead, every figure measured in one run.

    python benchmarks/speed.py [--only startup,w1,w2,resnet,clients,threads,engine] [--quick] [--repeat 3]
                               [--device cpu|cuda] [--churn diurnal|sessions] [--json benchmarks/results/speed.json]

Run it by hand on a quiet machine (nothing else busy: every section times
processes against each other and prints ratios, not absolute targets). It is
not a test. Sections:

* startup -- median wall time of ``netfl --help``, ``netfl validate``, ``netfl
  algorithms`` and whether each imports torch; and for workload W1 the time
  from launching a Python process to netfl's first round.
* w1, w2, resnet -- the workloads of benchmarks/workloads.py (Fashion-MNIST,
  100 clients, every client every round 10 SGD steps of batch 32, FedAvg):
  W1 an MLP (20 rounds), W2 FedAU's CNN (5 rounds), and a user's small
  ResNet with BatchNorm defined in benchmarks/user_resnet.py (3 rounds);
  each as a whole job, process start to results: ``netfl simulate
  benchmarks/<workload>.yaml`` against the plain PyTorch loop
  (benchmarks/plain_loop.py) with 1 thread and with torch's threads, and
  Flower's simulation engine (benchmarks/flower_sim.py), alternated; wall,
  user and system CPU, peak memory, accuracy; then the training rate in
  client updates per second and GFLOP/s (benchmarks/netfl_rate.py times
  ``sim.run()`` in-process) against this machine's matrix-product and
  convolution peaks (benchmarks/peaks.py). ``--device cuda`` runs netfl and
  the plain loop on a GPU and adds their peak GPU memory.
* text -- the text workloads of benchmarks/workloads.py (``TEXT``: a
  character LSTM and GRU, a Transformer encoder, an embedding-bag
  classifier at 2 and at 10 local steps, each a user's module of benchmarks/user_text.py; 50 clients,
  30 rounds, every client every round): ``netfl simulate --threads 1``
  against the plain loop (benchmarks/plain_text_loop.py, 1 thread) as
  alternated pairs, each pair's ratio of wall times, and netfl at its
  default threads; then the small job's start-up: the same pairs at 1
  round, the difference of their wall times.
* clients -- W1 at 10, 100 and 1000 clients, netfl against the plain loop.
* threads -- netfl's worker threads 1 against 2, for W1 and the shipped
  topologies quickstart, fashion-mnist and mmfl, each alone and beside a
  second identical run (a competing CPU load): the measured case for
  netfl's default; and torch's own intra-op threads 1 against 2 on the plain
  loop, for contrast.
* engine  -- the array form of the engine (``engine: {devices: arrays}``)
  with 10 000 to 1 000 000 phones (``--engine-max`` adds a size, e.g. ten
  million) over 24 simulated hours (100 per round, a round every 3 minutes
  as in topologies/million-phones.yaml), in four worlds (``--engine-worlds``):
  sync (batteries), phones (nightly chargers and the owners' use), async
  (phones with anarchic arrivals, FedBuff) and trace (availability replayed
  from a 100 000-client FedScale-format trace that
  benchmarks/make_fedscale_trace.py writes): wall time, events per second and
  memory per device.

``--quick`` is a smoke run (fewer rounds, sizes and repeats; its figures are
not for the README; about 6 minutes). A full run takes a few hours, most of
it in the threads section, whose runs with 2 threads beside a second one are
many times slower than the rest (that is what it shows); ``--only`` and
``--repeat`` shorten it. Every child runs with its threads pinned (1, or
the count a row names; ``netfl simulate`` without ``--threads`` uses netfl's
default, one worker per CPU); the environment is passed on as it is
(``OMP_NUM_THREADS`` is not set). Everything measured also goes to ``--json`` (default
benchmarks/results/speed.json).

Needs Debian's dataset-fashion-mnist (``apt-get install dataset-fashion-mnist``,
or FASHION_MNIST_DIR pointing at the four IDX files). Flower lives in its own
virtualenv (not netfl's, not committed); without it the Flower rows are
skipped. From the repository root, create it once with:

    python3 -m venv benchmarks/.venv-flower && benchmarks/.venv-flower/bin/pip install torch==2.13.0 "flwr[simulation]"

(torch must stay pinned to 2.13.0, the local CPU wheel; tested with flwr 1.42.0,
ray 2.55.1, torch 2.13.0+cpu.)
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import pickle
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
PYTHON = sys.executable
NETFL = str(Path(sys.executable).parent / "netfl")
FLOWER_PYTHON = BENCH / ".venv-flower" / "bin" / "python"
FLOWER_SETUP = (
    "python3 -m venv benchmarks/.venv-flower && "
    'benchmarks/.venv-flower/bin/pip install torch==2.13.0 "flwr[simulation]"'
)
SECTIONS = ("startup", "w1", "w2", "resnet", "text", "clients", "threads", "engine")
TOPOLOGIES = ("quickstart", "fashion-mnist", "mmfl")
MB = 2**20


# ------------------------------------------------------------------ running children


@dataclass
class Run:
    """One finished child: wall time from just before its launch to its exit, and its own rusage (wait4).

    ``user_s``/``sys_s``/``maxrss_mb`` are the child's and those of the descendants it waited for;
    ``tree_cpu_s``/``tree_rss_mb`` (only when asked) sample every process of its tree from /proc:
    CPU seconds (at least; the larger of wait4's and the samples' sum) and the peak of the summed RSS.
    """

    cmd: list[str]
    wall_s: float
    user_s: float
    sys_s: float
    maxrss_mb: float
    returncode: int
    stdout: str
    stderr: str
    tree_cpu_s: float | None = None
    tree_rss_mb: float | None = None
    timed_out: bool = False

    def ok(self) -> Run:
        if self.returncode != 0 or self.timed_out:
            tail = "\n".join(self.stderr.strip().splitlines()[-15:])
            why = "timed out" if self.timed_out else f"exit code {self.returncode}"
            raise RuntimeError(f"{' '.join(self.cmd)}: {why}\n{tail}")
        return self

    def result(self) -> dict:
        """The JSON line a baseline script prints last on stdout."""
        return json.loads(self.ok().stdout.strip().splitlines()[-1])

    def record(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k not in ("stdout", "stderr")}


class TreeSampler(threading.Thread):
    """Samples the process trees under ``roots`` from /proc: peak summed RSS, last CPU seen per process."""

    def __init__(self, roots: list[int], interval_s: float = 0.25):
        super().__init__(daemon=True)
        self.roots, self.interval_s = roots, interval_s
        self.peak_rss = {r: 0 for r in roots}
        self.cpu: dict[int, dict[int, float]] = {r: {} for r in roots}
        self.stopped = threading.Event()
        self.page, self.tick = os.sysconf("SC_PAGE_SIZE"), os.sysconf("SC_CLK_TCK")

    def run(self) -> None:
        while not self.stopped.is_set():
            self.sample()
            self.stopped.wait(self.interval_s)

    def sample(self) -> None:
        children, stat = {}, {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            pid = int(name)
            children.setdefault(int(fields[1]), []).append(pid)
            stat[pid] = (int(fields[21]) * self.page, (int(fields[11]) + int(fields[12])) / self.tick)
        for root in self.roots:
            todo, rss = [root], 0
            while todo:
                pid = todo.pop()
                if pid in stat:
                    rss += stat[pid][0]
                    self.cpu[root][pid] = stat[pid][1]
                todo += children.get(pid, [])
            self.peak_rss[root] = max(self.peak_rss[root], rss)


def run_together(cmds: list[list[str]], *, tree: bool = False, timeout_s: float | None = None) -> list[Run]:
    """Start ``cmds`` at the same moment (each in its own session, from the repository root) and wait for all."""
    outs = [(tempfile.TemporaryFile(), tempfile.TemporaryFile()) for _ in cmds]
    procs, starts = [], []
    for cmd, (out, err) in zip(cmds, outs):
        starts.append(time.perf_counter())
        procs.append(subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=err, start_new_session=True))
    sampler = TreeSampler([p.pid for p in procs]) if tree else None
    if sampler:
        sampler.start()
    ends: list[tuple | None] = [None] * len(procs)

    def wait(i: int) -> None:
        _, status, usage = os.wait4(procs[i].pid, 0)
        ends[i] = (time.perf_counter(), status, usage)
        procs[i].returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen

    waiters = [threading.Thread(target=wait, args=(i,), daemon=True) for i in range(len(procs))]
    for w in waiters:
        w.start()
    deadline = None if timeout_s is None else time.perf_counter() + timeout_s
    timed_out = [False] * len(procs)
    for i, w in enumerate(waiters):
        w.join(None if deadline is None else max(0.0, deadline - time.perf_counter()))
        if w.is_alive():  # not reaped yet, so its process group is still the one this script started
            timed_out[i] = True
            os.killpg(procs[i].pid, signal.SIGKILL)
            w.join()
    if sampler:
        sampler.stopped.set()
        sampler.join()
    runs = []
    for i, (cmd, p, (out, err)) in enumerate(zip(cmds, procs, outs)):
        end, status, usage = ends[i]
        out.seek(0), err.seek(0)
        run = Run(
            cmd,
            end - starts[i],
            usage.ru_utime,
            usage.ru_stime,
            usage.ru_maxrss / 1024,
            p.returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            timed_out=timed_out[i],
        )
        if sampler:
            run.tree_cpu_s = max(run.user_s + run.sys_s, sum(sampler.cpu[p.pid].values()))
            run.tree_rss_mb = max(run.maxrss_mb, sampler.peak_rss[p.pid] / MB)
        out.close(), err.close()
        runs.append(run)
    return runs


def run(cmd: list[str], **kwargs) -> Run:
    return run_together([cmd], **kwargs)[0]


# ------------------------------------------------------------------ small helpers


def median(values) -> float:
    return statistics.median(values)


def times(a: float, b: float, what: str) -> str:
    """'2.0x faster than <what>' for netfl's time ``a`` against the other's time ``b``."""
    if a <= b:
        return f"{b / a:.1f}x faster than {what}"
    return f"{a / b:.1f}x slower than {what}"


def table(header: str, columns: list[str], rows: list[list]) -> None:
    """One aligned table: a line saying what is measured and how, then the columns."""

    def cell(v) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:#.3g}" if abs(v) < 10 else f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.1f}"
        return str(v)

    text = [[cell(v) for v in row] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in text)) if text else len(c) for i, c in enumerate(columns)]
    print(f"\n== {header}")
    print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(columns, widths))))
    for r in text:
        print("  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths))))


def quiet_check() -> float:
    """CPU cores busy with other work over one second before a section (this script runs nothing then),
    with a warning when it is not close to zero: the figures would be noisy."""

    def ticks() -> tuple[int, int]:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
        return sum(values), values[3] + values[4]  # all, idle + iowait

    (total0, idle0), _, (total1, idle1) = ticks(), time.sleep(1.0), ticks()
    busy = (os.cpu_count() or 1) * (1 - (idle1 - idle0) / max(1, total1 - total0))
    if busy > 0.2:
        print(
            f"   (warning: {busy:.1f} cores busy with something else just before this section; figures will be noisy)"
        )
    return busy


def w1_yaml(tmp: Path, rounds: int) -> Path:
    return workload_yaml(tmp, "w1", rounds)


def simulate(yaml_path: Path, out: Path, threads: int | None = None, device: str = "cpu") -> list[str]:
    return [
        NETFL,
        "simulate",
        str(yaml_path),
        "--out",
        str(out),
        "--quiet",
        "--device",
        device,
        *([] if threads is None else ["--threads", str(threads)]),
    ]


def summary(out: Path) -> dict:
    data = json.loads((out / "summary.json").read_text())
    shutil.rmtree(out, ignore_errors=True)
    return data


# ------------------------------------------------------------------ sections


def plain(*argv: str) -> list[str]:
    return [PYTHON, str(BENCH / "plain_loop.py"), *argv]


IMPORTS_TORCH = r"""
import atexit, os, sys
atexit.register(lambda: os.write(2, b"\nspeed.py: torch imported: %d\n" % ("torch" in sys.modules)))
sys.argv = ["netfl", *sys.argv[1:]]
from netfl.cli.main import main
main()
"""

FIRST_ROUND = r"""
import time
t0 = time.perf_counter()
import os, sys
from netfl.learn.training.runtime import use_threads
from netfl.assemble import build_simulation
from netfl.config import load_scenario
imported = time.perf_counter() - t0
use_threads(1)
sim, learner = build_simulation(load_scenario(sys.argv[1]))
built = time.perf_counter() - t0
def first_round(*args, **kwargs):
    print(f"first-round {imported:.6f} {built:.6f} {time.perf_counter() - t0:.6f}", flush=True)
    os._exit(0)
learner.plan_round = first_round
sim.run()
"""


def startup(args, tmp: Path) -> dict:
    commands = {
        "netfl --help": ["--help"],
        "netfl validate topologies/quickstart.yaml": ["validate", "topologies/quickstart.yaml"],
        "netfl algorithms": ["algorithms"],
    }
    walls: dict[str, list[float]] = {label: [] for label in commands}
    busy = quiet_check()
    for _ in range(5):
        for label, argv in commands.items():
            walls[label].append(run([NETFL, *argv]).ok().wall_s)
    torch = {
        label: run([PYTHON, "-c", IMPORTS_TORCH, *argv]).ok().stderr.strip().endswith("1")
        for label, argv in commands.items()
    }
    # W1: from just before launching the interpreter to the line it prints as netfl's first round starts
    w1 = w1_yaml(tmp, 20)
    firsts = []
    for _ in range(5):
        started = time.perf_counter()
        child = subprocess.Popen([PYTHON, "-c", FIRST_ROUND, str(w1)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        line = child.stdout.readline()
        wall = time.perf_counter() - started
        child.wait()
        if not line.startswith("first-round"):
            raise RuntimeError(f"the first-round driver printed {line!r} (exit code {child.returncode})")
        imported, built, in_child = map(float, line.split()[1:])
        firsts.append(
            {
                "wall_s": wall,
                "interpreter_s": wall - in_child,
                "import_s": imported,
                "build_s": built - imported,
                "initial_eval_s": in_child - built,
            }
        )
    rows = [[label, median(walls[label]), "yes" if torch[label] else "no"] for label in commands]
    first = {k: median(f[k] for f in firsts) for k in firsts[0]}
    rows.append(["simulate W1: process start to first round", first["wall_s"], "yes"])
    table(
        f"startup: median wall of 5 runs of each command (subprocesses; others busy {busy:.1f} cores)",
        ["command", "wall s", "imports torch"],
        rows,
    )
    print(
        f"   W1 to first round, median parts: interpreter start {first['interpreter_s']:.2f} s, "
        f"import netfl and torch {first['import_s']:.2f} s, load and split data + build {first['build_s']:.2f} s, "
        f"evaluation before round 1 {first['initial_eval_s']:.2f} s (1 torch thread)"
    )
    return {
        "commands": {
            label: {"walls_s": walls[label], "median_s": median(walls[label]), "imports_torch": torch[label]}
            for label in commands
        },
        "w1_first_round": {"runs": firsts, "median": first},
        "others_busy_cores": busy,
    }


WORKLOAD_NAMES = {"w1": "W1 (MLP)", "w2": "W2 (CNN)", "resnet": "the user's ResNet with BatchNorm"}


def workload_yaml(tmp: Path, workload: str, rounds: int) -> Path:
    """benchmarks/<workload>.yaml itself at its own rounds, else a copy that stops (and evaluates) after ``rounds``."""
    source = BENCH / f"{workload}.yaml"
    data = yaml.safe_load(source.read_text())
    if rounds == data["stop"]["rounds"]:
        return source
    data["stop"], data["eval"] = {"rounds": rounds}, {"every": f"{rounds} rounds"}
    if "path" in data["task"]["model"]:  # a user's file, relative to the topology: keep it found from the copy
        data["task"]["model"]["path"] = str(BENCH / data["task"]["model"]["path"])
    path = tmp / f"{workload}-{rounds}rounds.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def peaks(args) -> dict[int, dict]:
    """The machine's matrix-product and convolution peaks (benchmarks/peaks.py), per thread count."""
    cpus = os.cpu_count() or 1
    return {t: run([PYTHON, str(BENCH / "peaks.py"), "--threads", str(t), "--device", args.device]).result()
            for t in sorted({1, cpus})}  # fmt: skip


def whole_job(args, tmp: Path, workload: str) -> dict:
    """A workload as a whole job against the plain loop (1 thread and torch's threads) and Flower; then training
    rates in client updates per second and GFLOP/s against the machine's peaks."""
    own_rounds = yaml.safe_load((BENCH / f"{workload}.yaml").read_text())["stop"]["rounds"]
    rounds = min(own_rounds, 2) if args.quick else own_rounds
    path = workload_yaml(tmp, workload, rounds)
    flower = FLOWER_PYTHON.exists() and args.device == "cpu"
    if not flower and args.device == "cpu":
        print(
            f"\n({workload}: no Flower venv at {FLOWER_PYTHON.relative_to(ROOT)}; Flower skipped. Create it with:\n"
            f"    {FLOWER_SETUP})"
        )
    base = ["--workload", workload, "--rounds", str(rounds), "--device", args.device]
    cpus = os.cpu_count() or 1
    many = f"plain loop, torch's {cpus} threads"
    jobs: dict[str, list[str] | int | None] = {"netfl": None, "netfl, 1 thread": 1,
                                               many: plain(*base, "--threads", str(cpus)),
                                               "plain loop, 1 thread": plain(*base, "--threads", "1")}  # fmt: skip
    if flower:
        jobs["Flower"] = [str(FLOWER_PYTHON), "benchmarks/flower_sim.py", *base, "--threads", "1"]
    rates = {
        f"netfl in-process, {t} thread{'s' if t > 1 else ''}": [
            PYTHON,
            "benchmarks/netfl_rate.py",
            *base,
            "--threads",
            str(t),
        ]
        for t in sorted({1, cpus})
    }
    runs: dict[str, list[dict]] = {name: [] for name in [*jobs, *rates]}
    busy = quiet_check()
    for i in range(args.repeat):
        for name, cmd in jobs.items():
            if cmd is None or isinstance(cmd, int):  # netfl simulate, whole job
                out = tmp / f"{workload}-{i}"
                r = run(simulate(path, out, cmd, args.device), tree=True).ok()
                s = summary(out)
                result = {"accuracy": s["final_test_accuracy"], "threads": s["threads"], "events": s["events"],
                          "training": s["tasks"][0]["training"]}  # fmt: skip
            else:
                r = run(cmd, tree=True)
                result = r.result()
            runs[name].append({**r.record(), **result})
        for name, cmd in rates.items():
            r = run(cmd)
            runs[name].append({**r.record(), **r.result()})

    def med(name: str, key: str) -> float | None:
        values = [x[key] for x in runs.get(name, []) if x.get(key) is not None]
        return median(values) if values else None

    rows = [
        [n, med(n, "wall_s"), med(n, "user_s"), med(n, "sys_s"), med(n, "sys_s") / med(n, "user_s"),
         med(n, "tree_cpu_s"), med(n, "tree_rss_mb"), 100 * med(n, "accuracy")]
        for n in jobs
    ]  # fmt: skip
    label = WORKLOAD_NAMES[workload]
    table(
        f"{workload}: {label}, whole job, process start to results: median of {args.repeat}, alternated, "
        f"{rounds} rounds; netfl at its default threads ({runs['netfl'][0]['threads']}), trains on "
        f"{runs['netfl'][0]['training']} (others busy {busy:.1f} cores)",
        ["job", "wall s", "user s", "sys s", "sys/user", "tree CPU s", "peak RSS MB", "accuracy %"],
        rows,
    )
    print("   user/sys: the child's own (wait4); tree: every process it started, sampled from /proc")
    best_plain = min((many, "plain loop, 1 thread"), key=lambda n: med(n, "wall_s"))
    for netfl in ("netfl", "netfl, 1 thread"):
        ratio = med(netfl, "wall_s") / med(best_plain, "wall_s")
        words = [f"{ratio:.2f}x the wall time of the plain loop at its best ({best_plain.split(', ')[1]})"]
        if flower:
            words.append(times(med(netfl, "wall_s"), med("Flower", "wall_s"), "Flower"))
        print(f"   {netfl} whole job: {'; '.join(words)}")
    print(f"   peak memory: netfl {med('netfl', 'tree_rss_mb'):.0f} MB, the plain loop at its best "
          f"{med(best_plain, 'tree_rss_mb'):.0f} MB")  # fmt: skip
    top = peaks(args)
    per_update = runs[next(iter(rates))][0]["flops_per_update"]
    rate_rows = []
    for name in [*rates, many, "plain loop, 1 thread", *(["Flower"] if flower else [])]:
        threads = cpus if (name == many or name.endswith(f"{cpus} threads")) and cpus > 1 else 1
        updates = med(name, "updates_per_s")
        gflops = updates * per_update / 1e9
        conv, matmul = top[threads]["conv_gflops"], top[threads]["matmul_gflops"]
        rate_rows.append([name, med(name, "train_s"), updates, gflops, f"{100 * gflops / conv:.0f}%",
                          f"{100 * gflops / matmul:.0f}%"])  # fmt: skip
    table(
        f"{workload} training rate: median of {args.repeat}, 100 clients x {rounds} rounds, evaluation excluded; "
        f"{per_update / 1e9:.3g} GFLOP per update; peaks of this machine (benchmarks/peaks.py): matmul "
        + ", ".join(f"{t} thread{'s' if t > 1 else ''} {p['matmul_gflops']:.0f}" for t, p in top.items())
        + "; conv "
        + ", ".join(f"{t} {p['conv_gflops']:.0f}" for t, p in top.items())
        + " GFLOP/s",
        ["job", "train s", "updates/s", "GFLOP/s", "of conv peak", "of matmul peak"],
        rate_rows,
    )
    if args.device != "cpu":
        print("   GPU peak memory: " + ", ".join(f"{n} {med(n, 'gpu_peak_mb'):.0f} MB" for n in [*rates, many]
                                                if med(n, "gpu_peak_mb") is not None))  # fmt: skip
    keys = ("wall_s", "user_s", "sys_s", "tree_cpu_s", "maxrss_mb", "tree_rss_mb", "accuracy", "train_s",
            "updates_per_s", "outside_torch_share", "import_build_s", "gpu_peak_mb")  # fmt: skip
    return {"rounds": rounds, "runs": runs, "others_busy_cores": busy, "peaks": top, "flops_per_update": per_update,
            "median": {n: {k: med(n, k) for k in keys} for n in runs}}  # fmt: skip


def w1(args, tmp: Path) -> dict:
    return whole_job(args, tmp, "w1")


def w2(args, tmp: Path) -> dict:
    return whole_job(args, tmp, "w2")


def resnet(args, tmp: Path) -> dict:
    return whole_job(args, tmp, "resnet")


def text_topology(tmp: Path, workload: str, rounds: int) -> Path:
    """The text workload as a topology of netfl's, its data written as the ``.npz`` a user would give."""
    sys.path.insert(0, str(BENCH))
    import numpy as np
    import workloads as w

    data = tmp / f"{workload}.npz"
    if not data.exists():
        np.savez(data, **w.text_arrays(workload))
    model, _, steps, batch, lr = w.TEXT[workload]
    topology = {
        "name": f"text-{workload}",
        "seed": 1,
        "stop": {"rounds": rounds},
        "task": {
            "dataset": {"path": str(data), "partition": {"kind": "natural"}},
            "model": {"path": f"{BENCH / 'user_text.py'}:{model}"},
            "local": {"steps": steps, "batch_size": batch, "lr": lr},
        },
        "devices": [{"group": "clients", "count": w.TEXT_CLIENTS, "compute": {"flops_per_s": 1e10},
                     "availability": {"policy": "always"},
                     "link": {"uplink": "1Gbps", "downlink": "1Gbps", "latency": "1ms"}}],
        "server": {"algorithm": {"name": "fedavg", "weighting": "samples"},
                   "round": {"participants": w.TEXT_CLIENTS}},
        "eval": {"every": f"{rounds} rounds"},
    }  # fmt: skip
    path = tmp / f"text-{workload}-{rounds}.yaml"
    path.write_text(yaml.safe_dump(topology, sort_keys=False))
    return path


def text(args, tmp: Path) -> dict:
    """The text workloads, netfl (1 thread) against the plain loop (1 thread) in alternated pairs; netfl at its
    default threads; and a small job's start-up (the same pairs at 1 round)."""
    sys.path.insert(0, str(BENCH))
    import workloads as w

    rounds = 3 if args.quick else w.TEXT_ROUNDS
    busy = quiet_check()
    results, rows = {}, []
    for workload in w.TEXT:
        path, one = text_topology(tmp, workload, rounds), text_topology(tmp, workload, 1)
        plain_cmd = [PYTHON, str(BENCH / "plain_text_loop.py"), "--workload", workload, "--threads", "1"]
        pairs, starts, default, training = [], [], [], ""
        for i in range(args.repeat):
            out = tmp / f"text-{workload}-{i}"
            mine = run(simulate(path, out, 1)).ok()
            s = summary(out)
            training = s["tasks"][0]["training"]
            theirs = run([*plain_cmd, "--rounds", str(rounds)])
            pairs.append({"netfl_wall_s": mine.wall_s, "plain_wall_s": theirs.wall_s,
                          "ratio": mine.wall_s / theirs.wall_s,
                          "netfl_accuracy": s["final_test_accuracy"], "plain_accuracy": theirs.result()["accuracy"],
                          "netfl_user_s": mine.user_s, "plain_user_s": theirs.user_s})  # fmt: skip
            mine_one = run(simulate(one, tmp / f"text-{workload}-one-{i}", 1)).ok()
            shutil.rmtree(tmp / f"text-{workload}-one-{i}", ignore_errors=True)
            theirs_one = run([*plain_cmd, "--rounds", "1"]).ok()
            starts.append(mine_one.wall_s - theirs_one.wall_s)
            both = run(simulate(path, tmp / f"text-{workload}-default-{i}")).ok()
            shutil.rmtree(tmp / f"text-{workload}-default-{i}", ignore_errors=True)
            default.append(both.wall_s / theirs.wall_s)
        ratios = [p["ratio"] for p in pairs]
        results[workload] = {"pairs": pairs, "startup_differences_s": starts, "default_threads_ratios": default,
                             "training": training, "median_ratio": median(ratios)}  # fmt: skip
        rows.append([workload, median(p["netfl_wall_s"] for p in pairs), median(p["plain_wall_s"] for p in pairs),
                     f"{median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})", f"{median(default):.2f}",
                     f"{median(starts):+.2f}", 100 * median(p["netfl_accuracy"] for p in pairs),
                     100 * median(p["plain_accuracy"] for p in pairs), training.split(" (")[0]])  # fmt: skip
    table(
        f"text: {w.TEXT_CLIENTS} clients x {rounds} rounds, whole job, process start to results, {args.repeat} "
        f"alternated pairs, one thread each (others busy {busy:.1f} cores)",
        ["workload", "netfl wall s", "plain wall s", "ratio (range)", "netfl default threads", "1-round diff s",
         "netfl acc %", "plain acc %", "netfl path"],
        rows,
    )  # fmt: skip
    return {"rounds": rounds, "others_busy_cores": busy, "by_workload": results}


def clients(args, tmp: Path) -> dict:
    rounds = 2 if args.quick else 5
    results, rows = {}, []
    busy = quiet_check()
    for n in (10, 100, 1000):
        base = ["--clients", str(n), "--rounds", str(rounds), "--threads", "1"]
        got = {"netfl": [], "plain": []}
        for _ in range(args.repeat):
            got["netfl"].append(run([PYTHON, "benchmarks/netfl_rate.py", *base]).result())
            got["plain"].append(run(plain(*base)).result())
        med = {who: {k: median(r[k] for r in rs) for k in ("train_s", "updates_per_s")} for who, rs in got.items()}
        results[n] = {"runs": got, "median": med}
        rows.append(
            [
                n,
                60000 // n,
                med["netfl"]["train_s"],
                med["netfl"]["updates_per_s"],
                med["plain"]["train_s"],
                med["plain"]["updates_per_s"],
                med["plain"]["train_s"] / med["netfl"]["train_s"],
            ]
        )
    table(
        f"clients: W1 at 10/100/1000 clients, {rounds} rounds, every client every round; train time, median of "
        f"{args.repeat}, alternated, 1 thread (others busy {busy:.1f} cores)",
        ["clients", "samples each", "netfl s", "netfl upd/s", "plain s", "plain upd/s", "netfl speed-up"],
        rows,
    )
    print("   netfl training: " + "; ".join(f"{r[0]} clients {times(r[2], r[4], 'the plain loop')}" for r in rows))
    print("   the plain loop imports torch._dynamo (torch.optim's first step, ~1 s) before its timer")
    return {"rounds": rounds, "others_busy_cores": busy, "by_clients": results}


def threads(args, tmp: Path) -> dict:
    """netfl's worker threads (1 and 2) alone and shared; and, for contrast, torch's own intra-op pool (the plain
    loop)."""
    rounds = 3 if args.quick else 20
    paths = {"W1": w1_yaml(tmp, rounds), "W2": workload_yaml(tmp, "w2", 2 if args.quick else 5)}
    for name in TOPOLOGIES:
        path = ROOT / "topologies" / f"{name}.yaml"
        if args.quick:  # the same topology, stopped after 3 rounds
            data = yaml.safe_load(path.read_text())
            data["stop"]["rounds"] = 3
            path = tmp / f"{name}-quick.yaml"
            path.write_text(yaml.safe_dump(data, sort_keys=False))
        paths[name] = path
    commands = {w: (lambda p: lambda t, out: simulate(p, out, t))(p) for w, p in paths.items()}  # noqa: B023
    commands["W1 plain loop, torch intra-op"] = lambda t, out: plain("--threads", str(t), "--rounds", str(rounds))
    counts = (1, 2)
    default = "default"  # netfl without --threads: every CPU, fewer while another process keeps some busy
    walls = {w: {t: {"alone": [], "shared": []} for t in (*counts, default)} for w in commands}
    busy = quiet_check()
    for i in range(args.repeat):
        for w, command in commands.items():
            for t in counts if "plain" in w else (*counts, default):
                out = tmp / f"threads-{i}-{t}"
                threads = None if t == default else t
                walls[w][t]["alone"].append(run(command(threads, out)).ok().wall_s)
                shutil.rmtree(out, ignore_errors=True)
                pair = run_together([command(threads, out / "a"), command(threads, out / "b")])
                walls[w][t]["shared"].append([r.ok().wall_s for r in pair])
                shutil.rmtree(out, ignore_errors=True)
    rows, med = [], {}
    for w in commands:
        med[w] = {
            t: {"alone": median(walls[w][t]["alone"]), "shared": median(max(p) for p in walls[w][t]["shared"])}
            for t in walls[w]
            if walls[w][t]["alone"]
        }
        m = med[w]
        shown = [t for t in (*counts, default) if t in m]
        rows.append(
            [
                w,
                *(m[t]["alone"] for t in counts),
                m[default]["alone"] if default in m else None,
                min(shown, key=lambda t: m[t]["alone"]),
                *(m[t]["shared"] for t in counts),
                m[default]["shared"] if default in m else None,
                min(shown, key=lambda t: m[t]["shared"]),
            ]
        )
    table(
        f"threads: wall s with 1 / 2 threads and netfl's default (no --threads: every CPU, fewer while another "
        f"process keeps some busy), alone and beside a second identical run started at the same moment (slower of "
        f"the pair); netfl: --threads (worker threads, one torch thread each); plain loop: torch's intra-op "
        f"threads; median of {args.repeat}{', 3 rounds each' if args.quick else ''} (others busy {busy:.1f} cores)",
        ["workload", "1 alone", "2 alone", "default", "wins", "1 shared", "2 shared", "default", "wins"],
        rows,
    )
    for w in commands:
        m = med[w]
        line = (
            f"   {w}: 2 threads take {m[2]['alone'] / m[1]['alone']:.2f}x the time of 1 alone, "
            f"{m[2]['shared'] / m[1]['shared']:.2f}x shared"
        )
        if default in m:
            line += f"; the default {m[default]['shared'] / m[1]['shared']:.2f}x the time of 1 thread each shared"
        print(line)
    if "OMP_NUM_THREADS" in os.environ:
        print(f"   note: OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} is set in this environment")
    return {
        "others_busy_cores": busy,
        "walls_s": walls,
        "median": med,
        "workloads": {w: str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p.name) for w, p in paths.items()},
    }


ENGINE_RUNS = {False: ((10_000, 100_000, 1_000_000), 24), True: ((10_000, 100_000), 2)}  # quick: devices, hours
#: The worlds the engine section measures: synchronous rounds over batteries alone, the same with nightly
#: chargers and the owners' use, and that world with anarchic arrivals (FedBuff) instead of rounds.
ENGINE_WORLDS = ("sync", "phones", "async", "trace")
#: Clients of the FedScale-format trace the trace world replays (device n replays client n mod this).
TRACE_CLIENTS = 100_000
#: Async workers pause so that about this many jobs start in a simulated day whatever the devices' number
#: (the synchronous worlds' 480 rounds x 100).
ASYNC_JOBS_PER_DAY = 48_000


def engine_scenario(devices: int, hours: int, churn: str, world: str = "sync", trace: Path | None = None) -> dict:
    availability = {
        "diurnal": {"policy": "diurnal", "mixing": "20min"},
        "sessions": {
            "policy": "sessions",
            "on": {"exponential": {"mean": "1h"}},
            "off": {"exponential": {"mean": "3h"}},
        },
    }[churn]
    return {
        "name": f"engine-{devices}",
        "seed": 1,
        "stop": {"sim_time": f"{hours}h"},
        "task": {
            "dataset": {"name": "digits", "partition": {"kind": "iid", "samples_per_client": 20}},
            "model": {"name": "logistic"},
            "local": {"steps": 5, "batch_size": 10, "lr": 0.1},
        },
        "devices": [
            {
                "group": "phones",
                "count": devices,
                "availability": availability,
                "compute": {"flops_per_s": {"uniform": [0.5e9, 2e9]}},
                "battery": {"capacity": "55kJ", "initial": {"uniform": [0.3, 1.0]}, "min_level": "20%"},
                "link": {"uplink": {"uniform": ["1Mbps", "10Mbps"]}, "downlink": "20Mbps", "latency": "40ms"},
            }
        ],
        # interval: as in topologies/million-phones.yaml; without it a round of this tiny model lasts ~0.1
        # simulated s and 24 hours hold about a million rounds
        "server": {
            "algorithm": {"name": "fedavg"},
            "round": {"participants": 100, "deadline": "60s", "interval": "3min"},
        },
        "eval": {"every": "100 rounds"},
        "engine": {"devices": "lazy"},
    } | _world(world, devices, trace)


def _world(world: str, devices: int, trace: Path | None = None) -> dict:
    """What a world adds to the synchronous one: chargers and the owners' use, asynchronous arrivals, or
    availability replayed from a FedScale-format trace (``trace``: the pickle benchmarks/make_fedscale_trace.py
    writes)."""
    if world == "sync":
        return {}
    if world == "trace":
        replay = {"policy": "fedscale_trace", "file": str(trace or "trace.pkl"), "trust_pickle": True}
        return {"devices_update": {"availability": replay}}
    phone = {
        "capacity": "55kJ",
        "initial": {"uniform": [0.3, 1.0]},
        "min_level": "20%",
        "charging": {"policy": "daily", "start": "22:00", "end": "07:00", "jitter": "1h"},
    }
    group = {"battery": phone, "usage": "phone"}
    changes: dict = {"devices_update": group}
    if world == "async":
        # each phone pausing so that the day holds about ASYNC_JOBS_PER_DAY jobs: a worker whose pause is over pulls
        # as soon as it can, so each pulls about once a pause (a little less: the wait for its device to be free)
        pause_s = devices * 86_400 / ASYNC_JOBS_PER_DAY
        changes["server"] = {
            "algorithm": {"name": "fedbuff"},
            "mode": "async",
            "async": {"buffer": 100, "pause": f"{pause_s:.0f}s"},
        }
        changes["eval"] = {"every": "1h"}
    return changes


def _engine_yaml(n: int, hours: int, churn: str, world: str, trace: Path | None = None) -> dict:
    data = engine_scenario(n, hours, churn, world, trace)
    data["devices"][0].update(data.pop("devices_update", {}))
    return data


def engine(args, tmp: Path) -> dict:
    sizes, hours = ENGINE_RUNS[args.quick]
    if args.engine_sizes:
        sizes = tuple(int(float(n)) for n in args.engine_sizes.split(","))
    if args.engine_max:
        sizes = (*sizes, args.engine_max)
    results: dict = {}
    busy = quiet_check()
    for world in args.engine_worlds.split(","):
        results[world] = _engine_world(args, tmp, world, sizes, hours, busy)
    return {
        "churn": args.churn,
        "hours": hours,
        "others_busy_cores": busy,
        "by_world": results,
        "scenarios": {w: _engine_yaml(sizes[0], hours, args.churn, w) for w in ENGINE_WORLDS},
    }


def _engine_world(args, tmp: Path, world: str, sizes: tuple, hours: int, busy: float) -> dict:
    paths, trace = {}, None
    if world == "trace":  # one trace of TRACE_CLIENTS clients, replayed by every size
        sys.path.insert(0, str(BENCH))
        from make_fedscale_trace import make_trace

        trace = tmp / "trace.pkl"
        if not trace.exists():
            clients = make_trace(TRACE_CLIENTS, finish=6 * 86_400.0, online=20 * 60.0, offline=2 * 3600.0)
            trace.write_bytes(pickle.dumps(clients, protocol=pickle.HIGHEST_PROTOCOL))
    for n in sizes:
        paths[n] = tmp / f"engine-{world}-{n}.yaml"
        paths[n].write_text(yaml.safe_dump(_engine_yaml(n, hours, args.churn, world, trace), sort_keys=False))
    check = run([NETFL, "validate", str(paths[sizes[0]])])
    if check.returncode != 0:
        print(f"\n(engine: this netfl does not accept the {world} scenario; skipped)\n{check.stderr.strip()}")
        return {"skipped": check.stderr.strip()}
    results, rows = {}, []
    for n in sizes:
        out = tmp / f"engine-{world}-{n}"
        r = run(simulate(paths[n], out, threads=1), timeout_s=args.engine_timeout)
        if r.timed_out:
            results[n] = {**r.record()}
            rows.append([n, f">{args.engine_timeout:.0f}", "timed out", None, None, None, None])
            shutil.rmtree(out, ignore_errors=True)
            continue
        r.ok()
        s = summary(out)
        results[n] = {
            **r.record(),
            "rounds": s["rounds"],
            "events": s["events"],
            "sim_time_s": s["sim_time_s"],
            "run_wall_s": s["wall_time_s"],
        }
        per_device = None
        if n != sizes[0] and sizes[0] in results and "events" in results[sizes[0]]:
            per_device = (r.maxrss_mb - results[sizes[0]]["maxrss_mb"]) * MB / (n - sizes[0])
            results[n]["rss_per_device_bytes"] = per_device
        rows.append([n, r.wall_s, s["rounds"], s["events"], s["events"] / r.wall_s, r.maxrss_mb, per_device])
    what = {
        "sync": "batteries, 100 participants per round started every 3 min",
        "phones": "nightly chargers and the owners' use (usage: phone), rounds as sync",
        "async": f"as phones, anarchic arrivals (FedBuff, buffer 100), about {ASYNC_JOBS_PER_DAY:,} jobs a day",
        "trace": f"as sync, availability replayed from a {TRACE_CLIENTS:,}-client FedScale-format trace "
        "(device n replays client n mod its clients)",
    }[world]
    table(
        f"engine, {world}: {args.churn} availability, {what}, {hours} simulated hours; whole job "
        f"(netfl simulate, 1 thread), one run each (others busy {busy:.1f} cores)",
        ["devices", "wall s", "rounds", "events", "events/s", "peak RSS MB", "RSS B/device"],
        rows,
    )
    print(f"   RSS per device: (peak RSS - the {sizes[0]:,}-device run's) / the extra devices")
    return results


# ------------------------------------------------------------------ main


def environment() -> dict:
    env = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "mem_gib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
        "torch": importlib.metadata.version("torch"),
        "netfl": importlib.metadata.version("netfl-sim"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    if FLOWER_PYTHON.exists():
        versions = subprocess.run(
            [
                str(FLOWER_PYTHON),
                "-c",
                "import importlib.metadata as m; print(m.version('flwr'), m.version('ray'), m.version('torch'))",
            ],
            capture_output=True,
            text=True,
        ).stdout.split()
        env.update(zip(("flwr", "ray", "flower_torch"), versions))
    return env


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections of {','.join(SECTIONS)}")
    parser.add_argument("--quick", action="store_true", help="a short smoke run (fewer rounds, sizes, repeats)")
    parser.add_argument("--repeat", type=int, help="runs per measurement, alternated [default: 3; --quick: 1]")
    parser.add_argument(
        "--engine-worlds",
        default=",".join(ENGINE_WORLDS),
        help=f"engine section: the worlds to measure [default: {','.join(ENGINE_WORLDS)}]",
    )
    parser.add_argument(
        "--engine-max",
        type=int,
        default=0,
        help="engine section: also this many devices (e.g. 10000000) [default: none]",
    )
    parser.add_argument(
        "--engine-sizes",
        default="",
        help="engine section: the sizes to measure, comma-separated (e.g. 10000,100000) [default: 10^4, 10^5, 10^6]",
    )
    parser.add_argument(
        "--churn",
        choices=("diurnal", "sessions"),
        default="diurnal",
        help="engine section: availability of the phones [default: diurnal]",
    )
    parser.add_argument(
        "--engine-timeout",
        type=float,
        default=3 * 3600,
        help="engine section: seconds before a run is stopped [default: 3 hours]",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=BENCH / "results" / "speed.json",
        help="where to write every figure [default: benchmarks/results/speed.json]",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        help="where netfl and the plain loop train in the workload sections: cpu, or cuda on a machine with a GPU "
        "(Flower and the other sections stay on the CPU)",
    )
    args = parser.parse_args()
    args.repeat = args.repeat or (1 if args.quick else 3)
    if args.device != "cpu":
        check = subprocess.run([PYTHON, "-c", f"import torch; torch.zeros(1, device={args.device!r})"],
                               capture_output=True, text=True)  # fmt: skip
        if check.returncode:
            parser.error(
                f"--device {args.device}: this torch cannot use it here ({check.stderr.strip().splitlines()[-1]})"
            )
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(only) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {', '.join(sorted(unknown))}; choose from {', '.join(SECTIONS)}")
    env = environment()
    print(
        f"netfl {env['netfl']}, torch {env['torch']}, Python {env['python']}, {env['cpus']} CPUs, "
        f"{env['mem_gib']:.0f} GiB"
        + (f"; Flower {env['flwr']} (ray {env['ray']})" if "flwr" in env else "")
        + ("; quick smoke run, figures not for the README" if args.quick else "")
    )
    report = {"environment": env, "quick": args.quick, "repeat": args.repeat, "sections": {}}
    with tempfile.TemporaryDirectory(prefix="netfl-speed-") as tmp:
        for name in (s for s in SECTIONS if s in only):
            started = time.perf_counter()
            try:
                report["sections"][name] = globals()[name](args, Path(tmp))
            except Exception as exc:  # one broken section must not lose the others' figures
                traceback.print_exc()
                print(f"\n(section {name} failed: {exc})")
                report["sections"][name] = {"error": str(exc)}
            report["sections"][name]["section_wall_s"] = time.perf_counter() - started
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1, default=str))
    print(f"\nall figures: {args.json}")


if __name__ == "__main__":
    main()
