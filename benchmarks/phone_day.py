"""A day of phones: the battery levels at 21:00, the owners' hours of use and the dropouts (issue 37).

2 000 phones of topologies/million-phones.yaml with a nightly charger (22:00-07:00, give or take an hour, as
topologies/ten-million-phones.yaml) and ``usage: phone``: one run to 21:00 (the levels before the evening
plug-in), one to 24:00 (hours of use a day, dropouts, emptied batteries). Prints the distributions; run by hand:

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/phone_day.py [--phones 2000] [--set KEY=VALUE ...]

``--set`` changes the group's mapping (``--set battery.health=1.0`` to see the world without fade).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import yaml  # noqa: E402

import netfl  # noqa: E402

TOPOLOGY = Path(__file__).resolve().parent.parent / "topologies" / "million-phones.yaml"
CHARGER = {"policy": "daily", "start": "22:00", "end": "07:00", "jitter": "1h"}


def world(phones: int, hours: int, sets: list[str]) -> dict:
    scenario = yaml.safe_load(TOPOLOGY.read_text())
    group = scenario["devices"][0]
    group["count"] = phones
    group["battery"]["charging"] = dict(CHARGER)
    group["usage"] = "phone"
    for item in sets:
        key, value = item.split("=", 1)
        *path, last = key.split(".")
        place = group
        for name in path:
            place = place.setdefault(name, {})
        place[last] = yaml.safe_load(value)
    scenario["stop"] = {"sim_time": f"{hours}h"}
    scenario["eval"] = {"every": "1000 rounds"}
    return scenario


def quantiles(values: np.ndarray, qs=(0.1, 0.5, 0.9)) -> str:
    return ", ".join(f"p{round(q * 100)} {np.quantile(values, q):.3g}" for q in qs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phones", type=int, default=2000)
    parser.add_argument("--set", action="append", default=[], dest="sets", metavar="KEY=VALUE")
    args = parser.parse_args()
    started = time.perf_counter()
    evening = netfl.run(world(args.phones, 21, args.sets))
    day = netfl.run(world(args.phones, 24, args.sets))
    level = evening.devices["battery_fraction"].to_numpy()
    power = 2.0 if "usage.power" not in " ".join(args.sets) else None
    use_j = day.devices["energy_use_j"].to_numpy()
    events = day.events
    jobs = int((events["kind"] == "train_start").sum()) if "kind" in events else 0
    dropouts = events[events["kind"] == "dropout"] if "kind" in events else events.iloc[:0]
    print(f"{args.phones} phones of {TOPOLOGY.name}, charger {CHARGER}, usage: phone, {' '.join(args.sets)}")
    print(f"battery at 21:00: mean {level.mean():.1%}, {quantiles(level)}, min {level.min():.1%}")
    for floor in (0.1, 0.2, 0.3):
        print(f"  below {floor:.0%}: {(level < floor).mean():.1%} of phones")
    if power is not None:
        hours = use_j / power / 3600
        print(f"use a day: mean {hours.mean():.2f} h, {quantiles(hours)} h")
    print(f"battery_empty in the day: {int(day.devices['battery_empty'].sum())} phones")
    print(f"dropouts: {len(dropouts)} of {jobs} jobs started; causes: {dict(dropouts['cause'].value_counts())}")
    print(f"(ran in {time.perf_counter() - started:.0f} s; load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    sys.exit(main())
