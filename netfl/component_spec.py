"""A scenario value that picks a component by name and carries that component's parameters.

``availability: {policy: markov, p: 0.3}``, ``algorithm: {name: fedau, K: 50}``: one key names the
component, the other keys are its parameters. The scenario cannot know those parameters' schema
before it knows the component, so they are kept as they are (``params``) and validated by the
component's own ``Params`` model in a second pass that names their YAML path.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class WithParams(BaseModel):
    """The base of every such value: unknown keys are the component's parameters."""

    model_config = ConfigDict(extra="allow", frozen=True)

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class PolicySpec(WithParams):
    """``policy`` names a built-in policy or ``path/to/file.py:ClassName``."""

    policy: str
