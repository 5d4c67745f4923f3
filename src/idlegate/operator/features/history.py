"""The cluster's own history: a record of every finished DagWorkflow, for replays and training.

A finished workflow's record is a :class:`idlegate.sim.history.HistoryWorkflow` (the
`file` workload's history format, docs/workloads.md): its DAG and estimates, its arrival,
each stage's measured task durations, its outcome, its JCT, the policy that ran it and the
pool size. It is built by one function, :func:`history_workflow`, from what the
operator writes into the workflow's status, so the records of the sink and those
``idlegate history export`` reads from live objects (:mod:`idlegate.operator.features.export`)
are the same but for ``policy``:

* ``arrival``: ``completionTime - jctSeconds``, the arrival the operator measured the JCT
  from (``metadata.creationTimestamp`` on its clock), else the creation timestamp;
* ``measuredDurationSeconds``: ``status.stages[].measuredDurationSeconds``, a uniform
  sample of at most ``--history-samples`` run times per stage (pod start to finish, from
  the pods' container states: :func:`idlegate.operator.core.pods.ran`);
* ``policy``: in the sink, the operator's ``--scheduler`` spec as its canonical text
  (``learned:/models/policy.onnx``), which ``idlegate advise`` rebuilds
  (:func:`recorded_spec`); without ``--scheduler``, for a workflow that finished before
  this operator started, and in a record of a live object, the status's ``policy``: the
  name of the rule that released its last tasks (``policy`` for that spec).

The optional sink (``--history-file PATH``, meant for a volume) is a JSON Lines history
file, one line per finished workflow (with ``pool``, the ExecutorPool that ran it),
rotated at ``--history-max-bytes`` (the standard library's ``RotatingFileHandler``):
``history.jsonl`` becomes ``history.1.jsonl``, that one ``history.2.jsonl``, up to
``--history-backups`` files, each a history file itself. One worker thread writes the
lines, so a slow or failing volume never stalls the event loop or the pool: a failed
write is a Warning Event and ``idlegate_history_errors``, the workflow goes on. Once
written, the status says ``historyRecorded: true``, and a restarted operator does not
write it again; a finished workflow without it (finished while the sink failed, or
before it was configured) is recorded when the operator admits it at a restart.

The same thread reads a pool's most recent records back (:meth:`HistorySink.prior`): a
restarted operator's portfolio starts from them (:mod:`.planning`). Lines that are not
such a record, and files that cannot be read, are left out, counted by reason and
logged (`sim.history.tail_history`); no sink is no record.
"""

from __future__ import annotations

import asyncio
import glob
import json
import logging
import logging.handlers
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from idlegate.api.pool_spec import DEFAULT_POOL
from idlegate.api.status import Phase
from idlegate.api.timestamps import from_datetime, timestamp_precision
from idlegate.errors import IdlegateError
from idlegate.operator.core.pods import Owner
from idlegate.policy.spec import SchedulerSpec
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival
from idlegate.sim.history import HistoryWorkflow, history_record, tail_history
from idlegate.sim.spec import WorkflowSpec, parse_workflow

if TYPE_CHECKING:
    from idlegate.operator.core.intents import Outbox
    from idlegate.operator.core.tracking import Workflow
    from idlegate.operator.edge.metrics import Metrics
    from idlegate.operator.settings import Settings

log = logging.getLogger(__name__)

FINISHED = (Phase.SUCCEEDED.value, Phase.FAILED.value)
"""The phases of a workflow that has a record."""


