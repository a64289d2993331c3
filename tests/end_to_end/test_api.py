"""The Python API: a world from a file, a dict or the schema's models; typed results; the same run as the CLI."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from cli_support import EVENT_COLUMNS, TINY
from click.testing import CliRunner

import netfl
from netfl.cli.main import main
from netfl.config.schema import DeviceGroupSpec
from netfl.errors import ScenarioError


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return path


def test_the_api_is_discoverable_by_dir_and_tab_completion() -> None:
    assert {"run", "load", "from_dict", "Result", "ScenarioError"} <= set(dir(netfl))
    assert all(callable(getattr(netfl, name)) for name in ("run", "load", "from_dict"))


def test_run_from_a_file_gives_dataframes_and_writes_nothing(tiny, tmp_path) -> None:
    result = netfl.run(tiny)
    assert result.out_dir is None and list(tmp_path.iterdir()) == [tiny]
    assert isinstance(result.metrics, pd.DataFrame) and list(result.metrics.columns[:6]) == [
        "sim_time_s",
        "round",
        "test_accuracy",
        "test_loss",
        "participants",
        "energy_j",
    ]
    assert list(result.events.columns) == EVENT_COLUMNS
    assert result.metrics.energy_j.iloc[-1] == result.summary["energy_j"]  # to the bit: last evaluation at the stop
    assert len(result.devices) == 4 and result.devices.energy_j.sum() == pytest.approx(result.summary["energy_j"])
    assert result.summary["rounds"] == 2 and result.metrics["round"].iloc[-1] == 2


def test_the_api_and_the_cli_give_the_same_run(tiny, tmp_path) -> None:
    api = netfl.run(tiny, seed=4, out=tmp_path / "api")
    cli = CliRunner().invoke(main, ["simulate", str(tiny), "--seed", "4", "--out", str(tmp_path / "cli"), "-q"])
    assert cli.exit_code == 0, cli.output
    for name in ("metrics.csv", "events.parquet", "devices.parquet"):
        assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    written = json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert written["final_test_accuracy"] == api.summary["final_test_accuracy"]
    assert pd.read_parquet(tmp_path / "cli" / "events.parquet").equals(api.events)
    # the strategy's metrics of each aggregation: algorithm.csv's table (FedAvg: updates and samples per round)
    written_metrics = pd.read_csv(tmp_path / "cli" / "algorithm.csv")
    assert list(api.algorithm.columns) == ["sim_time_s", "round", "task", "updates", "samples"]
    assert len(api.algorithm) == 2 and api.algorithm.equals(written_metrics)


def test_a_world_built_in_code_is_checked_like_a_file(tiny) -> None:
    world = netfl.load(tiny)
    bigger = world.model_copy(update={"devices": [world.devices[0].model_copy(update={"count": 6})]})
    assert netfl.run(bigger).summary["num_devices"] == 6
    group = DeviceGroupSpec.model_validate(
        {
            "group": "x",
            "count": 2,
            "compute": {"flops_per_s": 1e9},
            "link": {"uplink": 1e6},
            "availability": {"policy": "nope"},
        }
    )
    with pytest.raises(ScenarioError, match="unknown policy 'nope'"):
        netfl.run(world.model_copy(update={"devices": [group]}))
    with pytest.raises(netfl.ScenarioError, match="stop"):
        netfl.from_dict(
            {"name": "x", "task": {"dataset": {"name": "digits"}, "model": {"name": "logistic"}}, "devices": []}
        )
