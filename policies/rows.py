"""One device's availability as a row of its group's population model: the per-device protocol over arrays.

A built-in policy is implemented once, as a population model
(:mod:`netfl.policies.population`); its per-device class (``Bernoulli``,
``Diurnal``...) is a view of one row of that model. The engine builds one
model per device group and gives each device a view of its row, so a device
has the same online times whether the engine holds it as an actor (every
change an event) or as a row of arrays: one seed, one world.

A view built on its own (``Diurnal(params, info, rng)``, as a world written
in code or a policy composed of others does) holds a model of one device,
keyed from ``rng``.

Flipping one row of a model is a vectorised call on one element: tens of
microseconds, where a scalar policy took a few. The actor form therefore
reads its rows through a :class:`Lookahead`, which runs the group's model
ahead in blocks of flips for many rows at once (the same draws, in the same
order for each row, so the same world) and hands each row its flips in
turn.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np

from netfl.policies.base import AvailabilityPolicy, DeviceInfo, DeviceState, PolicyParams, RoundPolicy, SessionPolicy
from netfl.policies.population import FlipHook, PopulationModel

__all__ = ["Lookahead", "PopulationRow", "RoundRow", "SessionRow"]


class Lookahead:
    """A group's model run ahead of time in blocks of ``block`` flips for all rows short of them at once; each
    row then reads its own flips in its own time order (time never goes back for one device).

    Each row keeps a ring of the flips computed and not yet reached: a row that runs out triggers a refill of
    every row with less than a block left, so rows that flip at similar rates are refilled together, and a row
    that is not asked (a device that is off) holds at most two blocks.
    """

    def __init__(self, model: PopulationModel, block: int = 32):
        self.model, self.block = model, block
        n = model.n
        self._ring = np.full((n, 2 * block), np.inf)
        self._after = np.zeros((n, 2 * block), dtype=bool)  # the state each flip leaves (a composite's may not toggle)
        self._head = np.zeros(n, dtype=np.int64)  # flips reached, per row
        self._tail = np.zeros(n, dtype=np.int64)  # flips computed, per row
        self._state = model.state.copy()  # each row's state before its next flip not yet reached
        self._refill(np.arange(n))

    def _refill(self, rows: np.ndarray) -> None:
        model, width = self.model, 2 * self.block
        for _ in range(self.block):
            at = model.change[rows]
            slot = self._tail[rows] % width
            self._ring[rows, slot] = at
            self._tail[rows] += 1
            moving = rows[np.isfinite(at)]  # a row that never changes again keeps inf
            if moving.size:
                model.flip(moving)
            self._after[rows, slot] = model.state[rows]

    def state_at(self, row: int, at: float) -> bool:
        """Row ``row``'s state at ``at``, past every flip up to it."""
        width = 2 * self.block
        while True:
            if self._head[row] == self._tail[row]:
                self._refill(np.flatnonzero(self._tail - self._head < self.block))
            slot = self._head[row] % width
            if self._ring[row, slot] > at:
                return bool(self._state[row])
            self._state[row] = self._after[row, slot]
            self._head[row] += 1

    def change_of(self, row: int) -> float:
        """Row ``row``'s next flip after the last one reached."""
        return float(self._ring[row, self._head[row] % (2 * self.block)])


class _Live:
    """A model read row by row as it stands (the array form's own models, and a view built on its own)."""

    def __init__(self, model: PopulationModel, on_flip: FlipHook | None):
        self.model, self._on_flip = model, on_flip

    def state_at(self, row: int, at: float) -> bool:
        return self.model.advance_one(row, at, self._on_flip)

    def change_of(self, row: int) -> float:
        return float(self.model.change[row])


class PopulationRow(AvailabilityPolicy):
    """What both time bases share: the model, the row, and the model class a built-in declares."""

    #: the built-in's population model (the one implementation of its behaviour)
    population: ClassVar[type[PopulationModel]]

    def __init__(self, params: PolicyParams, device: DeviceInfo, rng: np.random.Generator):
        super().__init__(params, device, rng)
        mix = np.asarray(device.label_distribution, dtype=float)[None, :]
        place = {"base_dir": device.base_dir, "first": device.index} if self.population.placed else {}
        self._attach(self.population(params, 1, int(rng.integers(2**63)), mix, device.seed, **place), 0, None)

    @classmethod
    def population_form(cls, params: PolicyParams, base_dir: Path | None) -> bool:
        """Whether a group with these parameters can be one population model (a composite of policies may not)."""
        return True

    @classmethod
    def row_of(
        cls,
        model: PopulationModel | Lookahead,
        row: int,
        device: DeviceInfo | None = None,
        on_flip: FlipHook | None = None,
    ) -> PopulationRow:
        """Device ``row``'s view of its group's ``model`` (read as it stands, ``on_flip`` seeing the flips this
        view brings about), or of a :class:`Lookahead` of it."""
        view = cls.__new__(cls)
        source = model if isinstance(model, Lookahead) else _Live(model, on_flip)
        AvailabilityPolicy.__init__(view, source.model.params, device, None)  # type: ignore[arg-type]
        view._source, view.model, view.row = source, source.model, row
        return view

    def _attach(self, model: PopulationModel, row: int, on_flip: FlipHook | None) -> None:
        self._source, self.model, self.row = _Live(model, on_flip), model, row

    def _state_at(self, at: float) -> bool:
        return self._source.state_at(self.row, at)

    def participation_probability(self) -> float | None:
        p = self.model.participation
        return None if p is None else float(p[self.row])

    @property
    def p(self) -> float | None:
        """The device's participation probability (per-round patterns), as the per-device classes always had."""
        return self.participation_probability()


class RoundRow(PopulationRow, RoundPolicy):
    """A per-round pattern's row: the state after the model's transition into ``round_index``."""

    def participates(self, round_index: int) -> bool:
        return self._state_at(round_index)


class SessionRow(PopulationRow, SessionPolicy):
    """A continuous-time policy's row: online between the model's flips."""

    def online(self, now: float, state: DeviceState) -> bool:
        return self._state_at(now)

    def next_wakeup(self, now: float) -> float:
        self._state_at(now)
        return self._source.change_of(self.row)