def history_workflow(
    name: str, spec: WorkflowSpec, status: Mapping[str, Any], created: str | None = None
) -> HistoryWorkflow | None:
    """The record of a finished workflow from its status (None: it has not finished).

    `name` labels it (``namespace/name``); `created` is its ``creationTimestamp``, the
    arrival when the status does not give the one the operator measured from.
    """
    phase, jct = status.get("phase"), status.get("jctSeconds")
    if phase not in FINISHED or not isinstance(jct, int | float):
        return None
    completion = status.get("completionTime")
    if isinstance(completion, str):
        arrival: float | None = from_datetime(completion) - float(jct)
    elif isinstance(created, str):
        arrival = from_datetime(created) + timestamp_precision(created)
    else:
        arrival = None
    samples = {
        s.get("name"): s.get("measuredDurationSeconds")
        for s in status.get("stages") or []
        if isinstance(s, Mapping)
    }
    measured = tuple(_positive(samples.get(stage.name)) for stage in spec.stages)
    pool = status.get("poolSize")
    return HistoryWorkflow(
        spec,
        name,
        None if arrival is None else round(arrival, 3),
        measured,
        name,
        jct=float(jct),
        outcome=phase,
        policy=status.get("policy") or None,
        pool_size=pool if isinstance(pool, int) and pool >= 1 else None,
    )


def replay_arrival(wf: Workflow) -> JobArrival | None:
    """`wf`, just finished, as a replay's arrival: its arrival, DAG and measured durations
    (its record's: what a portfolio's window replays, `Decider.learns`)."""
    name = f"{wf.owner.namespace}/{wf.owner.name}"
    record = history_workflow(name, wf.spec, wf.status())
    return None if record is None else JobArrival(wf.arrival, name, wf.dag, record.durations())


def recorded_spec(settings: Settings) -> str | None:
    """The policy the sink records: the canonical text of ``--scheduler``, which a replay
    can rebuild (the status names a rule, ``model`` for ``learned:/m/model.onnx``); None
    without it, or with a scheduler object (tests, embedding), whose spec is unknown."""
    if settings.policy is None or settings.scheduler is not None:
        return None
    return SchedulerSpec.parse(settings.policy).format()


def object_history(obj: Mapping[str, Any]) -> HistoryWorkflow | None:
    """The record of a DagWorkflow object as the API returns it (None: not finished).

    Raises SpecError for a finished workflow whose spec is not valid (it cannot be one).
    """
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    if status.get("phase") not in FINISHED:
        return None
    name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    spec = parse_workflow(obj.get("spec"), f"DagWorkflow {name}: spec")
    return history_workflow(name, spec, status, meta.get("creationTimestamp"))


def _positive(values: Any) -> tuple[float, ...] | None:
    if not isinstance(values, list):
        return None
    kept = tuple(float(v) for v in values if isinstance(v, int | float) and v > 0)
    return kept or None


def rotated(path: Path, n: int) -> Path:
    """The sink's `n`-th rotated file: ``history.jsonl`` -> ``history.<n>.jsonl`` (the
    suffix kept, so that it reads as a history file of its own)."""
    return path.with_name(f"{path.stem}.{n}{path.suffix}")


def sink_files(path: Path) -> list[Path]:
    """The sink's files, oldest first: the rotated ones (`rotated`), then `path`."""
    numbers = []
    for p in path.parent.glob(f"{glob.escape(path.stem)}.*{glob.escape(path.suffix)}"):
        n = p.name[len(path.stem) + 1 : len(p.name) - len(path.suffix)]
        if n.isdigit() and p == rotated(path, int(n)):
            numbers.append(int(n))
    files = [rotated(path, n) for n in sorted(numbers, reverse=True)]
    if path.is_file():
        files.append(path)
    if not files:
        raise IdlegateError(
            f"no history file at {path} (nor rotated ones, {rotated(path, 1).name}, ...): pass "
            "the operator's --history-file path"
        )
    return files


def read_prior(path: Path, pool: str, count: int) -> list[JobArrival]:
    """The last `count` records of `pool` in the sink at `path` and its rotated files, as
    arrivals on the operator's clock (a record without ``pool`` is the default pool's, as
    before pools were recorded; what is left out is logged, `tail_history`)."""
    try:
        files = sink_files(path)
    except IdlegateError:  # no sink yet: no record
        return []
    tail = tail_history(files, count, lambda w: (w.pool or DEFAULT_POOL) == pool)
    return [
        JobArrival(w.arrival or 0.0, w.name or w.source, Dag.from_spec(w.spec), w.durations())
        for w in tail.workflows
    ]


def _rotation_name(default: str) -> str:
    """RotatingFileHandler's ``PATH.<n>`` as `rotated` names it."""
    base, _, n = default.rpartition(".")
    return str(rotated(Path(base), int(n)))


