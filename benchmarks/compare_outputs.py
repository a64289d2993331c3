"""Record the results of every shipped topology, study and example at a small size, and compare two records.

A redesign that must change no result is checked with it: record on the old tree, record on the new one, compare.

    python benchmarks/compare_outputs.py record DIR [--rounds 3] [--only NAME ...] [--list]
    python benchmarks/compare_outputs.py compare DIR_A DIR_B

``record`` runs each item (below) with ``stop.rounds=ROUNDS`` (a world of more than 2 000 devices in a group
shrunk to 2 000, in the engine's form and with the event log it has at full size; see ``SHRINK``) and keeps its
``events.parquet``, ``metrics.csv`` and ``devices.parquet`` in ``DIR/<item>/``. The items are every topology in
topologies/, every topology and study in examples/ and docs/studies/ (each case and grid point of a study with its
first seed only). ``compare`` exits 0 when the two folders hold the same items with the same files, byte for byte,
and 1 otherwise, naming each file that differs.

The comparison is of bytes, parquet files included: pyarrow writes no time stamp or host into a file, so the
same table written by the same pyarrow gives the same bytes (tests/end_to_end/test_determinism.py relies on it
too). Where two parquet files differ, ``compare`` also decodes them and says whether the tables (schema, its
metadata and every value) differ or only the bytes around them (another pyarrow version, say); either way the
files count as different. Compare two records made with the same installed packages.

It imports netfl from wherever Python finds it, and reads the topologies beside this file: to record another
tree (main before a change, say), run that tree's copy of this script with that tree first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILES = ("events.parquet", "metrics.csv", "devices.parquet")
#: Devices a group keeps at most (million-phones has 10^6): enough for the array form to be chosen as at full size.
MAX_GROUP = 2000
#: Settings a topology needs beyond its size to do something in a few rounds (a path relative to the repository).
SHRINK = {
    # 2 000 phones pausing 200 days between jobs would start 10 a day: FedBuff's buffer of 100 would never fill
    "topologies/ten-million-phones.yaml": ["server.async.pause=4h"],
}


@dataclass(frozen=True)
class Item:
    """One run to record: its folder name, the file it comes from, and how it is made small."""

    name: str
    path: Path
    study: bool

    def overrides(self, rounds: int) -> list[str]:
        return [f"stop.rounds={rounds}", *SHRINK.get(self.path.relative_to(REPO).as_posix(), [])]


def items() -> list[Item]:
    """Every shipped topology and study, in a fixed order (names are paths with / replaced by __)."""
    from netfl.config.file_kinds import study_given_as_topology
    from netfl.config.loading import read_yaml

    found = sorted(REPO.glob("topologies/*.yaml"))
    found += sorted(REPO.glob("examples/**/*.yaml")) + sorted(REPO.glob("docs/studies/*/*.yaml"))
    listed = []
    for path in found:
        study = study_given_as_topology(read_yaml(path), path) is not None
        name = path.relative_to(REPO).with_suffix("").as_posix().replace("/", "__")
        listed.append(Item(name, path, study))
    return listed


def runs(item: Item, rounds: int) -> Iterator[tuple[str, object]]:
    """(folder name, validated scenario) for each run of ``item``, shrunk."""
    from netfl.config import load_scenario
    from netfl.study import load_study

    if not item.study:
        yield item.name, _shrunk(load_scenario(item.path, overrides=item.overrides(rounds)), item, rounds)
        return
    study = load_study(item.path, overrides=item.overrides(rounds), seeds=1)
    for run in study.runs:
        yield f"{item.name}__{run.folder.as_posix().replace('/', '__')}", _shrunk(run.scenario, item, rounds)


def _shrunk(scenario, item: Item, rounds: int):
    """``scenario`` with no group of more than MAX_GROUP devices (reloaded through --set paths, so validated), in
    the form of the engine it has at full size: idle devices' events, logged by default only below
    IDLE_EVENTS_BELOW devices (and then by actors), stay as the full-size world has them."""
    big = [f"devices[{i}].count={MAX_GROUP}" for i, group in enumerate(scenario.devices) if group.count > MAX_GROUP]
    if not big:
        return scenario
    from netfl.config import load_scenario
    from netfl.config.engine_form import idle_events

    if scenario.events.idle_devices is None:
        big.append(f"events.idle_devices={str(idle_events(scenario)).lower()}")
    if item.study:
        raise SystemExit(f"{item.path}: a study of more than {MAX_GROUP} devices in a group is not shrunk here")
    return load_scenario(item.path, overrides=[*item.overrides(rounds), *big])


def record(out: Path, rounds: int, only: Sequence[str], threads: int) -> int:
    from netfl.runner import run_scenario

    out.mkdir(parents=True, exist_ok=True)
    chosen = [item for item in items() if not only or any(word in item.name for word in only)]
    if not chosen:
        print(f"no item matches {' '.join(only)}", file=sys.stderr)
        return 2
    for item in chosen:
        for name, scenario in runs(item, rounds):
            with tempfile.TemporaryDirectory(prefix="netfl-compare-") as scratch:
                folder = Path(scratch) / "run"
                run_scenario(scenario, out_dir=folder, threads=threads)
                keep = out / name
                keep.mkdir(exist_ok=True)
                for file in FILES:
                    shutil.copyfile(folder / file, keep / file)
            print(f"recorded {name}", flush=True)
    return 0


def compare(a: Path, b: Path) -> list[str]:
    """What differs between two records (an empty list: byte-identical)."""
    problems = []
    for folder in (a, b):
        if not folder.is_dir():
            return [f"{folder} is not a folder"]
    names_a = {p.name for p in a.iterdir() if p.is_dir()}
    names_b = {p.name for p in b.iterdir() if p.is_dir()}
    problems += [f"{name}: only in {a}" for name in sorted(names_a - names_b)]
    problems += [f"{name}: only in {b}" for name in sorted(names_b - names_a)]
    for name in sorted(names_a & names_b):
        for file in FILES:
            fa, fb = a / name / file, b / name / file
            if not (fa.is_file() and fb.is_file()):
                missing = fa if not fa.is_file() else fb
                problems.append(f"{name}/{file}: missing in {missing.parent.parent}")
            elif fa.read_bytes() != fb.read_bytes():
                problems.append(f"{name}/{file}: differs{_how(fa, fb)}")
    return problems


def _how(fa: Path, fb: Path) -> str:
    """For two parquet files of different bytes, whether their tables differ too."""
    if fa.suffix != ".parquet":
        return ""
    import pyarrow.parquet as pq

    try:
        ta, tb = pq.read_table(fa), pq.read_table(fb)
    except Exception as exc:  # a file cut short: the byte difference is what to report
        return f" (not readable as parquet: {exc})"
    if ta.equals(tb, check_metadata=True):
        return " (the same table, schema and metadata: only the file's bytes differ)"
    if ta.schema != tb.schema:
        return " (different columns or types)"
    return f" (different values; {ta.num_rows} and {tb.num_rows} rows)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record", help="run every item small and keep its three result files in DIR")
    rec.add_argument("dir", type=Path)
    rec.add_argument("--rounds", type=int, default=3, help="stop.rounds of every run [default: 3]")
    rec.add_argument("--only", nargs="*", default=(), help="items whose name contains one of these words")
    rec.add_argument("--threads", type=int, default=1, help="training threads (results do not depend on it)")
    rec.add_argument("--list", action="store_true", help="list the items and record nothing")
    cmp_ = commands.add_parser("compare", help="exit 1, naming each file, unless two records are byte-identical")
    cmp_.add_argument("a", type=Path)
    cmp_.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    if args.command == "record":
        if args.list:
            for item in items():
                print(f"{item.name}  ({'study' if item.study else 'topology'}: {item.path.relative_to(REPO)})")
            return 0
        return record(args.dir, args.rounds, args.only, args.threads)
    problems = compare(args.a, args.b)
    for problem in problems:
        print(problem)
    count = sum(1 for p in args.a.iterdir() if p.is_dir()) if args.a.is_dir() else 0
    print(f"{'identical' if not problems else 'DIFFERENT'}: {count} runs in {args.a}, {len(problems)} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
