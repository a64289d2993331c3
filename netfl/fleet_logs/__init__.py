"""Device-state logs: per-device timelines of screen, lock, charger, network and battery states, read and
written in FLASH's format and as a long table (CSV or parquet), streamed one device at a time.

Engine side: numpy and pyarrow only (no torch, no simpy), so that the replay (policies) and ``netfl fit``
share one data model.
"""

from netfl.fleet_logs.read import detect_format, iter_device_logs, iter_log_blocks
from netfl.fleet_logs.records import DeviceLog, LogBlock, LogError
from netfl.fleet_logs.rules import (
    DEFAULT_RULE,
    INITIAL,
    Rule,
    RuleError,
    block_states_after,
    parse_rule,
    states_after,
)
from netfl.fleet_logs.states import BATTERY, CHARGER, KIND_NAMES, LOCK, NETWORK, NETWORK_NAMES, SCREEN
from netfl.fleet_logs.write import write_device_logs

__all__ = [
    "BATTERY",
    "DEFAULT_RULE",
    "INITIAL",
    "CHARGER",
    "KIND_NAMES",
    "LOCK",
    "NETWORK",
    "NETWORK_NAMES",
    "SCREEN",
    "DeviceLog",
    "LogBlock",
    "LogError",
    "Rule",
    "RuleError",
    "block_states_after",
    "detect_format",
    "iter_device_logs",
    "iter_log_blocks",
    "parse_rule",
    "states_after",
    "write_device_logs",
]
