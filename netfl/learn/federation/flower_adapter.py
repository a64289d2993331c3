"""A Flower strategy as it is, in netfl's world: an adapter from netfl's rounds to Flower's calls.

``server.algorithm: {flower: my_strategy.py:MyStrategy, ...}`` (or an import path, ``flwr.serverapp.strategy.FedAdam``)
runs a user's Flower ``Strategy`` unchanged: the current message API (``configure_train`` / ``aggregate_train`` with
``ArrayRecord``, ``MetricRecord`` and ``Message``) or the older one (``configure_fit`` / ``aggregate_fit`` with
``Parameters``, ``FitRes`` and ``ClientProxy``). The adapter is a netfl :class:`~netfl.algorithms.Strategy` written
against the public API; each synchronous round it

- hands Flower's configure step the devices netfl's world made eligible (availability, battery, links) as the nodes
  of a Grid (node id = device index + 2; Flower's SuperLink is node 1) or the clients of a ClientManager (cid = the
  device index); Flower chooses among them, and the messages it returns are who trains;
- hands Flower's aggregate step a reply (message API) or a ``FitRes`` (older API) for each update that reached the
  server -- the client's trained model as per-tensor numpy arrays (named as the model's parameters) and its
  ``num-examples`` -- and, in the older API, a failure for each device asked whose update did not arrive;
- takes the arrays Flower returns as the next global model (checked: the same tensors and shapes, finite) and
  Flower's metrics as the row of algorithm.csv.

Every draw is the seed's: Flower samples with Python's global ``random`` (and some strategies draw from numpy's
global generator), so each Flower call runs with both seeded from netfl's selection stream and put back as they
were afterwards; the ClientManager of the older API samples from that stream itself. Flower's wait for more nodes
than are eligible (``min_available_nodes``) is a round in which nobody trains, not a sleep.

What netfl does not take from Flower: the train config (``lr``, ``proximal-mu``, ...) a configure step sends goes to
no client -- netfl's clients train as ``task.local`` says; federated evaluation (``configure_evaluate``) and a
strategy's own ``evaluate``: netfl tests the global model centrally, on the task's test set.

Flower is imported with this module, which netfl imports only for a scenario that names a Flower strategy.
"""

from __future__ import annotations

import copy
import inspect
import logging
import math
import numbers
import pickle
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.common import Code, FitRes, Parameters, Status, ndarrays_to_parameters, parameters_to_ndarrays
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.serverapp import Grid
from flwr.serverapp.strategy import strategy_utils
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity

from netfl.algorithms import Aggregate, ClientUpdate, DeviceStates, Evaluation, RoundContext, Strategy
from netfl.backend import AGGREGATION_PLACE
from netfl.errors import StrategyError
from netfl.registry.flower import OWN_SERVER_STEP, SUPPLIED, FlowerClass, FlowerParams, flower_entry
from netfl.user_code import guarded

__all__ = ["FIRST_NODE_ID", "FlowerAdapter", "flower_strategy"]

#: Flower's node id of netfl's device 0 (device i is node i + FIRST_NODE_ID; the SuperLink is node 1).
FIRST_NODE_ID = SUPERLINK_NODE_ID + 1
#: The run id the messages carry (Flower's ServerApp runtime sets one; netfl's run is the only one).
RUN_ID = 1


def flower_strategy(found: FlowerClass, label: str) -> type[FlowerAdapter]:
    """The adapter class of the Flower strategy class ``found`` (``label``: how netfl names it)."""
    doc = (found.cls.__doc__ or "").strip().splitlines()
    summary = doc[0] if doc else ""
    adapter = type(
        f"Flower{found.cls.__name__}",
        (FlowerAdapter,),
        {"flower_class": found, "name": label, "summary": summary or "a Flower strategy", "__doc__": None},
    )
    adapter.entry = flower_entry(label, summary)  # the entry validation checked the scenario against
    return adapter


