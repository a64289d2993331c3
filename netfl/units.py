"""Physical quantities in scenario files: ``"6h"``, ``"55kJ"``, ``"50mW"``,
``"20Mbps"``, ``"5ms"`` or a bare number in the base unit (s, J, W, bit/s,
bytes, FLOP/s). Everything inside netfl is in base SI units; parsing happens
once, at the edge, so the engine never guesses a unit."""

from __future__ import annotations

import math
import re
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Union

from pydantic import BeforeValidator

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_QUANTITY = re.compile(rf"^\s*({_NUMBER})\s*([A-Za-z/%]*)\s*$")

_PREFIX = {"": 1.0, "n": 1e-9, "u": 1e-6, "µ": 1e-6, "m": 1e-3, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}

# unit kind -> {suffix: factor to the base unit}
UNITS: dict[str, dict[str, float]] = {
    "time": {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "min": 60.0, "h": 3600.0, "d": 86400.0},
    "energy": {
        "": 1.0,
        **{p + "J": f for p, f in _PREFIX.items() if p in ("", "m", "k", "M")},
        "Wh": 3600.0,
        "mWh": 3.6,
        "kWh": 3.6e6,
    },
    "power": {"": 1.0, **{p + "W": f for p, f in _PREFIX.items() if p in ("", "u", "m", "k")}},
    "rate": {
        "": 1.0,
        **{p + "bps": f for p, f in _PREFIX.items() if p in ("", "k", "K", "M", "G")},
        **{p + "bit/s": f for p, f in _PREFIX.items() if p in ("", "k", "M", "G")},
    },
    "bytes": {
        "": 1.0,
        "B": 1.0,
        "kB": 1e3,
        "KB": 1e3,
        "MB": 1e6,
        "GB": 1e9,
        "KiB": 1024.0,
        "MiB": 1024.0**2,
        "GiB": 1024.0**3,
    },
    "flops": {
        "": 1.0,
        **{p + "FLOPS": f for p, f in _PREFIX.items() if p in ("", "k", "M", "G", "T")},
        **{p + "FLOP/s": f for p, f in _PREFIX.items() if p in ("", "k", "M", "G", "T")},
    },
    "fraction": {"": 1.0, "%": 0.01},
    "frequency": {"": 1.0, "Hz": 1.0, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9},
    "distance": {"": 1.0, "m": 1.0, "km": 1e3},
    "count": {"": 1.0},
}


#: The longest duration a scenario may give: 10^10 s, about 317 years. Simulated time is a float64 number of
#: seconds: at 10^10 s it still resolves 2 microseconds, while a duration near the float limit (a latency of
#: 1.7e308 s) makes the clock infinite at the first addition.
MAX_SECONDS = 1e10


def parse_quantity(value: object, kind: str) -> float:
    """Return ``value`` in the base unit of ``kind``; raise ValueError with
    the accepted suffixes if it is not a number or a number with a known unit."""
    table = UNITS[kind]
    a_kind = ("an " if kind[0] in "aeiou" else "a ") + kind
    accepted = f"write a number followed by one of: {', '.join(s for s in table if s)} (e.g. {_example(kind)!r})"
    if isinstance(value, bool):
        raise ValueError(f"expected {a_kind} quantity, got a boolean; {accepted}")
    if isinstance(value, (int, float)):
        number, factor = float(value), 1.0
    elif isinstance(value, str):
        match = _QUANTITY.match(value)
        if not match or match.group(2) not in table:
            raise ValueError(f"{value!r} is not {a_kind} quantity; {accepted}")
        number, factor = float(match.group(1)), table[match.group(2)]
    else:
        raise ValueError(f"expected {a_kind} quantity, got {type(value).__name__}; {accepted}")
    result = number * factor
    if not math.isfinite(result):
        raise ValueError(f"{value!r} is not finite; {accepted}")
    if kind == "time" and abs(result) > MAX_SECONDS:
        raise ValueError(
            f"{value!r} is longer than netfl simulates: at most {MAX_SECONDS:g} s (about 317 years; "
            "simulated time is a float64 of seconds)"
        )
    return result


def _example(kind: str) -> str:
    return {
        "time": "30s",
        "energy": "55kJ",
        "power": "2W",
        "rate": "20Mbps",
        "bytes": "1MB",
        "flops": "2GFLOPS",
        "fraction": "30%",
        "frequency": "10MHz",
        "distance": "100m",
        "count": "10",
    }[kind]


