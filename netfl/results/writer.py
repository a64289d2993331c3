"""Writing a run's results folder so that it is never half-written.

summary.json, scenario.yaml and the figures are written here, each data file
by its own module (metrics_file.py, events_file.py, devices_file.py, algorithm_file.py), all
into a staging folder that replaces the results folder as a whole
(netfl/results/staging.py). A run stopped early (Ctrl-C) is still written,
with ``"complete": false`` in summary.json.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from netfl.errors import NetflError
from netfl.results.algorithm_file import write_algorithm
from netfl.results.devices_file import write_devices, write_timeline
from netfl.results.events_file import write_events
from netfl.results.metrics_file import write_metrics, write_staleness
from netfl.results.plots import plot_accuracy_vs_time, plot_staleness
from netfl.results.staging import replace_folder
from netfl.results.world_plots import timeline_figure


def finite_json(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None (JSON null): JSON has no such numbers, and a
    run whose simulated time or energy overflowed must still be written rather than lost."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def write_scenario(path: Path, scenario: dict[str, Any], source: str | None) -> None:
    """The scenario as run, loadable as a topology file (``netfl simulate scenario.yaml``; file paths in it are
    relative to ``source``'s folder, so copy the run folder beside the original topology to run it there)."""
    header = ["# The scenario of this run as netfl ran it: overrides applied, defaults left out, SI units."]
    if source is not None:
        header.append(f"# Read from {source}; file paths below are relative to its folder.")
    path.write_text("\n".join(header) + "\n" + yaml.safe_dump(scenario, sort_keys=False, allow_unicode=True))


def write_run(
    out_dir: Path,
    *,
    summary: dict[str, Any],
    metrics: Sequence[Any],
    num_classes: Sequence[int],
    events: dict[str, list],
    devices: Mapping[str, Any],
    title: str,
    staleness: Sequence[int] = (),
    scenario: dict[str, Any] | None = None,
    source: str | None = None,
    timeline: dict[str, Any] | None = None,
    algorithm: Sequence[Any] = (),
    class_names: Sequence[Sequence[str] | None] = (),
    vocabularies: Sequence[Mapping[str, Any] | None] = (),
) -> Path:
    """Write summary.json, metrics.csv, events.parquet, devices.parquet and accuracy_vs_time.png into
    ``out_dir`` atomically.

    ``timeline`` (netfl/sim/timeline.py's columns) adds timeline.parquet and timeline.png.
    ``scenario`` (the resolved scenario as a topology mapping; ``source``: the file it came from) adds
    scenario.yaml; ``staleness`` (asynchronous runs: each received update's staleness) adds staleness.csv
    and staleness.png; ``algorithm`` (the strategy's metrics of each aggregation) adds algorithm.csv.
    ``class_names`` (per task, or None) name metrics.csv's class columns; ``vocabularies`` (per task: what its
    token ids stand for, or None) add vocabulary.json (several tasks: task<s>_vocabulary.json).
    """
    out_dir = Path(out_dir)

    def fill(staging: Path) -> None:
        if scenario is not None:
            write_scenario(staging / "scenario.yaml", scenario, source)
        write_metrics(staging / "metrics.csv", metrics, num_classes, class_names)
        for s, vocabulary in enumerate(vocabularies):
            if vocabulary is not None:
                name = "vocabulary.json" if len(num_classes) == 1 else f"task{s}_vocabulary.json"
                (staging / name).write_text(json.dumps(vocabulary, indent=1, ensure_ascii=False) + "\n")
        write_events(staging / "events.parquet", events)
        write_devices(staging / "devices.parquet", devices)
        if algorithm:
            write_algorithm(staging / "algorithm.csv", algorithm)
        plot_accuracy_vs_time(staging / "accuracy_vs_time.png", metrics, title=title)
        if timeline is not None and timeline["sim_time_s"]:
            write_world_over_time(staging, timeline, events, devices, title)
        if staleness:  # asynchronous runs: how old the applied updates were
            write_staleness(staging / "staleness.csv", staleness)
            plot_staleness(staging / "staleness.png", staleness, title=title)
        # summary last: its presence with complete=true is what marks a finished run
        (staging / "summary.json").write_text(json.dumps(finite_json(summary), indent=2, allow_nan=False) + "\n")

    return replace_folder(out_dir, fill)


def write_world_over_time(
    folder: Path, timeline: dict[str, Any], events: dict[str, Any], devices: Mapping[str, Any], title: str
) -> None:
    """timeline.parquet and its figure, with a Gantt of a sample of devices from the event log."""
    write_timeline(folder / "timeline.parquet", timeline)
    log = pd.DataFrame({name: events[name] for name in ("sim_time_s", "device", "kind")})
    fleet = pd.DataFrame({k: devices[k] for k in ("device", "group")})
    (folder / "timeline.png").write_bytes(timeline_figure(pd.DataFrame(timeline), log, fleet, title=title))


def write_files(out_dir: Path, files: dict[str, bytes]) -> Path:
    """Write ``files`` (path inside the folder -> content) as the whole of ``out_dir``, atomically: a run
    made elsewhere (a Ray worker) lands as if written here."""

    def fill(staging: Path) -> None:
        for name, content in sorted(files.items(), key=lambda item: item[0] == "summary.json"):  # summary last
            target = (staging / name).resolve()
            if staging.resolve() not in target.parents:
                raise NetflError(f"{out_dir}: refusing to write {name!r} outside the results folder")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)

    return replace_folder(Path(out_dir), fill)


def read_files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (path inside it -> content): a run folder to send back from a worker."""
    folder = Path(folder)
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
