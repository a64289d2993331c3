"""The device table follows from its declaration (netfl.registry.device_params.DEVICE_COLUMNS): each column is an
attribute of the table and of a device's profile, drawn from its own seeded stream or shared by its group."""

from __future__ import annotations

import math

import numpy as np
import pytest
from engine_support import network_scenario

from netfl.assemble import device_table
from netfl.config.schema import DeviceGroupSpec
from netfl.registry.device_params import DEVICE_COLUMNS
from netfl.rng import RandomStreams
from netfl.sim.device_table import COLUMNS, DeviceTable
from netfl.sim.network import Attachments

PHONES = {
    "group": "phones",
    "count": 5,
    "compute": {"flops_per_s": {"uniform": [1e9, 2e9]}},
    "power": {"compute": 3.0, "transmit": 0.4, "idle": 0.02},
    "battery": {"capacity": "10kJ", "initial": {"uniform": [0.2, 0.8]}, "min_level": "10%", "charge_power": 5.0},
    "link": {"uplink": {"uniform": [1e6, 4e6]}},  # no downlink: the uplink's rate both ways
}
BOARDS = {
    "group": "boards",
    "count": 3,
    "compute": {"flops_per_s": 5e8},
    "power": {"receive": 0.3},
    "link": {"to": "ap", "channel": {"distance_m": {"uniform": [10.0, 50.0]}}},
}
NETWORK = {
    "nodes": {"ap": {"kind": "access_point", "downlink": 2e7}},
    "links": [{"from": "ap", "to": "server", "rate": 1e9}],
}


def _table() -> tuple[DeviceTable, RandomStreams]:
    sc = network_scenario([PHONES, BOARDS], network=NETWORK, seed=3)
    return device_table(sc, RandomStreams(3)), RandomStreams(3)


def test_every_column_is_read_from_a_key_of_the_group() -> None:
    """Each key names a field (or a property) of a group's declaration, and a fraction's column comes before it."""
    wired = DeviceGroupSpec.model_validate({**PHONES, "link": {"uplink": 1e6, "downlink": 2e6}})
    wireless = DeviceGroupSpec.model_validate({**PHONES, "link": BOARDS["link"]})
    for i, column in enumerate(DEVICE_COLUMNS):
        values = []
        for value in (wired, wireless):
            for name in column.key.split("."):
                value = value if value is None else getattr(value, name)
            values.append(value)
        assert values != [None, None], column  # a fixed-rate link has no channel, a wireless one no uplink
        assert not column.of or column.of in COLUMNS[:i], column
    assert len(set(COLUMNS)) == len(COLUMNS)


def test_drawn_columns_come_from_their_streams_and_shared_ones_are_held_once() -> None:
    table, streams = _table()
    assert [*table.columns] == list(COLUMNS) and all(getattr(table, n) is table.columns[n] for n in COLUMNS)
    flops = np.random.default_rng(streams.seed_sequence("devices", "phones", "flops_per_s")).uniform(1e9, 2e9, 5)
    assert np.array_equal(table.flops_per_s[:5], flops) and np.all(table.flops_per_s[5:] == 5e8)
    initial = streams.numpy("devices", "phones", "battery_initial").uniform(0.2, 0.8, 5) * 10e3
    assert np.array_equal(table.initial_j[:5], initial)
    distance = streams.numpy("devices", "boards", "distance").uniform(10.0, 50.0, 3)
    assert np.array_equal(table.distance_m[5:], distance) and np.all(np.isnan(table.distance_m[:5]))
    # the group's own values: the same for all its devices; no battery is mains (inf), a channel has no fixed rate
    assert table.compute_w.tolist() == [3.0] * 5 + [2.0] * 3
    assert table.receive_w.tolist() == [0.2] * 5 + [0.3] * 3  # half of transmit, or power.receive
    assert table.capacity_j.tolist() == [10e3] * 5 + [math.inf] * 3
    assert table.min_level.tolist() == [0.1] * 5 + [0.0] * 3
    assert np.all(np.isnan(table.uplink_bps[5:])) and np.all(np.isnan(table.downlink_bps))
    one = device_table(network_scenario([PHONES], seed=3), streams)  # one group: a shared value is one number
    assert one.compute_w.strides == (0,) and one.capacity_j.strides == (0,) and one.group.strides == (0,)
    assert one.initial_j.strides == (8,)


def test_a_profile_and_a_battery_are_a_row_of_the_table() -> None:
    table, _ = _table()
    profile = table.profile(6)
    assert (profile.index, profile.group) == (6, "boards")
    assert {name: getattr(profile, name) for name in COLUMNS} == pytest.approx(
        {name: float(table.columns[name][6]) for name in COLUMNS}, nan_ok=True
    )
    battery = table.battery(1)
    assert (battery.capacity_j, battery.level_j, battery.min_level, battery.charge_w) == (
        10e3,
        table.initial_j[1],
        0.1,
        5.0,
    )
    assert table.battery(6).mains


def test_a_link_without_a_downlink_takes_the_uplink_or_the_nodes_broadcast() -> None:
    """The column is NaN without a downlink: a device's attachment takes its own uplink on a link to the server,
    its node's broadcast behind an access point."""
    sc = network_scenario([PHONES, BOARDS], network=NETWORK, seed=3)
    table, streams = _table()
    attachments = Attachments(table, [g.link for g in sc.devices], sc.network.nodes, streams)
    assert [attachments[d].downlink_bps for d in range(5)] == table.uplink_bps[:5].tolist()
    assert attachments[6].downlink_bps == 2e7


def test_a_table_takes_exactly_the_declared_columns() -> None:
    table, _ = _table()
    columns = dict(table.columns)
    columns["rx_w"] = columns.pop("receive_w")
    with pytest.raises(TypeError, match="missing \\['receive_w'\\], unknown \\['rx_w'\\]"):
        DeviceTable(table.group, table.group_names, **columns)