_SI_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def format_duration(seconds: float) -> str:
    """``1h02m03s``, ``4m05s``, ``12s``; below 10 s with a fraction ``0.5s`` (a 500 ms deadline is not ``0s``)."""
    if seconds < 10 and seconds != int(seconds):
        return f"{seconds:.3g}s"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def format_si(value: float, unit: str, digits: int | None = None) -> str:
    """``value`` with an SI prefix for people to read: ``format_si(1310445, "J", 3)`` is ``'1.31 MJ'``.
    ``digits``: significant digits (None: as many as ``%g`` gives, for values a user wrote)."""
    spec = "g" if digits is None else f".{digits}g"
    for factor, prefix in _SI_PREFIXES:
        if abs(value) >= factor:
            return f"{value / factor:{spec}} {prefix}{unit}"
    return f"{value:{spec}} {unit}".rstrip()


def _quantity(kind: str):
    return BeforeValidator(lambda v: parse_quantity(v, kind))


_ROUNDS = re.compile(r"^\s*(\d+)\s*rounds?\s*$")


def parse_rounds(value: object) -> int | None:
    """The number of rounds in ``"10 rounds"`` (or ``"1 round"``, ``"10rounds"``); None for any other value."""
    match = _ROUNDS.match(value) if isinstance(value, str) else None
    return int(match.group(1)) if match else None


def bare_number(value: object) -> float | None:
    """``value`` as a number if it is one without a unit (``900``, ``"900"``; not a boolean), else None: in netfl
    such a number is in the base SI unit, so where a value may count rounds it is ambiguous and refused."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    match = _QUANTITY.match(value) if isinstance(value, str) else None
    return float(match.group(1)) if match and not match.group(2) else None


def _round_count(value: object) -> int:
    """A whole number of rounds, written with the word: ``"100 rounds"``."""
    rounds = parse_rounds(value)
    if rounds is None:
        number = bare_number(value)
        hint = f"{number:g} rounds" if number is not None and number.is_integer() else "100 rounds"
        raise ValueError(
            f"{value!r}: write a number of rounds with the word, e.g. {hint!r} (a bare number would mean "
            "seconds elsewhere in netfl)"
        )
    if rounds < 1:
        raise ValueError(f"must be at least 1 round (got {value!r})")
    return rounds


#: The symbol of each kind's base unit, as a person reads a value (``format_si``); a fraction reads as a percentage.
SYMBOLS = {
    "time": "s",
    "energy": "J",
    "power": "W",
    "rate": "bit/s",
    "bytes": "B",
    "flops": "FLOP/s",
    "fraction": "%",
    "frequency": "Hz",
    "distance": "m",
    "count": "",
}


@dataclass(frozen=True)
class Unit:
    """A quantity type's kind, in its ``Annotated`` metadata beside its parser (pydantic keeps it and ignores it):
    how a reader of a declaration, such as ``netfl validate``'s summary, finds a field's unit."""

    kind: str

    def format(self, value: float) -> str:
        """``value`` (in the base unit) as a person reads it: ``5 Mbit/s``, ``30%``, ``1m30s``."""
        if self.kind == "fraction":
            return f"{100 * value:g}%"
        return format_duration(value) if self.kind == "time" else format_si(value, SYMBOLS[self.kind])


def unit_of(annotation: Any, metadata: Iterable[Any] = ()) -> Unit | None:
    """The :class:`Unit` of a field declared as ``annotation`` (with pydantic's ``metadata``): a quantity type,
    a per-device distribution of one, or either ``| None``; None for a plain number or any other type."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        metadata = [*metadata, *(unit_of(arg) for arg in typing.get_args(annotation))]
    metadata = [*metadata, *getattr(annotation, "__metadata__", ())]
    return next((m for m in metadata if isinstance(m, Unit)), None)


Seconds = Annotated[float, _quantity("time"), Unit("time")]
#: A count of server rounds, always written with the word (``"100 rounds"``), never a bare number.
Rounds = Annotated[int, BeforeValidator(_round_count)]
Joules = Annotated[float, _quantity("energy"), Unit("energy")]
Watts = Annotated[float, _quantity("power"), Unit("power")]
BitsPerSecond = Annotated[float, _quantity("rate"), Unit("rate")]
Bytes = Annotated[float, _quantity("bytes"), Unit("bytes")]
Fraction = Annotated[float, _quantity("fraction"), Unit("fraction")]
Hertz = Annotated[float, _quantity("frequency"), Unit("frequency")]
