"""A device group's states replayed from device-state logs (:mod:`netfl.fleet_logs`): FLASH's JSON, or a long
table ``device, time, state, value`` as CSV or parquet, or a folder of them.

``device_logs`` is a continuous-time policy whose answer is a rule over the logged states, so one log set
gives a group all three of its timelines, each the same policy with its own rule:

* availability (``availability: {policy: device_logs, file: ...}``): by default ``locked and charging and
  wifi``, the eligibility of Google's FL system (Bonawitz et al., "Towards Federated Learning at Scale",
  2019) and FLASH's (Yang et al., "Characterizing Impacts of Heterogeneity in Federated Learning upon
  Large-Scale Smartphone Data", WWW 2021);
* the charger (``battery: {charging: {policy: device_logs, file: ..., rule: charging}}``): the battery then
  charges while the log says it is plugged in;
* the owners' use (``usage: {sessions: {policy: device_logs, file: ..., rule: screen_on}, power: 2W}``): in
  use while the screen is on.

Scenario device n replays the log set's device n in file order (as ``trace_csv``'s device n its rows). A
log set with fewer devices than the group's is refused, unless ``unlisted: cycle`` (device n replays device
n mod count, as ``fedscale_trace`` does). Without ``period`` the last logged state holds for ever; with it
the log repeats every period, each cycle from FLASH's starting states (its Timer's modulo), and every event
must lie in ``[0, period)``.

The logs are streamed once per process and rule: each device's log is read, turned into the intervals in
which the rule holds and dropped, and only the group's rows are read (a group of 1 000 reads 1 000 devices
of a log of 10^5). A group is one :class:`~netfl.policies.trace_arrays.TraceModel`, in both engine forms.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator

from netfl.errors import PolicyError
from netfl.fleet_logs import DEFAULT_RULE, LogBlock, LogError, RuleError, iter_device_logs, iter_log_blocks, parse_rule
from netfl.fleet_logs.levels import collector
from netfl.policies.base import PolicyParams
from netfl.policies.rows import SessionRow
from netfl.policies.trace_arrays import Toggles, TraceModel, merge_intervals
from netfl.units import Seconds

__all__ = ["DeviceLogs", "DeviceLogsModel", "LogReplay", "load_replay", "sample_logs"]

#: Devices ``netfl validate`` reads in full (the rest are counted, not parsed).
SAMPLE_DEVICES = 200


class LogReplay:
    """The intervals in which a rule holds for the first devices of a log set, as :class:`Toggles` rows, and
    whether the set ended before them (``complete``: every device of the set was read)."""

    def __init__(self, path: Path, rule: str, period: float | None, wanted: int):
        holds = parse_rule(rule)
        owners, starts, ends = [], [], []
        self.ids: list[str] = []
        self.complete = True
        levels = collector(path)  # a battery follows the set's levels: kept on the way (read once)
        for block in iter_log_blocks(path):
            if len(self.ids) + len(block) > wanted:  # the rows wanted end inside this block
                keep = wanted - len(self.ids)
                end = int(block.offsets[keep])
                block = LogBlock(
                    block.devices[:keep], block.offsets[: keep + 1], block.times[:end], block.kinds[:end],
                    block.values[:end], block.source,
                )  # fmt: skip
                self.complete = False
            if len(block):
                if levels is not None:
                    levels.add(block)
                if period is not None:
                    _check_period(block, period)
                owner, s, e = holds.block_intervals(block)
                owners.append(owner + len(self.ids))
                starts.append(np.maximum(s, 0.0))
                ends.append(np.minimum(e, math.inf if period is None else period))
                self.ids.extend(block.devices)
            if not self.complete or len(self.ids) == wanted:
                self.complete = self.complete and len(self.ids) < wanted
                break
        rows = len(self.ids)
        if not rows:
            raise PolicyError(f"{path}: the log set holds no devices")
        if levels is not None:
            levels.done(wanted)
        offsets, bounds = merge_intervals(np.concatenate(owners), np.concatenate(starts), np.concatenate(ends), rows)
        self.toggles = Toggles(offsets, bounds, None if period is None else np.full(rows, float(period)))

    @property
    def count(self) -> int:
        return len(self.ids)


def _check_period(block: LogBlock, period: float) -> None:
    outside = (block.times < 0) | (block.times >= period)
    if outside.any():
        i = int(np.argmax(outside))
        device = int(np.searchsorted(block.offsets, i, side="right")) - 1
        raise PolicyError(
            f"{block.source}: device {block.devices[device]}: event {i - int(block.offsets[device]) + 1} at "
            f"{block.times[i]:g} s lies outside the period [0, {period:g} s); every event must lie within one period"
        )


_cache: dict[tuple[str, int, str, float | None], LogReplay] = {}


def load_replay(path: Path, rule: str, period: float | None, wanted: int) -> LogReplay:
    """The replay of ``path``'s first ``wanted`` devices under ``rule`` (read once per process; a log error or a
    rule error as a PolicyError naming the file, device and line)."""
    if not path.exists():
        raise PolicyError(f"{path}: device logs not found")
    key = (str(path.resolve()), path.stat().st_mtime_ns, rule, period)
    cached = _cache.get(key)
    if cached is None or (cached.count < wanted and not cached.complete):
        try:
            cached = LogReplay(path, rule, period, wanted)
        except (LogError, RuleError) as exc:
            raise PolicyError(str(exc)) from None
        _cache[key] = cached
    return cached


class DeviceLogsModel(TraceModel):
    """A device group replaying device logs: scenario device n replays the set's device n (mod its count with
    ``unlisted: cycle``)."""

    def _trace(self, params: Any, path: Path, first: int) -> tuple[Toggles, np.ndarray]:
        wanted = first + self.n
        self.replay = load_replay(path, params.rule, params.period, wanted)  # kept: a device names its log
        count = self.replay.count
        if count < wanted and params.unlisted == "refuse":
            raise PolicyError(f"{path}: {_too_few(count, first, self.n)}")
        return self.replay.toggles, (first + np.arange(self.n)) % count


def _too_few(count: int, first: int, n: int) -> str:
    return (
        f"holds {count:,} devices, fewer than the {first + n:,} that replay it (scenario devices {first} to "
        f"{first + n - 1} replay its devices in file order); give more logs, or set unlisted: cycle to have device "
        "n replay the log's device n mod its count"
    )


def sample_logs(path: Path, devices: int = SAMPLE_DEVICES) -> tuple[int, int, float, float, bool]:
    """(devices read, events, first and last event time) of the set's first ``devices`` devices, read and checked
    in full, and whether that was the whole set: what ``netfl validate`` says about a log set, fast."""
    events, first, last, read, whole = 0, math.inf, -math.inf, 0, True
    for log in iter_device_logs(path):
        if read == devices:
            whole = False
            break
        read += 1
        events += len(log)
        first, last = min(first, float(log.times[0])), max(last, float(log.times[-1]))
    return read, events, first, last, whole


class DeviceLogs(SessionRow):
    """Replays device-state logs: online while a rule over the device's logged states holds (docs/device-logs.md).

    ``rule`` is a rule of :mod:`netfl.fleet_logs.rules`: ``screen_on``, ``locked``, ``charging``, ``wifi``,
    ``cellular``, ``battery < 30``... joined by ``and``, ``or``, ``not``.
    """

    population = DeviceLogsModel

    class Params(PolicyParams):
        file: Path = Field(description="the logs: a FLASH .json, a .csv or .parquet table, or a folder of them")
        rule: str = Field(DEFAULT_RULE, description="when the device counts as on, a rule over its logged states")
        period: Seconds | None = Field(
            None, gt=0, description="repeat the logs every period (None: the last state holds)"
        )
        unlisted: Literal["refuse", "cycle"] = Field(
            "refuse", description="more devices than the logs hold: refused, or device n replays log device n mod count"
        )

        @field_validator("rule")
        @classmethod
        def _parses(cls, rule: str) -> str:
            parse_rule(rule)  # a RuleError is a ValueError: pydantic names the field
            return rule

    @classmethod
    def check(cls, params: PolicyParams, base_dir: Path) -> list[tuple[str, str]]:
        """The log set's first devices read and checked as the run reads them (a sample: fast)."""
        path = cls.population.resolve(params.file, base_dir)
        if not path.exists():
            return [(".file", f"{path}: file not found (a relative path starts at the topology file's folder)")]
        try:
            sample_logs(path)
        except LogError as exc:
            return [(".file", str(exc))]
        return []

    @classmethod
    def check_devices(cls, params: PolicyParams, base_dir: Path, devices: range) -> list[tuple[str, str]]:
        if params.unlisted == "cycle" or not len(devices):
            return []
        path = cls.population.resolve(params.file, base_dir)
        try:
            count = count_devices(path, devices.stop)
        except LogError as exc:
            return [(".file", str(exc))]
        if count < devices.stop:
            return [(".file", f"{path}: {_too_few(count, devices.start, len(devices))}")]
        return []

    @property
    def log_device(self) -> str:
        """The id, in the logs, of the device this one replays."""
        return self.model.replay.ids[int(self.model.rows[self.row])]


