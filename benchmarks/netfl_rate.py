"""A workload in netfl, timed in-process: the counterpart of ``plain_loop.py`` for the training rate.

    python benchmarks/netfl_rate.py [--workload w1|w2|resnet] [--clients 100] [--rounds R] [--threads 1]
                                    [--device cpu|cuda] [--test-samples N]

Builds the workload from ``benchmarks/<workload>.yaml`` (device count, rounds and participants
per round overridden to ``--clients``/``--rounds``), sets netfl's worker threads with
``use_threads`` and times ``sim.run()``. Prints one JSON line like
``plain_loop.py`` -- accuracy, ``train_s`` and client updates per second -- where,
as in the plain loop, ``train_s`` leaves out the test-set evaluations
(``sim.run()`` evaluates before the first round and after the last): it is
``run_s`` (all of ``sim.run()``) minus ``eval_s``. Also:

* ``outside_torch_share``: the share of ``run_s`` spent outside the learner's
  calls (plan_round, plan_after_probe, aggregate -- which trains the round's
  jobs -- and evaluate): the discrete-event engine and netfl's bookkeeping;
* ``import_build_s``: from the top of this script (before importing netfl and
  torch) to a built simulation (data loaded and split, devices made);
* ``rounds`` and ``events`` of the run, the training path and, on a GPU, the peak memory torch allocated.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import workloads as w  # noqa: E402
import yaml  # noqa: E402

from netfl.assemble import build_simulation  # noqa: E402
from netfl.config import scenario_from_dict  # noqa: E402
from netfl.learn.training.runtime import use_threads  # noqa: E402

BENCH = Path(__file__).resolve().parent


def workload_scenario(workload: str, clients: int, rounds: int, test_samples: int | None = None):
    source = BENCH / f"{workload}.yaml"
    data = yaml.safe_load(source.read_text())
    data["devices"][0]["count"] = clients
    data["stop"] = {"rounds": rounds}
    data["server"]["round"]["participants"] = clients
    data["eval"] = {"every": f"{rounds} rounds", **({"max_test_samples": test_samples} if test_samples else {})}
    return scenario_from_dict(data, source=str(source), base_dir=BENCH)


def time_learner_calls(learner, names=("plan_round", "plan_after_probe", "aggregate", "evaluate")) -> dict:
    """Wrap the learner's engine-facing methods (on the instance): wall seconds spent in each."""
    spent = dict.fromkeys(names, 0.0)

    def wrap(name, method):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - t0

        return timed

    for name in names:
        setattr(learner, name, wrap(name, getattr(learner, name)))
    return spent


def main() -> None:
    args = w.arguments()
    use_threads(args.threads)
    scenario = workload_scenario(args.workload, args.clients, args.rounds, args.test_samples)
    sim, learner = build_simulation(scenario, data_dir=w.FASHION_MNIST_DIR, device=args.device)
    import_build_s = time.perf_counter() - STARTED
    in_learner = time_learner_calls(learner)
    started = time.perf_counter()
    result = sim.run()
    run_s = time.perf_counter() - started
    train_s = run_s - in_learner["evaluate"]
    print(
        json.dumps(
            {
                "accuracy": result.metrics[-1].test_accuracy,
                "train_s": train_s,
                "updates_per_s": args.clients * result.rounds / train_s,
                "outside_torch_share": 1 - sum(in_learner.values()) / run_s,
                "run_s": run_s,
                "eval_s": in_learner["evaluate"],
                "import_build_s": import_build_s,
                "rounds": result.rounds,
                "events": len(result.recorder),
                "training": learner.tasks[0].trainer.describe(args.threads),
                "flops_per_update": learner.tasks[0].job_flops(0, learner.tasks[0].steps_of(0)),
                **({"gpu_peak_mb": _gpu_peak_mb(args.device)} if args.device.startswith("cuda") else {}),
            }
        )
    )


def _gpu_peak_mb(device: str) -> float:
    import torch

    return torch.cuda.max_memory_allocated(device) / 2**20


if __name__ == "__main__":
    main()
