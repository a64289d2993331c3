"""Where a device's participation probability ``p_n`` comes from.

The per-round patterns (:mod:`netfl.policies.rounds`) all take ``p``, given
one of three ways::

    p: 0.3                                   # the same for every device of the group
    p: {from: data, floor: 0.02, scale: 0.1, concentration: 0.1}
    p: {from: smallest_label, p_min: 0.1}

``from: data`` is FedAU's rule (Wang & Ji, "A Lightweight Method for Tackling
Unknown Participation Statistics in Federated Averaging"; reference code
IBM/fedau, ``util/util.py: data_participation_each_node``): one draw
``m ~ Dirichlet(concentration * ones(L))`` shared by all devices, then
``p_n = max(floor, scale * L * sum_l q_{n,l} m_l)`` with ``q_n`` the device's
label mix. Devices rich in "favoured" labels take part more often, so
participation is correlated with data -- the case FedAU is built for. The
reference code does not clip at 1; we do, since ``p_n`` is a probability.

``from: smallest_label`` is MIFA's adversarial rule (Gu et al., "Fast
Federated Learning in the Presence of Arbitrary Device Unavailability";
reference code hmgxr128/MIFA_code): ``p_n = p_min + (1 - p_min) * l_n / (L - 1)``
with ``l_n`` the smallest label device n holds (``/9`` for 10 classes, as in
the paper).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError, PydanticKnownError

from netfl.policies.base import DeviceInfo, PolicyParams
from netfl.units import parse_quantity

__all__ = [
    "DataProbability",
    "SmallestLabelProbability",
    "ProbabilitySource",
    "resolve_probability",
    "resolve_probabilities",
    "nested_validation_error",
]


class DataProbability(PolicyParams):
    """FedAU's data-correlated participation: ``p_n = max(floor, scale * L * q_n . m)``, at most 1."""

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True)
    source: Literal["data"] = Field(alias="from")
    floor: float = Field(0.02, ge=0, le=1, description="lower bound on p_n (FedAU: 0.02)")
    scale: float = Field(0.1, gt=0, description="mean participation probability (FedAU: 0.1)")
    concentration: float = Field(0.1, gt=0, description="Dirichlet concentration of the shared draw m (FedAU: 0.1)")


class SmallestLabelProbability(PolicyParams):
    """MIFA's adversarial participation: ``p_n = p_min + (1 - p_min) * (smallest label) / (L - 1)``."""

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True)
    source: Literal["smallest_label"] = Field(alias="from")
    p_min: float = Field(0.1, gt=0, le=1, description="probability of a device whose smallest label is 0 (MIFA: 0.1)")


_SOURCES: dict[str, type[BaseModel]] = {"data": DataProbability, "smallest_label": SmallestLabelProbability}


def nested_validation_error(
    exc: ValidationError, model: type[BaseModel], title: str, prefix: tuple[str | int, ...] = ()
) -> ValidationError:
    """Re-raise a nested model's errors so that they keep their key path.

    Pydantic prefixes the locations of a ValidationError raised inside a
    validator with the field's path, so a user sees ``...wifi.on``. An
    unknown key becomes a custom error that lists the nested model's own
    keys: the scenario's generic message would list the keys of the outer
    annotation instead (e.g. only ``policy``).
    """
    accepted = ", ".join(f.alias or name for name, f in model.model_fields.items())
    details: list[InitErrorDetails] = []
    for err in exc.errors():
        loc = prefix + tuple(err["loc"])
        if err["type"] == "extra_forbidden":
            details.append(
                {
                    "type": PydanticCustomError(
                        "unknown_key", "unknown key; accepted: {accepted}", {"accepted": accepted}
                    ),
                    "loc": loc,
                    "input": err["input"],
                }
            )
        else:
            detail: InitErrorDetails = {"type": err["type"], "loc": loc, "input": err["input"]}
            if "ctx" in err:
                detail["ctx"] = err["ctx"]
            details.append(detail)
    return ValidationError.from_exception_data(title, details)


def _custom(loc: tuple[str | int, ...], value: Any, message: str) -> ValidationError:
    return ValidationError.from_exception_data(
        "ProbabilitySource", [{"type": PydanticCustomError("probability_source", message), "loc": loc, "input": value}]
    )


_ACCEPTED = "a probability in (0, 1] (e.g. 0.3 or '30%'), {from: data, ...} or {from: smallest_label, ...}"


def _parse_probability(value: Any) -> float | DataProbability | SmallestLabelProbability:
    if isinstance(value, (DataProbability, SmallestLabelProbability)):
        return value
    if isinstance(value, Mapping):
        kind = value.get("from")
        model = _SOURCES.get(kind) if isinstance(kind, str) else None
        if model is None:
            if "from" not in value:
                raise _custom((), value, f"a mapping needs 'from:', one of {', '.join(_SOURCES)}")
            raise _custom(("from",), kind, f"'from' must be one of {', '.join(_SOURCES)}")
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            raise nested_validation_error(exc, model, "ProbabilitySource") from None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _custom((), value, f"expected {_ACCEPTED}")
    try:
        p = parse_quantity(value, "fraction")
    except ValueError:
        raise _custom((), value, f"expected {_ACCEPTED}") from None
    if not p > 0:
        raise PydanticKnownError("greater_than", {"gt": 0})
    if p > 1:
        raise PydanticKnownError("less_than_equal", {"le": 1})
    return p


ProbabilitySource = Annotated[float | DataProbability | SmallestLabelProbability, PlainValidator(_parse_probability)]
"""A per-device participation probability: a number, or a rule resolved per device."""


def resolve_probabilities(
    source: float | DataProbability | SmallestLabelProbability,
    label_mix: np.ndarray,
    shared_rng: Callable[[str], np.random.Generator],
) -> np.ndarray:
    """The probability ``p_n`` of each device, from the devices' label mixes (n x labels; see the module
    docstring for the rules). ``shared_rng(name)``: the generator whose draws every device shares
    (:meth:`~netfl.policies.base.DeviceInfo.shared_rng`)."""
    q = np.nan_to_num(np.atleast_2d(np.asarray(label_mix, dtype=float)))
    n, num_labels = q.shape
    if isinstance(source, DataProbability):
        # One draw for the whole scenario: every device sees the same m.
        m = shared_rng("fedau-participation").dirichlet(source.concentration * np.ones(num_labels))
        return np.minimum(np.maximum(source.floor, source.scale * num_labels * (q @ m)), 1.0)
    if isinstance(source, SmallestLabelProbability):
        held = q > 0
        smallest = np.where(held.any(axis=1), held.argmax(axis=1), 0)  # no data: the least available, as label 0
        if num_labels < 2:
            return np.full(n, source.p_min)
        return source.p_min + (1.0 - source.p_min) * smallest / (num_labels - 1)
    return np.full(n, float(source))


def resolve_probability(source: float | DataProbability | SmallestLabelProbability, device: DeviceInfo) -> float:
    """The probability ``p_n`` for one ``device``."""
    return float(resolve_probabilities(source, device.label_distribution, device.shared_rng)[0])
