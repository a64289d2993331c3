"""Checkpoint and resume: a long run survives a crash, a kill or a reboot, and resumes to the same bits.

A SimPy simulation cannot be pickled (its processes are live generators),
but it is deterministic given its seed and the learner's answers. So a
checkpoint holds the learner's state and the log of every answer the
learner gave the engine up to that point (round plans, applied counts,
evaluations: small). Resuming rebuilds the world from the scenario,
replays the engine against the logged answers -- no training, so it runs at
the engine's speed -- and, once the log is used up, restores the learner's
state and goes on for real. The resumed run's events and metrics are those
of a run that never stopped, bit for bit.

The checkpoint sits beside the results folder (``results/.<name>.checkpoint``),
is replaced atomically at every checkpoint -- and at a Ctrl-C or SIGTERM,
which stops the engine between two events (:meth:`Recording.save_now`), so a
resumed run goes on from the instant it stopped -- and removed when the run
completes. It is a pickle, like any torch checkpoint: resume only your own.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netfl.backend import BackendWrapper, Evaluation, RoundContext, RoundPlan, TrainingBackend, Work
from netfl.errors import FileError, ModelChanged, NetflError, ScenarioError
from netfl.numbers import is_integer, is_number

if TYPE_CHECKING:
    from netfl.config.schema import Scenario

FORMAT = 2  # 2: the learner's state split by concern (netfl 0.2.0); 1: netfl 0.1.0


@dataclass(frozen=True)
class Every:
    """Checkpoint after the aggregation that completes every ``rounds`` rounds, or the first one at or after
    every ``seconds`` of simulated time."""

    rounds: int | None = None
    seconds: float | None = None

    @classmethod
    def parse(cls, text: str) -> Every:
        """``50rounds`` (or ``"50 rounds"``) or a simulated duration (``30min``, ``2h``); a bare number is refused:
        it could mean either."""
        from netfl.units import bare_number, parse_quantity, parse_rounds

        text = str(text).strip()
        spellings = "a number of rounds with the word, 50rounds, or a simulated duration, 30min or 2h"
        number = bare_number(text)
        if number is not None:
            raise NetflError(
                f"--checkpoint-every {text}: a number without a unit could mean rounds or seconds; write "
                f"{number:g}rounds or {number:g}s ({spellings})"
            )
        rounds = parse_rounds(text)
        if rounds is not None and rounds > 0:
            return cls(rounds=rounds)
        try:
            seconds = parse_quantity(text, "time") if rounds is None else math.nan
        except (ValueError, TypeError):
            seconds = math.nan
        if not (seconds > 0 and math.isfinite(seconds)):
            raise NetflError(f"--checkpoint-every {text}: give {spellings}")
        return cls(seconds=float(seconds))

    def describe(self) -> str:
        return f"{self.rounds} rounds" if self.rounds else f"{self.seconds:g} simulated s"


def checkpoint_path(out_dir: Path) -> Path:
    """Where the run that writes ``out_dir`` keeps its checkpoint."""
    out_dir = Path(out_dir)
    return out_dir.parent / f".{out_dir.name}.checkpoint"


@dataclass
class Checkpoint:
    """What a resumed run needs: the scenario as a topology mapping and where it was read from, the run's
    options, the engine's answer log and the learner's state after the last logged answer."""

    scenario: dict[str, Any]
    source: str | None
    options: dict[str, Any]
    every: Every
    log: list[tuple[str, Any]]
    state: dict[str, Any]
    rounds: int
    sim_time_s: float  # of the last periodic checkpoint (the schedule goes on from it)
    versions: dict[str, str] = field(default_factory=dict)
    file: Path | None = field(default=None, compare=False, metadata={"saved": False})  # where it was loaded from
    stopped_at_s: float | None = None  # a checkpoint written at an interrupt: the simulated time it stopped at

    def describe(self) -> str:
        if self.stopped_at_s is None:
            return f"round {self.rounds} ({self.sim_time_s:.0f} simulated s)"
        return f"round {self.rounds} ({self.stopped_at_s:.0f} simulated s, where it was interrupted)"

    def save(self, path: Path) -> None:
        """Replace ``path`` atomically: a kill while saving leaves the previous checkpoint whole."""
        import torch  # here, not at import: the command line parses --checkpoint-every before loading torch

        staging = path.with_name(f"{path.name}.partial-{os.getpid()}")
        content = {f.name: getattr(self, f.name) for f in _saved_fields()}
        try:
            torch.save({"format": FORMAT, **content, "every": self.every.__dict__}, staging)
            os.replace(staging, path)
        except OSError as exc:
            staging.unlink(missing_ok=True)
            raise NetflError(f"{path}: cannot write the checkpoint: {exc}") from None

    @classmethod
    def load(cls, path: Path) -> Checkpoint:
        """The checkpoint in ``path``, every field checked (a FileError naming the field, as for a topology)."""
        import torch

        try:
            # our own pickle (see the module docstring), its tensors read onto the CPU: a GPU run's checkpoint
            # resumes on a machine without one; the learner moves its state to the run's device
            data = torch.load(path, map_location="cpu", weights_only=False)
        except FileNotFoundError:
            raise NetflError(f"{path}: no checkpoint (run with --checkpoint-every to make one)") from None
        except Exception as exc:  # noqa: BLE001 -- a truncated or foreign file, however torch words it
            raise NetflError(f"{path}: not a netfl checkpoint ({type(exc).__name__}: {exc})") from None
        if isinstance(data, dict) and isinstance(data.get("format"), int) and data["format"] != FORMAT:
            raise NetflError(
                f"{path}: a checkpoint of format {data['format']}, written by another version of netfl; this one "
                f"resumes format {FORMAT} only: run the scenario again from the start"
            )
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise NetflError(f"{path}: not a netfl checkpoint of format {FORMAT}")
        problems = checkpoint_problems(data)
        if problems:
            raise FileError(str(path), problems)
        data.pop("format")
        data["every"] = Every(**data["every"])
        return cls(**data, file=Path(path))

    def resumed_scenario(self) -> Scenario:
        """The scenario to resume, validated as a topology is (its file paths relative to the topology it was read
        from); a problem names the checkpoint and the field."""
        from netfl.config import scenario_from_dict

        source = self.source
        try:
            return scenario_from_dict(
                self.scenario, source=source or str(self.file), base_dir=Path(source).parent if source else None
            )
        except ScenarioError as exc:
            raise FileError(str(self.file), [(_join("scenario", p), m) for p, m in exc.problems]) from None

    def restore_learner(self, learner: Any) -> None:
        """Give the learner its state back; a state that does not fit it names the checkpoint."""
        try:
            learner.restore(self.state)
        except ModelChanged as exc:  # the user's model file changed: say which parameter, not a reshape error
            raise FileError(str(self.file), [("state", str(exc))]) from None
        except Exception as exc:  # noqa: BLE001 -- whatever the learner trips on, the checkpoint is at fault
            raise FileError(
                str(self.file), [("state", f"does not fit this run's learner ({type(exc).__name__}: {exc})")]
            ) from None


def _saved_fields() -> list[Any]:
    return [f for f in fields(Checkpoint) if f.metadata.get("saved", True)]


def _join(prefix: str, path: str) -> str:
    return f"{prefix}.{path}" if path and not path.startswith("[") else f"{prefix}{path}"


def checkpoint_problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    """What is wrong with a checkpoint's content (its fields as saved), field by field."""
    names = {f.name for f in _saved_fields()} | {"format"}
    optional = {f.name for f in _saved_fields() if f.default is not MISSING or f.default_factory is not MISSING}
    problems = [(key, "not a field of a netfl checkpoint") for key in data if key not in names]
    problems += [(name, "missing") for name in sorted(names - optional - set(data))]
    if problems:
        return problems
    checks = [
        ("scenario", isinstance(data["scenario"], dict), "a topology mapping"),
        ("source", data["source"] is None or isinstance(data["source"], str), "the topology's path, or null"),
        ("options", isinstance(data["options"], dict), "a mapping of the run's options"),
        ("every", _is_every(data["every"]), "{rounds: N} or {seconds: S}, one of them > 0"),
        ("log", isinstance(data["log"], list), "a list of the learner's answers"),
        ("state", isinstance(data["state"], dict), "the learner's state (a mapping)"),
        ("rounds", is_integer(data["rounds"]) and data["rounds"] >= 0, "an integer >= 0"),
        ("sim_time_s", is_number(data["sim_time_s"]) and 0 <= data["sim_time_s"] < math.inf, "a time >= 0"),
        ("versions", isinstance(data.get("versions", {}), dict), "a mapping of package versions"),
        (
            "stopped_at_s",
            data.get("stopped_at_s") is None
            or (is_number(data["stopped_at_s"]) and 0 <= data["stopped_at_s"] < math.inf),
            "the simulated time an interrupt stopped the run at, or null",
        ),
    ]
    problems = [(name, f"must be {what}, got {_shown(data.get(name))}") for name, ok, what in checks if not ok]
    if isinstance(data["options"], dict):
        saved = data["options"].get("data_dir")
        if saved is not None and not isinstance(saved, str):
            problems.append(("options.data_dir", f"must be a folder's path or null, got {_shown(saved)}"))
    if isinstance(data["log"], list):
        for i, entry in enumerate(data["log"]):
            if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str) and entry[0] in ANSWERS):
                problems.append((f"log[{i}]", f"must be (question, answer), the question one of {', '.join(ANSWERS)}"))
            elif not ANSWERS[entry[0]][0](entry[1]):
                question, answer = entry
                problems.append(
                    (f"log[{i}]", f"the answer to {question} must be {ANSWERS[question][1]}, got {_shown(answer)}")
                )
            if len(problems) >= 10:
                break
    return problems


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _is_every(value: Any) -> bool:
    if not isinstance(value, dict) or set(value) != {"rounds", "seconds"}:
        return False
    rounds, seconds = value["rounds"], value["seconds"]
    if rounds is not None:
        return seconds is None and is_integer(rounds) and rounds > 0
    return is_number(seconds) and 0 < seconds < math.inf


