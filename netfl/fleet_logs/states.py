"""The state vocabulary of device logs: five kinds of state, each a small integer, with a numeric value.

A log is a sequence of (time, kind, value) changes; a kind keeps its value until its next change. Kinds
are small integers (int8 arrays of 10^8 events stay small); names are for messages and the long table.
"""

from __future__ import annotations

SCREEN = 1  # value 1: on, 0: off
LOCK = 2  # value 1: locked, 0: unlocked
CHARGER = 3  # value 1: plugged in, 0: not
NETWORK = 4  # value: one of NETWORK_NAMES' keys
BATTERY = 5  # value: percent, 0 to 100

KINDS = (SCREEN, LOCK, CHARGER, NETWORK, BATTERY)
KIND_NAMES = {SCREEN: "screen", LOCK: "lock", CHARGER: "charger", NETWORK: "network", BATTERY: "battery"}
KIND_BY_NAME = {name: kind for kind, name in KIND_NAMES.items()}

NONE, WIFI, G2, G3, G4, G5 = 0, 1, 2, 3, 4, 5
NETWORK_NAMES = {NONE: "none", WIFI: "wifi", G2: "2g", G3: "3g", G4: "4g", G5: "5g"}

# What each kind's value may be, for the one-line messages.
ACCEPTED = {
    SCREEN: "1 (on) or 0 (off)",
    LOCK: "1 (locked) or 0 (unlocked)",
    CHARGER: "1 (plugged) or 0 (not)",
    NETWORK: "0 (none), 1 (wifi), 2 (2g), 3 (3g), 4 (4g) or 5 (5g)",
    BATTERY: "a percentage from 0 to 100",
}


def value_problem(kind: int, value: float) -> str | None:
    """Why ``value`` is not a valid value of ``kind`` (None when it is)."""
    if value != value:  # NaN
        return f"{KIND_NAMES[kind]} value is missing; accepted: {ACCEPTED[kind]}"
    if kind == BATTERY:
        ok = 0.0 <= value <= 100.0
    elif kind == NETWORK:
        ok = value in NETWORK_NAMES
    else:
        ok = value in (0.0, 1.0)
    if ok:
        return None
    shown = f"{value:g}%" if kind == BATTERY else f"{value:g}"
    return f"{KIND_NAMES[kind]} value {shown} is out of range; accepted: {ACCEPTED[kind]}"
