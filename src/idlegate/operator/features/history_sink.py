"""The history sink's file (``--history-file PATH``; deploy/README.md, "The cluster's
history"): JSON Lines, one record (:class:`idlegate.sim.history.HistoryWorkflow`) per
finished workflow, rotated by the standard library's ``RotatingFileHandler`` into
``history.<n>.jsonl`` (:func:`idlegate.api.history.rotated`), each a history file itself,
which ``idlegate history export`` reads as the operator wrote them.

One worker thread writes the lines, so a slow or failing volume never stalls its writer
(the future of each says whether it was written), and reads a pool's most recent records
back (:func:`read_prior`, :func:`read_recent`) after the lines queued: a restarted
operator's portfolio window and forecast calibration; lines that are not such a record are
left out, counted (`idlegate.sim.history.tail_history`).
"""

from __future__ import annotations

import json
import logging
import logging.handlers
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from idlegate.api.history import rotated, sink_files
from idlegate.api.pool_spec import DEFAULT_POOL
from idlegate.errors import IdlegateError
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival
from idlegate.sim.history import HistoryWorkflow, Tail, history_record, tail_history


def read_recent(path: Path, pool: str, count: int) -> Tail:
    """The last `count` records of `pool` in the sink at `path` and its rotated files (one
    without ``pool``, as before pools, the default's), oldest first, and the lines left
    out, by reason (`tail_history`)."""
    try:
        files = sink_files(path)
    except IdlegateError:  # no sink yet: no record
        return Tail([], Counter())
    return tail_history(files, count, lambda w: (w.pool or DEFAULT_POOL) == pool)


def read_prior(path: Path, pool: str, count: int) -> tuple[list[JobArrival], Counter[str]]:
    """`read_recent`'s records as arrivals on the operator's clock, and the lines left out."""
    tail = read_recent(path, pool, count)
    arrivals = [
        JobArrival(w.arrival or 0.0, w.name or w.source, Dag.from_spec(w.spec), w.durations())
        for w in tail.workflows
    ]
    return arrivals, tail.skipped


class _Handler(logging.handlers.RotatingFileHandler):
    """The standard library's size-based rotation, raising what it fails with, naming as `rotated`."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        raise  # (called inside emit's `except`: its exception goes on)

    def rotation_filename(self, default_name: str) -> str:
        base, _, n = default_name.rpartition(".")  # (the stdlib's PATH.<n>)
        return str(rotated(Path(base), int(n)))


class HistorySink:
    """A JSON Lines history file with rotation, written by one worker thread."""

    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        self.path = path
        # (opened at the first write: a missing volume is a failed write, not a failed start)
        self._handler = _Handler(
            path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8", delay=True
        )
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="idlegate-history")

    def write(self, record: HistoryWorkflow) -> Future[None]:
        """Queue one record; the future says whether it was written."""
        line = json.dumps(history_record(record), separators=(",", ":"))
        return self._worker.submit(self._write, line)

    def _write(self, line: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handler.emit(logging.makeLogRecord({"msg": line}))  # (flushed by emit)

    def prior(self, pool: str, count: int) -> Future[tuple[list[JobArrival], Counter[str]]]:
        """Read `pool`'s last `count` records (`read_prior`) after the lines queued."""
        return self._worker.submit(read_prior, self.path, pool, count)

    def recent(self, pool: str, count: int) -> Future[Tail]:
        """Read `pool`'s last `count` records (`read_recent`) after the lines queued."""
        return self._worker.submit(read_recent, self.path, pool, count)

    def close(self) -> None:
        """Write what is queued, then close the file."""
        self._worker.shutdown(wait=True)
        self._handler.close()