def _is_work(value: Any) -> bool:
    return (
        isinstance(value, Work)
        and is_integer(value.client)
        and is_integer(value.job)
        and all(is_number(x) for x in (value.download_bytes, value.flops, value.upload_bytes))
        and isinstance(value.note, str)
        and isinstance(value.report, bool)
        and (value.task is None or is_integer(value.task))
        and is_integer(value.steps)
        and value.steps >= 0
    )


def _is_plan(value: Any) -> bool:
    return (
        isinstance(value, RoundPlan)
        and isinstance(value.work, tuple)
        and isinstance(value.probe, bool)
        and all(_is_work(w) for w in value.work)
    )


def _is_evaluation(value: Any) -> bool:
    return (
        isinstance(value, Evaluation)
        and is_number(value.accuracy)
        and is_number(value.loss)
        and isinstance(value.per_class_accuracy, tuple)
        and all(is_number(x) for x in value.per_class_accuracy)
        and isinstance(value.tasks, tuple)
        and all(_is_evaluation(t) for t in value.tasks)
    )


#: Each question the engine asks the learner: what its answer must be, and that said in words.
ANSWERS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "plan_round": (_is_plan, "a RoundPlan"),
    "plan_after_probe": (_is_plan, "a RoundPlan"),
    "submit": (_is_work, "a Work item"),
    "cancel": (lambda answer: answer is None, "None"),
    "cut": (lambda answer: answer is None, "None"),
    "aggregate": (lambda answer: is_integer(answer) and answer >= 0, "a count of applied updates (an integer >= 0)"),
    "aggregate_cloud": (lambda answer: is_integer(answer) and answer >= 0, "a count of edge models (an integer >= 0)"),
    "evaluate": (_is_evaluation, "an Evaluation"),
}


