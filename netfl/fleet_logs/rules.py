"""Rules over a device's states (``locked and charging and wifi``), and the intervals in which one holds.

A rule is words joined by ``and``, ``or``, ``not`` and parentheses; its words:

=================  ==================================================
``screen_on``      the screen is on (``screen_off``: off)
``locked``         the screen is locked (``unlocked``: not)
``charging``       the charger is plugged in
``wifi``           on Wi-Fi; ``cellular``: on 2G to 5G; ``2g`` ... ``5g``
``connected``      on any network (``no_network``: on none)
``battery < 30``   a comparison of the battery percentage (``<``, ``<=``, ``>``, ``>=``)
=================  ==================================================

Before a kind's first logged change a device is as FLASH's Timer starts it (PKU-Chengxu/FLASH,
``models/timer.py``): screen on, unlocked, not charging, no network, battery unknown (every comparison
false). A rule is evaluated after all of a device's changes at one instant, so two changes logged at the same
second never open a zero-length interval.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from netfl.fleet_logs.records import DeviceLog, LogBlock
from netfl.fleet_logs.states import BATTERY, CHARGER, G2, G3, G4, G5, KINDS, LOCK, NETWORK, NONE, SCREEN, WIFI

#: Google's and FLASH's: idle (locked), charging and on Wi-Fi (Bonawitz et al., "Towards Federated Learning at
#: Scale", 2019; FLASH's Timer).
DEFAULT_RULE = "locked and charging and wifi"

#: Each kind's state before its first logged change (FLASH's Timer's start).
INITIAL = {SCREEN: 1.0, LOCK: 0.0, CHARGER: 0.0, NETWORK: float(NONE), BATTERY: math.nan}

States = dict[int, np.ndarray]  # kind -> its value after each event
_WORDS: dict[str, Callable[[States], np.ndarray]] = {
    "screen_on": lambda s: s[SCREEN] == 1,
    "screen_off": lambda s: s[SCREEN] == 0,
    "locked": lambda s: s[LOCK] == 1,
    "unlocked": lambda s: s[LOCK] == 0,
    "charging": lambda s: s[CHARGER] == 1,
    "wifi": lambda s: s[NETWORK] == WIFI,
    "cellular": lambda s: (s[NETWORK] >= G2) & (s[NETWORK] <= G5),
    "connected": lambda s: s[NETWORK] != NONE,
    "no_network": lambda s: s[NETWORK] == NONE,
    **{name: (lambda s, v=v: s[NETWORK] == v) for name, v in (("2g", G2), ("3g", G3), ("4g", G4), ("5g", G5))},
}
_KIND_OF_WORD = {
    **dict.fromkeys(("screen_on", "screen_off"), SCREEN),
    **dict.fromkeys(("locked", "unlocked"), LOCK),
    "charging": CHARGER,
    **dict.fromkeys(("wifi", "cellular", "connected", "no_network", "2g", "3g", "4g", "5g"), NETWORK),
}
_COMPARE = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}
_TOKEN = re.compile(r"\s*(\(|\)|<=|>=|<|>|[A-Za-z0-9_.%]+)")
ACCEPTED = (
    "words " + ", ".join(_WORDS) + ", battery < N (or <=, >, >=), joined by and, or, not and parentheses; "
    "e.g. " + DEFAULT_RULE
)


class RuleError(ValueError):
    """A rule that does not parse; the message says where and what is accepted."""


@dataclass(frozen=True)
class Rule:
    """A parsed rule: ``holds(states)`` answers per event; :meth:`intervals` per device."""

    text: str
    holds: Callable[[States], np.ndarray]
    kinds: tuple[int, ...] = KINDS  # the kinds the rule reads (the others need not be followed)

    def intervals(self, log: DeviceLog) -> tuple[np.ndarray, np.ndarray]:
        """The half-open intervals ``[start, end)`` in which the rule holds for ``log``'s device, in time order,
        merged; the first may start at -inf (it holds before the first change), the last end at inf."""
        at, states = states_after(log, self.kinds)
        before = {kind: np.array([value]) for kind, value in INITIAL.items()}
        on = np.concatenate([self.holds(before), self.holds(states)]).astype(bool)
        edges = np.concatenate([[-math.inf], at, [math.inf]])  # on[i] holds on [edges[i], edges[i + 1])
        flips = np.flatnonzero(on[1:] != on[:-1]) + 1  # where a stretch starts or ends
        bounds = np.concatenate([[-math.inf] if on[0] else [], edges[flips], [math.inf] if on[-1] else []])
        return bounds[0::2].copy(), bounds[1::2].copy()

    def block_intervals(self, block: LogBlock) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`intervals` for every device of a block at once: (device index in the block, starts, ends), in
        device then time order."""
        who, at, states = block_states_after(self._read_rows(block), self.kinds)
        initially = bool(self.holds({kind: np.array([value]) for kind, value in INITIAL.items()})[0])
        on = np.asarray(self.holds(states), dtype=bool)
        before = np.empty(len(on), dtype=bool)  # the state before each instant: the device's previous, or initial
        before[1:] = on[:-1]
        opens = np.ones(len(on), dtype=bool)
        opens[1:] = who[1:] != who[:-1]
        before[opens] = initially
        rises, falls = np.flatnonzero(on & ~before), np.flatnonzero(~on & before)
        devices = np.arange(len(block))
        last_on = np.zeros(len(block), dtype=bool)
        ends_at = np.append(np.flatnonzero(opens[1:]), len(on) - 1)  # each device's last instant
        last_on[who[ends_at]] = on[ends_at]
        start_owner = np.concatenate([devices if initially else devices[:0], who[rises]])
        start_time = np.concatenate([np.full(len(block) if initially else 0, -math.inf), at[rises]])
        end_owner = np.concatenate([who[falls], devices[last_on]])
        end_time = np.concatenate([at[falls], np.full(int(last_on.sum()), math.inf)])
        s_order = np.argsort(start_owner, kind="stable")  # -inf first within a device, then in time order
        e_order = np.argsort(end_owner, kind="stable")  # the rest in time order, inf last
        return start_owner[s_order], start_time[s_order], end_time[e_order]

    def _read_rows(self, block: LogBlock) -> LogBlock:
        """The block's rows of the kinds the rule reads, and each device's first row (so that every device keeps
        an instant): the same intervals from fewer rows, as a row of another kind never changes the rule's
        answer (half of a phone's rows can be battery levels that ``locked and charging and wifi`` ignores)."""
        if set(KINDS) <= set(self.kinds) or not len(block.times):
            return block
        keep = block.kinds == self.kinds[0] if self.kinds else np.zeros(len(block.kinds), dtype=bool)
        for kind in self.kinds[1:]:
            keep |= block.kinds == kind
        keep[block.offsets[:-1]] = True
        rows = np.flatnonzero(keep)
        if len(rows) == len(keep):
            return block
        offsets = np.searchsorted(rows, block.offsets)  # each device's rows kept before its first
        return LogBlock(block.devices, offsets, block.times[rows], block.kinds[rows], block.values[rows], block.source)


