"""Command-line test support: run ``netfl`` in-process and check that a failure is a clean user error."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from netfl.cli.main import main

TINY = """\
name: tiny
seed: 1
stop: {rounds: 2}
task:
  dataset: {name: digits}
  model: {name: logistic}
  local: {steps: 2, batch_size: 8, lr: 0.1}
devices:
  - group: boards
    count: 4
    compute: {flops_per_s: 1GFLOPS}
    link: {uplink: 10Mbps}
"""


#: events.parquet's columns, in order (netfl.events.EVENT_FIELDS between kind and detail).
EVENT_COLUMNS = [
    "sim_time_s",
    "round",
    "device",
    "kind",
    "job",
    "task",
    "bytes",
    "flops",
    "energy_j",
    "airtime_s",
    "attempts",
    "staleness",
    "cause",
    "available",
    "received",
    "applied",
    "dropped",
    "collisions",
    "success",
    "retransmissions",
    "slot",
    "others",
    "level",
    "version",
    "steps",
    "asked_steps",
    "relay",
    "edge",
    "picked",
    "medium",
    "detail",
]


def idx_placeholders(folder: Path) -> Path:
    """``folder`` holding empty files named like the four MNIST/Fashion-MNIST IDX files: enough for validation,
    which checks that a data set's files are there (not what they hold), on a machine without the data set."""
    from netfl.registry.datasets import IDX_FILES

    folder.mkdir(parents=True, exist_ok=True)
    for name in IDX_FILES:
        (folder / name).touch()
    return folder


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def assert_user_error(result: Result, *expected: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    # SystemExit(2) is how click reports the exit code; anything else escaping is a bug
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert result.stderr.startswith("error: "), result.stderr
    for text in expected:
        assert text in result.stderr, f"{text!r} not in {result.stderr!r}"


def with_ctrl_c() -> None:
    """``preexec_fn`` for a subprocess a test will Ctrl-C: a shell without job control (CI running the suite in
    the background) starts its children with SIGINT ignored, and Python then never turns it into
    KeyboardInterrupt; the child is given SIGINT's default back, as at a terminal."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
