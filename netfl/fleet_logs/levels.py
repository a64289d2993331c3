"""The logged battery levels (the ``battery`` rows, FLASH's ``NN%``) of a log set's first devices, for a battery
driven by them (netfl/sim/logged_levels.py): each device's levels in time order, the last of those logged at
one instant (as a rule reads them), as fractions."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from netfl.fleet_logs.read import iter_log_blocks
from netfl.fleet_logs.records import LogBlock, LogError
from netfl.fleet_logs.states import BATTERY


class BatteryLevels:
    """The levels of a log set's first ``wanted`` devices (all of them if it holds fewer: ``count`` says how
    many), CSR: device ``i``'s are ``times[offsets[i]:offsets[i + 1]]`` and ``fractions``. A device with no
    battery row is refused (a LogError naming the file and the device)."""

    def __init__(self, path: Path, wanted: int, blocks: Iterable[LogBlock] | None = None):
        """``blocks``: the set's blocks, already read (their battery rows are enough); None: read from ``path``."""
        self.ids: list[str] = []
        counts, times, fractions = [], [], []
        for block in iter_log_blocks(path) if blocks is None else blocks:
            keep = min(len(block), wanted - len(self.ids))
            end = int(block.offsets[keep])
            owner = block.owner[:end]
            rows = np.flatnonzero(block.kinds[:end] == BATTERY)
            at, who = block.times[rows], owner[rows]
            last = np.ones(len(rows), dtype=bool)  # the last level of its device at its instant
            last[:-1] = (at[1:] != at[:-1]) | (who[1:] != who[:-1])
            rows, who = rows[last], who[last]
            count = np.bincount(who, minlength=keep)
            if (count == 0).any():
                i = int(np.argmin(count))
                raise LogError(
                    block.source,
                    block.devices[i],
                    0,
                    "has no battery level; accepted for battery.levels: at least one battery row (FLASH's NN%) "
                    "for every device that replays the logs",
                )
            counts.append(count)
            times.append(block.times[rows])
            fractions.append(block.values[rows] / 100.0)
            self.ids.extend(block.devices[:keep])
            if len(self.ids) >= wanted:
                break
        self.offsets = np.concatenate([[0], np.cumsum(np.concatenate(counts))]).astype(np.int64) if counts else None
        self.times = np.concatenate(times) if times else np.empty(0)
        self.fractions = np.concatenate(fractions) if fractions else np.empty(0)

    @property
    def count(self) -> int:
        return len(self.ids)

    def rows(self, devices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The levels of the set's devices ``devices`` (its indices, in the order given): (offsets, times,
        fractions); views, not copies, where they are consecutive (no cycling)."""
        if len(devices) and np.array_equal(devices, np.arange(devices[0], devices[0] + len(devices))):
            a, b = int(self.offsets[devices[0]]), int(self.offsets[devices[-1] + 1])
            return self.offsets[devices[0] : devices[-1] + 2] - a, self.times[a:b], self.fractions[a:b]
        starts, ends = self.offsets[devices], self.offsets[devices + 1]
        lengths = ends - starts
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        index = np.repeat(starts - offsets[:-1], lengths) + np.arange(int(offsets[-1]))
        return offsets, self.times[index], self.fractions[index]


_cache: dict[tuple[str, int, int], BatteryLevels] = {}
#: The log sets a scenario's batteries follow (resolved paths): a reader of such a set for another purpose (the
#: replay of a rule) keeps their battery rows on the way (:func:`collector`), so that the set is read once.
_wanted: set[str] = set()


def _key(path: Path, wanted: int) -> tuple[str, int, int]:
    return (str(path.resolve()), path.stat().st_mtime_ns, wanted)


def want_levels(path: Path) -> None:
    """A battery will follow ``path``'s levels: whoever reads the set first keeps them (:func:`collector`)."""
    _wanted.add(str(path.resolve()))


def forget_levels() -> None:
    """Forget the levels read and the sets followed (a process that builds many worlds, as a benchmark does)."""
    _wanted.clear()
    _cache.clear()


class Collector:
    """The battery rows of blocks read for another purpose, kept (a few bytes a level) and made the set's levels
    once the reading is done, as :func:`read_levels` would read them."""

    def __init__(self, path: Path):
        self.path, self.blocks = path, []

    def add(self, block: LogBlock) -> None:
        rows = np.flatnonzero(block.kinds == BATTERY)
        offsets = np.searchsorted(rows, block.offsets)  # each device's battery rows before its first
        self.blocks.append(
            LogBlock(block.devices, offsets, block.times[rows], block.kinds[rows], block.values[rows], block.source)
        )

    def done(self, wanted: int) -> None:
        """The set's first ``wanted`` devices were read (or all it holds): their levels, kept; a device without any
        is left for :func:`read_levels` to refuse, naming it."""
        try:
            levels = BatteryLevels(self.path, wanted, self.blocks)
        except LogError:
            return
        _cache[_key(self.path, wanted)] = levels


def collector(path: Path) -> Collector | None:
    """A :class:`Collector` for ``path`` if a battery follows its levels, else None (nothing kept)."""
    return Collector(path) if str(path.resolve()) in _wanted else None


def read_levels(path: Path, wanted: int, keep: bool = True) -> BatteryLevels:
    """The levels of ``path``'s first ``wanted`` devices (read once per process; a LogError as it is); ``keep``:
    False for the last reader (the run's, which holds them itself): 16 bytes a level not held twice."""
    key = _key(path, wanted)
    levels = _cache.get(key) or BatteryLevels(path, wanted)
    if keep:
        _cache[key] = levels
    else:
        _cache.pop(key, None)
    return levels


def too_few(path: Path, count: int, devices: range) -> str:
    """The message for a log set of ``count`` devices that the scenario's ``devices`` cannot all follow."""
    return (
        f"{path}: holds {count:,} devices, fewer than the {devices.stop:,} whose batteries follow it "
        f"(scenario devices {devices.start} to {devices.stop - 1} follow its devices in file order); give more "
        "logs, or set unlisted: cycle to have device n follow the log's device n mod its count"
    )
