"""A user's population policy and traces under hostile input: arrays written in place, answers that are not real
numbers, a clock that creeps, a trace that lists too few devices, a policy that does not load -- each a one-line
error naming the user's file (or the topology's path), never a quiet cast, a scrambled world or a hang."""

from __future__ import annotations

import re
import textwrap
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from cli_support import TINY
from cli_support import run as run_cli

from netfl.errors import PolicyError
from netfl.policies.catalog import population_model

POLICY = """\
import numpy as np
from netfl.policies import PopulationPolicy


class Hostile(PopulationPolicy):
    def start(self, devices):
        {start}
        return np.zeros(len(devices), dtype=bool), np.full(len(devices), 10.0)

    def next_change(self, devices, at, online):
        {body}
"""


def build(tmp_path: Path, body: str = "return at + 1.0", start: str = "pass", n: int = 5):
    (tmp_path / "pol.py").write_text(POLICY.format(body=body, start=start))
    spec = SimpleNamespace(policy="pol.py:Hostile", params={})
    return population_model(spec, n, 9, np.full((n, 4), 0.25), 3, base_dir=tmp_path)


@pytest.mark.parametrize(
    "body, line",
    [
        ("devices[:] = devices[::-1].copy()", 11),  # reversed: the engine's rows would be scrambled
        ("devices[:] = 0", 11),  # zeroed: every change would land on device 0, the others never move (a hang)
        ("at += 1.0", 11),
        ("online[:] = True", 11),
        ("self.label_mix[0, 0] = 1.0", 11),
    ],
)
def test_an_in_place_write_raises_in_the_users_line(tmp_path: Path, body: str, line: int) -> None:
    model = build(tmp_path, body)
    with pytest.raises(PolicyError, match=rf"pol.py:{line}: ValueError in Hostile.next_change: .*read-only"):
        model.advance(100.0)


def test_a_write_to_the_rows_given_to_start_raises_too(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"pol.py:7: ValueError in Hostile.start: .*read-only.*np.array"):
        build(tmp_path, start="devices[::-1].sort()")


def test_the_engine_arrays_are_untouched_by_a_policy_that_keeps_what_it_was_given(tmp_path: Path) -> None:
    """Read-only views, not copies the user may rewrite: what next_change is given stays what it was."""
    model = build(tmp_path, "self.kept = (devices, at, online)\n        return at + 1.0")
    model.advance(10.0)
    devices, at, online = model.user.kept
    assert devices.tolist() == [0, 1, 2, 3, 4] and at.tolist() == [10.0] * 5 and online.all()
    assert not (devices.flags.writeable or at.flags.writeable or online.flags.writeable)
    assert model.change.tolist() == [11.0] * 5 and model.state.all()


@pytest.mark.parametrize(
    "body, got",
    [
        ("return at + 1 + 1j", "ndarray of complex numbers"),
        ("return [str(t + 1) for t in at]", "list of strings"),
        ("return [None] + list(at[1:] + 1)", "list of objects"),
        ("return np.stack([at + 1, at + 2])", "shape (2, 5)"),
        ("return float(at[0]) + 1", "shape ()"),
        ("return [[1.0], [2.0, 3.0]]", "list of values of different lengths"),
    ],
)
def test_an_answer_that_is_not_one_real_number_per_device_is_refused(tmp_path: Path, body: str, got: str) -> None:
    model = build(tmp_path, body)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's ComplexWarning would have been printed from netfl's own line
        with pytest.raises(PolicyError) as caught:
            model.advance(100.0)
    assert re.fullmatch(
        rf".*pol.py:10: Hostile.next_change gave the times of change as {re.escape(got)}; expected one real number "
        "for each of the 5 devices asked about",
        str(caught.value),
    ), str(caught.value)


@pytest.mark.parametrize("value", ["np.nan", "-np.inf"])
def test_a_time_that_is_not_a_later_time_is_refused(tmp_path: Path, value: str) -> None:
    model = build(tmp_path, f"return np.full(len(devices), {value})")
    with pytest.raises(PolicyError, match=r"pol.py:10: Hostile.next_change gave device 0 its next change at"):
        model.advance(100.0)


def test_a_never_is_still_accepted(tmp_path: Path) -> None:
    model = build(tmp_path, "return np.full(len(devices), np.inf)")
    model.advance(100.0)
    assert model.state.all() and np.isinf(model.change).all()