class FlowerAdapter(Strategy):
    """netfl's rounds as Flower's calls (the module's text); subclassed per Flower class by :func:`flower_strategy`."""

    Params = FlowerParams
    mode = "sync"
    own_server_step = OWN_SERVER_STEP
    flower_class: ClassVar[FlowerClass]

    def __init__(self, params: FlowerParams, clients):
        super().__init__(params, clients)
        self.kwargs = dict(params.model_extra or {})
        self.tensors: list[tuple[str, tuple[int, ...]]] | None = None  # the model's (name, shape), when known
        self.x: torch.Tensor | None = None  # the current global vector, known from the first evaluation on
        self.round_seed = 0  # drawn from the selection stream each round: the seed of Flower's own draws
        self.asked: dict[int, Any] = {}  # device -> what Flower sent it this round (a Message, or FitIns)
        self.flower: Any = None
        if not self._takes_initial_parameters():
            self.flower = self._build(None)

    # ------------------------------------------------------------------------------------------ netfl's hooks

    def use_tensors(self, names: Sequence[str], shapes: Sequence[Sequence[int]]) -> None:
        """The model's parameters by name and shape, in the flat vector's order: Flower sees one array per tensor
        (without this, one flat array)."""
        self.tensors = [(str(n), tuple(int(d) for d in s)) for n, s in zip(names, shapes)]

    def evaluate(self, task: int, x: torch.Tensor, test: Callable[[torch.Tensor], Evaluation]) -> Evaluation:
        self._know(x)  # the initial evaluation, before the first round, gives the starting model
        return test(x)

    def select(
        self,
        round_index: int,
        available: Sequence[int],
        participants: int | None,
        rng: np.random.Generator,
        devices: DeviceStates | None = None,
    ) -> list[tuple[int, int]]:
        """Flower's configure step among the eligible devices (``participants`` is Flower's to decide)."""
        self.round_seed = int(rng.integers(2**63))
        x = self._current()
        eligible = [int(c) for c in available]
        self.asked = {}
        hook = "configure_train" if self._message_api else "configure_fit"
        with _flower_process():
            arrays = self._record(x) if self._message_api else self._parameters(x)
            with self._calling(hook, 0):
                try:
                    if self._message_api:
                        grid = _Grid([c + FIRST_NODE_ID for c in eligible])
                        sent = list(self.flower.configure_train(round_index + 1, arrays, ConfigRecord(), grid))
                    else:
                        manager = _ClientManager(eligible, rng)
                        sent = list(self.flower.configure_fit(round_index + 1, arrays, manager))
                except _Waiting:  # more nodes wanted than are eligible: Flower would wait; nobody trains now
                    sent = []
        self.asked = self._asked(hook, sent, set(eligible))
        return [(client, 0) for client in sorted(self.asked)]

    def aggregate(self, x: torch.Tensor, updates: list[ClientUpdate], context: RoundContext) -> Aggregate:
        """Flower's aggregate step on the updates that arrived; its arrays are the next global model."""
        self._know(x)
        server_round = context.round_index + 1
        hook = "aggregate_train" if self._message_api else "aggregate_fit"
        with _flower_process():
            if self._message_api:
                replies = [self._reply(u, x) for u in updates]
                with self._calling(hook, 1):
                    answer = self.flower.aggregate_train(server_round, replies)
            else:
                delivered = {u.client for u in updates}
                results = [(_Client(u.client), self._fit_res(u, x)) for u in updates]
                failures = [
                    TimeoutError(f"device {c}'s update did not reach the server in round {context.round_index}")
                    for c in sorted(self.asked)
                    if c not in delivered
                ]
                with self._calling(hook, 1):
                    answer = self.flower.aggregate_fit(server_round, results, failures)
        arrays, metrics = self._pair(hook, answer)
        vector = x if arrays is None else self._vector(hook, arrays, x, updates)
        self.x, self.asked = vector, {}
        return Aggregate(vector, self._metrics(hook, metrics, len(updates)))

    def state(self) -> dict:
        """The global vector, the round's seed, who was asked and the Flower object's data (its attributes but
        functions, which its construction gives again); a StrategyError naming an attribute a checkpoint cannot
        keep."""
        kept = {}
        if self.flower is not None:
            for key, value in vars(self.flower).items():
                if callable(value) or inspect.ismodule(value):
                    continue
                try:
                    pickle.dumps(value)
                except Exception as exc:  # noqa: BLE001 -- whatever the object is, it cannot be saved
                    raise StrategyError(
                        f"{self.flower_class.source}: {type(self.flower).__qualname__}.{key} "
                        f"({type(value).__name__}) cannot be kept in a checkpoint ({exc}); run without "
                        "checkpoint_every, or keep plain data (numbers, numpy arrays, lists, dicts) in it"
                    ) from None
                kept[key] = copy.deepcopy(value)
        # who was asked, should the run stop between a round's start and its aggregation (Ctrl-C)
        return {"x": self.x, "round_seed": self.round_seed, "asked": sorted(self.asked), "flower": kept}

    def restore(self, state: dict) -> None:
        self.x, self.round_seed = state["x"], state["round_seed"]
        self.asked = dict.fromkeys(state["asked"])  # what Flower sent them is not kept: their replies answer anew
        if self.flower is None:
            self.flower = self._build(self.x)
        vars(self.flower).update(copy.deepcopy(state["flower"]))

    # ------------------------------------------------------------------------------------------ Flower's side

    @property
    def _message_api(self) -> bool:
        return self.flower_class.message_api

    def _takes_initial_parameters(self) -> bool:
        """Whether netfl supplies the strategy's initial_parameters (the older FedOpt family requires them)."""
        try:
            names = inspect.signature(self.flower_class.cls.__init__).parameters
        except (TypeError, ValueError):
            return False
        return any(n in names and n not in self.kwargs for n in SUPPLIED)

    def _build(self, x: torch.Tensor | None) -> Any:
        kwargs = dict(self.kwargs)
        if x is not None and self._takes_initial_parameters():
            kwargs["initial_parameters"] = ndarrays_to_parameters(self._arrays(x))
        cls = self.flower_class.cls
        with _flower_process():
            with self._calling("__init__", 3):  # seeded too: an __init__ that draws draws the same each run
                flower = cls(**kwargs)
            if not self._message_api:  # Flower's server asks first; netfl's model is the initial one
                with self._calling("initialize_parameters", 2):
                    flower.initialize_parameters(_ClientManager([], np.random.default_rng(0)))
        return flower

    def _know(self, x: torch.Tensor) -> None:
        self.x = x
        if self.flower is None:
            self.flower = self._build(x)

    def _current(self) -> torch.Tensor:
        if self.x is None:
            raise RuntimeError("the Flower adapter was asked to select before netfl's initial evaluation")
        return self.x

    @contextmanager
    def _calling(self, hook: str, stream: int) -> Iterator[None]:
        """Inside: the Flower strategy's ``hook`` runs behind the fence (its errors name its file and line), with
        Python's and numpy's global generators seeded from the round's seed (``stream``: which of its draws)."""
        cls = self.flower_class.cls
        with guarded(path=self.flower_class.source, what=f"{cls.__qualname__}.{hook}", error=StrategyError):
            with _seeded((self.round_seed, stream)):
                yield

    def _refuse(self, hook: str, problem: str) -> StrategyError:
        method = getattr(type(self.flower), hook)
        return StrategyError(f"{_defined(method)}: {type(self.flower).__qualname__}.{hook} {problem}")

    def _arrays(self, vector: torch.Tensor) -> list[np.ndarray]:
        """``vector`` as Flower's arrays: one per tensor of the model (one flat array when netfl does not know
        them, or they do not cover the vector)."""
        return [a for _, a in self._named(vector)]

    def _named(self, vector: torch.Tensor) -> list[tuple[str, np.ndarray]]:
        flat = vector.detach().to("cpu").numpy().copy()
        if self.tensors is None or sum(math.prod(s) for _, s in self.tensors) != flat.size:
            return [("vector", flat)]
        out, at = [], 0
        for name, shape in self.tensors:
            size = math.prod(shape)
            out.append((name, flat[at : at + size].reshape(shape)))
            at += size
        return out

    def _record(self, vector: torch.Tensor) -> ArrayRecord:
        return ArrayRecord({n: Array(a) for n, a in self._named(vector)})

    def _parameters(self, vector: torch.Tensor) -> Parameters:
        return ndarrays_to_parameters(self._arrays(vector))

    def _trained(self, update: ClientUpdate, x: torch.Tensor) -> torch.Tensor:
        """The client's model after training: where it started plus its update."""
        start = update.start if update.start is not None else x
        return start.to(update.delta.dtype) + update.delta.view_as(start)

    def _reply(self, update: ClientUpdate, x: torch.Tensor) -> Message:
        asked = self.asked.get(update.client)
        if not isinstance(asked, Message):  # what Flower sent is not known (a resumed round): a message of its own
            asked = Message(content=RecordDict(), message_type="train", dst_node_id=update.client + FIRST_NODE_ID)
        content = RecordDict(
            {
                "arrays": self._record(self._trained(update, x)),
                "metrics": MetricRecord({"num-examples": int(update.num_samples)}),
            }
        )
        return Message(content=content, reply_to=asked)

    def _fit_res(self, update: ClientUpdate, x: torch.Tensor) -> FitRes:
        return FitRes(
            Status(Code.OK, "Success"), self._parameters(self._trained(update, x)), int(update.num_samples), {}
        )

    def _asked(self, hook: str, sent: list, eligible: set[int]) -> dict[int, Any]:
        """Who Flower's configure step asks, each an eligible device, once."""
        asked: dict[int, Any] = {}
        for item in sent:
            if self._message_api:
                if not isinstance(item, Message):
                    raise self._refuse(hook, f"returned {type(item).__name__} among its messages; expected Messages")
                client = item.metadata.dst_node_id - FIRST_NODE_ID
                what = f"a message to node {item.metadata.dst_node_id}"
            else:
                if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], ClientProxy)):
                    raise self._refuse(hook, f"returned {item!r}; expected (ClientProxy, FitIns) pairs")
                client = int(item[0].cid) if str(item[0].cid).isdigit() else -1
                what = f"client {item[0].cid!r}"
            if client not in eligible:
                raise self._refuse(hook, f"returned {what}, which is not one of the eligible nodes this round")
            if client in asked:
                raise self._refuse(hook, f"returned {what} twice")
            asked[client] = item if self._message_api else item[1]
        return asked

    def _pair(self, hook: str, answer: Any) -> tuple[Any, Any]:
        if not (isinstance(answer, tuple) and len(answer) == 2):
            raise self._refuse(hook, f"returned {type(answer).__name__}; expected a pair (arrays, metrics)")
        arrays, metrics = answer
        kind = ArrayRecord if self._message_api else Parameters
        if arrays is not None and not isinstance(arrays, kind):
            raise self._refuse(
                hook, f"returned {type(arrays).__name__} as its arrays; expected {kind.__name__} or None"
            )
        return arrays, metrics

    def _vector(self, hook: str, arrays: Any, x: torch.Tensor, updates: list[ClientUpdate]) -> torch.Tensor:
        """Flower's arrays as netfl's flat vector: the same tensors (names, in the message API), each of the same
        shape, finite where x and the updates are."""
        named = self._named(x)
        expected = [a for _, a in named]
        if self._message_api:
            names = [n for n, _ in named]
            if set(arrays.keys()) != set(names):  # in another order: taken by name
                raise self._refuse(
                    hook, f"returned arrays {sorted(arrays.keys())}; expected the model's {names} (as sent)"
                )
            got = [arrays[n].numpy() for n in names]
        else:
            got = parameters_to_ndarrays(arrays)
            if len(got) != len(expected):
                raise self._refuse(hook, f"returned {len(got)} arrays; expected the model's {len(expected)}")
        for i, (theirs, ours) in enumerate(zip(got, expected)):
            if tuple(np.shape(theirs)) != ours.shape:
                raise self._refuse(
                    hook, f"returned array {i} of shape {tuple(np.shape(theirs))}; expected {ours.shape}, as sent"
                )
        flat = np.concatenate([np.asarray(a, dtype=np.float64).reshape(-1) for a in got])
        vector = torch.from_numpy(flat).to(dtype=x.dtype, device=x.device)
        if not bool(torch.isfinite(vector).all()) and bool(torch.isfinite(x).all()):
            if all(bool(torch.isfinite(u.delta).all()) for u in updates):
                raise self._refuse(hook, "returned arrays that are not finite (NaN or inf) from finite updates")
        return vector

    def _metrics(self, hook: str, metrics: Any, replies: int) -> dict[str, float]:
        """Flower's metrics as algorithm.csv's: numbers as they are (a bool as 0/1, a list as name[i]), the
        rest (text, bytes) left out; beside them ``replies``, the updates Flower aggregated."""
        out: dict[str, float] = {"replies": replies}
        if metrics is None:
            return out
        if not isinstance(metrics, (MetricRecord, dict)):
            raise self._refuse(hook, f"returned {type(metrics).__name__} as its metrics; expected MetricRecord")
        for key, value in metrics.items():
            name = f"flower_{key}" if key in AGGREGATION_PLACE or key == "replies" else str(key)
            if isinstance(value, (list, tuple)):
                for i, v in enumerate(value):
                    if _is_number(v):
                        out[f"{name}[{i}]"] = _number(v)
            elif _is_number(value):
                out[name] = _number(value)
        return out