class _Handler(logging.handlers.RotatingFileHandler):
    """The standard library's size-based rotation, raising what it fails with."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        raise  # (called inside emit's `except`: its exception goes on)


class HistorySink:
    """A JSON Lines history file with rotation, written by one worker thread."""

    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        self.path = path
        self._handler: _Handler | None = None
        self._max_bytes, self._backups = max_bytes, backups
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="idlegate-history")

    def write(self, record: HistoryWorkflow) -> Future[None]:
        """Queue one record; the future says whether it was written."""
        line = json.dumps(history_record(record), separators=(",", ":"))
        return self._worker.submit(self._write, line)

    def _write(self, line: str) -> None:
        if self._handler is None:  # opened on first use: a missing volume is one error
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._handler = _Handler(
                self.path, maxBytes=self._max_bytes, backupCount=self._backups, encoding="utf-8"
            )
            self._handler.namer = _rotation_name
        message = logging.LogRecord("idlegate.history", logging.INFO, "", 0, line, None, None)
        self._handler.emit(message)
        self._handler.flush()

    def prior(self, pool: str, count: int) -> Future[list[JobArrival]]:
        """Read `pool`'s last `count` records (`read_prior`) after the lines queued."""
        return self._worker.submit(read_prior, self.path, pool, count)

    def close(self) -> None:
        """Write what is queued, then close the file."""
        self._worker.shutdown(wait=True)
        if self._handler is not None:
            self._handler.close()


class HistoryRecorder:
    """A pool's side of the history: records of its finished workflows, in the sink that
    it shares with the recorder `beside` it (another pool's), if given."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        intents: Outbox,
        beside: HistoryRecorder | None = None,
    ) -> None:
        s = settings
        self.pool, self.pool_size = metrics.pool, s.pool_size
        self.metrics, self.intents = metrics, intents
        self.spec = recorded_spec(s)
        if beside is not None:
            self.sink = beside.sink
        elif s.history_file is not None:
            self.sink = HistorySink(s.history_file, s.history_max_bytes, s.history_backups)
        else:
            self.sink = None

    def finished(self, wf: Workflow) -> None:
        """`wf` has just finished (its final status is queued): record it in the sink."""
        wf.pool_size = self.pool_size
        if self.sink is None or wf.history_recorded:
            return
        name = f"{wf.owner.namespace}/{wf.owner.name}"
        record = history_workflow(name, wf.spec, wf.status())
        if record is None:
            return
        record = replace(record, policy=self.spec or record.policy, pool=self.pool)
        self._write(self.sink, record, wf.owner, lambda: self._recorded(wf))

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
        meta = body.get("metadata") or {}
        owner = Owner(meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", ""))
        record = replace(record, pool=self.pool)  # (where it is admitted: where it ran)
        mark = {"historyRecorded": True}
        self._write(self.sink, record, owner, lambda: self.intents.patch_status(owner, mark))

    def _write(
        self, sink: HistorySink, record: HistoryWorkflow, owner: Owner, done: Callable[[], None]
    ) -> None:
        loop = asyncio.get_running_loop()
        future = sink.write(record)
        future.add_done_callback(
            lambda f: loop.call_soon_threadsafe(self._written, f, sink.path, owner, done)
        )

    def _written(
        self, future: Future[None], path: Path, owner: Owner, done: Callable[[], None]
    ) -> None:
        metrics = self.metrics
        error = future.exception()
        if error is None:
            metrics.history_records.inc()
            done()
            return
        metrics.history_errors.inc()
        message = (
            f"Cannot write the workflow's record to the history file {path}: {error}. The "
            "workflow is not affected; check the volume (--history-file), or export the "
            "history from the live objects with `idlegate history export`."
        )
        log.warning("%s/%s: %s", owner.namespace, owner.name, message)
        self.intents.event(owner, "Warning", "HistoryNotRecorded", message)

    def _recorded(self, wf: Workflow) -> None:
        wf.history_recorded = True
        self.intents.status(wf, urgent=True)

    def close(self) -> None:
        if self.sink is not None:
            self.sink.close()
