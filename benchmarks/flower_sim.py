"""A workload with Flower's Simulation Engine (Ray-backed virtual clients): the Flower baseline.

Flower lives in its own virtualenv (not netfl's, not committed). From the
repository root, create it once with:

    python3 -m venv benchmarks/.venv-flower && benchmarks/.venv-flower/bin/pip install torch==2.13.0 "flwr[simulation]"

(torch must stay pinned to 2.13.0, the local CPU wheel; tested with flwr 1.42.0,
ray 2.55.1, torch 2.13.0+cpu.) Then run:

    benchmarks/.venv-flower/bin/python benchmarks/flower_sim.py [--workload w1|w2|resnet] [--clients 100]
        [--rounds R] [--threads 1]

Same workload and training code as ``plain_loop.py`` (``workloads``): a
ServerApp runs Flower's own message-based ``FedAvg`` (every client every
round, weighted by samples, no client-side evaluation) and evaluates the
global model centrally on the test set after the last round; a ClientApp does
``workloads.local_train`` on its IID part. Flower's defaults are kept for the
backend (``client_resources`` = 2 CPUs / 0 GPUs per client, so a 2-core
machine gets a pool of one Ray actor); ``--threads`` only sets
``torch.set_num_threads`` inside each actor (Ray would otherwise give torch
as many threads as the actor's CPUs).

The engine is started with ``flwr.simulation.run_simulation``, which flwr 1.41
marks deprecated in favour of ``flwr run``; but ``flwr run`` launches a
detached, long-lived ``flower-superlink`` daemon and runs the app from a
packaged project, which suits no single-process benchmark. Both drive the same
Simulation Engine (``flwr.server.superlink.fleet.vce`` with the Ray backend).

Prints one JSON line on stdout: final accuracy, ``train_s`` and client updates
per second. ``train_s`` runs from the moment the first ClientApp starts
training in round 1 (after its actor has loaded the data set once) to the end
of the last round's aggregation: the ServerApp sends round 1 at once, while
the Simulation Engine is still starting Ray and its actors, and that start-up
is left to the process's wall time. The per-round times and the train time
counted from the ServerApp's own start of round 1 go to stderr, as does
everything Flower and Ray print.
"""

from __future__ import annotations

import os
import sys

# No phoning home: Ray's usage stats and Flower's telemetry.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import workloads as w1  # noqa: E402
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402
from flwr.simulation import run_simulation  # noqa: E402

# ---------------------------------------------------------------- client side
# This module is imported (as ``flower_sim``, not ``__main__``) by every Ray
# actor, so the cache below lives once per actor process, the way Flower
# examples keep their federated dataset in a module-level global.

_train_data: tuple[torch.Tensor, torch.Tensor] | None = None
_parts: dict[int, list[torch.Tensor]] = {}


def client_data(partition_id: int, num_partitions: int) -> tuple[torch.Tensor, torch.Tensor]:
    global _train_data
    if _train_data is None:
        train_x, train_y, _, _ = w1.load_fashion_mnist()
        _train_data = (torch.from_numpy(train_x), torch.from_numpy(train_y))
    if num_partitions not in _parts:
        _parts[num_partitions] = [torch.from_numpy(p) for p in w1.iid_parts(len(_train_data[1]), num_partitions)]
    idx = _parts[num_partitions][partition_id]
    return _train_data[0][idx], _train_data[1][idx]


client_app = ClientApp()


@client_app.train()
def train(msg: Message, context: Context) -> Message:
    config = msg.content["config"]
    threads = int(config["threads"])
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    pid = int(context.node_config["partition-id"])
    x, y = client_data(pid, int(context.node_config["num-partitions"]))
    started_at = time.time()  # after the (once per actor) data load, like the plain loop's setup
    model = w1.make_model(str(config["workload"]))
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    # One seeded stream per (round, client): clients run in whichever actor is
    # free, so the plain loop's single shared generator cannot be reproduced.
    generator = torch.Generator().manual_seed(w1.SEED * 1_000_003 + int(config["server-round"]) * 10_007 + pid)
    w1.local_train(model, x, y, generator)
    content = RecordDict(
        {
            "arrays": ArrayRecord(model.state_dict()),
            "metrics": MetricRecord({"num-examples": len(x), "started-at": started_at}),
        }
    )
    return Message(content=content, reply_to=msg)


# ---------------------------------------------------------------- server side


def first_start(records: list[RecordDict], weighting_key: str) -> MetricRecord:
    """Train-metrics aggregation: when the round's first client started training."""
    return MetricRecord({"started-at": min(float(m["started-at"]) for r in records for m in r.metric_records.values())})


def make_server_app(args: argparse.Namespace, out: dict) -> ServerApp:
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        torch.set_num_threads(args.threads)
        torch.manual_seed(w1.SEED)
        global_model = w1.make_model(args.workload)
        _, _, test_x, test_y = w1.load_fashion_mnist()
        test_x, test_y = torch.from_numpy(test_x), torch.from_numpy(test_y)
        marks: list[float] = []

        def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
            # FedAvg.start calls this just before round 1 and after every round.
            marks.append(time.time())
            if server_round < args.rounds:
                return None
            global_model.load_state_dict(arrays.to_torch_state_dict())
            out["accuracy"] = w1.accuracy(global_model, test_x, test_y)
            return MetricRecord({"accuracy": out["accuracy"]})

        strategy = FedAvg(
            fraction_train=1.0,
            fraction_evaluate=0.0,
            min_available_nodes=args.clients,
            train_metrics_aggr_fn=first_start,
        )
        result = strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord(global_model.state_dict()),
            num_rounds=args.rounds,
            train_config=ConfigRecord({"threads": args.threads, "workload": args.workload}),
            evaluate_fn=evaluate,
        )
        # Round 1 starts when its first ClientApp starts training: the ServerApp
        # sends round 1 at once, while the Simulation Engine is still starting
        # Ray and its actors (that start-up is in the process's wall time).
        first = float(result.train_metrics_clientapp[1]["started-at"])
        out["train_s"] = marks[-1] - first
        rounds = [round(b - a, 3) for a, b in zip(marks, marks[1:])]
        print(
            f"flower_sim: round times seen by the ServerApp (s): {rounds}; "
            f"round 1 minus engine start-up: {marks[1] - first:.3f}; "
            f"rounds from the ServerApp's start of round 1: {marks[-1] - marks[0]:.3f}",
            file=sys.stderr,
        )

    return server_app


def main() -> None:
    args = w1.arguments()
    # Keep stdout for the JSON line only: everything else (Flower's logger,
    # Ray's driver and forwarded actor output) goes to stderr.
    sys.stdout.flush()
    json_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    out: dict = {}
    run_simulation(server_app=make_server_app(args, out), client_app=client_app, num_supernodes=args.clients)
    if "accuracy" not in out:
        sys.exit("flower_sim: the simulation ended without a final evaluation")
    json_out.write(
        json.dumps(
            {
                "accuracy": out["accuracy"],
                "train_s": out["train_s"],
                "updates_per_s": args.clients * args.rounds / out["train_s"],
            }
        )
        + "\n"
    )
    json_out.flush()


if __name__ == "__main__":
    # Run as the importable module ``flower_sim`` so that Ray pickles the
    # ClientApp's functions by reference and the actors import this file.
    import flower_sim

    flower_sim.main()
