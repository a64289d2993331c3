"""Every numeric option at the edges of its accepted range: refused at validation with its field, or one round of
a tiny scenario runs -- never a value that validates and then overflows (``qsgd: {levels: 2**70}`` did, in
``learn/compression.py``).

The fields and their bounds are read from the schema and the registries' parameter models (``gt``/``ge``/``lt``/
``le``, :data:`~netfl.numbers.MAX_INTEGER` for integers, float32's range for :data:`~netfl.numbers.Float32`); a
table here says where each field sits in a scenario, and a test checks that the table misses none, so a new field
cannot go untested.
"""

from __future__ import annotations

import copy
import inspect
import math
import sys
from collections.abc import Callable
from pathlib import Path

import annotated_types
import pytest
import yaml
from cli_support import TINY
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import netfl
from netfl.config import schema as S
from netfl.errors import NetflError
from netfl.numbers import FLOAT32_MAX, MAX_INTEGER, _item_types, _leaf_types
from netfl.registry.algorithms import ALGORITHMS
from netfl.registry.server_optimizers import SERVER_OPTIMIZERS

Edit = Callable[[dict, object], None]


def _set(*path: str | int) -> Callable[[Edit | None], Edit]:
    """An edit that puts the value at ``path`` (after ``before`` sets up the context it needs)."""

    def make(before: Edit | None = None) -> Edit:
        def edit(doc: dict, value: object) -> None:
            if before is not None:
                before(doc, value)
            node = doc
            for key in path[:-1]:
                node = node.setdefault(key, {}) if isinstance(key, str) else node[key]
            node[path[-1]] = value

        return edit

    return make


def _wireless(doc: dict, _value: object) -> None:
    doc["network"] = {"nodes": {"ap": {"kind": "access_point"}}, "links": [{"from": "ap", "to": "server", "rate": 1e9}]}
    doc["devices"][0]["link"] = {"to": "ap", "channel": {"kind": "rician", "rician_k": 3, "distance_m": 50}}


def _aloha(doc: dict, value: object) -> None:
    _wireless(doc, value)
    doc["network"]["nodes"]["ap"]["medium"] = {"kind": "slotted_aloha", "rate": 2e6}


def _relay(doc: dict, _value: object) -> None:
    doc["network"] = {
        "nodes": {"r": {"kind": "relay", "ram": {}}},
        "links": [{"from": "r", "to": "server", "rate": 1e8}],
    }
    doc["devices"][0]["link"] = {"to": "r", "uplink": 2e6}


def _edges(doc: dict, _value: object) -> None:
    doc["network"] = {"nodes": {"e": {"kind": "edge"}}, "links": [{"from": "e", "to": "server", "rate": 1e9}]}
    doc["devices"][0]["link"]["to"] = "e"


def _partition(kind: str, **params: object) -> Edit:
    def edit(doc: dict, _value: object) -> None:
        doc["task"]["dataset"]["partition"] = {"kind": kind, **params}

    return edit


def _sync(doc: dict, _value: object) -> None:
    doc["server"].setdefault("round", {})["participants"] = 2


def _async(doc: dict, _value: object) -> None:
    doc["server"]["mode"] = "async"
    doc["stop"] = {"rounds": 1, "sim_time": 60.0}


def _algorithm(name: str, **params: object) -> Edit:
    def edit(doc: dict, value: object) -> None:
        doc["server"]["algorithm"] = {"name": name, **params}
        if ALGORITHMS[name].needs_participation:  # divides by each client's participation probability
            doc["devices"][0]["availability"] = {"policy": "bernoulli", "p": 0.9}
        if name in ("fedasync", "fedbuff"):
            _async(doc, value)
            doc["server"]["async"] = {"buffer": 1 if name == "fedasync" else 2}

    return edit


def _optimizer(name: str, **params: object) -> Edit:
    def edit(doc: dict, _value: object) -> None:
        doc["server"]["optimizer"] = {"name": name, "lr": 0.1, **params}

    return edit


def _battery(doc: dict, _value: object) -> None:
    doc["devices"][0]["battery"] = {"capacity": 55e3, "charging": {"policy": "always"}}


def _qsgd(doc: dict, _value: object) -> None:
    doc["server"]["compression"] = {"uplink": {"qsgd": {"levels": 4}}}


def _list_of(edit: Edit) -> Edit:
    return lambda doc, value: edit(doc, [value])


