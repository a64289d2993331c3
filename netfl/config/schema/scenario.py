"""The scenario: its name and seeds, and a part of the topology file under each of its keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from pydantic import Field, field_validator, model_validator

from netfl.config.schema.device_spec import DeviceGroupSpec
from netfl.config.schema.network_spec import NetworkSpec
from netfl.config.schema.run_spec import EngineSpec, EvalSpec, EventsSpec, OutputSpec, TrackingSpec
from netfl.config.schema.server_spec import ServerSpec
from netfl.config.schema.task_spec import TaskSpec
from netfl.numbers import ANY_SIZE, Strict
from netfl.registry.run_params import StopSpec

__all__ = ["Scenario", "Seeds"]


class Seeds(NamedTuple):
    world: int
    training: int


class Scenario(Strict):
    name: str = Field(
        pattern=r"^[A-Za-z0-9_.-]+$", description="the scenario's name (letters, digits, _ . -): results/<name>"
    )
    seed: int = Field(
        0,
        ge=0,
        json_schema_extra=ANY_SIZE,
        description="seeds every random draw (world_seed and training_seed when not given)",
    )
    world_seed: int | None = Field(
        None,
        ge=0,
        json_schema_extra=ANY_SIZE,
        description="the world's draws: devices, availability, channels, media, relays, asynchronous workers",
    )
    training_seed: int | None = Field(
        None,
        ge=0,
        json_schema_extra=ANY_SIZE,
        description="the learning's draws: data split, test split, initial model, minibatches, client selection",
    )
    stop: StopSpec = Field(description="when the run ends")
    tasks: list[TaskSpec] = Field(
        min_length=1, description="what is learnt: task, or tasks, a list of them (several models at once)"
    )
    devices: list[DeviceGroupSpec] = Field(min_length=1, description="the device groups")
    network: NetworkSpec = Field(
        NetworkSpec(), description="access points, relays, edges and wired links; without: each device to the server"
    )
    server: ServerSpec = Field(ServerSpec(), description="the algorithm and how rounds or arrivals are aggregated")
    eval: EvalSpec = Field(EvalSpec(), description="when and on how much of the test set the model is evaluated")
    engine: EngineSpec = Field(EngineSpec(), description="how the engine holds the devices")
    events: EventsSpec = Field(EventsSpec(), description="what the event log records")
    output: OutputSpec = Field(OutputSpec(), description="where the results go")
    tracking: TrackingSpec = Field(
        TrackingSpec(),
        description="log the run to TensorBoard and/or MLflow too: {tensorboard: DIR, mlflow: URI} "
        "(not part of the world: a run folder's scenario.yaml leaves it out)",
    )
    source: Path | None = Field(None, exclude=True, description="the file this came from (set by load_scenario)")

    @model_validator(mode="before")
    @classmethod
    def _task_or_tasks(cls, data: Any):
        if isinstance(data, dict) and "task" in data:
            if "tasks" in data:
                raise ValueError("give either task or tasks, not both")
            data = {**data, "tasks": [data["task"]]}
            del data["task"]
        return data

    @field_validator("devices")
    @classmethod
    def _unique_groups(cls, devices: list[DeviceGroupSpec]):  # a field validator, so the error names `devices`
        names = [g.group for g in devices]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"device group names must be unique; repeated: {', '.join(dupes)}")
        return devices

    @property
    def seeds(self) -> Seeds:
        """The seeds in effect: ``seed`` for both, unless world_seed or training_seed says otherwise."""
        return Seeds(
            self.seed if self.world_seed is None else self.world_seed,
            self.seed if self.training_seed is None else self.training_seed,
        )

    @property
    def num_devices(self) -> int:
        return sum(g.count for g in self.devices)

    @property
    def task(self) -> TaskSpec:
        return self.tasks[0]

    @property
    def names_users_code(self) -> bool:
        """Whether some task's model or data set is the user's own, or read to be sized (LEAF's tasks), so that torch
        must build and measure it."""
        return any(t.measured for t in self.tasks)