# ---------------------------------------------------------------------------------------------- Flower's world


class _Waiting(Exception):
    """Flower's sampling would wait for nodes to connect: in netfl's world no more are eligible this round."""


def _refuse_to_wait(seconds: float) -> None:
    raise _Waiting


class _Grid(Grid):
    """The eligible devices as Flower's nodes; netfl's world carries the messages (not this Grid)."""

    def __init__(self, nodes: list[int]):
        self._nodes = nodes
        self._run = Run.create_empty(RUN_ID)

    def set_run(self, run: Run) -> None:
        self._run = run

    @property
    def run(self) -> Run:
        return self._run

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None) -> Message:
        return Message(content=content, message_type=message_type, dst_node_id=dst_node_id, group_id=group_id,
                       ttl=ttl)  # fmt: skip

    def get_node_ids(self) -> list[int]:
        return list(self._nodes)

    def push_messages(self, messages):
        raise _not_here("push_messages")

    def pull_messages(self, message_ids):
        raise _not_here("pull_messages")

    def send_and_receive(self, messages, *, timeout=None):
        raise _not_here("send_and_receive")


def _not_here(what: str) -> RuntimeError:
    return RuntimeError(
        f"Grid.{what}: in netfl the simulated world carries the messages configure_train returns, and its replies "
        "come to aggregate_train; a strategy's own send and receive has no place there"
    )


