"""Errors meant for users: each carries a message that names the file, the
field and what would be accepted. The CLI prints them and exits with code 2;
anything else escaping is a bug in netfl."""


class NetflError(Exception):
    """Base of every error a user can cause and fix."""


class FileError(NetflError):
    """A file netfl reads is malformed or holds something invalid: a topology or study file, or one netfl wrote
    and reads back (summary.json, sweep.json, metrics.csv, a checkpoint...).

    ``problems`` holds one ``(path, message)`` pair per problem, e.g.
    ``("devices[1].battery.capacity", "must be > 0")`` or ``("rounds", "'many' is not a number")``.
    """

    def __init__(self, source: str, problems: list[tuple[str, str]]):
        self.source = source
        self.problems = problems
        lines = [f"{source}: {len(problems)} problem(s)"]
        lines += [f"  {path}: {msg}" if path else f"  {msg}" for path, msg in problems]
        super().__init__("\n".join(lines))

    def __reduce__(self):  # picklable, so that a run in a worker process reports it like any other
        return type(self), (self.source, self.problems)


class ScenarioError(FileError):
    """The scenario file is malformed or asks for something invalid."""


class DataError(NetflError):
    """A data set could not be found or read."""


class UserCodeError(NetflError):
    """A user's file (policy, model, data loader) could not be loaded, or raised or answered nonsense when called;
    the message names the file and line (:mod:`netfl.user_code`)."""


class PolicyError(UserCodeError):
    """A policy could not be loaded or misbehaved (user scripts included)."""


class ModelError(UserCodeError):
    """A model could not be built, or does not fit its task's data (user modules included)."""


class StrategyError(UserCodeError):
    """A user's FL algorithm (its strategy class) could not be loaded, or one of its hooks raised or answered
    something netfl cannot use (a vector of the wrong shape, a selection of devices that are not eligible)."""


class ModelChanged(ModelError):
    """A checkpoint's model is not the one this run builds (the model file changed since): the message says which
    parameter differs, and how."""


class NetflWarning(UserWarning):
    """Something a user should know that does not stop netfl (a model whose output is not finite from the
    start: the run will diverge at once); ``netfl validate`` prints it."""