#: Saves a checkpoint: (answer log, aggregations done, simulated time of the periodic checkpoint, the simulated time
#: of an interrupt or None).
Save = Callable[[list, int, float, "float | None"], None]


class Recording(BackendWrapper):
    """The learner as the engine sees it, each answer logged; ``due(context)`` after each aggregation decides
    whether to checkpoint, ``save(log, rounds, sim_time, stopped_at)`` does it."""

    def __init__(
        self,
        learner: TrainingBackend,
        every: Every | None,
        save: Save,
        log: list[tuple[str, Any]] | None = None,
        done: tuple[int, float] = (0, 0.0),
    ):
        super().__init__(learner)
        self.every, self._save = every, save
        self.log: list[tuple[str, Any]] = log if log is not None else []
        self._rounds, self._last_time = done

    def pass_on(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Every answer, logged as it is given."""
        value = super().pass_on(name, *args, **kwargs)
        self.log.append((name, value))
        return value

    def aggregate(self, context: RoundContext) -> int:
        applied = super().aggregate(context)
        self._rounds += 1
        if self._due(context.sim_time_s):
            self._last_time = context.sim_time_s
            self._save(self.log, self._rounds, context.sim_time_s, None)
        return applied

    def save_now(self, now: float) -> bool:
        """Checkpoint where the run stands, at simulated time ``now`` (an interrupt that stopped the engine between
        two events: every answer logged so far is in the learner's state); the periodic schedule goes on as it
        was. True: saved."""
        self._save(self.log, self._rounds, self._last_time, now)
        return True

    def _due(self, now: float) -> bool:
        if self.every is None:
            return False
        if self.every.rounds:
            return self._rounds % self.every.rounds == 0
        return now - self._last_time >= self.every.seconds


class Replaying(BackendWrapper):
    """The engine's answers from a checkpoint's log, then (``then()`` restores the learner) the live learner:
    the engine, deterministic, walks the same path to the checkpoint without training anything."""

    def __init__(self, log: list[tuple[str, Any]], live: Recording, then: Callable[[], None]):
        super().__init__(live)
        self._log, self._next, self.live, self._then = log, 0, live, then
        if not log:
            then()

    @property
    def replaying(self) -> bool:
        return self._next < len(self._log)

    def save_now(self, now: float) -> bool:
        """As :meth:`Recording.save_now` once the log is used up; while replaying, the learner is not restored yet
        and the checkpoint resumed from still holds: nothing is saved (False)."""
        return False if self.replaying else self.live.save_now(now)

    def pass_on(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """The logged answer while the log lasts, then the live learner's."""
        return self._replay(name) if self.replaying else super().pass_on(name, *args, **kwargs)

    def _replay(self, name: str) -> Any:
        logged, value = self._log[self._next]
        if logged != name:
            raise NetflError(
                f"the checkpoint does not match this run: at answer {self._next} the engine asked "
                f"{name}, the checkpoint holds {logged} (was the scenario or netfl changed?)"
            )
        self._next += 1
        self.live.log.append((name, value))  # the resumed run's own log starts as the checkpoint's
        if not self.replaying:
            self._then()
        return value
