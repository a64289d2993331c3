"""The fitted world as a topology's ``devices:`` list, and the comment block that says what was fitted.

Each fitted group becomes one device group of today's schema: availability the ``diurnal`` chain of the
eligible fraction, the owner's use the ``diurnal`` chain of the screen with its power, the charger a
``daily`` window, the idle draw and charge power, the battery's capacity (given, not fitted: a log holds
percent, not joules) and its initial charge. What a log cannot tell -- compute speed, the link -- is the
caller's (``netfl fit --flops``, ``--uplink``), written as such.

The block of ``# netfl fit:`` comments on top records what was fitted and from how many devices and days;
``netfl validate`` prints it back for a topology that includes the fragment (:func:`provenance_lines`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from netfl.fleet_fit.estimate import FittedGroup

__all__ = ["MARK", "group_document", "fragment_text", "provenance_lines"]

MARK = "# netfl fit:"


def _clock(seconds: float) -> str:
    minutes = int(round(seconds / 60)) % 1440
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def group_document(group: FittedGroup, flops: float, uplink: str) -> dict[str, Any]:
    """One ``devices[]`` entry, as the topology file's keys."""
    battery: dict[str, Any] = {
        "capacity": f"{group.capacity:g}J",
        "initial": {"uniform": list(group.initial)} if group.initial[0] < group.initial[1] else group.initial[0],
        "charge_power": f"{max(group.charge_power, 1e-3):g}W",
    }
    if group.window is not None:
        start, end, jitter = group.window
        battery["charging"] = {"policy": "daily", "start": _clock(start), "end": _clock(end), "jitter": f"{jitter:g}s"}
    entry: dict[str, Any] = {
        "group": group.name,
        "count": len(group.devices),
        "compute": {"flops_per_s": flops},
        "power": {"idle": f"{group.idle_power:g}W"},
        "battery": battery,
        "availability": {
            "policy": "diurnal",
            "profile": list(group.availability_profile),
            "mixing": f"{group.availability_mixing:g}s",
        },
    }
    if group.use_profile is not None:
        entry["usage"] = {
            "sessions": {"policy": "diurnal", "profile": list(group.use_profile), "mixing": f"{group.use_mixing:g}s"},
            "power": max(group.use_power, 1e-6),
        }
    entry["link"] = {"uplink": uplink}
    return entry


def fragment_text(
    groups: list[FittedGroup], source: str, *, flops: float, uplink: str, rule: str = "locked and charging and wifi"
) -> str:
    """The fragment's YAML: the provenance comments, then ``devices:``."""
    devices = sum(len(g.devices) for g in groups)
    days = sum(g.days for g in groups)
    header = [
        f"{MARK} {devices} devices over {days / max(devices, 1):.1f} days ({days:.0f} device-days) of logs from "
        f"{source}, in {len(groups)} group(s)",
        f"{MARK} fitted: availability (diurnal profile of '{rule}', mixing), use (diurnal "
        "sessions, power), charger (daily window, jitter), idle draw, charge power, initial charge",
        f"{MARK} given, not fitted: battery capacity {groups[0].capacity:g} J, compute {flops:g} FLOP/s, "
        f"uplink {uplink}"
        if groups
        else f"{MARK} no devices",
    ]
    body = yaml.safe_dump(
        {"devices": [group_document(g, flops, uplink) for g in groups]},
        sort_keys=False,
        default_flow_style=None,
        width=120,
    )
    return "\n".join(header) + "\n" + body


def provenance_lines(topology: Path) -> list[str]:
    """The ``# netfl fit:`` lines of a topology file (none if it holds no fitted fragment)."""
    try:
        text = Path(topology).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    return [line.strip()[len(MARK) :].strip() for line in text.splitlines() if line.strip().startswith(MARK)]
