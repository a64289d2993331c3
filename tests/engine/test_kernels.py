"""The compiled per-change step and draws (netfl/kernels/) give the results of the numpy steps they replace.

The worlds below were run with main's vectorised numpy step (recorded from main at 0182266, the numpy
implementation, with fleet-owners' per-device parameters) and their event logs and per-device totals hashed;
the compiled step must give the same bytes: a phones' day (diurnal availability, nightly chargers, the owners'
use), the same with daily windows, asynchronous arrivals, a FedScale-format trace, ``eligible`` on the charger
with a user's population policy (draws in Python, flips handed back), sessions in the actor form (a device's
policy a row of its model), and a fleet whose devices differ (time zones drawn per device for availability and
chargers, light and heavy users' rate and length scales for diurnal and sessions, faded batteries). The draws
are also compared element by element with :mod:`netfl.keyed_random`'s. Hashes of floats hold where numpy's
float64 exp, log, log1p and cos call the C library, as the kernels do (x86 without AVX-512, as the machine
they were recorded on; see netfl/kernels/__init__.py). Where numpy takes its own SIMD paths for them instead
(AVX-512: other last bits), those two tests run in a child process with those paths disabled
(``NPY_DISABLE_CPU_FEATURES``), so that they check the same arithmetic on every machine.
"""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from engine_support import events, group, scenario
from test_idle_events import DAY_POLICIES, day
from test_one_world import CHARGERS, POLICIES, USE, asynchronous, fedscale_trace, run, user_policy, world

from netfl import keyed_random
from netfl.sim.idle_events import KINDS
from netfl.sim.idle_rows import IdleRows


def _numpy_calls_the_c_library() -> bool:
    """Whether numpy's float64 log1p, log, exp and cos give the C library's bits here (the kernels call it)."""
    x = np.linspace(1e-3, 0.999, 2001)
    return all(
        (ufunc(x) == np.array([scalar(v) for v in x])).all()
        for ufunc, scalar in ((np.log1p, math.log1p), (np.log, math.log), (np.exp, math.exp), (np.cos, math.cos))
    )


try:
    from numpy._core._multiarray_umath import __cpu_dispatch__
except ImportError:  # numpy 1.x
    from numpy.core._multiarray_umath import __cpu_dispatch__

LIBM = _numpy_calls_the_c_library()
#: numpy's dispatch targets whose float64 transcendental functions are its own (AVX-512), disabled in the child
SIMD_PATHS = [f for f in __cpu_dispatch__ if "AVX512" in f or f == "X86_V4"]
needs_libm = pytest.mark.skipif(not LIBM, reason="numpy's own SIMD paths here: run in a child process without them")


def digest(sim, result) -> str:
    """The event log (every field of every row) and each device's totals, hashed."""
    h = hashlib.sha256()
    for e in events(sim):
        h.update(repr((e.time, e.round, e.device, e.kind, e.detail, sorted(e.values.items()))).encode())
    stats = result.stats
    columns = [stats.tasks_started, stats.online_time_s, stats.charged_j, stats.battery_fraction, stats.battery_empty]
    for column in columns + [stats.energy_by_activity_j[k] for k in sorted(stats.energy_by_activity_j)]:
        h.update(np.ascontiguousarray(column).tobytes())
    return h.hexdigest()[:16]


def fleet() -> object:
    """Phones that differ device by device: their time zones (availability and charger), how often and how long
    they are used and online (rate and length scales), their batteries' health; sessions scaled per device too."""
    zones = {"choice": {"values": ["-5h", "0h", "1h", "8h"], "weights": [3, 2, 2, 1]}}
    diurnal = {
        "policy": "diurnal",
        "mixing": "15min",
        "time_zone_offset": zones,
        "rate_scale": {"lognormal": {"median": 1.0, "sigma": 0.5}},
        "length_scale": {"choice": [0.5, 1.0, 2.0]},
    }
    nights = {"policy": "daily", "start": "22:00", "end": "07:00", "jitter": "1h", "time_zone_offset": zones}
    battery = {
        "capacity": "20kJ",
        "health": {"uniform": [0.6, 1.0]},
        "initial": {"uniform": [0.05, 0.6]},
        "min_level": "30%",
        "charging": nights,
        "charge_power": 1.0,
    }
    phones = group("phones", 24, flops=2e9, up=2e6, power={"idle": 0.1}, battery=battery, availability=diurnal)
    phones["usage"] = "phone"
    sessions = {
        "policy": "sessions",
        "on": {"exponential": {"mean": "1h"}},
        "off": {"lognormal": {"median": "2h", "sigma": 0.5}},
        "rate_scale": {"uniform": [0.5, 2.0]},
        "length_scale": {"choice": [1.0, 3.0]},
    }
    tablets = group(
        "tablets", 12, flops=1e9, up=1e6, battery={"capacity": "30kJ", "health": 0.8}, availability=sessions
    )
    return scenario(
        [phones, tablets],
        stop={"sim_time": 86_400.0},
        round={"participants": 4, "deadline": 60.0, "interval": 1200.0},
    )