def block_states_after(block: LogBlock, kinds: tuple[int, ...] = KINDS) -> tuple[np.ndarray, np.ndarray, States]:
    """:func:`states_after` for every device of a block at once: (each instant's device, its time, the states)."""
    owner = block.owner
    n = len(block.times)
    index = np.arange(n)
    last = np.ones(n, dtype=bool)  # the last event of its device at its instant
    last[:-1] = (block.times[1:] != block.times[:-1]) | (owner[1:] != owner[:-1])
    last = np.flatnonzero(last)
    first = block.offsets[:-1][owner[last]]  # where each instant's device starts
    states: States = {}
    for kind in kinds:
        latest = np.maximum.accumulate(np.where(block.kinds == kind, index, -1))[last]
        mine = latest >= first  # a change of this device, not of one before it
        states[kind] = np.where(mine, block.values[np.maximum(latest, 0)], INITIAL[kind])
    return owner[last], block.times[last], states


def states_after(log: DeviceLog, kinds: tuple[int, ...] = KINDS) -> tuple[np.ndarray, States]:
    """The distinct times of ``log``'s changes and each kind's value after all the changes at each of them
    (forward filled; :data:`INITIAL` before a kind's first change)."""
    last = np.flatnonzero(np.append(log.times[1:] != log.times[:-1], True))  # the last event at each instant
    states: States = {}
    index = np.arange(len(log))
    for kind in kinds:
        mine = log.kinds == kind
        latest = np.maximum.accumulate(np.where(mine, index, -1))[last]  # the kind's latest event so far
        states[kind] = np.where(latest >= 0, log.values[np.maximum(latest, 0)], INITIAL[kind])
    return log.times[last], states


