"""A loss explosion -- finite, an order of magnitude above the initial loss, accuracy at chance -- is warned about
as the run goes on, recorded in summary.json, and stops the run when asked to (server.on_loss_explosion)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import TINY, run

from netfl.backend import Diverged, Evaluation
from netfl.loss_watch import CHANCE_MARGIN, EXPLOSION_FACTOR, LossWatch, exploded

TEN = (0.1,) * 10  # per-class accuracies: 10 classes


def ev(accuracy: float, loss: float, classes: tuple[float, ...] = TEN, tasks: tuple[Evaluation, ...] = ()):
    return Evaluation(accuracy, loss, classes, tasks)


@pytest.mark.parametrize(
    "accuracy, loss, expected",
    [
        (0.10, 23.0, 0),  # 10x the initial 2.3, at chance (1/10): exploded
        (0.15, 23.0, 0),  # chance + 0.05: still chance
        (0.16, 23.0, None),  # better than chance: a model that learns, whatever its loss
        (0.10, 22.9, None),  # not yet an order of magnitude
        (0.10, float("inf"), None),  # not finite: the learner's NaN and inf checks speak for that
    ],
)
def test_the_rule_by_hand(accuracy: float, loss: float, expected: int | None) -> None:
    assert (EXPLOSION_FACTOR, CHANCE_MARGIN) == (10.0, 0.05)
    assert exploded(ev(accuracy, loss), ev(0.05, 2.3)) == expected


def test_with_several_models_each_is_judged_against_its_own_start() -> None:
    binary = (0.5, 0.5)  # 2 classes: chance is 0.5, up to 0.55
    start = ev(0.3, 1.5, (), (ev(0.1, 2.3), ev(0.5, 0.7, binary)))
    assert exploded(ev(0.3, 4.0, (), (ev(0.1, 2.3), ev(0.55, 7.0, binary))), start) == 1
    assert exploded(ev(0.3, 4.0, (), (ev(0.1, 2.3), ev(0.56, 7.0, binary))), start) is None


class Script:
    """A backend answering evaluations from a list."""

    def __init__(self, *evaluations: Evaluation):
        self.evaluations = list(evaluations)

    def evaluate(self) -> Evaluation:
        return self.evaluations.pop(0)

    def aggregate(self, context) -> int:
        return 1


def test_the_watch_warns_once_and_changes_no_answer() -> None:
    warnings: list[str] = []
    answers = [ev(0.05, 2.3), ev(0.10, 30.0), ev(0.10, 300.0)]
    watch = LossWatch(Script(*answers), stop=False, warn=warnings.append)
    watch.clock = lambda: 12.5
    seen = [watch.evaluate()]
    watch.aggregate(None), watch.aggregate(None)
    seen += [watch.evaluate(), watch.evaluate()]
    assert seen == answers
    assert watch.explosion.record() == {
        "round": 2,
        "sim_time_s": 12.5,
        "task": None,
        "test_loss": 30.0,
        "initial_test_loss": 2.3,
        "test_accuracy": 0.10,
        "chance": 0.1,
    }
    assert warnings == [
        "warning: after round 2 (12.5 simulated s), test loss 30 is 13x the initial 2.3, with test accuracy 10.0% "
        "at chance (10 classes): training has exploded; lower task.local.lr (server.on_loss_explosion: stop would "
        "stop the run here)"
    ]


def test_the_watch_stops_when_asked() -> None:
    watch = LossWatch(Script(ev(0.05, 2.3), ev(0.10, 30.0)), stop=True)
    watch.evaluate()
    watch.aggregate(None)
    with pytest.raises(Diverged) as stopped:
        watch.evaluate()
    assert (stopped.value.divergence.where, stopped.value.divergence.round_index) == ("loss_explosion", 0)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY.replace("stop: {rounds: 2}", "stop: {rounds: 4}").replace("lr: 0.1", "lr: 1e6"))
    return path


def test_a_learning_rate_of_a_million_is_warned_about_and_recorded(tiny: Path, tmp_path: Path) -> None:
    result = run("simulate", tiny, "--out", tmp_path / "out", "-q")
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("warning: after round 1 (0.00422192 simulated s), test loss 1.49e+06 is")
    assert "with test accuracy 10.3% at chance (10 classes): training has exploded" in result.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["loss_explosion"]["round"] == 1 and summary["loss_explosion"]["test_loss"] > 1e6
    assert summary["stopped_by"] == "rounds" and summary["rounds"] == 4 and summary["complete"] is True


def test_on_loss_explosion_stop_ends_the_run_there(tiny: Path, tmp_path: Path) -> None:
    result = run("simulate", tiny, "--out", tmp_path / "out", "-q", "--set", "server.on_loss_explosion=stop")
    assert result.exit_code == 3, result.output
    assert "(the run stops here)" in result.stderr
    assert "diverged: round 0: the global model's test loss exploded" in result.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["stopped_by"] == "diverged" and summary["rounds"] == 1
    assert summary["divergence"]["where"] == "loss_explosion" and summary["loss_explosion"]["round"] == 1


def test_a_sane_run_records_no_explosion(tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(TINY)
    result = run("simulate", tmp_path / "tiny.yaml", "--out", tmp_path / "out", "-q")
    assert result.exit_code == 0 and result.stderr == ""
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["loss_explosion"] is None
