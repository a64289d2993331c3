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
- ``cause``: why: ``dropout`` (``deadline``, ``unavailable``,
  ``transmission_failed``, ``battery_empty``, ``policy``), ``online`` /
  ``offline`` (``policy``, ``battery_empty``), an aborted ``tx_end``,
  ``power_on`` (``charging``), an edge server's ``edge_online`` /
  ``edge_offline`` (``policy``).
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
}