def worlds(tmp_path: Path) -> dict:
    eligible = {**POLICIES["eligible"], "charging": True, "idle": user_policy("Flicker")(tmp_path)}
    return {
        "phones": (day(DAY_POLICIES["diurnal"], count=20), "arrays"),
        "daily": (day(DAY_POLICIES["daily"], count=20), "arrays"),
        "async": (asynchronous(day(DAY_POLICIES["diurnal"], count=20), "900s", 5, 21_600.0), "arrays"),
        "trace": (
            world(fedscale_trace(tmp_path), count=40, rounds=30, charging=CHARGERS["daily"], usage=USE),
            "arrays",
        ),
        "eligible": (world(eligible, count=40, rounds=40, charging=CHARGERS["sessions"], usage=USE), "arrays"),
        "sessions actors": (world(POLICIES["sessions"], count=40, rounds=40, charging=CHARGERS["daily"]), "actors"),
        "fleet": (fleet(), "arrays"),
        "fleet actors": (fleet(), "actors"),
    }


#: The digests of main's numpy step (main at 0182266, tests/engine/test_kernels.py run there), world by world.
BEFORE = {
    "phones": "5533300d29f29465",
    "daily": "908b5da7a675cbb4",
    "async": "c1c0e98e4c339881",
    "trace": "f4f8cdbd56f96bc1",
    "eligible": "ac0fbc48ac0d3f6e",
    "sessions actors": "855bcb8134049721",
    "fleet": "69ef37767ec99e45",
    "fleet actors": "be8aa557c487b9b2",
}


@needs_libm
@pytest.mark.parametrize("name", list(BEFORE))
def test_the_compiled_step_gives_the_numpy_steps_results_to_the_bit(name: str, tmp_path: Path, monkeypatch) -> None:
    sc, form = worlds(tmp_path)[name]
    sim, result = run(sc, form, True)
    assert digest(sim, result) == BEFORE[name]
    monkeypatch.setattr(IdleRows, "ROWS_PER_STEP", 7)  # many calls, stops handed back between them
    monkeypatch.setattr(IdleRows, "EVENT_BUFFER", 16)  # and a buffer of events that fills at every other change
    sim, result = run(sc, form, True)
    assert digest(sim, result) == BEFORE[name]


@needs_libm
def test_the_compiled_draws_are_keyed_randoms() -> None:
    from netfl.kernels import keyed

    rng = np.random.default_rng(5)
    keys = [0, 1, 2**63 + 12345, 2**64 - 1, int(rng.integers(2**62))]
    devices, draws = rng.integers(0, 10**7, 200), rng.integers(0, 2**32, 200)
    for key in keys:
        bits = keyed_random.bits(key, devices, draws)
        uniform = keyed_random.uniform(key, devices, draws)
        normal = keyed_random.standard_normal(key, devices, draws)
        for i, (d, k) in enumerate(zip(devices, draws)):
            args = np.uint64(key), np.uint64(d), np.uint64(k)
            assert keyed.bits(*args) == bits[i]
            assert keyed.uniform(*args) == uniform[i]
            assert keyed.standard_normal(*args) == normal[i]


