"""Property-based fuzzing of everything that reads user files: a valid result or one clean error, never a crash.

Bounded for CI: a fixed number of examples from a fixed seed (``derandomize``), each under a deadline. The
inputs are built from the topology's own vocabulary (keys, units, policy and algorithm names) so that they get
past the first check and reach the deep ones, plus raw text mutated from a real topology.
"""

from __future__ import annotations

import resource
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netfl.config import load_scenario
from netfl.errors import NetflError
from netfl.policies.trace_files import load_csv

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = (REPO / "topologies" / "quickstart.yaml").read_text()
BOUNDED = settings(
    max_examples=150,
    deadline=3000,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

KEYS = [
    "name",
    "seed",
    "stop",
    "rounds",
    "sim_time",
    "task",
    "tasks",
    "dataset",
    "partition",
    "kind",
    "alpha",
    "model",
    "hidden",
    "local",
    "steps",
    "batch_size",
    "lr",
    "devices",
    "group",
    "count",
    "compute",
    "flops_per_s",
    "power",
    "battery",
    "capacity",
    "initial",
    "min_level",
    "availability",
    "policy",
    "p",
    "link",
    "uplink",
    "downlink",
    "latency",
    "channel",
    "server",
    "algorithm",
    "mode",
    "round",
    "participants",
    "deadline",
    "over_commit",
    "async",
    "buffer",
    "eval",
    "every",
    "network",
    "nodes",
    "links",
    "medium",
    "uniform",
    "lognormal",
    "median",
    "sigma",
    "choice",
    "on",
    "off",
    "world_seed",
    "training_seed",
]
WORDS = [
    "fedavg",
    "fedau",
    "mifa",
    "afa_cs",
    "bernoulli",
    "markov",
    "sessions",
    "diurnal",
    "digits",
    "mlp",
    "logistic",
    "dirichlet",
    "sync",
    "async",
    "5Mbps",
    "3s",
    "2GFLOPS",
    "55kJ",
    "20%",
    "10min",
    "0.2W",
    "nan",
    "inf",
    "-1",
    "1e308",
    "",
    "~",
    "true",
    "[]",
    "{}",
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True),
    st.sampled_from(WORDS),
    st.text(max_size=12),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)),
    max_leaves=30,
)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def loads_or_refuses(path: Path) -> None:
    """A scenario that validates, or a clean refusal naming the file (anything else fails with its traceback)."""
    try:
        scenario = load_scenario(path)
    except NetflError as exc:  # ScenarioError is one
        assert str(path) in str(exc), f"a refusal that does not name the file: {exc}"
        return
    assert scenario.num_devices >= 1 and scenario.stop.rounds or scenario.stop.sim_time


@pytest.fixture(scope="module")
def memory_budget():
    before = peak_rss_mb()
    yield
    assert peak_rss_mb() - before < 1024, "reading fuzzed scenarios grew the process by more than 1 GB"


@BOUNDED
@given(document=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=8))
def test_any_mapping_of_topology_keys_loads_or_is_refused(tmp_path_factory, memory_budget, document) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "t.yaml"
    path.write_text(yaml.safe_dump(document))
    loads_or_refuses(path)


@BOUNDED
@given(
    edits=st.lists(
        st.tuples(
            st.integers(0, len(QUICKSTART)),
            st.integers(0, 8),
            st.sampled_from(
                [
                    "",
                    ":",
                    "-",
                    "[",
                    "]",
                    "{",
                    "}",
                    "&a",
                    "*a",
                    "!!",
                    "\t",
                    "\n  ",
                    "1e309",
                    "null",
                    "'",
                    '"',
                    "%",
                    "#",
                    "0",
                    "true",
                ]
            ),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_a_mutated_topology_loads_or_is_refused(tmp_path_factory, memory_budget, edits) -> None:
    text = QUICKSTART
    for at, cut, insert in edits:
        at = min(at, len(text))
        text = text[:at] + insert + text[at + cut :]
    path = tmp_path_factory.mktemp("fuzz") / "t.yaml"
    path.write_text(text)
    loads_or_refuses(path)


@BOUNDED
@given(
    document=st.fixed_dictionaries(
        {"devices": st.lists(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=6), min_size=1, max_size=3)}
    )
)
def test_device_groups_of_fuzzed_fields_load_or_are_refused(tmp_path_factory, memory_budget, document) -> None:
    """A valid scenario with its device groups replaced: the checks that need the whole scenario run too."""
    data = yaml.safe_load(QUICKSTART)
    data["devices"] = [{**data["devices"][0], **group} for group in document["devices"]]
    path = tmp_path_factory.mktemp("fuzz") / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    loads_or_refuses(path)


CELLS = st.one_of(
    st.integers(-5, 5).map(str),
    st.floats(allow_nan=True).map(repr),
    st.sampled_from(["", " ", "x", "1e999", "-0", "3.5", "\ufeff", '"', "inf", "nan"]),
    st.text(max_size=6),
)


@BOUNDED
@given(
    header=st.one_of(st.just("device,start_s,end_s"), st.text(max_size=20)),
    rows=st.lists(st.lists(CELLS, max_size=4), max_size=12),
)
def test_an_interval_trace_reads_or_is_refused_with_its_line(tmp_path_factory, memory_budget, header, rows) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "trace.csv"
    try:
        path.write_text(header + "\n" + "\n".join(",".join(r) for r in rows) + "\n", encoding="utf-8")
    except UnicodeEncodeError:
        return  # a lone surrogate: no file can hold it
    try:
        trace = load_csv(path)
    except NetflError as exc:
        assert str(path) in str(exc)
        return
    intervals = trace.bounds.reshape(-1, 2)
    assert (0 <= intervals[:, 0]).all() and (intervals[:, 0] < intervals[:, 1]).all()
