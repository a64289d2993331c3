"""Partial work at the deadline: a device that would miss it trains the local steps that fit, from its speed, the
FLOPs of a step, the time left after its download and its upload at the link's rate -- on timelines by hand."""

from __future__ import annotations

from engine_support import FakeBackend, approx, events, group, scenario, simulate

# 250 kB each way at 1 Mbit/s: 2 s down and 2 s up; 2.5 GFLOP in 10 steps of 0.25 GFLOP. Speeds 1, 0.5, 2.5 and
# 0.2 GFLOP/s: a step takes 0.25, 0.5, 0.1 and 1.25 s.
SPEEDS = [1e9, 0.5e9, 2.5e9, 0.2e9]


def run(deadline: float, latency: float = 0.0, partial: bool = True):
    sc = scenario(
        [group(f"g{i}", flops=f, up=1e6, latency=latency) for i, f in enumerate(SPEEDS)],
        stop={"rounds": 1},
        round={"deadline": deadline, "partial_work": partial},
    )
    backend = FakeBackend(steps=10)
    sim, result = simulate(sc, backend)
    return sim, backend, result


def test_each_device_trains_what_fits_before_the_deadline() -> None:
    """Deadline 5.1 s; downloads end at 2 s, so the last bit must leave by 3.1 s for a 2 s upload. Device 0: 4 steps
    (2 + 4 x 0.25 = 3.0 < 3.1); device 1: 2 steps of 0.5 s; device 2: all 10 (1 s); device 3: no 1.25 s step fits,
    so it stops at 2 s (dropout, cause deadline). Three updates arrive at 5.0 s."""
    sim, backend, result = run(5.1)
    assert backend.cuts == [(0, 4), (1, 2)]
    starts = {e.device: e for e in events(sim, "train_start")}
    assert {d: (e.detail, e.values["flops"]) for d, e in starts.items()} == {
        0: ("partial steps=4/10", 1e9),
        1: ("partial steps=2/10", 5e8),
        2: ("", 2.5e9),
    }
    ends = {e.device: e for e in events(sim, "train_end")}
    assert ends[0].time == approx(3.0) and ends[1].time == approx(3.0) and ends[2].time == approx(3.0)
    assert ends[0].values["energy_j"] == approx(2.0) and ends[1].values["energy_j"] == approx(2.0)  # 2 W x 1 s
    (dropout,) = events(sim, "dropout")
    assert (dropout.device, dropout.time, dropout.values["cause"]) == (3, approx(2.0), "deadline")
    assert [e.time for e in events(sim, "upload_end")] == [approx(5.0)] * 3
    assert sorted(backend.client_of(j) for j in backend.contexts[0].delivered) == [0, 1, 2]
    assert result.updates_received == 3 and result.updates_dropped == 1


def test_the_download_and_the_latency_after_the_last_bit_are_counted() -> None:
    """100 ms latency each way: the download ends at 2.1 s and the last bit must leave by 5.1 - 0.1 = 5.0 s, so
    training must end by 3.0 s: device 0 fits 3 steps (4 would end exactly at 3.0 and arrive at the deadline)."""
    sim, backend, _ = run(5.1, latency=0.1)
    assert backend.cuts[0] == (0, 3)
    arrivals = [e.time for e in events(sim, "upload_end") if e.device == 0]
    assert arrivals == [approx(2.1 + 0.75 + 2.0)]


def test_without_partial_work_the_slow_devices_are_stopped_at_the_deadline() -> None:
    sim, backend, result = run(5.1, partial=False)
    assert backend.cuts == [] and result.updates_received == 1  # only device 2 arrives
    assert {e.device for e in events(sim, "dropout")} == {0, 1, 3}
