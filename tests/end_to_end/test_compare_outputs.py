"""benchmarks/compare_outputs.py: two records of the same tree are byte-identical, and a changed file is named."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("compare_outputs", REPO / "benchmarks" / "compare_outputs.py")
compare_outputs = importlib.util.module_from_spec(SPEC)
sys.modules[SPEC.name] = compare_outputs  # its dataclass looks its module up
SPEC.loader.exec_module(compare_outputs)

#: A synchronous world, the array form (a million phones shrunk to 2 000) and a study's two cases.
FEW = ["topologies__quickstart", "topologies__million-phones", "examples__cvar_blobs__study"]


def test_every_shipped_topology_and_study_is_an_item() -> None:
    paths = {item.path for item in compare_outputs.items()}
    assert set(REPO.glob("topologies/*.yaml")) <= paths
    assert {REPO / "docs/studies/slow-uplink/tuning.yaml", REPO / "examples/quickstart_study.yaml"} <= paths
    assert {REPO / "examples" / name / "study.yaml" for name in ("cvar_blobs", "afa_noniid", "mmfl_sampling")} <= paths
    studies = {item.path.name for item in compare_outputs.items() if item.study}
    assert studies == {"study.yaml", "tuning.yaml", "quickstart_study.yaml"}


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("records")
    for name in ("a", "b"):
        assert compare_outputs.main(["record", str(base / name), "--rounds", "2", "--only", *FEW]) == 0
    return base / "a", base / "b"


@pytest.mark.slow
def test_two_records_of_one_tree_are_identical(records, capsys) -> None:
    a, b = records
    runs = sorted(p.name for p in a.iterdir())
    assert runs[:2] == [
        "examples__cvar_blobs__study__runs__mlp__alpha=0.1__seed0",
        "examples__cvar_blobs__study__runs__mlp__alpha=1.0__seed0",
    ]
    assert len(runs) == 6 and "topologies__million-phones" in runs and "topologies__quickstart" in runs
    assert all(sorted(f.name for f in (a / run).iterdir()) == sorted(compare_outputs.FILES) for run in runs)
    assert pq.read_metadata(a / "topologies__million-phones" / "devices.parquet").num_rows == 2000  # shrunk
    assert compare_outputs.main(["compare", str(a), str(b)]) == 0
    assert capsys.readouterr().out == f"identical: 6 runs in {a}, 0 differences\n"


@pytest.mark.slow
def test_a_changed_file_is_named(records, tmp_path, capsys) -> None:
    a, b = records
    changed = tmp_path / "changed"
    changed.mkdir()
    for run in b.iterdir():
        (changed / run.name).mkdir()
        for file in run.iterdir():
            (changed / run.name / file.name).write_bytes(file.read_bytes())
    metrics = changed / "topologies__quickstart" / "metrics.csv"
    metrics.write_text(metrics.read_text().replace("0.", "1.", 1))
    events = changed / "topologies__million-phones" / "events.parquet"
    table = pq.read_table(events)
    pq.write_table(table, events, compression="none")  # the same table, other bytes
    devices = changed / "topologies__million-phones" / "devices.parquet"
    pq.write_table(pq.read_table(devices).slice(1), devices)  # a device less
    (changed / "examples__cvar_blobs__study__runs__mlp__alpha=0.1__seed0" / "metrics.csv").unlink()

    assert compare_outputs.main(["compare", str(a), str(changed)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"examples__cvar_blobs__study__runs__mlp__alpha=0.1__seed0/metrics.csv: missing in {changed}",
        "topologies__million-phones/events.parquet: differs (the same table, schema and metadata: only the file's "
        "bytes differ)",
        "topologies__million-phones/devices.parquet: differs (different values; 2000 and 1999 rows)",
        "topologies__quickstart/metrics.csv: differs",
        f"DIFFERENT: 6 runs in {a}, 4 differences",
    ]


def test_runs_only_in_one_record_are_named(tmp_path: Path) -> None:
    for name, runs in {"a": ["x", "y"], "b": ["y", "z"]}.items():
        for run in runs:
            (tmp_path / name / run).mkdir(parents=True)
            for file in compare_outputs.FILES:
                (tmp_path / name / run / file).write_bytes(b"same")
    assert compare_outputs.compare(tmp_path / "a", tmp_path / "b") == [
        f"x: only in {tmp_path / 'a'}",
        f"z: only in {tmp_path / 'b'}",
    ]
    assert compare_outputs.compare(tmp_path / "a", tmp_path / "nowhere") == [f"{tmp_path / 'nowhere'} is not a folder"]