def parse_rule(text: str) -> Rule:
    """The rule ``text`` (see the module docstring); a RuleError says what is wrong and what is accepted."""
    tokens, pos = [], 0
    text_ = text.strip()
    while pos < len(text_):
        m = _TOKEN.match(text_, pos)
        if not m:
            raise RuleError(f"rule {text!r}: cannot read {text_[pos:]!r}; accepted: {ACCEPTED}")
        tokens.append(m.group(1).lower())
        pos = m.end()
    if not tokens:
        raise RuleError(f"rule is empty; accepted: {ACCEPTED}")
    parser = _Parser(text, tokens)
    holds = parser.disjunction()
    if parser.i < len(tokens):
        raise RuleError(f"rule {text!r}: unexpected {tokens[parser.i]!r}; accepted: {ACCEPTED}")
    return Rule(text, holds, tuple(sorted(parser.kinds)))


class _Parser:
    """Recursive descent: or < and < not < atom."""

    def __init__(self, text: str, tokens: list[str]):
        self.text, self.tokens, self.i = text, tokens, 0
        self.kinds: set[int] = set()

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise RuleError(f"rule {self.text!r} ends too soon; accepted: {ACCEPTED}")
        self.i += 1
        return token

    def disjunction(self) -> Callable[[States], np.ndarray]:
        parts = [self.conjunction()]
        while self.peek() == "or":
            self.take()
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else (lambda s: np.logical_or.reduce([p(s) for p in parts]))

    def conjunction(self) -> Callable[[States], np.ndarray]:
        parts = [self.negation()]
        while self.peek() == "and":
            self.take()
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else (lambda s: np.logical_and.reduce([p(s) for p in parts]))

    def negation(self) -> Callable[[States], np.ndarray]:
        if self.peek() == "not":
            self.take()
            inner = self.negation()
            return lambda s: ~inner(s)
        return self.atom()

    def atom(self) -> Callable[[States], np.ndarray]:
        token = self.take()
        if token == "(":
            inner = self.disjunction()
            if self.peek() != ")":
                raise RuleError(f"rule {self.text!r}: a '(' is not closed; accepted: {ACCEPTED}")
            self.take()
            return inner
        if token == "battery":
            op = self.take()
            if op not in _COMPARE:
                raise RuleError(f"rule {self.text!r}: battery needs <, <=, > or >= and a percentage, got {op!r}")
            raw = self.take().rstrip("%")
            try:
                level = float(raw)
            except ValueError:
                raise RuleError(f"rule {self.text!r}: battery {op} {raw!r}: expected a percentage") from None
            compare = _COMPARE[op]
            self.kinds.add(BATTERY)
            return lambda s: compare(s[BATTERY], level)  # NaN (unknown) compares false
        if token in _WORDS:
            self.kinds.add(_KIND_OF_WORD[token])
            return _WORDS[token]
        raise RuleError(f"rule {self.text!r}: unknown word {token!r}; accepted: {ACCEPTED}")
