"""``netfl fit``: a world fitted to a fleet's device-state logs, and how well it reproduces them.

Engine side (numpy, no torch at import): logs are streamed one device at a time
(:func:`netfl.fleet_logs.iter_device_logs`) into per-device sufficient statistics
(:mod:`~netfl.fleet_fit.statistics`), grouped by k-means (:mod:`~netfl.fleet_fit.clusters`), fitted in closed
form (:mod:`~netfl.fleet_fit.estimate`) and written as a topology's ``devices:`` list
(:mod:`~netfl.fleet_fit.fragment`); the fitted world is simulated by the engine the runs use and reduced by the
same statistics (:mod:`~netfl.fleet_fit.simulated`) for the report (:mod:`~netfl.fleet_fit.report`).
"""

from netfl.fleet_fit.pipeline import Fit, fit_logs

__all__ = ["Fit", "fit_logs"]
