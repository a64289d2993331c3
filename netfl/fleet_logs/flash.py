"""FLASH's device-behaviour file, as FLASH reads it (PKU-Chengxu/FLASH, ``models/client.py`` and
``models/timer.py``): one JSON object mapping a key to each device's record, ``{"guid": ..., "messages":
"..."}``, where ``messages`` holds one line per state change, ``YYYY-MM-DD HH:MM:SS<TAB>state``.

States, as FLASH's Timer takes them (case-insensitive): ``battery_charged_on`` / ``battery_charged_off``,
``screen_on`` / ``screen_off``, ``screen_lock`` / ``screen_unlock``, ``wifi``, ``2g`` ... ``5g`` and
``unknown`` (no network), and a battery level ``NN%``. Blank lines are skipped, as FLASH does.

The file is one JSON object, so it is decoded entry by entry from a buffer read in chunks: a file of 10^5
devices is never held whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from netfl.fleet_logs.records import LogError
from netfl.fleet_logs.states import BATTERY, CHARGER, G2, G3, G4, G5, LOCK, NETWORK, NONE, SCREEN, WIFI

# FLASH's state words -> (kind, value)
STATE_WORDS = {
    "battery_charged_on": (CHARGER, 1.0),
    "battery_charged_off": (CHARGER, 0.0),
    "screen_on": (SCREEN, 1.0),
    "screen_off": (SCREEN, 0.0),
    "screen_lock": (LOCK, 1.0),
    "screen_unlock": (LOCK, 0.0),
    "wifi": (NETWORK, float(WIFI)),
    "2g": (NETWORK, float(G2)),
    "3g": (NETWORK, float(G3)),
    "4g": (NETWORK, float(G4)),
    "5g": (NETWORK, float(G5)),
    "unknown": (NETWORK, float(NONE)),
}
ACCEPTED_WORDS = ", ".join(STATE_WORDS) + " or a battery level NN%"
TIME_FORMAT = "YYYY-MM-DD HH:MM:SS"
CHUNK = 1 << 20
_WS = " \t\r\n"


def iter_entries(path: Path) -> Iterator[tuple[str, object, int]]:
    """(key, value, line of the key) for each top-level entry of a JSON object file, decoded one at a time."""
    decoder = json.JSONDecoder()
    source = str(path)
    with open(path, encoding="utf-8") as f:
        buf, pos, line, eof = "", 0, 1, False

        def fill() -> bool:
            nonlocal buf, pos, eof
            if eof:
                return False
            more = f.read(CHUNK)
            if not more:
                eof = True
                return False
            buf = buf[pos:] + more
            pos = 0
            return True

        def skip_ws() -> None:
            nonlocal pos, line
            while True:
                n = len(buf)
                start = pos
                while pos < n and buf[pos] in _WS:
                    pos += 1
                line += buf.count("\n", start, pos)
                if pos < n or not fill():
                    return

        def decode():
            nonlocal pos, line
            while True:
                try:
                    value, end = decoder.raw_decode(buf, pos)
                except json.JSONDecodeError as e:
                    if e.pos >= len(buf) - 1 and fill():  # the entry runs past the buffer: read on
                        continue
                    if fill():  # a string cut at the buffer's end reads as an error inside it
                        continue
                    raise LogError(
                        source, None, line + buf.count("\n", pos, e.pos), f"not valid JSON: {e.msg}"
                    ) from None
                line += buf.count("\n", pos, end)
                pos = end
                return value

        def expect(char: str, what: str) -> None:
            nonlocal pos
            skip_ws()
            if pos >= len(buf) or buf[pos] != char:
                got = repr(buf[pos]) if pos < len(buf) else "the end of the file"
                raise LogError(
                    source, None, line, f"expected {what}, got {got}; accepted: FLASH's JSON object of devices"
                )
            pos += 1

        fill()
        expect("{", "'{'")
        skip_ws()
        if pos < len(buf) and buf[pos] == "}":
            return
        while True:
            skip_ws()
            key_line = line
            key = decode()
            if not isinstance(key, str):
                raise LogError(source, None, key_line, "expected a device key (a string)")
            expect(":", "':'")
            skip_ws()
            value = decode()
            yield key, value, key_line
            skip_ws()
            if pos < len(buf) and buf[pos] == ",":
                pos += 1
                continue
            expect("}", "',' or '}'")
            return


def parse_device(
    source: str, key: str, record: object, line: int, origin: np.datetime64 | None
) -> tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.datetime64]:
    """One FLASH record -> (device, times since the origin, kinds, values, lines, origin). The origin, when not
    given, is midnight of this device's first event (the caller passes it on to the next devices)."""
    if not isinstance(record, dict):
        raise LogError(source, key, line, 'expected a record {"guid": ..., "messages": "..."}')
    device = str(record.get("guid", key))
    messages = record.get("messages")
    if not isinstance(messages, str):
        raise LogError(source, device, line, "has no \"messages\" text; accepted: lines of 'time<TAB>state'")
    rows = [m.strip() for m in messages.split("\n")]
    rows = [m for m in rows if m]
    if not rows:
        raise LogError(source, device, line, "has no events; a device needs at least one")
    stamps, kinds, values = [], np.empty(len(rows), np.int8), np.empty(len(rows), np.float64)
    for i, row in enumerate(rows):
        parts = row.split("\t")
        if len(parts) != 2:
            raise LogError(source, device, line, f"message {i + 1} {row!r} is not 'time<TAB>state'")
        stamp, word = parts[0].strip(), parts[1].strip().lower()
        stamps.append(stamp)
        hit = STATE_WORDS.get(word)
        if hit is None:
            if word.endswith("%"):
                try:
                    hit = (BATTERY, float(word[:-1]))
                except ValueError:
                    hit = None
            if hit is None:
                raise LogError(
                    source,
                    device,
                    line,
                    f"message {i + 1}: unknown state {parts[1].strip()!r}; accepted: {ACCEPTED_WORDS}",
                )
            if not 0.0 <= hit[1] <= 100.0:
                raise LogError(
                    source, device, line, f"message {i + 1}: battery level {word} is out of range; accepted: 0% to 100%"
                )
        kinds[i], values[i] = hit
    try:
        when = np.array(stamps, dtype="datetime64[us]")
    except ValueError:
        for i, stamp in enumerate(stamps):
            try:
                np.datetime64(stamp, "us")
            except ValueError:
                raise LogError(
                    source, device, line, f"message {i + 1}: time {stamp!r} is not a time; accepted: {TIME_FORMAT}"
                ) from None
        raise
    if origin is None:
        origin = when[0].astype("datetime64[D]").astype("datetime64[us]")
    times = (when - origin).astype(np.int64) / 1e6
    return device, times, kinds, values, np.full(len(rows), line, np.int64), origin


