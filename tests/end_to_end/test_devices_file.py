"""devices.parquet: its columns by hand, written a row group at a time with the bytes of one whole-table write, and
the world released before the results are written."""

from __future__ import annotations

import math
import weakref
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from netfl import runner
from netfl.api import from_dict
from netfl.results import devices_file
from netfl.results.devices_file import ROW_GROUP_ROWS, write_devices
from netfl.sim.fleet_readings import DeviceStats


def stats() -> DeviceStats:
    """Three phones and two boards (mains power: no battery fraction)."""
    return DeviceStats(
        group=np.array([0, 0, 0, 1, 1], dtype=np.uint8),
        group_names=["phones", "boards"],
        tasks_started=np.array([2, 0, 1, 0, 3]),
        updates_delivered=np.array([1, 0, 1, 0, 2]),
        online_time_s=np.array([50.0, 0.0, 100.0, 25.0, 100.0]),
        energy_by_activity_j={
            "idle": np.array([1.0, 2.0, 3.0, 4.0, 5.0]),
            "compute": np.array([10.0, 0.0, 20.0, 0.0, 30.0]),
            "use": np.array([100.0, 200.0, 300.0, 0.0, 0.0]),
        },
        charged_j=np.array([0.5, 0.0, 0.0, 0.0, 0.0]),
        battery_fraction=np.array([0.5, 0.25, 1.0, math.nan, math.nan]),
        battery_empty=np.array([False, True, False, False, False]),
    )


def columns(duration_s: float = 100.0):
    """devices.parquet's columns of :func:`stats` over a run of ``duration_s``."""
    return runner.device_columns(SimpleNamespace(stats=stats(), sim_time_s=duration_s))


def test_the_columns_by_hand_whole_or_a_range_of_rows() -> None:
    rows = columns()
    assert list(rows) == [
        "device", "group", "tasks_started", "updates_delivered", "online_fraction", "energy_j", "work_energy_j",
        "charged_j", "battery_fraction", "battery_empty", "energy_compute_j", "energy_idle_j", "energy_use_j",
    ]  # fmt: skip
    assert rows.count == 5 and rows["device"].tolist() == [0, 1, 2, 3, 4]
    assert list(rows["group"]) == ["phones"] * 3 + ["boards"] * 2
    assert rows["online_fraction"].tolist() == [0.5, 0.0, 1.0, 0.25, 1.0]
    assert rows["energy_j"].tolist() == [111.0, 202.0, 323.0, 4.0, 35.0]  # idle, training and the owner's use
    assert rows["work_energy_j"].tolist() == [10.0, 0.0, 20.0, 0.0, 30.0]  # what FL cost: training only
    part = rows.part(1, 4)
    assert part["device"].tolist() == [1, 2, 3] and list(part["group"]) == ["phones", "phones", "boards"]
    for name in rows:
        assert pd.Series(part[name]).equals(pd.Series(rows[name])[1:4].reset_index(drop=True)), name
    assert columns(duration_s=0.0)["online_fraction"].tolist() == [0.0] * 5
    with pytest.raises(KeyError):
        rows["nothing"]


def _whole_write(path, columns) -> None:
    """devices.parquet as one table written at once, pyarrow choosing the row groups (the file before)."""
    arrays = {}
    for name, values in columns.items():
        if isinstance(values, pd.Categorical):
            arrays[name] = pa.array(np.asarray(values, dtype=object))
        else:
            values = np.asarray(values)
            arrays[name] = pa.array(values, mask=np.isnan(values)) if values.dtype.kind == "f" else pa.array(values)
    pq.write_table(pa.table(arrays), path, compression="zstd", write_statistics=False, store_schema=True)


def test_row_groups_written_one_at_a_time_give_the_bytes_of_one_whole_write(tmp_path, monkeypatch) -> None:
    """Two rows a group: three row groups, made from the totals one at a time, are the file pyarrow writes from
    the whole table with row groups of two rows."""
    monkeypatch.setattr(devices_file, "ROW_GROUP_ROWS", 2)
    rows = columns()
    write_devices(tmp_path / "parts.parquet", rows)
    whole = {name: rows[name] for name in rows}
    monkeypatch.setattr(pq, "write_table", _with_row_groups(pq.write_table, 2))
    _whole_write(tmp_path / "whole.parquet", whole)
    assert pq.ParquetFile(tmp_path / "parts.parquet").metadata.num_row_groups == 3
    assert (tmp_path / "parts.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    table = pq.read_table(tmp_path / "parts.parquet")
    assert table.column("battery_fraction").null_count == 2 and table.column("group").type == pa.string()


def _with_row_groups(write, size: int):
    return lambda table, path, **options: write(table, path, row_group_size=size, **options)


def test_the_row_group_is_pyarrows_own(tmp_path) -> None:
    """One row more than a row group: two groups, as pyarrow cuts one whole table by default."""
    column = {"device": np.arange(ROW_GROUP_ROWS + 1)}
    write_devices(tmp_path / "parts.parquet", column)
    _whole_write(tmp_path / "whole.parquet", column)
    assert pq.ParquetFile(tmp_path / "whole.parquet").metadata.num_row_groups == 2
    assert (tmp_path / "parts.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()


def test_the_world_and_the_learner_are_released_before_the_results_are_written(tmp_path, monkeypatch) -> None:
    """At ten million devices the world's arrays are gigabytes that writing does not need: nothing holds the
    simulation, its fleet or the learner once the writing starts (in the array form, whose result holds arrays
    only)."""
    built: list[weakref.ref] = []

    def build(*args, **kwargs):
        simulation, learner = real_build(*args, **kwargs)
        built.extend([weakref.ref(simulation), weakref.ref(learner), weakref.ref(simulation.devices)])
        return simulation, learner

    def write(*args, **kwargs):
        alive.extend(ref() is not None for ref in built)
        return real_write(*args, **kwargs)

    real_build, real_write, alive = runner.build_simulation, runner.write_run, []
    monkeypatch.setattr(runner, "build_simulation", build)
    monkeypatch.setattr(runner, "write_run", write)
    scenario = from_dict(
        {
            "name": "released",
            "stop": {"rounds": 2},
            "task": {"dataset": {"name": "digits"}, "model": {"name": "logistic"}},
            "devices": [
                {
                    "group": "phones",
                    "count": 20,
                    "compute": {"flops_per_s": 1e9},
                    "link": {"uplink": 1e6},
                    "availability": {"policy": "always"},
                }
            ],
            "server": {"round": {"participants": 5}},
            "engine": {"devices": "lazy"},  # the actor form's result keeps its actors, to inspect
        }
    )
    outcome = runner.run_scenario(scenario, out_dir=tmp_path / "run", threads=1)
    assert alive == [False, False, False] and outcome.summary["rounds"] == 2
    assert len(pq.read_table(tmp_path / "run" / "devices.parquet")) == 20
