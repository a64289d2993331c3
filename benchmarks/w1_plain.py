"""W1 as a plain per-client PyTorch loop: the baseline a researcher writes in an afternoon.

    python benchmarks/w1_plain.py [--clients 100] [--rounds 20] [--threads 1]

Prints one JSON line: final accuracy, wall time of the training rounds and
client updates per second. ``benchmarks/speed.py`` times the whole process.
"""

from __future__ import annotations

import json
import time

import torch
import torch._dynamo  # noqa: F401  torch.optim imports it at its first step (~1 s): not training, so not timed
import w1_common as w1


def main() -> None:
    args = w1.arguments()
    torch.set_num_threads(args.threads)
    torch.manual_seed(w1.SEED)
    train_x, train_y, test_x, test_y = (torch.from_numpy(a) for a in w1.load_fashion_mnist())
    parts = [torch.from_numpy(p) for p in w1.iid_parts(len(train_y), args.clients)]
    data = [(train_x[p], train_y[p]) for p in parts]
    global_model = w1.make_model()
    local = w1.make_model()
    generator = torch.Generator().manual_seed(w1.SEED)
    started = time.perf_counter()
    for _ in range(args.rounds):
        state = global_model.state_dict()
        total = {k: torch.zeros_like(v) for k, v in state.items()}
        for x, y in data:
            local.load_state_dict(state)
            w1.local_train(local, x, y, generator)
            for k, v in local.state_dict().items():
                total[k] += v * (len(x) / len(train_y))
        global_model.load_state_dict(total)
    train_s = time.perf_counter() - started
    print(
        json.dumps(
            {
                "accuracy": w1.accuracy(global_model, test_x, test_y),
                "train_s": train_s,
                "updates_per_s": args.clients * args.rounds / train_s,
            }
        )
    )


if __name__ == "__main__":
    main()
