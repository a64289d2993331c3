"""When the engine stops and evaluates, each declared once: ``stop`` (:class:`StopSpec`) and the spelling of
``eval.every`` (:class:`Every`), read by :class:`netfl.sim.simulation.Simulation` as the scenario gives them.

Here, below both the configuration and the engine (``tests/config/test_layers.py``), because both read them:
the schema types ``Scenario.stop`` with :class:`StopSpec` and ``EvalSpec.every`` with :data:`EveryValue`, and a
world holds the same objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import BeforeValidator, Field, model_validator

from netfl.numbers import Strict
from netfl.units import Fraction, Seconds, bare_number, parse_quantity, parse_rounds

__all__ = ["EVERY_ROUND", "EVERY_SPELLINGS", "Every", "EveryValue", "StopSpec"]


class StopSpec(Strict):
    """Stop at whichever limit comes first."""

    sim_time: Seconds | None = Field(None, gt=0, description="simulated seconds")
    rounds: int | None = Field(None, gt=0, description="server rounds (aggregations)")
    accuracy: Fraction | None = Field(
        None,
        gt=0,
        le=1,
        description="stop at the first evaluation reaching this test accuracy (needs sim_time or rounds too)",
    )

    @model_validator(mode="after")
    def _one_limit(self):
        if self.sim_time is None and self.rounds is None:
            raise ValueError("give sim_time, rounds, or both (also with accuracy: it may never be reached)")
        return self


@dataclass(frozen=True)
class Every:
    """How often the model is evaluated: every ``rounds`` rounds, or every ``seconds`` of simulated time (a grid
    shared by every run of a study, whatever their round lengths)."""

    rounds: int | None = None
    seconds: float | None = None

    def as_scenario_value(self) -> str:
        return f"{self.rounds} rounds" if self.rounds is not None else f"{self.seconds!r}s"


EVERY_SPELLINGS = "a number of rounds with the word ('10 rounds') or a simulated time ('5min', '30s')"


def _every(value: object) -> Every:
    if isinstance(value, Every):
        return value
    number = bare_number(value)
    if number is not None:
        spelled = f"'{number:g} rounds' or '{number:g}s'" if number.is_integer() else f"'{number:g}s'"
        raise ValueError(f"{value!r} without a unit could mean rounds or seconds: write {spelled} ({EVERY_SPELLINGS})")
    rounds = parse_rounds(value)
    if rounds is not None:
        if rounds <= 0:
            raise ValueError(f"must be > 0 rounds (got {value!r})")
        return Every(rounds=rounds)
    if isinstance(value, str):
        try:
            seconds = parse_quantity(value, "time")
        except ValueError:
            raise ValueError(f"{value!r}: write {EVERY_SPELLINGS}") from None
        if not seconds > 0:
            raise ValueError(f"must be a positive time (got {value!r})")
        return Every(seconds=seconds)
    raise ValueError(f"{value!r}: write {EVERY_SPELLINGS}")


#: Evaluate after every round: ``eval.every``'s default, and a world's.
EVERY_ROUND = Every(rounds=1)
#: ``eval.every`` as a file writes it: ``10 rounds`` or a simulated time, parsed into an :class:`Every`.
EveryValue = Annotated[Every, BeforeValidator(_every)]
