"""Device logs read and written in each format: the round trip, and the one line each malformed log gets."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from netfl.fleet_logs import (
    BATTERY,
    CHARGER,
    LOCK,
    NETWORK,
    SCREEN,
    DeviceLog,
    LogError,
    iter_device_logs,
    write_device_logs,
)
from netfl.fleet_logs import table as table_module
from netfl.fleet_logs import write as write_module

SUFFIX = {"flash": "json", "csv": "csv", "parquet": "parquet"}


def log(device, events):
    times, kinds, values = zip(*events)
    return DeviceLog(device, np.array(times, float), np.array(kinds, np.int8), np.array(values, float))


def some_logs(n=5, seed=3):
    """Random logs in whole seconds (FLASH's resolution), the first device starting on day 0."""
    rng = np.random.default_rng(seed)
    out = []
    for d in range(n):
        m = int(rng.integers(1, 40))
        times = np.sort(rng.integers(0, 3 * 86400, m)).astype(float)
        kinds = rng.integers(1, 6, m).astype(np.int8)
        values = np.where(
            kinds == BATTERY,
            np.round(rng.uniform(0, 100, m), 3),
            np.where(kinds == NETWORK, rng.integers(0, 6, m), rng.integers(0, 2, m)),
        ).astype(float)
        out.append(DeviceLog(f"dev-{d:03d}", times, kinds, values))
    return out


@pytest.mark.parametrize("fmt", ["flash", "csv", "parquet"])
def test_read_gives_back_what_was_written(tmp_path, fmt):
    logs = some_logs()
    path = write_device_logs(logs, tmp_path / f"fleet.{SUFFIX[fmt]}", fmt)
    back = list(iter_device_logs(path))
    assert back == logs
    assert all(b.source == str(path) for b in back)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary left beside it


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_table_keeps_arbitrary_float_times_and_levels(tmp_path, fmt):
    logs = [log("x", [(0.1 + 0.2, BATTERY, 100 / 3), (1 / 7 + 1, SCREEN, 1), (1e6 / 3, BATTERY, 0.0)])]
    assert list(iter_device_logs(write_device_logs(logs, tmp_path / f"f.{SUFFIX[fmt]}", fmt))) == logs


def test_fractional_seconds_survive_flash(tmp_path):
    logs = [log("x", [(0.5, BATTERY, 12.5), (86400 * 6 + 0.25, CHARGER, 1)])]
    assert list(iter_device_logs(write_device_logs(logs, tmp_path / "f.json", "flash"))) == logs


def test_streams_across_batches(tmp_path, monkeypatch):
    """Devices cut by batch (and row group) boundaries come back whole."""
    monkeypatch.setattr(table_module, "BATCH_ROWS", 7)
    monkeypatch.setattr(write_module, "ROWS_PER_GROUP", 5)
    logs = some_logs(12)
    path = write_device_logs(logs, tmp_path / "f.parquet", "parquet")
    assert pq.ParquetFile(path).num_row_groups > 3
    assert list(iter_device_logs(path)) == logs


def test_flash_json_read_in_chunks(tmp_path, monkeypatch):
    from netfl.fleet_logs import flash, read

    monkeypatch.setattr(flash, "CHUNK", 64)
    monkeypatch.setattr(read, "FLASH_BLOCK_DEVICES", 3)  # records parsed three at a time
    logs = some_logs(8)
    assert list(iter_device_logs(write_device_logs(logs, tmp_path / "f.json", "flash"))) == logs


def test_flash_file_as_flash_writes_it(tmp_path):
    """FLASH's own layout (json.dump with indent, keys "0", "1", model and user_id fields, upper case and blank
    lines) reads as FLASH's Timer reads it."""
    messages = "2020-01-02 07:00:00\tScreen_On\n\n2020-01-02 07:05:00\tscreen_unlock\n2020-01-02 23:00:00\t4G\n"
    messages += "2020-01-03 01:00:00\t35%\n2020-01-03 01:00:00\tunknown\n"
    path = tmp_path / "state_traces.json"
    path.write_text(json.dumps({"0": {"guid": "g1", "model": "SM-G9", "user_id": 5, "messages": messages}}, indent=4))
    (only,) = iter_device_logs(path)
    assert only.device == "g1"
    np.testing.assert_array_equal(only.times, [25200, 25500, 82800, 90000, 90000])
    np.testing.assert_array_equal(only.kinds, [SCREEN, LOCK, NETWORK, BATTERY, NETWORK])
    np.testing.assert_array_equal(only.values, [1, 0, 4, 35, 0])


def test_timestamps_in_a_table_count_from_midnight_of_the_first_day(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("device,time,state,value\na,2021-03-04 06:30:00,charger,1\na,2021-03-05T00:00:01,battery,40\n")
    (a,) = iter_device_logs(path)
    np.testing.assert_array_equal(a.times, [6.5 * 3600, 86401])
    (a,) = iter_device_logs(path, origin="2021-03-03")
    np.testing.assert_array_equal(a.times, [86400 + 6.5 * 3600, 2 * 86400 + 1])


def test_a_folder_is_one_log_set(tmp_path):
    logs = some_logs(4)
    write_device_logs(logs[:2], tmp_path / "a.csv", "csv")
    write_device_logs(logs[2:], tmp_path / "b.parquet", "parquet")
    (tmp_path / "notes.txt").write_text("not a log")
    assert list(iter_device_logs(tmp_path)) == logs


def test_the_reader_streams_and_needs_no_whole_read(tmp_path):
    """A generator: the first device comes back before the rest of a malformed file is read."""
    path = tmp_path / "t.csv"
    path.write_text("device,time,state,value\na,0,screen,1\nb,0,screen,1\nb,5,screen,7\n")
    logs = iter_device_logs(path)
    assert next(logs).device == "a"


def test_a_failed_write_leaves_nothing(tmp_path):
    def broken():
        yield some_logs(1)[0]
        raise RuntimeError("the source failed")

    for fmt in ("flash", "csv", "parquet"):
        with pytest.raises(RuntimeError):
            write_device_logs(broken(), tmp_path / f"out.{SUFFIX[fmt]}", fmt)
    assert list(tmp_path.iterdir()) == []


CSV_HEAD = "device,time,state,value\n"
MALFORMED_CSV = [
    ("a,0,screen,1\na,5,dance,1\n", 3, "a", "unknown state 'dance'; accepted: screen, lock, charger, network, battery"),
    ("a,10,screen,1\na,5,screen,0\n", 3, "a", "time 5 s is before the previous event's 10 s"),
    ("a,0,battery,101\n", 2, "a", "battery value 101% is out of range; accepted: a percentage from 0 to 100"),
    ("a,0,battery,-1\n", 2, "a", "battery value -1% is out of range"),
    ("a,0,network,9\n", 2, "a", "network value 9 is out of range"),
    ("a,0,screen,2\n", 2, "a", "screen value 2 is out of range; accepted: 1 (on) or 0 (off)"),
    ("a,0,screen,1\na,x1,screen,1\n", 3, "a", "time 'x1' is not a time"),
    ("a,0,screen,on\n", 2, "a", "value 'on' is not a number"),
    ("a,0,screen,1\na,1,screen,1_0\n", 3, "a", "value '1_0' is not a number"),  # Python's float reads it
    ("a,0,screen,1\nb,1,screen,1\na,2,screen,1\n", 4, "a", "rows are not together"),
    ("a,0,screen,\n", 2, "a", "value is missing"),
]


@pytest.mark.parametrize("body, line, device, what", MALFORMED_CSV)
def test_malformed_table_gets_one_line(tmp_path, body, line, device, what):
    path = tmp_path / "bad.csv"
    path.write_text(CSV_HEAD + body)
    with pytest.raises(LogError) as caught:
        list(iter_device_logs(path))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:{line}: device {device}: ")
    assert what in message
    assert (caught.value.path, caught.value.device, caught.value.line) == (str(path), device, line)


def test_malformed_parquet_names_the_row(tmp_path):
    path = tmp_path / "bad.parquet"
    table = pa.table(
        {
            "device": ["a", "a", "a"],
            "time": [0.0, 1.0, 2.0],
            "state": ["screen", "battery", "battery"],
            "value": [1.0, 50.0, 100.5],
        }
    )
    pq.write_table(table, path)
    with pytest.raises(LogError, match=rf"^{path}:4: device a: battery value 100.5% is out of range"):
        list(iter_device_logs(path))


def test_missing_column_named(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("device,when,state,value\na,0,screen,1\n")
    with pytest.raises(LogError, match=r"bad.csv:1: .*accepted columns: device, time, state, value"):
        list(iter_device_logs(path))


def flash_file(tmp_path, records, indent=None):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(records, indent=indent))
    return path


MALFORMED_FLASH = [
    ("2020-01-02 00:00:00\tscreen_on\n2020-01-02 00:00:01\tbattery_low", "message 2: unknown state 'battery_low'"),
    ("2020-01-02 00:00:09\tscreen_on\n2020-01-02 00:00:01\tscreen_off", "message 2: time 1 s is before"),
    ("2020-01-02 00:00:00\t101%", "message 1: battery level 101% is out of range; accepted: 0% to 100%"),
    ("2020-01-02 00:00:00\t-3%", "message 1: battery level -3% is out of range"),
    ("2020-01-02 00:00:00 screen_on", "message 1 '2020-01-02 00:00:00 screen_on' is not 'time<TAB>state'"),
    ("2020-13-02 00:00:00\tscreen_on", "message 1: time '2020-13-02 00:00:00' is not a time"),
    ("\n \n", "has no events; a device needs at least one"),
]


@pytest.mark.parametrize("messages, what", MALFORMED_FLASH)
def test_malformed_flash_gets_one_line(tmp_path, messages, what):
    good = {"guid": "ok", "messages": "2020-01-02 00:00:00\twifi"}
    path = flash_file(tmp_path, {"0": good, "1": {"guid": "g7", "messages": messages}}, indent=4)
    with pytest.raises(LogError) as caught:
        list(iter_device_logs(path))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:6: device g7: ")  # indent=4: the second key is on line 6
    assert what in message


def test_flash_not_json_named_with_its_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{\n"0": {"guid": "a", "messages": "2020-01-02 00:00:00\\twifi"},\n"1": {"guid": nope}\n}\n')
    with pytest.raises(LogError, match=rf"^{path}:3: not valid JSON"):
        list(iter_device_logs(path))


def test_a_device_twice_in_a_folder_refused(tmp_path):
    logs = some_logs(2)
    write_device_logs(logs, tmp_path / "a.csv", "csv")
    write_device_logs(logs[1:], tmp_path / "b.csv", "csv")
    with pytest.raises(LogError, match=r"b.csv:0: device dev-001: appears twice in the log set"):
        list(iter_device_logs(tmp_path))


def test_unknown_format_refused(tmp_path):
    with pytest.raises(LogError, match=r"fleet.txt:0: unknown device-log format; accepted: a FLASH .json file"):
        list(iter_device_logs(tmp_path / "fleet.txt"))
