"""The event log's typed columns, shared by the engine that fills them and the writer that stores them.

Each is null where it does not apply. Which events fill it:

- ``job``: the job an event belongs to (``selected``, ``dropout``, the
  ``download_*``/``train_*``/``upload_*`` phases, ``late``, ``pull``,
  ``relay_*``); a probe is a job of its own.
- ``task``: the model that job trains when several train at once (MMFL);
  null with one model and for a probe. Every row of a job that has it,
  but ``relay_*`` (join on ``job``).
- ``bytes``: the bytes it moves, rounded to whole bytes (``download_start``,
  ``upload_start``, ``tx_start``, ``tx_end``, ``relay_*``,
  ``edge_upload_start``, ``edge_download_start``; ``collision``: the packet
  lost). Compressed updates and models count as sent.
- ``flops``: the job's computation (``train_start``; a job cut at the
  deadline, the steps it did).
- ``energy_j``: what the one load the event is about drew, idle draw not
  included (devices.parquet has every device's total by activity):
  ``train_end`` compute power x training time; ``download_end`` receive
  power x time receiving; ``upload_end`` transmit power x time
  transmitting, retransmissions included; ``tx_end`` transmit power x
  airtime; ``collision`` transmit power x the lost slot.
- ``airtime_s``, ``attempts``: ``tx_end`` of a transmission that ended (not
  of an aborted one): seconds on the air; packet transmissions, repeats
  included.
- ``staleness``: ``aggregate``: the largest staleness (global model
  versions behind) of the updates it applied; 0 in synchronous rounds,
  null when it applied none (``detail`` lists each when one is stale).
- ``cause``: why: ``dropout`` (``deadline``, ``over_commit``, ``unavailable``,
  ``transmission_failed``, ``battery_empty``, or ``policy:<name>``, the
  availability policy that took the device offline: ``policy:diurnal``,
  ``policy:my_policies.py:EveryKth``), ``online`` / ``offline`` (the same
  ``policy:<name>``, ``battery_empty``), an aborted ``tx_end``, ``power_on``
  (``charging``), an edge server's ``edge_online`` / ``edge_offline``
  (``policy``).
- ``available``: ``round_start`` of a synchronous round: the devices eligible.
- ``received``, ``applied``, ``dropped``: ``aggregate``: updates that reached
  the server, those the model took in, and the round's work that was lost.
- ``collisions``, ``success``: ``tx_end`` of a transmission that ended: its
  packets' collisions, and 1 if it got through (0: it gave up).
- ``retransmissions``: ``retransmission``: the packets sent again.
- ``slot``, ``others``: ``collision``: the slot and how many others sent in it.
- ``level``: the battery fraction at ``charge_start`` / ``charge_stop``, and the
  threshold crossed at ``below_min_level`` / ``above_min_level``.
- ``version``, ``steps``: ``pull``: the model version taken, and the worker's
  own local steps (null: the task's). ``steps`` and ``asked_steps`` on the
  ``train_start`` of a job cut at the deadline (partial work): the steps it
  trains, of those it was asked for.
- ``edge``: the edge server of ``edge_online`` / ``edge_offline`` and of
  ``edge_upload_*`` / ``edge_download_*`` (hierarchical aggregation).
- ``relay``, ``picked``: ``relay_*``: the relay's name; in a RAM erasure
  (``relay_drop``), the user the relay drew, whose update had not arrived.
- ``medium``: ``tx_start``: the kind of medium (``fdma``, ``slotted_aloha``...).

``detail`` keeps what has no column: ``probe`` (``selected``), each update's
staleness when one is stale (``aggregate``), ``waiting for updates`` (an
asynchronous ``round_start``), ``aborted after=`` (``tx_end``), the edges a
``cloud_aggregate`` heard (``edges=``).
"""

from __future__ import annotations

#: The typed columns in file order (after ``sim_time_s, round, device, kind``; ``detail`` comes last) and their type.
EVENT_FIELDS: dict[str, type] = {
    "job": int,
    "task": int,
    "bytes": int,
    "flops": float,
    "energy_j": float,
    "airtime_s": float,
    "attempts": int,
    "staleness": int,
    "cause": str,
    "available": int,
    "received": int,
    "applied": int,
    "dropped": int,
    "collisions": int,
    "success": int,
    "retransmissions": int,
    "slot": int,
    "others": int,
    "level": float,
    "version": int,
    "steps": int,
    "asked_steps": int,
    "relay": str,
    "edge": str,
    "picked": int,
    "medium": str,
}

#: The events one job logs, in order, when nothing stops it (``kind`` column): the server starts it, with ``selected``
#: in a synchronous round (netfl/sim/sync_server.py) or ``pull`` when an asynchronous worker takes the model
#: (netfl/sim/async_server.py); the device's task logs the rest (netfl/sim/device/task.py). The schedule estimate
#: (netfl/config/schedule.py) counts them.
JOB_EVENTS: dict[str, tuple[str, ...]] = {
    mode: (first, "download_start", "download_end", "train_start", "train_end", "upload_start", "upload_end")
    for mode, first in (("sync", "selected"), ("async", "pull"))
}
#: The server's own events per aggregation, in order: a synchronous round, or an asynchronous aggregation's wait for
#: its buffer (a ``round_start`` too) and the aggregation.
AGGREGATION_EVENTS: tuple[str, ...] = ("round_start", "aggregate")