class _Client(ClientProxy):
    """A device as the older API's client (cid: its index); netfl trains it, not this proxy."""

    def __init__(self, client: int):
        super().__init__(str(client))

    def get_properties(self, ins, timeout, group_id):
        raise _not_here("ClientProxy.get_properties")

    def get_parameters(self, ins, timeout, group_id):
        raise _not_here("ClientProxy.get_parameters")

    def fit(self, ins, timeout, group_id):
        raise _not_here("ClientProxy.fit")

    def evaluate(self, ins, timeout, group_id):
        raise _not_here("ClientProxy.evaluate")

    def reconnect(self, ins, timeout, group_id):
        raise _not_here("ClientProxy.reconnect")


class _ClientManager(ClientManager):
    """The eligible devices as the older API's clients, sampled from netfl's selection stream (``rng``), never
    waited for: fewer than asked is no one."""

    def __init__(self, clients: Sequence[int], rng: np.random.Generator):
        self.clients = {str(c): _Client(c) for c in clients}
        self.rng = rng

    def num_available(self) -> int:
        return len(self.clients)

    def register(self, client: ClientProxy) -> bool:
        return False  # the world decides who is there

    def unregister(self, client: ClientProxy) -> None:
        pass

    def all(self) -> dict[str, ClientProxy]:
        return dict(self.clients)

    def wait_for(self, num_clients: int, timeout: int = 0) -> bool:
        return len(self.clients) >= num_clients

    def sample(self, num_clients: int, min_num_clients: int | None = None, criterion=None) -> list[ClientProxy]:
        if min_num_clients is None:
            min_num_clients = num_clients
        cids = [c for c in self.clients if criterion is None or criterion.select(self.clients[c])]
        if len(self.clients) < min_num_clients or num_clients > len(cids) or num_clients <= 0:
            return []
        picked = np.sort(self.rng.choice(len(cids), size=num_clients, replace=False))
        return [self.clients[cids[i]] for i in picked]


