"""Write a FedScale-format device-behaviour trace of many clients, to replay at array scale.

    python benchmarks/make_fedscale_trace.py OUT.pkl [--clients 100000] [--days 6] [--seed 0]
                                             [--online 20min] [--offline 2h]

The file is the pickled dict that FedScale's ``client_behave_trace`` holds and
netfl's ``fedscale_trace`` policy reads (:mod:`netfl.policies.traces`):
``client id -> {'duration', 'active': [s, ...], 'inactive': [s, ...],
'finish_time', 'model'}``. Each client alternates online and offline
stretches with lognormal lengths (medians ``--online`` and ``--offline``,
log-spread 1: most sessions short, a few long, as in measured device traces),
starting at a random point of its cycle, over ``finish_time`` = ``--days``
days (FedScale's own trace: 6 days, 518400 s), after which FedScale and
netfl repeat it. Everything is drawn from one numpy generator seeded by
``--seed``. With the defaults a client has about 38 online stretches and the
file is some 73 MB; netfl holds it as about 7 MB of arrays per 10^4 clients
(8 bytes per interval bound), after reading the pickle once (some 700 MB
while it is read: a pickle can only be read whole).

To replay it, point a device group at it (the path relative to the topology)
and ask for the array form of the engine, e.g.::

    devices:
      - group: phones
        count: 100000
        availability: {policy: fedscale_trace, file: trace.pkl, trust_pickle: true}
    engine: {devices: lazy}

(start from topologies/million-phones.yaml for the rest). ``trust_pickle``
is the opt-in to unpickle: only for a file you made or trust.
"""

from __future__ import annotations

import argparse
import pickle
from pathlib import Path

import numpy as np

from netfl.units import parse_quantity


def make_trace(
    clients: int, *, finish: float, online: float, offline: float, seed: int = 0, spread: float = 1.0
) -> dict[int, dict]:
    """``clients`` clients (ids 0 to clients - 1) alternating online and offline over ``[0, finish)``, with
    lognormal stretches of medians ``online`` and ``offline`` seconds and log-spread ``spread``."""
    rng = np.random.default_rng(seed)
    cycle = (online + offline) * np.exp(spread**2 / 2)  # the mean of a lognormal is its median times e^(s^2/2)
    pairs = int(np.ceil(2 * finish / cycle)) + 8  # drawn per client: enough to pass finish, almost surely
    out: dict[int, dict] = {}
    for first in range(0, clients, 10_000):  # in blocks: memory stays that of 10^4 clients' draws
        n = min(10_000, clients - first)
        on = online * np.exp(spread * rng.standard_normal((n, pairs)))
        off = offline * np.exp(spread * rng.standard_normal((n, pairs)))
        steps = np.empty((n, 2 * pairs))
        steps[:, 0::2], steps[:, 1::2] = off, on
        steps[:, 0] *= rng.uniform(size=n)  # start part-way through an offline stretch
        bounds = np.cumsum(steps, axis=1)
        starts, ends = bounds[:, 0::2], np.minimum(bounds[:, 1::2], finish)
        for i in range(n):
            keep = starts[i] < finish
            out[first + i] = {
                "duration": float(np.sum(ends[i][keep] - starts[i][keep])),
                "active": starts[i][keep].tolist(),
                "inactive": ends[i][keep].tolist(),
                "finish_time": finish,
                "model": "synthetic",
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the pickle to write")
    parser.add_argument("--clients", type=int, default=100_000)
    parser.add_argument("--days", type=float, default=6.0, help="finish_time, in days (the trace's cycle)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--online", default="20min", help="median online stretch")
    parser.add_argument("--offline", default="2h", help="median offline stretch")
    args = parser.parse_args()
    trace = make_trace(
        args.clients,
        finish=args.days * 86400.0,
        online=parse_quantity(args.online, "time"),
        offline=parse_quantity(args.offline, "time"),
        seed=args.seed,
    )
    with open(args.out, "wb") as fh:
        pickle.dump(trace, fh, protocol=pickle.HIGHEST_PROTOCOL)
    intervals = sum(len(c["active"]) for c in trace.values())
    size = args.out.stat().st_size
    print(f"wrote {args.out}: {len(trace):,} clients, {intervals:,} online stretches, {size:,} bytes")


if __name__ == "__main__":
    main()