_WORD_LIST = list(STATE_WORDS)
_WORD_ARRAY = pa.array(_WORD_LIST)
_WORD_KIND = np.array([kind for kind, _ in STATE_WORDS.values()], dtype=np.int8)
_WORD_VALUE = np.array([value for _, value in STATE_WORDS.values()], dtype=np.float64)


def parse_block(
    entries: list[tuple[str, object, int]], origin: np.datetime64 | None
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.datetime64] | None:
    """Many FLASH records parsed at once with Arrow's string kernels: (devices, offsets, times, kinds, values,
    lines, origin), or None where anything is amiss -- the caller then parses the records one by one
    (:func:`parse_device`), which names the problem."""
    devices, texts, key_lines = [], [], []
    for key, record, line in entries:
        if not isinstance(record, dict) or not isinstance(record.get("messages"), str):
            return None
        devices.append(str(record.get("guid", key)))
        texts.append(record["messages"])
        key_lines.append(line)
    split = pc.split_pattern(pa.array(texts, pa.string()), "\n")
    owner = pc.list_parent_indices(split).to_numpy(zero_copy_only=False)
    lines_ = pc.utf8_trim_whitespace(pc.list_flatten(split))
    keep = pc.greater(pc.utf8_length(lines_), 0)
    lines_ = lines_.filter(keep)
    owner = owner[keep.to_numpy(zero_copy_only=False)]
    counts = np.bincount(owner, minlength=len(texts))
    if not len(owner) or (counts == 0).any():
        return None
    parts = pc.split_pattern(lines_, "\t")
    if not pc.all(pc.equal(pc.list_value_length(parts), 2)).as_py():
        return None
    flat = pc.list_flatten(parts)
    stamps, words = pc.utf8_trim_whitespace(flat[0::2]), pc.utf8_lower(pc.utf8_trim_whitespace(flat[1::2]))
    try:
        when = pc.cast(stamps, pa.timestamp("us")).to_numpy(zero_copy_only=False).astype("datetime64[us]")
    except pa.ArrowInvalid:
        return None
    index = pc.index_in(words, value_set=_WORD_ARRAY).fill_null(-1).to_numpy(zero_copy_only=False)
    kinds, values = _WORD_KIND[np.maximum(index, 0)], _WORD_VALUE[np.maximum(index, 0)]
    other = np.flatnonzero(index < 0)
    if len(other):  # battery levels NN%
        levels = words.take(pa.array(other))
        if not pc.all(pc.ends_with(levels, "%")).as_py():
            return None
        try:
            percent = pc.cast(pc.utf8_slice_codeunits(levels, 0, -1), pa.float64()).to_numpy(zero_copy_only=False)
        except pa.ArrowInvalid:
            return None
        if not ((percent >= 0) & (percent <= 100)).all():
            return None
        kinds[other], values[other] = BATTERY, percent
    if origin is None:
        origin = when[0].astype("datetime64[D]").astype("datetime64[us]")
    times = (when - origin).astype(np.int64) / 1e6
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return devices, offsets, times, kinds, values, np.asarray(key_lines, dtype=np.int64)[owner], origin
