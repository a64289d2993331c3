"""The configuration layer: a scenario's schema, its loading and its cross-checks.

Imports neither torch nor simpy (a test pins that), so ``netfl validate`` and
a notebook that only builds scenarios stay light; the building layer
(:mod:`netfl.assemble`) turns a :class:`Scenario` into the engine's and the
learner's own objects.
"""

from netfl.config.checks import check_scenario
from netfl.config.data import check_data
from netfl.config.loading import load_scenario, scenario_document, scenario_from_dict
from netfl.config.schema import Scenario

__all__ = ["Scenario", "check_data", "check_scenario", "load_scenario", "scenario_document", "scenario_from_dict"]
