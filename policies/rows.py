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
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np

from netfl.policies.base import AvailabilityPolicy, DeviceInfo, DeviceState, PolicyParams, RoundPolicy, SessionPolicy
from netfl.policies.population import FlipHook, PopulationModel

__all__ = ["PopulationRow", "RoundRow", "SessionRow"]


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
        cls, model: PopulationModel, row: int, device: DeviceInfo | None = None, on_flip: FlipHook | None = None
    ) -> PopulationRow:
        """Device ``row``'s view of its group's ``model``; ``on_flip`` sees the flips this view brings about."""
        view = cls.__new__(cls)
        AvailabilityPolicy.__init__(view, model.params, device, None)  # type: ignore[arg-type]
        view._attach(model, row, on_flip)
        return view

    def _attach(self, model: PopulationModel, row: int, on_flip: FlipHook | None) -> None:
        self.model, self.row, self._on_flip = model, row, on_flip

    def _state_at(self, at: float) -> bool:
        return self.model.advance_one(self.row, at, self._on_flip)

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
        return float(self.model.change[self.row])