def _exclusive(field: str) -> Edit:
    def edit(doc: dict, value: object) -> None:
        group = {"clients": [0], "labels": [0], field: [value]}
        doc["task"]["dataset"]["partition"] = {"kind": "iid", "exclusive": [group]}

    return edit


def _skew(field: str) -> Edit:
    def edit(doc: dict, value: object) -> None:
        skew = {"clients": 0.25, "share": 0.5, field: value}
        doc["task"]["dataset"]["partition"] = {"kind": "iid", "quantity_skew": skew}

    return edit


def _uplink_to_server(doc: dict, value: object) -> None:
    doc["network"] = {"nodes": {"ap": {"kind": "access_point"}}, "links": [{"from": "ap", "to": "server"}]}
    doc["network"]["links"][0]["rate"] = 1e9
    doc["devices"][0]["link"]["to"] = "ap"


def _wired(field: str) -> Edit:
    def edit(doc: dict, value: object) -> None:
        _uplink_to_server(doc, value)
        doc["network"]["links"][0][field] = value

    return edit


#: (schema model, field) -> how to set it in the tiny scenario (with the context it needs).
WHERE: dict[tuple[type, str], Edit] = {
    (S.StopSpec, "sim_time"): _set("stop", "sim_time")(),
    (S.StopSpec, "rounds"): _set("stop", "rounds")(lambda d, v: d["stop"].update(sim_time=1.0)),
    (S.StopSpec, "accuracy"): _set("stop", "accuracy")(),
    (S.ExclusiveGroupSpec, "clients"): _exclusive("clients"),
    (S.ExclusiveGroupSpec, "labels"): _exclusive("labels"),
    (S.QuantitySkewSpec, "clients"): _skew("clients"),
    (S.QuantitySkewSpec, "share"): _skew("share"),
    (S.PartitionSpec, "alpha"): _set("task", "dataset", "partition", "alpha")(_partition("dirichlet")),
    (S.PartitionSpec, "classes_per_client"): _set("task", "dataset", "partition", "classes_per_client")(
        _partition("classes")
    ),
    (S.PartitionSpec, "samples_per_client"): _set("task", "dataset", "partition", "samples_per_client")(),
    (S.DatasetSpec, "input_shape"): lambda d, v: d["task"].update(dataset={"path": "data.npz", "input_shape": [v]}),
    (S.DatasetSpec, "test_fraction"): _set("task", "dataset", "test_fraction")(),
    (S.DatasetSpec, "max_train_samples"): _set("task", "dataset", "max_train_samples")(),
    (S.ModelSpec, "hidden"): lambda d, v: d["task"].update(model={"name": "mlp", "hidden": [v]}),
    (S.ModelSpec, "flops_per_sample"): _set("task", "model", "flops_per_sample")(),
    (S.LocalSpec, "steps"): _set("task", "local", "steps")(),
    (S.LocalSpec, "epochs"): lambda d, v: d["task"].update(local={"epochs": v, "batch_size": 8, "lr": 0.1}),
    (S.LocalSpec, "batch_size"): _set("task", "local", "batch_size")(),
    (S.LocalSpec, "lr"): _set("task", "local", "lr")(),
    (S.LocalSpec, "weight_decay"): _set("task", "local", "weight_decay")(),
    **{(S.PowerSpec, f): _set("devices", 0, "power", f)() for f in S.PowerSpec.model_fields},
    (S.UsageSpec, "power"): lambda d, v: d["devices"][0].update(
        usage={"sessions": {"policy": "sessions", "on": "1min", "off": "5min"}, "power": v}
    ),
    (S.BatterySpec, "capacity"): _set("devices", 0, "battery", "capacity")(),
    (S.BatterySpec, "min_level"): _set("devices", 0, "battery", "min_level")(),
    (S.BatterySpec, "charge_power"): _set("devices", 0, "battery", "charge_power")(_battery),
    **{
        (S.ChannelSpec, f): _set("devices", 0, "link", "channel", f)(_wireless)
        for f in ("tx_power", "shadowing_db", "rician_k", "coherence", "noise_figure_db", "rate", "packet_size")
    },
    (S.ChannelSpec, "max_spectral_efficiency"): _set("devices", 0, "link", "channel", "max_spectral_efficiency")(
        _wireless
    ),
    (S.LinkSpec, "latency"): _set("devices", 0, "link", "latency")(),
    (S.DeviceGroupSpec, "count"): _set("devices", 0, "count")(),
    (S.QsgdSpec, "levels"): _set("server", "compression", "uplink", "qsgd", "levels")(_qsgd),
    (S.QsgdSpec, "bucket"): _set("server", "compression", "uplink", "qsgd", "bucket")(_qsgd),
    (S.CompressorSpec, "topk"): _set("server", "compression", "uplink", "topk")(),
    (S.RoundSpec, "over_commit"): _set("server", "round", "over_commit")(_sync),
    (S.RoundSpec, "partial_margin"): _set("server", "round", "partial_margin")(
        lambda d, v: d["server"].setdefault("round", {}).update(deadline=0.05, partial_work=True)
    ),
    (S.RoundSpec, "cloud_every"): _set("server", "round", "cloud_every")(_edges),
    **{
        (S.MediumSpec, f): _set("network", "nodes", "ap", "medium", f)(_aloha)
        for f in ("bandwidth", "rate", "q", "packet_size", "max_attempts")
    },
    (S.RamSpec, "rho"): _set("network", "nodes", "r", "ram", "rho")(
        lambda d, v: (_relay(d, v), d["devices"][0].update(count=1))
    ),
    (S.NodeSpec, "downlink"): _set("network", "nodes", "ap", "downlink")(_uplink_to_server),
    (S.WiredLinkSpec, "rate"): _wired("rate"),
    (S.WiredLinkSpec, "latency"): _wired("latency"),
    (S.EvalSpec, "max_test_samples"): _set("eval", "max_test_samples")(),
    **{(S.Scenario, f): _set(f)() for f in ("seed", "world_seed", "training_seed")},
}
_RAM_LIST = {(S.RamSpec, "rho")}  # a list of floats: the value goes in a list