@pytest.mark.slow
@pytest.mark.skipif(LIBM, reason="numpy calls the C library here: the tests above ran in this process")
def test_the_bits_hold_with_numpys_own_simd_paths_disabled() -> None:
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": " ".join(SIMD_PATHS)}
    args = ["-q", "-p", "no:cacheprovider", "-n", "0", "-k", "to_the_bit or keyed_randoms", __file__]
    out = subprocess.run([sys.executable, "-m", "pytest", *args], env=env, capture_output=True, text=True)
    expected = f"{len(BEFORE) + 1} passed"
    assert out.returncode == 0 and expected in out.stdout, out.stdout[-4000:] + out.stderr[-2000:]


def test_the_step_logs_the_event_codes_of_the_log() -> None:
    from netfl.kernels import idle_step

    names = ("ONLINE", "OFFLINE", "BATTERY_EMPTY", "POWER_ON", "CHARGE_START", "CHARGE_STOP", "BELOW_MIN_LEVEL")
    names += ("ABOVE_MIN_LEVEL", "BATTERY_FULL", "USE_START", "USE_END")
    assert [getattr(idle_step, name) for name in names] == list(range(len(KINDS)))
    assert [name.lower() for name in names] == list(KINDS)


if __name__ == "__main__":  # print the digests (run on the tree to compare with)
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for name, (sc, form) in worlds(Path(tmp)).items():
            print(f"    {name!r}: {digest(*run(sc, form, True))!r},", flush=True)
    sys.exit(0)


def test_the_compiled_eligibility_is_below_min_s() -> None:
    """The round's check of every device, compiled, against the battery's closed form written out here: idle,
    online, on, not in use (where use excludes training) and not below min_level -- at it exactly only while
    charging or still -- over random states with levels placed on the threshold, some batteries following logged
    levels (a dead one draws nothing, a logged rise still charges it)."""
    from netfl.kernels import idle_step

    rng = np.random.default_rng(5)
    n, now = 4000, 500.0
    capacity = rng.choice([1000.0, 2000.0], n)
    min_level = rng.choice([0.0, 0.2, 0.3], n)
    finite = rng.random(n) < 0.9
    idle_w, use_w, charge_w = rng.choice([0.0, 0.1], n), np.full(n, 2.0), rng.choice([0.5, 3.0], n)
    alive, charging, using = (rng.random(n) < p for p in (0.9, 0.3, 0.3))
    online, busy = rng.random(n) < 0.7, rng.random(n) < 0.1
    since = rng.uniform(0.0, now, n)
    logged = rng.choice([0.0, 0.4, -0.7], n)  # a battery's logged levels: falling, rising, or none
    drain = alive * idle_w + using * use_w - charging * charge_w + np.where(alive | (logged < 0), logged, 0.0)
    threshold = min_level * np.where(finite, capacity, 0.0)
    level = rng.uniform(0.0, capacity)
    on_it = rng.random(n) < 0.3  # at the threshold at now exactly: the tie the actor's watch breaks by the drain
    level[on_it] = threshold[on_it] + drain[on_it] * (now - since[on_it])
    f8 = np.zeros(n)
    state = (level, since, alive, charging, using, f8, f8, f8, busy, online, f8, f8, f8, f8, busy)
    levels = (logged, np.full(n, np.inf), np.zeros(n, dtype=np.int64), np.zeros(n + 1, dtype=np.int64), f8, f8)
    columns = (idle_w, charge_w, capacity, min_level, use_w, finite, levels)
    at = np.clip(level - drain * (now - since), 0.0, capacity)
    below = (min_level > 0) & finite & ((at < threshold) | ((at == threshold) & (drain > 0)))
    for exclude_using in (False, True):
        expected = online & alive & ~busy & ~(exclude_using & using) & ~below
        out = np.empty(n, dtype=np.int64)
        found = idle_step.eligible_rows(state, columns, 0, n, exclude_using, now, out)
        assert found == expected.sum() and (out[:found] == np.flatnonzero(expected)).all()
        assert ((at == threshold) & expected & (min_level > 0) & finite).any()  # the tie is tested, both ways
        assert ((at == threshold) & ~expected & online & alive & ~busy).any()
        part = idle_step.eligible_rows(state, columns, 1000, 3000, exclude_using, now, out)
        assert (out[:part] == np.flatnonzero(expected[1000:3000]) + 1000).all()
