"""The scenario's closed choices that another layer acts on, each declared once.

The schema types its field with the ``Literal`` (so the YAML is refused with the accepted values, and the JSON
schema and the docs' tables list them), and the layer that acts on the value, which cannot import the scenario
(the learner, the engine), reads the same values from here through :func:`values`. A new choice is added here
and where it is acted on.
"""

from __future__ import annotations

import typing
from typing import Literal

__all__ = ["AlohaBackoff", "ChannelKind", "DataTargets", "LrSchedule", "OnDivergence", "RamDraw", "values"]

#: ``server.on_divergence``: what the learner does with a non-finite update or probe report.
OnDivergence = Literal["stop", "skip_update"]
#: ``task.local.lr_schedule``: the client learning rate over rounds.
LrSchedule = Literal["constant", "inverse_round"]
#: ``task.dataset.targets``: what a LEAF character data set's samples are labelled with.
DataTargets = Literal["sample", "every_token"]
#: ``devices[].link.channel.kind``: a wireless channel's fading.
ChannelKind = Literal["awgn", "rayleigh", "rician"]
#: ``network.nodes.*.medium.backoff``: a slotted ALOHA device's transmit probability after a collision.
AlohaBackoff = Literal["none", "binary_exponential"]
#: ``network.nodes.*.ram.draw``: among whom a RAM relay draws the user whose update passes.
RamDraw = Literal["all", "arrived"]


def values(choice: object) -> tuple[str, ...]:
    """The values a choice's ``Literal`` accepts, in its order."""
    return typing.get_args(choice)