def _server_where() -> dict[tuple[type, str], Edit]:
    """The engine server's parameters (netfl/registry/server_params.py), each set on its own; WHERE gives those
    that need more of the scenario (over_commit needs participants)."""
    rounds = {(S.RoundSpec, f): _set("server", "round", f)() for f in _numeric_fields(S.RoundSpec)}
    return rounds | {(S.AsyncSpec, f): _set("server", "async", f)(_async) for f in _numeric_fields(S.AsyncSpec)}


def _params_where() -> dict[tuple[type, str], Edit]:
    """The registries' parameters: each algorithm's and server optimiser's numeric ones."""
    out: dict[tuple[type, str], Edit] = {}
    needs = {"fed_cvar": {}, "fedau": {}, "fedasync": {"staleness": "hinge"}}
    for name, entry in ALGORITHMS.items():
        for field in _numeric_fields(entry.params):
            out.setdefault(
                (entry.params, field), _set("server", "algorithm", field)(_algorithm(name, **needs.get(name, {})))
            )
    for name, entry in SERVER_OPTIMIZERS.items():
        for field in _numeric_fields(entry.params):
            out.setdefault((entry.params, field), _set("server", "optimizer", field)(_optimizer(name)))
    return out


def _numeric_fields(model: type) -> list[str]:
    fields = []
    for name, info in model.model_fields.items():
        leaves = _leaf_types(info.annotation) | _item_types(info.annotation)
        if leaves & {int, float} and bool not in leaves:
            fields.append(name)
    return fields


def _schema_models() -> list[type]:
    return [c for c in vars(S).values() if inspect.isclass(c) and issubclass(c, S.Strict) and c is not S.Strict]


ALL_WHERE = {**_server_where(), **WHERE, **_params_where()}


def test_the_table_holds_every_numeric_field_of_the_schema_and_the_registries() -> None:
    wanted = {(m, f) for m in _schema_models() for f in _numeric_fields(m)}
    wanted |= {
        (e.params, f) for e in (*ALGORITHMS.values(), *SERVER_OPTIMIZERS.values()) for f in _numeric_fields(e.params)
    }
    assert wanted - set(ALL_WHERE) == set()


