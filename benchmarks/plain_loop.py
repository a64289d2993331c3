"""A workload as a plain per-client PyTorch loop: the baseline a researcher writes in an afternoon.

    python benchmarks/plain_loop.py [--workload w1|w2|resnet] [--clients 100] [--rounds R] [--threads 1]
                                    [--device cpu|cuda] [--test-samples N]

Prints one JSON line: final accuracy, wall time of the training rounds, client updates per second and, on a
GPU, the peak memory torch allocated. ``benchmarks/speed.py`` times the whole process.
"""

from __future__ import annotations

import json
import time

import torch
import torch._dynamo  # noqa: F401  torch.optim imports it at its first step (~1 s): not training, so not timed
import workloads as w


def main() -> None:
    args = w.arguments()
    torch.set_num_threads(args.threads)
    torch.manual_seed(w.SEED)
    device = torch.device(args.device)
    train_x, train_y, test_x, test_y = (torch.from_numpy(a).to(device) for a in w.load_fashion_mnist())
    parts = [torch.from_numpy(p).to(device) for p in w.iid_parts(len(train_y), args.clients)]
    data = [(train_x[p], train_y[p]) for p in parts]
    global_model = w.make_model(args.workload).to(device)
    local = w.make_model(args.workload).to(device)
    generator = torch.Generator().manual_seed(w.SEED)
    started = time.perf_counter()
    for _ in range(args.rounds):
        state = global_model.state_dict()
        total = {k: torch.zeros_like(v) for k, v in state.items()}
        for x, y in data:
            local.load_state_dict(state)
            w.local_train(local, x, y, generator)
            w.average_into(total, local.state_dict(), len(x) / len(train_y))
        global_model.load_state_dict(total)
    if device.type == "cuda":
        torch.cuda.synchronize()
    train_s = time.perf_counter() - started
    tested = slice(args.test_samples)
    out = {"accuracy": w.accuracy(global_model, test_x[tested], test_y[tested]), "train_s": train_s,
           "updates_per_s": args.clients * args.rounds / train_s}  # fmt: skip
    if device.type == "cuda":
        out["gpu_peak_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    print(json.dumps(out))


if __name__ == "__main__":
    main()
