"""Columns of one value per row, each made when read: a whole column, or every column's values for a range of rows.

devices.parquet has a row per device: at ten million devices each derived column (the device numbers, the group
names, the online fraction, the energy sums) is 80 MB or more. The writer asks for one row group at a time
(:func:`netfl.results.devices_file.write_devices`), so that only that group's columns exist at once; the runner says
how a column is made (:func:`netfl.runner.device_columns`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

__all__ = ["RowTable"]


class RowTable(Mapping[str, Any]):
    """Columns ``names`` of ``count`` rows, made by ``make(name, rows)`` (``rows``: a slice), which gives the
    column's values for those rows -- the same as the whole column's, a row's value depending on its own row.
    Read as a mapping of name to whole column, or ``part(start, stop)``: every column's rows ``start..stop``.
    ``len`` is the number of columns, as for any mapping; ``count`` the number of rows."""

    def __init__(self, names: Sequence[str], count: int, make: Callable[[str, slice], Any]):
        self.names, self.count, self._make = list(names), count, make

    def __getitem__(self, name: str) -> Any:
        if name not in self.names:
            raise KeyError(name)
        return self._make(name, slice(0, self.count))

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def part(self, start: int, stop: int) -> dict[str, Any]:
        """Every column's rows ``start..stop``, in order."""
        return {name: self._make(name, slice(start, stop)) for name in self.names}