def _edges(model: type, field: str) -> list[object]:
    """The field's values at the edges of its accepted range (and just past them)."""
    info = model.model_fields[field]
    leaves = _leaf_types(info.annotation) | _item_types(info.annotation)
    integer = int in leaves and float not in leaves
    low = high = None
    low_open = high_open = False
    float32 = False
    for meta in _metadata(info):
        if isinstance(meta, annotated_types.Gt):
            low, low_open = meta.gt, True
        elif isinstance(meta, annotated_types.Ge):
            low = meta.ge
        elif isinstance(meta, annotated_types.Lt):
            high, high_open = meta.lt, True
        elif isinstance(meta, annotated_types.Le):
            high = meta.le
        elif getattr(getattr(meta, "func", None), "__name__", "") == "_float32":
            float32 = True
    if integer:
        values = [0, -1, MAX_INTEGER, MAX_INTEGER + 1, 2**70]
        if low is not None:
            values += [low + 1 if low_open else low, low]
        if high is not None:
            values += [high - 1 if high_open else high, high + 1]
        return values
    top = FLOAT32_MAX if float32 else sys.float_info.max
    values = [top, 2 * FLOAT32_MAX if float32 else math.inf, 5e-324, 0.0, -1.0]
    if low is not None:
        values += [math.nextafter(low, math.inf) if low_open else low]
    if high is not None:
        values += [math.nextafter(high, -math.inf) if high_open else high, math.nextafter(high, math.inf)]
    return values


def _metadata(info) -> list[object]:
    found = list(info.metadata)
    stack = [info.annotation]
    while stack:
        annotation = stack.pop()
        found += list(getattr(annotation, "__metadata__", ()))
        stack += [a for a in getattr(annotation, "__args__", ()) if a is not type(None)]
    return found


#: Left out of the draws: a wireless channel's or a shared medium's physics at the edge of its range (a rate of
#: 5e-324 bit/s/Hz, a bandwidth of 5e-324 Hz) makes the engine's transfer loop (netfl/sim/channel.py) step
#: through coherence blocks for ever rather than fail; that is the engine's to bound.
ENGINE_PHYSICS = (S.ChannelSpec, S.MediumSpec)

CASES = sorted(
    (
        (model, field, value)
        for (model, field) in ALL_WHERE
        if model not in ENGINE_PHYSICS
        for value in _edges(model, field)
    ),
    key=lambda c: (c[0].__name__, c[1], repr(c[2])),
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    import numpy as np

    here = tmp_path_factory.mktemp("edges")
    rng = np.random.default_rng(0)
    np.savez(here / "data.npz", x=rng.random((40, 8), dtype=np.float32), y=np.arange(40) % 4)
    return here


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.sampled_from(CASES))
def test_a_value_at_the_edge_of_its_range_is_refused_or_runs_a_round(folder: Path, case) -> None:
    model, field, value = case
    doc = yaml.safe_load(TINY)
    doc["stop"] = {"rounds": 1}
    doc["server"] = {}
    edit_value = [value] if (model, field) in _RAM_LIST else value
    ALL_WHERE[(model, field)](doc, edit_value)
    path = folder / "edge.yaml"
    path.write_text(yaml.safe_dump(copy.deepcopy(doc)))
    try:
        result = netfl.run(path, threads=1)
    except NetflError:
        return  # refused with its field: exit 2
    assert result.summary["stopped_by"] in ("rounds", "sim_time", "diverged", "stalled", "accuracy")


#: A value that runs, for fields whose default does not say (none, or infinite) or is not meant alone.
ORDINARY = {
    "rho": 1.0,
    "input_shape": 8,
    "samples_per_client": 5,
    "max_attempts": 50,
    "max_train_samples": 200,
    "steps": 2,
}


@pytest.mark.parametrize("model,field", sorted(ALL_WHERE, key=lambda k: (k[0].__name__, k[1])), ids=str)
def test_each_fields_context_runs_with_an_ordinary_value(folder: Path, model, field) -> None:
    """The table's contexts are scenarios that run: with the field at an ordinary value, the round runs (so that
    an edge value's refusal is the value's, not a broken context's)."""
    info = model.model_fields[field]
    ordinary = ORDINARY.get(field)
    if ordinary is None:
        ordinary = (
            info.default if isinstance(info.default, (int, float)) and not isinstance(info.default, bool) else None
        )
    if ordinary is None or (isinstance(ordinary, float) and not math.isfinite(ordinary)):
        ordinary = 1 if int in _leaf_types(info.annotation) | _item_types(info.annotation) else 0.5
    doc = yaml.safe_load(TINY)
    doc["stop"] = {"rounds": 1}
    doc["server"] = {}
    ALL_WHERE[(model, field)](doc, [ordinary] if (model, field) in _RAM_LIST else ordinary)
    path = folder / "ordinary.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert netfl.run(path, threads=1).summary["rounds"] >= 0