#: What Flower's runtime says of the task running in this process (Flower's TaskIdentity).
_IDENTITY = ("run_id", "node_id", "task_id")


def _identity(name: str) -> int | None:
    try:
        return getattr(TaskIdentity, name)
    except RuntimeError:  # not set: no Flower runtime in this process
        return None


@contextmanager
def _flower_process() -> Iterator[None]:
    """Inside: what Flower's ServerApp runtime provides (the task's identity, for the messages a strategy makes),
    Flower's INFO lines kept off netfl's console, and a wait for nodes refused; all put back afterwards."""
    saved = {name: _identity(name) for name in _IDENTITY}
    logger = logging.getLogger("flwr")
    level, sleep = logger.level, strategy_utils.sleep
    for name, value in zip(_IDENTITY, (RUN_ID, SUPERLINK_NODE_ID, 1)):
        setattr(TaskIdentity, name, value)
    logger.setLevel(max(level, logging.WARNING))
    strategy_utils.sleep = _refuse_to_wait
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(TaskIdentity, name, value)  # None where it was not set: unset again
        logger.setLevel(level)
        strategy_utils.sleep = sleep


@contextmanager
def _seeded(key: tuple[int, int]) -> Iterator[None]:
    """Inside: Python's ``random`` and numpy's global generator seeded from ``key``; their states put back after."""
    py_state, np_state = random.getstate(), np.random.get_state()
    words = np.random.SeedSequence(list(key)).generate_state(4)
    random.seed(int.from_bytes(words.tobytes(), "little"))
    np.random.seed(words)
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


def _defined(function: Callable) -> str:
    try:
        return f"{inspect.getsourcefile(function)}:{inspect.getsourcelines(function)[1]}"
    except (OSError, TypeError):
        return getattr(function, "__qualname__", repr(function))


def _is_number(value: Any) -> bool:
    return isinstance(value, (numbers.Real, np.bool_)) and not isinstance(value, str)


def _number(value: Any) -> float:
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    return int(value) if isinstance(value, numbers.Integral) else float(value)
