"""A run as TensorBoard event files (written with tensorboardX, the lighter writer; TensorBoard reads them).

In the run's subfolder:

- ``by_round/<metric>``: every metrics.csv column, step = the round;
- ``by_sim_time/<metric>``: the same against simulated time, step = the simulated second (rounded); every event's
  wall time is the simulated time itself, so TensorBoard's "Relative" axis reads simulated time exactly;
- ``summary/<name>``: the energy and participation summary, at the last round;
- the hparams plugin's session (the scenario flattened, the summary as its metrics) and the scenario as text;
- ``figures/<name>``: the run's PNG figures, their bytes as netfl wrote them.

Scalars are TensorBoard's own (float32 ``simple_value``: TensorBoard's fast loader shows no other), so they hold
metrics.csv's values rounded to float32, about 7 significant digits; MLflow holds them exactly.

netfl's event files end in ``.netfl`` (``events.out.tfevents.<time>.<host>.netfl``): a run logged again into the
same subfolder replaces netfl's event files there, and never removes another program's (nor any other file).
"""

from __future__ import annotations

import struct
from pathlib import Path

from tensorboardX import FileWriter
from tensorboardX.proto.summary_pb2 import Summary
from tensorboardX.summary import hparams, text

from netfl.results.tracking_record import Label, RunRecord

#: The end of the name of every event file netfl writes: what tells netfl's own apart from another program's.
SUFFIX = ".netfl"


def own_event_files(logdir: Path) -> list[Path]:
    """netfl's event files in ``logdir`` (those it may replace), not another program's."""
    return sorted(p for p in logdir.glob(f"events.out.tfevents.*{SUFFIX}") if p.is_file() and not p.is_symlink())


def log_tensorboard(record: RunRecord, logdir: Path, label: Label) -> None:
    logdir.mkdir(parents=True, exist_ok=True)
    for old in own_event_files(logdir):
        old.unlink()
    writer = FileWriter(str(logdir), filename_suffix=SUFFIX)
    try:
        times, rounds = record.metrics["sim_time_s"], record.rounds
        for i, (when, step) in enumerate(zip(times, rounds)):
            values = {name: record.metrics[name][i] for name in record.series}
            writer.add_summary(_scalars("by_round", values), step, walltime=when)
            writer.add_summary(_scalars("by_sim_time", {"round": step, **values}), round(when), walltime=when)
        for step, when, values in record.algorithm:  # the strategy's own metrics, one point per aggregation
            writer.add_summary(_scalars("algorithm", values), step, walltime=when)
        last_step, end = (rounds[-1], times[-1]) if rounds else (0, 0.0)
        writer.add_summary(_scalars("summary", record.summary), last_step, walltime=end)
        experiment, start, finish = hparams(
            {**record.params, **{f"netfl/{k}": v for k, v in label.tags.items()}},
            {f"summary/{name}": value for name, value in record.summary.items()},
        )
        for part in (experiment, start, finish):
            writer.add_summary(part, last_step, walltime=end)
        if record.scenario_text:
            writer.add_summary(text("scenario", f"```yaml\n{record.scenario_text}```"), last_step, walltime=end)
        for figure in record.figures:
            writer.add_summary(_image(f"figures/{figure.stem}", figure.read_bytes()), last_step, walltime=end)
    finally:
        writer.close()


def _scalars(family: str, values: dict[str, float]) -> Summary:
    return Summary(value=[Summary.Value(tag=f"{family}/{name}", simple_value=value) for name, value in values.items()])


def _image(tag: str, png: bytes) -> Summary:
    """A PNG as it is (no decoding): its size from the IHDR chunk."""
    width, height = struct.unpack(">II", png[16:24])
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(png[25], 4)  # PNG colour type: grey, RGB, grey+alpha, RGBA
    image = Summary.Image(height=height, width=width, colorspace=channels, encoded_image_string=png)
    return Summary(value=[Summary.Value(tag=tag, image=image)])
