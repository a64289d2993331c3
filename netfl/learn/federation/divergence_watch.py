"""The divergence watch: NaN and infinity in what the learner handles, and what the run does about them.

Before the strategy sees them, the updates that arrived are checked for NaN
and infinity (:func:`all_finite`: one sum per update, about what adding it
to the aggregate costs), and so are probe reports, each new global model
and every test loss. A non-finite update or report stops the run
(:class:`~netfl.backend.Diverged`) or, with ``on_divergence:
skip_update``, is dropped and counted (``updates_skipped``) so that it
reaches neither the model nor a stateful strategy's memory; a non-finite
global model or test loss always stops the run. A client's training loss is
never computed (the stacked kernels need only its gradient): a non-finite
loss makes its gradients, hence its update, non-finite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from netfl.backend import Diverged, Divergence, Evaluation
from netfl.registry.choices import OnDivergence, values

#: What the learner may do with a non-finite update or report (``server.on_divergence``, declared in the registry).
ON_DIVERGENCE = values(OnDivergence)

_EMPTY = torch.zeros(0)


def all_finite(vectors: Sequence[torch.Tensor]) -> list[bool]:
    """Whether each vector holds no NaN or infinity, cheaply: a NaN or inf anywhere makes a vector's sum NaN or
    inf, so one sum per vector clears the finite ones, and only a vector whose sum is not finite (it may also
    have overflowed) is tested element by element -- 15 times slower than the sum."""
    if not vectors:
        return []
    sums = torch.isfinite(torch.stack([v.sum() for v in vectors])).tolist()
    return [ok or bool(torch.isfinite(v).all()) for v, ok in zip(vectors, sums)]


def kept(keep: Sequence[bool], *columns: Sequence) -> tuple[list, ...]:
    """Each of ``columns`` without the rows ``keep`` refuses."""
    return tuple([v for v, ok in zip(column, keep) if ok] for column in columns)


def require_finite(models: Sequence[torch.Tensor], round_index: int, clients: tuple[int, ...]) -> None:
    """Diverged (``global_model``) unless every one of ``models`` is finite: no policy drops a global model."""
    if not all(all_finite(models)):
        raise Diverged(Divergence("global_model", round_index, clients))


class DivergenceWatch:
    """The run's policy on non-finite updates and reports, the count of those it dropped, and which aggregation
    made the current global model (what a non-finite test loss is blamed on)."""

    def __init__(self, on_divergence: str = "stop"):
        if on_divergence not in ON_DIVERGENCE:
            raise ValueError(f"on_divergence must be one of {', '.join(ON_DIVERGENCE)}, got {on_divergence!r}")
        self.on_divergence = on_divergence
        self.updates_skipped = 0  # non-finite updates and probe reports dropped (on_divergence: skip_update)
        self.made_by: tuple[int | None, tuple[int, ...]] = (None, ())  # the current model's round and clients

    def nonfinite(self, where: str, round_index: int, clients: Sequence[int]) -> None:
        """Non-finite updates or reports of ``clients``: stop the run, or count them as skipped."""
        if self.on_divergence == "stop":
            raise Diverged(Divergence(where, round_index, tuple(sorted(set(clients)))))
        self.updates_skipped += len(clients)

    def finite_updates(
        self, round_index: int, clients: Sequence[int], deltas: Sequence[torch.Tensor], buffers: Sequence
    ) -> list[bool]:
        """Which updates (``deltas`` and the ``buffers`` they carry, None where none) are finite; the others are
        dealt with by the policy (a Diverged, or counted as skipped)."""
        finite = [
            ok and (b is None or ok_b)
            for ok, ok_b, b in zip(
                all_finite(deltas), all_finite([b if b is not None else _EMPTY for b in buffers]), buffers
            )
        ]
        if not all(finite):
            self.nonfinite("update", round_index, [c for c, ok in zip(clients, finite) if not ok])
        return finite

    def finite_reports(self, round_index: int, reports: dict[int, np.ndarray], trained: bool) -> dict[int, np.ndarray]:
        """The probe reports (client -> one value per task) that are finite; the others are dealt with by the
        policy, as non-finite updates when the probe trained, else as non-finite losses."""
        bad = sorted(client for client, values in reports.items() if not np.isfinite(values).all())
        if not bad:
            return reports
        self.nonfinite("update" if trained else "loss", round_index, bad)
        return {client: values for client, values in reports.items() if client not in bad}

    def check_evaluations(self, results: Sequence[Evaluation]) -> None:
        """Diverged (``evaluation``, blamed on the aggregation that made the model) on a non-finite test loss."""
        if not all(math.isfinite(r.loss) for r in results):
            raise Diverged(Divergence("evaluation", *self.made_by))
