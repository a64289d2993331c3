"""A text workload as a plain per-client PyTorch loop: the baseline of benchmarks/speed.py's text section.

    python benchmarks/plain_text_loop.py --workload char-lstm|gru|transformer|bag|bag-10 [--rounds R] [--threads 1]

The same per-client work as netfl's run of the workload (benchmarks/workloads.py, ``TEXT``): every client every
round its local SGD steps from the global model, FedAvg weighted by samples, test accuracy at the end. Prints
one JSON line: accuracy, wall time of the training rounds, client updates per second.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch._dynamo  # noqa: F401  torch.optim imports it at its first step (~1 s): not training, so not timed
import user_text
import workloads as w


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", choices=tuple(w.TEXT), required=True)
    parser.add_argument("--rounds", type=int, default=w.TEXT_ROUNDS)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(w.SEED)
    model_name, _, steps, batch, lr = w.TEXT[args.workload]
    arrays = {k: torch.from_numpy(v) for k, v in w.text_arrays(args.workload).items()}
    classes = int(arrays["num_classes"])
    data = [(arrays["x"][arrays["client"] == c], arrays["y"][arrays["client"] == c]) for c in range(w.TEXT_CLIENTS)]
    make = getattr(user_text, model_name)
    global_model, local = make(classes), make(classes)
    generator = torch.Generator().manual_seed(w.SEED)
    total_samples = sum(len(y) for _, y in data)
    started = time.perf_counter()
    for _ in range(args.rounds):
        state = global_model.state_dict()
        total = {k: torch.zeros_like(v) for k, v in state.items()}
        for x, y in data:
            local.load_state_dict(state)
            w.text_local_train(local, x, y, generator, steps, batch, lr)
            w.average_into(total, local.state_dict(), len(x) / total_samples)
        global_model.load_state_dict(total)
    train_s = time.perf_counter() - started
    out = {"accuracy": w.accuracy(global_model, arrays["x_test"], arrays["y_test"]), "train_s": train_s,
           "updates_per_s": w.TEXT_CLIENTS * args.rounds / train_s}  # fmt: skip
    print(json.dumps(out))


if __name__ == "__main__":
    main()
