"""The cluster's own history in the operator: a record of every finished DagWorkflow
(:func:`idlegate.api.history.history_workflow`, the same as ``idlegate history export``
makes from live objects), for replays and training.

The optional sink (``--history-file PATH``; :mod:`idlegate.operator.features.history_sink`, the file and
its writing thread) takes one line per finished workflow (with ``pool``, the ExecutorPool
that ran it), so a slow or failing volume never stalls the pool: a failed write is a Warning
Event and ``idlegate_history_errors``. Once written, the status says
``historyRecorded: true`` and no operator writes it again; a finished workflow without it
is recorded when the operator admits it at a restart. The same thread reads a pool's most
recent records back (:meth:`HistorySink.prior`) for a restarted operator's portfolio
(:mod:`.planning`).
"""

from __future__ import annotations

import asyncio
import logging
import logging.handlers
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from idlegate.api.history import history_workflow, object_history
from idlegate.api.task_pods import Owner, owner_of
from idlegate.errors import IdlegateError
from idlegate.operator.core.events import Fact, Finished, FoundFinished, Recorded
from idlegate.operator.core.intents import PatchStatus, PostEvent
from idlegate.operator.features.history_sink import HistorySink
from idlegate.operator.forecasting.book import history_forecast
from idlegate.sim.engine import JobArrival
from idlegate.sim.history import HistoryWorkflow

if TYPE_CHECKING:
    from idlegate.api.settings import Settings
    from idlegate.operator.core.tracking import Workflow
    from idlegate.operator.metrics import Metrics

log = logging.getLogger(__name__)


def replay_arrival(wf: Workflow) -> JobArrival | None:
    """`wf`, just finished, as a replay's arrival: its arrival, DAG and measured durations
    (its record's: what a portfolio's window replays, `Decider.learns`), and the queue it
    names and its namespace, so a replay under the pool's queues places it as the pool did."""
    name = f"{wf.owner.namespace}/{wf.owner.name}"
    record = history_workflow(name, wf.spec, wf.status())
    if record is None:
        return None
    queue, namespace = wf.spec.queue_name, wf.owner.namespace
    return JobArrival(
        wf.arrival, name, wf.dag, record.durations(), queue=queue, namespace=namespace
    )


class HistoryRecorder:
    """A pool's side of the history: records of its finished workflows, in the sink that it shares
    with the recorder `beside` it (another pool's), if given. A record written is handed back to the
    pool (`emit`): the core's `Recorded`, or the status mark of a workflow that finished before."""

    takes = (Finished, FoundFinished)
    """The core's facts it answers."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        emit: Callable[[list[Any]], None],
        beside: HistoryRecorder | None = None,
    ) -> None:
        s = settings
        self.pool, self.pool_size = metrics.pool, s.pool_size
        self.metrics, self.emit = metrics, emit
        self.sink: HistorySink | None
        if beside is not None:
            self.sink = beside.sink
        elif s.history_file is not None:
            self.sink = HistorySink(s.history_file, s.history_max_bytes, s.history_backups)
        else:
            self.sink = None

    def react(self, fact: Fact) -> list[Any]:
        """The core's facts: a workflow that finished, here or before (a restart)."""
        if isinstance(fact, Finished):
            self.finished(fact.workflow)
        elif isinstance(fact, FoundFinished):
            self.finished_before(fact.body)
        return []

    def finished(self, wf: Workflow) -> None:
        """`wf` has just finished (its final status is queued): record it in the sink."""
        if self.sink is None or wf.history_recorded:
            return
        record = history_workflow(f"{wf.owner.namespace}/{wf.owner.name}", wf.spec, wf.status())
        if record is None:
            return
        # (forecast vs actual, and the replays' intervals: a restarted pool's calibration)
        made = history_forecast(wf.forecast_made, wf.job.first_start, wf.forecast_replayed)
        record = replace(record, pool=self.pool, forecast=made)  # (policy: status's scheduler)
        self.write(record, wf.owner, lambda: self.emit([Recorded(wf)]))

    def finished_before(self, body: Mapping[str, Any]) -> None:
        """A workflow that finished before this operator started: record it in the sink if
        no operator did (its status says so)."""
        status = body.get("status") or {}
        if self.sink is None or status.get("historyRecorded"):
            return
        try:
            record = object_history(body)
        except IdlegateError as exc:
            log.warning("Not recording a finished workflow in the history: %s", exc)
            return
        if record is None:
            return
        owner = owner_of(body)
        record = replace(record, pool=self.pool)  # (where it is admitted: where it ran)
        mark = {"historyRecorded": True}
        self.write(record, owner, lambda: self.emit([PatchStatus(owner, mark)]))

    def write(
        self, record: HistoryWorkflow, owner: Owner, done: Callable[[], None] = lambda: None
    ) -> None:
        """Queue `record` in the sink, if any. Once it is written, `done` runs in the event
        loop; a failed write is counted and a Warning on `owner`."""
        sink = self.sink
        if sink is None:
            return
        loop = asyncio.get_running_loop()

        def written(future: Future[None]) -> None:
            error = future.exception()
            if error is None:
                self.metrics.history_records.inc()
                done()
                return
            self.metrics.history_errors.inc()
            message = (
                f"Cannot write the workflow's record to the history file {sink.path}: {error}. "
                "The workflow is not affected; check the volume (--history-file), or export "
                "the history from the live objects with `idlegate history export`."
            )
            log.warning("%s/%s: %s", owner.namespace, owner.name, message)
            self.emit([PostEvent(owner, "Warning", "HistoryNotRecorded", message)])

        sink.write(record).add_done_callback(lambda f: loop.call_soon_threadsafe(written, f))

    def close(self) -> None:
        if self.sink is not None:
            self.sink.close()
