"""A FedScale trace is a pickle, and unpickling runs whatever code it holds: it is read only on an explicit
opt-in where the file is named (trust_pickle: true beside file, --allow-pickle on netfl trace convert), and
refused otherwise with a pointer to the CSV conversion -- without opening the file."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from cli_support import TINY, assert_user_error, run

from netfl.errors import PolicyError
from netfl.policies import DeviceInfo, build_policy
from netfl.policies.traces import fedscale_to_csv


class _Payload:
    """Unpickling this creates ``marker``: the proof that a pickle's code ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.makedirs, (str(self.marker),)


def _hostile(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "code-ran"
    path = tmp_path / "trace.pkl"
    path.write_bytes(pickle.dumps({1: _Payload(marker)}))
    return path, marker


def _topology(tmp_path: Path, **policy) -> Path:
    data = yaml.safe_load(TINY)
    data["devices"][0]["availability"] = {"policy": "fedscale_trace", "file": "trace.pkl", **policy}
    path = tmp_path / "topology.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_validate_and_simulate_refuse_a_pickle_without_trust_pickle(tmp_path: Path) -> None:
    _, marker = _hostile(tmp_path)
    path = _topology(tmp_path)
    for command in (["validate", path], ["simulate", path, "--out", tmp_path / "out", "-q"]):
        assert_user_error(
            run(*command),
            "devices[0].availability.trust_pickle: a FedScale trace is a Python pickle",
            "netfl trace convert TRACE.pkl trace.csv --allow-pickle",
            "policy trace_csv",
        )
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_trust_pickle_is_the_opt_in(tmp_path: Path) -> None:
    """Trusted, the trace is read where it is named -- by validate too, which then refuses a record that is not
    one (the run would), in one line -- and, untrusted, never (above)."""
    _, marker = _hostile(tmp_path)
    assert_user_error(
        run("validate", _topology(tmp_path, trust_pickle=True)),
        "devices[0].availability.file",
        "client 1: expected a dict with 'active', 'inactive' and 'finish_time'",
    )
    assert marker.exists()  # the opt-in: its code ran
    os.rmdir(marker)
    spec = SimpleNamespace(policy="fedscale_trace", params={"file": "trace.pkl", "trust_pickle": True})
    device = DeviceInfo(index=0, group="g", num_samples=1, label_distribution=np.ones(1), base_dir=tmp_path)
    with pytest.raises(PolicyError):
        build_policy(spec, device, np.random.default_rng(0))  # read: the code ran, then the record is refused
    assert marker.exists()


def test_building_the_policy_directly_still_refuses(tmp_path: Path) -> None:
    _, marker = _hostile(tmp_path)
    spec = SimpleNamespace(policy="fedscale_trace", params={"file": "trace.pkl"})
    device = DeviceInfo(index=0, group="g", num_samples=1, label_distribution=np.ones(1), base_dir=tmp_path)
    with pytest.raises(PolicyError, match="unpickling runs whatever code"):
        build_policy(spec, device, np.random.default_rng(0))
    with pytest.raises(PolicyError, match="unpickling runs whatever code"):
        fedscale_to_csv(tmp_path / "trace.pkl", tmp_path / "trace.csv")
    assert not marker.exists() and not (tmp_path / "trace.csv").exists()


def test_trace_convert_needs_allow_pickle(tmp_path: Path) -> None:
    source, marker = _hostile(tmp_path)
    assert_user_error(
        run("trace", "convert", source, tmp_path / "trace.csv"),
        str(source),
        "unpickling runs whatever code the file holds",
        "--allow-pickle",
    )
    assert not marker.exists() and not (tmp_path / "trace.csv").exists()
    good = tmp_path / "good.pkl"
    good.write_bytes(pickle.dumps({1: {"active": [0.0], "inactive": [5.0], "finish_time": 10.0}}))
    result = run("trace", "convert", good, tmp_path / "trace.csv", "--allow-pickle")
    assert result.exit_code == 0 and "policy: trace_csv" in result.stdout
    assert (tmp_path / "trace.csv").read_text().split() == ["device,start_s,end_s", "0,0.0,5.0"]
