"""Partial work at the deadline: a device that would miss it trains the local steps that fit, from its speed, the
FLOPs of a step, the time left after its download and its upload at the link's rate -- on timelines by hand."""

from __future__ import annotations

from engine_support import FakeBackend, approx, events, group, network_scenario, run_network, scenario, simulate

from netfl.backend import Work
from netfl.sim.device import Deadline

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
    assert {d: (e.values.get("steps"), e.values.get("asked_steps"), e.values["flops"]) for d, e in starts.items()} == {
        0: (4, 10, 1e9),
        1: (2, 10, 5e8),
        2: (None, None, 2.5e9),
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


def test_a_device_plans_with_the_throughput_its_last_upload_achieved() -> None:
    """Two devices share one 1 Mbit/s TDMA uplink. Device 0 (2 GFLOP/s) trains 2.5 GFLOP in 1.25 s and sends from
    3.25 s to 5.25 s; device 1 (1 GFLOP/s) finishes at 4.5 s and waits for it: its 2 Mbit took 5.25 to 7.25 s of
    sending after 0.75 s of waiting, 2.75 s in all, 0.727 Mbit/s. That is what it plans with next: a 2.75 s upload."""
    sc = network_scenario(
        [
            {
                "group": f"g{i}",
                "count": 1,
                "compute": {"flops_per_s": f},
                "link": {"to": "ap", "channel": {"kind": "awgn", "distance_m": 10, "rate": 1e6}},
            }
            for i, f in enumerate((2e9, 1e9))
        ],
        network={
            "nodes": {"ap": {"kind": "access_point", "medium": {"kind": "tdma"}, "downlink": 1e6}},
            "links": [{"from": "ap", "to": "server", "rate": 1e12}],
        },
        server={"round": {"deadline": 60, "partial_work": True}},
        stop={"rounds": 1},
    )
    backend = FakeBackend(steps=10)
    sim, _ = run_network(sc, backend)
    sends = {(e.kind, e.device): e.time for e in events(sim) if e.kind in ("upload_start", "upload_end")}
    hop = 2e6 / 1e12  # the broadcast's wired hop
    assert sends[("upload_start", 1)] == approx(2 + hop + 2.5)
    assert sends[("upload_end", 1)] == approx(2 + hop + 1.25 + 4)  # after device 0's 2 s
    device = sim.devices[1]
    assert device.upload_bps == approx(2e6 / 2.75)
    # planning now, 1 s before a deadline 10 s away (nothing on the wired hop's way back): 2.75 s to send, so
    # 7.25 s of steps of 0.25 s: 28 of them, and 40 would not fit
    work = Work(1, 99, 250_000, 1e10, 250_000, steps=40)
    assert device._steps_in_time(work, Deadline(sim.env.now + 10.0, backend.cut)) == 28
    assert sim.devices[0].upload_bps == approx(1e6)


def test_a_margin_plans_the_upload_longer() -> None:
    """Deadline 5.6 s. Without a margin training may run to 3.6 s: 6, 3, 10 (all) and 1 steps. With partial_margin
    50% the 2 s upload is planned as 3 s, so training must end by 2.6 s, 0.6 s after the download: 2, 1 and 5 steps
    (6 would end exactly then), and none for device 3 (1.25 s a step)."""

    def cuts(margin: str) -> tuple[list, list]:
        sc = scenario(
            [group(f"g{i}", flops=f, up=1e6) for i, f in enumerate(SPEEDS)],
            stop={"rounds": 1},
            round={"deadline": 5.6, "partial_work": True, "partial_margin": margin},
        )
        backend = FakeBackend(steps=10)
        sim, _ = simulate(sc, backend)
        return backend.cuts, [e.device for e in events(sim, "dropout")]

    assert cuts("0%") == ([(0, 6), (1, 3), (3, 1)], [])
    assert cuts("50%") == ([(0, 2), (1, 1), (2, 5)], [3])


def shared_uplink(rounds: int, margin: str = "20%"):
    """Three identical devices (1 GFLOP/s, 40 steps of 0.25 GFLOP asked) behind one 1 Mbit/s TDMA uplink, a 12 s
    deadline: each plans the same 2 s upload (x 1.2), so all three start it at once and the medium serves one."""
    sc = network_scenario(
        [
            {
                "group": "phones",
                "count": 3,
                "compute": {"flops_per_s": 1e9},
                "link": {"to": "ap", "channel": {"kind": "awgn", "distance_m": 10, "rate": 1e6}},
            }
        ],
        network={
            "nodes": {"ap": {"kind": "access_point", "medium": {"kind": "tdma"}, "downlink": 1e6}},
            "links": [{"from": "ap", "to": "server", "rate": 1e12}],
        },
        server={"round": {"deadline": 12, "partial_work": True, "partial_margin": margin}},
        stop={"rounds": rounds},
    )
    backend = FakeBackend(flops=1e10, steps=40)
    return run_network(sc, backend)


def test_a_device_whose_upload_the_deadline_cut_is_on_time_in_the_next_round() -> None:
    """Round 1: downloads end at 2 s; each plans 2.4 s of upload, so trains 30 steps to 9.5 s and starts sending
    then; device 0 is served 9.5-11.5 s, devices 1 and 2 wait, and the deadline cuts them at 12 s, 2.5 s into
    their upload. They learn that sending takes more than 2.5 s and plan twice that, 5 s (x 1.2 = 6 s): in round 2
    (12-24 s, downloads to 14 s) they train 16 steps to 18 s and arrive at 20 and 22 s, in time. (Before, a cut
    upload taught nothing: the same two lost their work in every round.)"""
    sim, _ = shared_uplink(rounds=2)
    cut = [e for e in events(sim, "dropout") if e.round == 0]
    assert [(e.device, e.time, e.values["cause"]) for e in cut] == [
        (1, approx(12.0), "deadline"),
        (2, approx(12.0), "deadline"),
    ]
    hop = 2e6 / 1e12  # the broadcast's wired hop
    assert [e.time for e in events(sim, "upload_start") if e.round == 0] == [approx(9.5 + hop)] * 3
    second = {e.device: e for e in events(sim, "train_start") if e.round == 1}
    assert [second[d].values["steps"] for d in (1, 2)] == [16, 16]
    arrivals = {e.device: e.time for e in events(sim, "upload_end") if e.round == 1}
    assert arrivals[1] == approx(20.0 + hop) and arrivals[2] == approx(22.0 + hop)  # before the deadline at 24 s
    assert sim.devices[1].upload_bps == approx(1e6)  # and then measured again by the upload that completed


def test_the_back_off_after_a_cut_upload_is_twice_the_time_it_had() -> None:
    """One round: devices 1 and 2 had 2.5 s and did not finish: they plan 2 Mbit over 5 s, 0.4 Mbit/s; device 0,
    served first, measured 1 Mbit/s. A slower estimate than the back-off is kept."""
    sim, _ = shared_uplink(rounds=1)
    had = 12.0 - events(sim, "upload_start", device=1)[0].time
    assert had == approx(2.5 - 2e6 / 1e12)  # less the broadcast's wired hop
    assert [d.upload_bps for d in sim.devices] == [approx(1e6), approx(2e6 / (2 * had)), approx(2e6 / (2 * had))]
    device = sim.devices[1]
    device._upload_cut(2e6, 1.0)  # a shorter cut: 2 s would be quicker than the 5 s it already plans
    assert device.upload_bps == approx(2e6 / (2 * had))
    device._upload_cut(2e6, 0.0)  # cut the instant it began: nothing learned
    assert device.upload_bps == approx(2e6 / (2 * had))


def test_a_device_that_gives_up_plans_its_next_upload_faster_until_the_links_rate() -> None:
    """Giving up sends nothing and so measures nothing: each time, the device plans the next upload with twice the
    throughput, up to the link's nominal 1 Mbit/s (then it plans with the link again), so it tries once more
    instead of giving up in every later round. A device that never measured keeps planning with the link."""
    sim, _ = shared_uplink(rounds=1)
    device = sim.devices[1]
    backed_off = device.upload_bps
    assert backed_off < 0.5e6
    device._gave_up(2e6)
    assert device.upload_bps == approx(2 * backed_off)
    device._gave_up(2e6)  # 4 x 0.4 Mbit/s would pass the link's 1 Mbit/s
    assert device.upload_bps is None
    device._gave_up(2e6)
    assert device.upload_bps is None