def test_a_clock_that_creeps_is_stopped_naming_the_policy(tmp_path: Path) -> None:
    """np.nextafter(at, inf): every answer later than the last, by 10^-15 s; advancing to 100 s would take 10^17
    changes. After 10 000 such changes of a device in a row the run stops, naming the file and the method."""
    model = build(tmp_path, "return np.nextafter(at, np.inf)")
    with pytest.raises(PolicyError) as caught:
        model.advance(100.0)
    message = str(caught.value)
    assert "pol.py:10: Hostile.next_change gave device 0 10,000 changes in a row" in message
    assert "simulated time stopped advancing" in message and model.change[0] - 10.0 < 1e-9


def test_short_stretches_that_do_advance_are_not_stopped(tmp_path: Path) -> None:
    """Changes 2 us apart are a busy world, not a stuck one: 50 000 of them per device pass."""
    model = build(tmp_path, "return at + 2e-6", n=3)
    model.advance(10.1)
    assert model.change.min() > 10.1 and model.state.dtype == bool


def test_uniform_given_float_rows_says_so_in_one_line(tmp_path: Path) -> None:
    model = build(tmp_path, "return at + self.uniform(devices.astype(float))", n=2000)
    with pytest.raises(PolicyError) as caught:
        model.advance(100.0)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 300, message
    assert "devices must be a 1-d array of whole rows 0 to 1999, got a float64 array of shape (2000,)" in message


# ----------------------------------------------------------------------------- validate: traces and engine form


def topology(tmp_path: Path, availability: dict, count: int = 40, **extra) -> Path:
    data = yaml.safe_load(TINY)
    data["devices"][0].update(count=count, availability=availability)
    data["task"]["dataset"]["partition"] = {"kind": "iid", "samples_per_client": 20}  # 2 000 devices share them
    data.update(extra)
    path = tmp_path / "topology.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_trace_listing_3_devices_for_a_group_of_2000_is_refused(tmp_path: Path) -> None:
    (tmp_path / "t3.csv").write_text("device,start_s,end_s\n0,0,100\n1,5,50\n2,3,9\n")
    result = run_cli("validate", topology(tmp_path, {"policy": "trace_csv", "file": "t3.csv"}, count=2000))
    assert result.exit_code == 2, result.output
    assert (
        f"devices[0].availability.file: {tmp_path / 't3.csv'}: lists 3 of the 2,000 devices that replay it "
        "(scenario devices 0 to 1999); the other 1,997 would never be online"
    ) in result.output
    assert "unlisted: offline" in result.output
    offline = {"policy": "trace_csv", "file": "t3.csv", "unlisted": "offline"}
    assert run_cli("validate", topology(tmp_path, offline, count=2000)).exit_code == 0


def test_a_second_group_is_checked_against_its_own_devices(tmp_path: Path) -> None:
    """A group's devices are the scenario's indices after the groups before it: 4 to 5 here."""
    (tmp_path / "t.csv").write_text("device,start_s,end_s\n" + "".join(f"{d},0,10\n" for d in range(5)))
    data = yaml.safe_load(TINY)
    second = dict(data["devices"][0], group="late", count=2, availability={"policy": "trace_csv", "file": "t.csv"})
    data["devices"].append(second)
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(data))
    result = run_cli("validate", path)
    assert result.exit_code == 2 and "devices[1].availability.file" in result.output
    assert "lists 1 of the 2 devices that replay it (scenario devices 4 to 5)" in result.output


NO_NEXT = """\
import numpy as np
from netfl.policies import PopulationPolicy


class Half(PopulationPolicy):
    def start(self, devices):
        return np.zeros(len(devices), dtype=bool), np.full(len(devices), np.inf)
"""


@pytest.mark.parametrize(
    "write, problem",
    [
        (True, "half.py: Half does not define next_change"),
        (False, "file not found"),
    ],
)
def test_a_policy_that_does_not_load_is_one_problem_under_the_array_form(
    tmp_path: Path, write: bool, problem: str
) -> None:
    if write:
        (tmp_path / "half.py").write_text(NO_NEXT)
    path = topology(tmp_path, {"policy": "half.py:Half"}, engine={"devices": "arrays"})
    result = run_cli("validate", path)
    assert result.exit_code == 2, result.output
    assert "1 problem(s)" in result.output and problem in result.output, result.output
    assert "no population form" not in result.output and "engine.devices: auto" not in result.output


def test_a_per_device_policy_under_the_array_form_is_still_refused(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(
        textwrap.dedent(
            """
            from netfl.policies import RoundPolicy

            class Mine(RoundPolicy):
                def participates(self, round_index):
                    return True
            """
        )
    )
    result = run_cli("validate", topology(tmp_path, {"policy": "mine.py:Mine"}, engine={"devices": "arrays"}))
    assert result.exit_code == 2 and "answers per device (no population form)" in result.output
