"""The event log: every engine event, in simulated-time order.

One row per event: ``sim_time_s``, ``round``, ``device`` (-1 for the
server), ``kind`` and a free-form ``detail``. Everything a user may plot
comes from here (plus the metrics the learner reports at evaluations).
"""

from __future__ import annotations

from dataclasses import dataclass, field

SERVER = -1

EVENT_KINDS = (
    "round_start", "online", "offline", "selected", "download_start", "download_end", "train_start",
    "train_end", "upload_start", "upload_end", "dropout", "aggregate", "battery_empty", "battery_full",
    "below_min_level", "above_min_level", "charge_start", "charge_stop", "power_on", "late", "pull",
    "tx_start", "tx_end", "collision", "retransmission", "relay_arrive", "relay_pass", "relay_drop",
)


@dataclass
class EventRecorder:
    times: list[float] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    devices: list[int] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)

    def log(self, time: float, round_index: int, device: int, kind: str, detail: str = "") -> None:
        self.times.append(float(time))
        self.rounds.append(int(round_index))
        self.devices.append(int(device))
        self.kinds.append(kind)
        self.details.append(detail)

    def __len__(self) -> int:
        return len(self.kinds)

    def count(self, kind: str) -> int:
        return self.kinds.count(kind)

    def columns(self) -> dict[str, list]:
        return {"sim_time_s": self.times, "round": self.rounds, "device": self.devices,
                "kind": self.kinds, "detail": self.details}
