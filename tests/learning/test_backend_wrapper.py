"""One wrapper base for the training backend: every question of the protocol is passed on by it, so the loss watch,
checkpoint recording and replay each write only what they change, and a checkpoint can check every answer."""

from __future__ import annotations

import inspect

import pytest

from netfl.backend import (
    BACKEND_METHODS,
    BackendWrapper,
    CloudContext,
    Evaluation,
    RoundContext,
    RoundPlan,
    TrainingBackend,
    Work,
)
from netfl.checkpoint import ANSWERS, Recording, Replaying
from netfl.loss_watch import LossWatch

#: Arguments for each question, and the answer a fake learner gives: distinct, so a swapped call shows.
CALLS = {
    "plan_round": ((3, [1, 2]), {}, RoundPlan((Work(1, 7, 10.0, 20.0, 30.0),))),
    "plan_after_probe": ((3, [7]), {}, RoundPlan(probe=True)),
    "submit": ((4, 5), {"steps": 2}, Work(4, 8, 1.0, 2.0, 3.0, steps=2)),
    "cancel": ((8,), {}, None),
    "cut": ((8, 1), {}, None),
    "aggregate": ((RoundContext(3, 9.5, [1, 2], (1, 2), (7,)),), {}, 1),
    "aggregate_cloud": ((CloudContext(3, 9.5, (0, 1)),), {}, 2),
    "evaluate": ((), {}, Evaluation(0.5, 1.25, (0.5, 0.5))),
}


def protocol_methods() -> list[str]:
    """The methods TrainingBackend declares, read from the class as a reader would (not from BACKEND_METHODS)."""
    return [name for name, _ in inspect.getmembers(TrainingBackend, inspect.isfunction) if not name.startswith("_")]


class Fake:
    """A learner that notes each question and answers from CALLS."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, tuple, dict]] = []

    def __getattr__(self, name: str):
        if name not in CALLS:
            raise AttributeError(name)

        def answer(*args, **kwargs):
            self.asked.append((name, args, kwargs))
            return CALLS[name][2]

        return answer


def test_the_calls_here_cover_the_protocol() -> None:
    assert sorted(CALLS) == sorted(protocol_methods()) == sorted(BACKEND_METHODS)


@pytest.mark.parametrize("name", protocol_methods())
def test_the_base_passes_every_protocol_method_on(name: str) -> None:
    assert name in vars(BackendWrapper), f"BackendWrapper does not pass {name} on"
    assert inspect.signature(getattr(BackendWrapper, name)) == inspect.signature(getattr(TrainingBackend, name))
    fake = Fake()
    args, kwargs, answer = CALLS[name]
    assert getattr(BackendWrapper(fake), name)(*args, **kwargs) is answer
    assert fake.asked == [(name, args, kwargs)]


def test_a_checkpoint_knows_what_each_answer_must_be() -> None:
    assert list(ANSWERS) == list(BACKEND_METHODS)
    assert all(ANSWERS[name][0](answer) for name, (_, _, answer) in CALLS.items())


@pytest.mark.parametrize("name", protocol_methods())
def test_the_loss_watch_passes_every_question_on(name: str) -> None:
    fake = Fake()
    args, kwargs, answer = CALLS[name]
    assert getattr(LossWatch(fake, stop=True), name)(*args, **kwargs) is answer
    assert fake.asked == [(name, args, kwargs)]


def test_recording_logs_every_answer_and_replaying_gives_them_back_then_asks_the_learner() -> None:
    saved = []
    fake = Fake()
    recording = Recording(fake, None, lambda *a: saved.append(a))
    for name, (args, kwargs, _) in CALLS.items():
        getattr(recording, name)(*args, **kwargs)
    assert recording.log == [(name, answer) for name, (_, _, answer) in CALLS.items()]
    assert [name for name, _, _ in fake.asked] == list(CALLS) and saved == []
    assert recording.save_now(12.0) and saved == [(recording.log, 1, 0.0, 12.0)]  # one aggregation counted

    restored, live = [], Fake()
    resumed = Recording(live, None, lambda *a: None)
    replaying = Replaying(list(recording.log), resumed, then=lambda: restored.append(True))
    for name, (args, kwargs, answer) in CALLS.items():
        assert getattr(replaying, name)(*args, **kwargs) is answer
    assert live.asked == [] and restored == [True] and not replaying.replaying
    assert replaying.evaluate() is CALLS["evaluate"][2] and [name for name, _, _ in live.asked] == ["evaluate"]
    assert resumed.log == [*recording.log, ("evaluate", CALLS["evaluate"][2])]


def test_replaying_refuses_a_log_of_another_run() -> None:
    from netfl.errors import NetflError

    replaying = Replaying([("evaluate", CALLS["evaluate"][2])], Recording(Fake(), None, print), then=lambda: None)
    with pytest.raises(NetflError, match="at answer 0 the engine asked plan_round, the checkpoint holds evaluate"):
        replaying.plan_round(0, [1])