def count_devices(path: Path, enough: int) -> int:
    """How many devices the log set holds, counted up to ``enough`` (a table's device column alone is read)."""
    from netfl.fleet_logs.read import detect_format, log_files
    from netfl.fleet_logs.table import csv_device_runs, parquet_device_runs

    count = 0
    for file in log_files(path):
        fmt = detect_format(file)
        if fmt == "flash":
            from netfl.fleet_logs.flash import iter_entries

            for _ in iter_entries(file):
                count += 1
                if count >= enough:
                    return count
        else:
            count += (csv_device_runs if fmt == "csv" else parquet_device_runs)(file, enough - count)
        if count >= enough:
            return count
    return count


def describe_logs(path: Path, needed: int | None) -> str:
    """What ``netfl validate`` says of a log set: its devices (counted up to those that replay it and one more, or
    all of them where the devices cycle (``needed`` None): a table's device column alone is read) and, from a
    sample of its first devices read in full, its events and days."""
    needed = needed if needed is not None else 10**9
    count = count_devices(path, needed + 1)
    read, events, first, last, whole = sample_logs(path)
    devices = f"{count:,} devices" if count <= needed else f"more than the {needed:,} devices that replay it"
    days = (last - first) / DAY_S
    sample = "all its devices" if whole else f"its first {read:,} devices"
    return (
        f"logs       {path}: {devices}; {sample}: {events:,} events, {events / max(read, 1):,.0f} a device, "
        f"from day {first / DAY_S:.2f} to day {last / DAY_S:.2f} ({days:.1f} days)"
    )


DAY_S = 86_400.0


def log_sets(scenario: Any) -> dict[Path, int | None]:
    """Each log set a scenario replays (availability, charger, owners' use, the battery's levels) and how many of its
    devices it needs."""
    base = scenario.source.parent if scenario.source is not None else Path.cwd()
    needed: dict[Path, int | None] = {}
    start = 0
    for group in scenario.devices:
        specs = [group.availability, group.battery.charging if group.battery is not None else None]
        specs.append(group.usage.sessions if group.usage is not None else None)
        levels = group.battery.levels if group.battery is not None else None  # the battery's logged levels
        for spec in specs + [levels]:
            if spec is not None and getattr(spec, "policy", "device_logs") == "device_logs":
                params = spec.params if hasattr(spec, "params") else {"file": spec.file, "unlisted": spec.unlisted}
                path = DeviceLogsModel.resolve(Path(params["file"]), base)
                if params.get("unlisted") == "cycle" or needed.get(path, 0) is None:
                    needed[path] = None
                else:
                    needed[path] = max(needed.get(path) or 0, start + group.count)
        start += group.count
    return needed
