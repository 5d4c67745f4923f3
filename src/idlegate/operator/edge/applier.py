"""The one write path: carries out the core's intents (:mod:`idlegate.operator.core.intents`)
against the API and hands back outcomes.

:meth:`Applier.apply` queues each write as an :class:`Op` on a *lane* of its workflow
(:class:`Lanes`: a pod, the workflow's status, its Events), each a FIFO worked by its own
task, all in parallel: a pod is created before its gate is removed, and a status write or
an Event waiting for the API never delays a pod write (nor takes its connection, but
for a share: :class:`Slots`). The one order across lanes is stated per op (:attr:`Op.after`).

Retries of a failed request are the API client's (:mod:`idlegate.operator.edge.kube`);
an op raises :class:`Retry` for a condition of its own that time resolves. Any other
failure goes to the op's `on_error`, once (for pod writes: the workflow fails and its
executors return to the pool, so no error ever leaves an executor held).

Pod creations and gate removals (`idlegate_pods_created_total`,
`idlegate_gate_removals_total`) are counted once each, when confirmed: by their success,
or, when an earlier try got no answer (`ApiError.lost`: it may have been carried out), by
the read after the refusal that followed (a 409, a refused guard) showing the write's
effect. A pod found on a first try's 409 is not the operator's creation. An object's
status writes are coalesced and paced (:class:`_StatusLane`).

Events (core/v1, shown by ``kubectl describe``; :class:`EventRecorder`) go in their
workflow's lane of Events, and take the API's connections right after the releases
(:class:`Priority`): a burst of gated creations (written ahead of need) or status writes
never holds back the Events saying what was decided. At most `EVENTS_QUEUED` wait: one
more is dropped, counted and logged, as client-go's recorder drops Events past its
queue, so a stalled API never grows the operator's memory. One that cannot be posted is
logged and dropped, it never fails a workflow. An Event said again adds to its count,
and an object's distinct Events are bounded (:mod:`idlegate.operator.lag.pacing`). How late each
write lands after its decision is ``idlegate_write_lag_seconds`` (:mod:`idlegate.operator.lag.lag`).

The write gate (:class:`WriteGate`) is given to the API client, the lanes and the applier
as they are built, so none needs rewiring when :func:`idlegate.operator.edge.leader.elect`
binds it: intents given to a replica that may not write are dropped, and so is every
queued write whose turn comes once it may not.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from idlegate.api.eviction import mark_patch, unhold_patch, unmark_patch
from idlegate.api.kinds import CRON_KIND, KIND, POOL_KIND
from idlegate.api.settings import Settings
from idlegate.api.status import FINISHED, clip
from idlegate.api.task_pods import EXECUTOR_PATH, read_task_pod, release_patch, task_pod
from idlegate.operator.core.intents import (
    Confirmed,
    CreatePod,
    CreateWorkflow,
    DeletePod,
    DeleteWorkflow,
    EvictPod,
    Intent,
    Outcome,
    Owner,
    PatchStatus,
    PostEvent,
    Refused,
    ReleaseStop,
    RemoveGate,
)
from idlegate.operator.edge.kube import ApiError, KubeApi, WriteGate, identity
from idlegate.operator.lag.pacing import SERIES_SECONDS, EventBook, Pace, Priority, Series, Slots
from idlegate.operator.metrics import Metrics
from idlegate.operator.nodes.ledger import Releasing

log = logging.getLogger(__name__)

EVENTS = "events"
"""The lane of a workflow's Events (`EventRecorder`)."""
EVENTS_QUEUED = 1000
"""Events that may wait to be written (client-go's recorder queues as many): past them an
Event is dropped (`idlegate_events_dropped_total`)."""


class Retry(Exception):
    """Raised by an op to run again after `Lanes.wait` (e.g. a pod name still taken)."""


@dataclass(eq=False)
class Op:
    """One API write (or a short sequence of them) for a workflow."""

    what: str
    """For logs: what the op does, e.g. "CreatePod pod/ns/wf-a-0"."""
    run: Callable[[KubeApi], Awaitable[None]]
    on_error: Callable[[Exception], None] | None = None
    """Called once for a failure the op cannot get past (an ApiError such as 422 on pod
    creation, or any other exception: a bug, or input no check caught); the op ends."""
    priority: Priority = Priority.POD
    """Its turn for a slot of the API's concurrency (:class:`Slots`)."""
    after: tuple[asyncio.Event, ...] = ()
    """Not started before these are set: other lanes' writes, to keep an order across
    lanes; each is set however its write ends."""
    write: str = ""
    """Its success's label in `Lanes.written`, its lag read from `since` (made, by default)."""
    since: float = field(default_factory=lambda: asyncio.get_running_loop().time())
    dropped: Callable[[], object] = lambda: None
    """Told if it is dropped unsent (its workflow left, this replica may not write)."""


LaneKey = tuple[Hashable, Hashable]
"""(workflow key, lane)."""


class Lanes:
    """Lanes of :class:`Op` (FIFO each), worked concurrently."""

    def __init__(
        self,
        kube: KubeApi,
        *,
        concurrency: int | None = None,
        wait: float = 1.0,
        gate: WriteGate | None = None,
    ) -> None:
        self.kube = kube
        self.slots = Slots(concurrency) if concurrency is not None else None
        """The API client's concurrency, handed out by priority; None: no limit."""
        self.queued: Counter[Hashable] = Counter()
        """Ops not started yet, by lane name (e.g. `EVENTS`)."""
        self.wait = wait
        """Seconds before an op that raised :class:`Retry` runs again."""
        self._lanes: dict[LaneKey, deque[Op]] = {}
        """The lanes that have ops queued or running."""
        self._workers: dict[LaneKey, asyncio.Task[None]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self.closed = False
        """Closed (the operator stops): ops submitted now are dropped."""
        self.gate = gate if gate is not None else WriteGate()
        """Whether this replica may write now (leader election): an op that comes to its
        turn when it may not is dropped, unsent."""
        self.written: Callable[[str, float], None] = lambda write, since: None
        """Told of each op that succeeded (`Lag.written`: ``idlegate_write_lag_seconds``)."""

    def submit(self, key: Hashable, op: Op, *, lane: Hashable) -> None:
        """Queue `op` behind the other ops of lane `lane` of workflow `key`."""
        if self.closed:
            log.info("Not written, the operator is stopping: %s.", op.what)
            return
        lane_key = (key, lane)
        self._lanes.setdefault(lane_key, deque()).append(op)
        self.queued[lane] += 1
        if self.slots is not None:
            self.slots.hurry(lane_key, op.priority)
        if lane_key not in self._workers:
            self._idle.clear()
            self._workers[lane_key] = asyncio.get_running_loop().create_task(
                self._work(lane_key), name=f"idlegate-lane-{key}-{lane}"
            )

    def clear(self, key: Hashable) -> int:
        """Drop the ops of `key` (every lane) not started yet; returns how many."""
        dropped = 0
        for (of, lane), queue in self._lanes.items():
            if of == key:
                dropped += len(queue)
                self.queued[lane] -= len(queue)
                while queue:
                    queue.popleft().dropped()
        return dropped

    def pending(self) -> int:
        """Ops not started yet."""
        return sum(len(q) for q in self._lanes.values())

    def settled(self, key: Hashable) -> bool:
        """No op of workflow `key` is queued or running: every write decided for it so far
        has ended (what a rebuild needs to tell a deleted pod from one not created yet)."""
        return all(of != key for of, _ in self._lanes)

    async def wait_idle(self, timeout: float | None = None) -> None:
        """Until every lane is empty and no op runs (tests, shutdown)."""
        await asyncio.wait_for(self._idle.wait(), timeout)

    async def close(self) -> None:
        """Stop all workers; ops not done are dropped (what matters is in the API's state)."""
        self.closed = True
        workers = list(self._workers.values())
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        self._workers.clear()
        self._lanes.clear()
        self._idle.set()

    async def _work(self, lane_key: LaneKey) -> None:
        queue = self._lanes[lane_key]
        try:
            while queue:
                op = queue.popleft()
                self.queued[lane_key[1]] -= 1
                for event in op.after:
                    await event.wait()
                await self._attempt(op, min([op.priority, *(o.priority for o in queue)]), lane_key)
        finally:
            self._workers.pop(lane_key, None)
            if not queue and self._lanes.get(lane_key) is queue:
                del self._lanes[lane_key]
            if not self._workers:
                self._idle.set()

    async def _attempt(self, op: Op, priority: Priority, lane_key: LaneKey) -> None:
        while not self.closed:
            try:
                slot = (
                    self.slots.taken(priority, lane_key) if self.slots else contextlib.nullcontext()
                )
                async with slot:
                    if not self.gate.open():  # (checked once its turn has come)
                        log.info("Not written, this replica is not the leader: %s.", op.what)
                        op.dropped()
                        return
                    await op.run(self.kube)
                self.written(op.write, op.since)
                return
            except Retry as exc:
                log.info("Again in %.1f s: %s: %s", self.wait, op.what, exc)
                await asyncio.sleep(self.wait)
            except Exception as exc:
                if isinstance(exc, ApiError):
                    log.warning("Not done: %s: %s", op.what, exc)
                else:
                    log.exception("Unexpected error in %s; the operation is dropped.", op.what)
                if op.on_error is not None:
                    op.on_error(exc)
                return


class EventRecorder:
    """Posts the Events of the operator (one instance per operator)."""

    def __init__(self, lanes: Lanes, settings: Settings) -> None:
        self.lanes = lanes
        self.component, self.instance = settings.component, identity()
        """The Events' component, and reporting instance: this replica (two under one Pod
        name differ)."""
        self._book = EventBook(
            settings.max_events_per_workflow, self.component, self.instance, join=True
        )
        self._there: set[str] = set()
        """Names of the component's Events the API server had when `recall` read them."""
        self._held: list[tuple[Owner, Series, bool]] | None = None
        """Events recorded while `recall` reads (None: it does not)."""
        self._reading: asyncio.Task[None] | None = None
        self.dropped: Callable[[], None] = lambda: None
        """Told of each Event dropped past `EVENTS_QUEUED` (the metric's)."""
        self._dropping = False
        """Events are being dropped (logged at the first, and when the queue has room)."""

    def recall(self, kube: KubeApi, namespaces: Iterable[str | None]) -> None:
        """Read the names of the Events this component posted before (an earlier leader,
        this replica before a restart), so that an equal one is not posted again: one list
        per namespace at a takeover, not a post refused (409) per Event. Events recorded
        meanwhile wait for the read."""
        if self._reading is not None:
            return
        self._held = []

        async def read() -> None:
            try:
                for namespace in namespaces:
                    found = await kube.list_events(
                        namespace, f"reportingComponent={self.component}"
                    )
                    self._there.update(e["metadata"]["name"] for e in found)
            except ApiError as exc:
                log.info(
                    "Cannot read the Events posted before (%s): equal ones are posted again.", exc
                )
            finally:  # (whatever the read met, the Events held go)
                held, self._held = self._held or [], None
                for item in held:
                    self._submit(*item)

        self._reading = asyncio.ensure_future(read())

    def record(self, owner: Owner, type_: str, reason: str, message: str) -> None:
        """An Event on `owner`: posted, or counted if an equal one was (`EventBook`)."""
        message = clip(message)
        log.info("%s/%s %s: %s", owner.namespace, owner.name, reason, message)
        if self._full():  # (before the book: an equal one said later is posted)
            return
        loop = asyncio.get_running_loop()
        series = self._book.record(owner, (type_, reason, message), time.time(), loop.time())
        if series is not None and series.count == 1:
            self._submit(owner, series, True)
        elif series is not None and not (series.pending or series.waits):  # (its count: 30 s)
            series.pending, at = True, series.patched + SERIES_SECONDS
            loop.call_at(at, self._submit, owner, series, False)

    def _full(self) -> bool:
        """Whether `EVENTS_QUEUED` Events wait to be written: the next one is dropped,
        counted, and the first of a run of them logged."""
        if self.lanes.queued[EVENTS] < EVENTS_QUEUED:
            if self._dropping:
                self._dropping = False
                log.info("The Events' queue has room again: Events are written again.")
            return False
        self.dropped()
        if not self._dropping:
            log.warning(
                "%d Events wait to be written: later ones are dropped until they go.",
                EVENTS_QUEUED,
            )
        self._dropping = True
        return True

    def _submit(self, owner: Owner, series: Series, post: bool) -> None:
        """Post `series`' Event in `owner`'s lane of Events (`post`), or write its count."""
        if self._held is not None:
            self._held.append((owner, series, post))
            return
        if post and series.name in self._there:  # (posted before: not again)
            series.posted()
            return
        if not post and self._full():  # (its count: written with the next one said)
            series.pending = False
            return

        async def run(kube: KubeApi) -> None:
            try:
                if post:
                    await kube.create_event(owner.namespace, series.posted())
                    return
                series.pending, series.patched = False, asyncio.get_running_loop().time()
                await kube.patch_event(owner.namespace, series.name, series.patch())
            except ApiError as exc:
                if exc.status != 409:  # (409: an equal one is there: posted before)
                    log.warning("Event %s on %s not written: %s", series.name, owner.name, exc)

        what, write = f"event {series.name}", "event" if post else ""
        dropped = series.posted if post else (lambda: None)
        op = Op(what, run, priority=Priority.EVENT, write=write, dropped=dropped)
        self.lanes.submit((owner.namespace, owner.name), op, lane=EVENTS)


class Applier:
    """Queues intents on the lanes; reports each write's end to `on_outcome`."""

    def __init__(
        self,
        lanes: Lanes,
        events: EventRecorder,
        metrics: Metrics,
        on_outcome: Callable[[Outcome], None],
        *,
        status_interval: float = 0.0,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.lanes, self.events, self.metrics = lanes, events, metrics
        lanes.written = metrics.families.lag.written
        events.dropped = metrics.events_dropped.inc
        self.now = now
        """The operator's clock (a status's condition times)."""
        self.on_outcome = on_outcome
        """Where outcomes go (the core, or the pools that route them to theirs)."""
        self.status_interval = status_interval
        """Least seconds between two status writes of one object, and how long a PatchStatus
        that is not urgent waits to be sent with later ones (`Pace`)."""
        self._status: dict[tuple[str, str], _StatusLane] = {}
        self._freeing: dict[tuple[str, str], set[asyncio.Event]] = {}
        """Per workflow, the deletions not ended yet of pods whose executors were given back."""
        self.releasing: dict[tuple[str, str], Releasing] = {}
        """(namespace, name) of the pods released that a read of the pods may show gated
        still, or not at all, with what they request if known and the node they are pinned
        to (`edge.nodes`: they take room)."""

    def apply(self, intents: Iterable[Intent]) -> None:
        """Queue `intents`, in order (each behind the earlier writes of its lane); none while this
        replica may not write (its lanes' gate: checked again as each queued write's turn comes)."""
        if not self.lanes.gate.open():
            return
        for intent in intents:
            if isinstance(intent, PatchStatus):
                self._patch_status(intent)
            elif isinstance(intent, PostEvent):
                self.events.record(intent.owner, intent.type, intent.reason, intent.message)
            else:
                self._submit(intent)

    def cancel(self, owner: Owner) -> None:
        """The workflow left: its writes not started yet are dropped (a status write held
        for its batch is sent with the next PatchStatus instead)."""
        self.lanes.clear(_key(owner))
        for ended in self._freeing.pop(_key(owner), ()):
            ended.set()  # (dropped, or running on: the release need not wait for it)
        lane = self._status.get(_key(owner))
        if lane is not None:
            lane.dropped()

    async def drain(self, timeout: float) -> None:
        """At shutdown: send the statuses held for batching, wait up to `timeout` s for
        every write to end, then stop the lanes (later intents are dropped, logged)."""
        for lane in list(self._status.values()):
            lane.flush()
        try:
            await self.lanes.wait_idle(timeout)
        except TimeoutError:
            log.warning("Stopping with %d write(s) not done.", self.lanes.pending())
        await self.lanes.close()

    # -- pods, deletions ---------------------------------------------------------------

    def _submit(self, intent: Intent) -> None:
        run: Callable[[KubeApi], Awaitable[Mapping[str, Any] | None]]
        after: tuple[asyncio.Event, ...] = ()
        ended = None
        if isinstance(intent, CreatePod):
            run = lambda k: self._create(k, intent)  # noqa: E731
            priority = Priority.POD if intent.gated else Priority.RUN
            after = self._after(intent.owner, intent.after_status)
            if not intent.gated:  # (it takes room before a read of the pods shows it)
                key = (intent.owner.namespace, intent.name)
                self.releasing[key] = intent.spec.demand, intent.host
        elif isinstance(intent, RemoveGate):
            run, priority = (lambda k: self._release(k, intent)), Priority.RUN
            demand = intent.spec.demand if intent.spec is not None else None
            self.releasing[(intent.owner.namespace, intent.name)] = demand, intent.host
            # (the executor it hands out may be one of a pod whose deletion was asked before)
            freeing = [e for events in self._freeing.values() for e in events]
            after = (*self._after(intent.owner, intent.after_status), *freeing)
        elif isinstance(intent, EvictPod):
            run, priority = (lambda k: self._evict(k, intent)), Priority.POD
        elif isinstance(intent, ReleaseStop):
            run, priority = (lambda k: self._release_stop(k, intent)), Priority.POD
            after = self._after(intent.owner, intent.after_status)
        elif isinstance(intent, DeletePod):
            run = lambda k: k.delete_pod(intent.owner.namespace, intent.name)  # noqa: E731
            priority = Priority.POD
            if intent.frees:
                ended = asyncio.Event()
                self._freeing.setdefault(_key(intent.owner), set()).add(ended)
        elif isinstance(intent, DeleteWorkflow):
            run, priority = (lambda k: self._delete_workflow(k, intent)), Priority.STATUS
        elif isinstance(intent, CreateWorkflow):
            run, priority = (lambda k: self._create_workflow(k, intent)), Priority.STATUS
        else:
            raise TypeError(f"not an intent the applier knows: {intent!r}")

        async def attempt(kube: KubeApi) -> None:
            body = await run(kube)
            self._ended(intent, ended)
            self.on_outcome(Confirmed(intent, body))

        def refused(exc: Exception) -> None:
            self._ended(intent, ended)
            if isinstance(intent, CreatePod):  # (never made: it takes no room)
                self.releasing.pop((intent.owner.namespace, intent.name), None)
            if isinstance(intent, CreateWorkflow):  # (a run not started: loudly)
                said = f"Cannot create {intent.lane[2]}: {exc}"
                self.events.record(intent.owner, "Warning", "RunNotStarted", said)
            self.on_outcome(_refused(intent, exc))

        what = f"{type(intent).__name__} {'/'.join(intent.lane)}"
        write = {Priority.RUN: "release", Priority.POD: "pod"}.get(priority, "workflow")
        op = Op(what, attempt, on_error=refused, priority=priority, after=after, write=write)
        self.lanes.submit(_key(intent.owner), op, lane=intent.lane)

    async def _create(self, kube: KubeApi, intent: CreatePod) -> Mapping[str, Any] | None:
        owner, name = intent.owner, intent.name
        if intent.owner_check and await _workflow(kube, owner) is None:
            raise _Gone()
        try:
            body = await kube.create_pod(owner.namespace, intent.manifest)
        except ApiError as exc:
            if exc.status != 409:
                raise
            lost = exc.lost
        else:
            self.metrics.pods_created.inc()
            return body
        body = await kube.get_pod(owner.namespace, name)
        info = read_task_pod(body)
        if info is None or info.owner_uid != owner.uid or info.deleting:
            raise Retry(f"pod {name} exists and is not this workflow's (yet)")
        if lost:  # a try whose answer was lost made it
            self.metrics.pods_created.inc()
        if intent.executor is not None and info.gated:
            return await self._patch_gate(kube, owner, name, body, intent.executor)
        return body

    async def _release(self, kube: KubeApi, intent: RemoveGate) -> Mapping[str, Any] | None:
        owner, name = intent.owner, intent.name
        if intent.spec is None:
            return await self._release_argo(kube, intent)
        gated = task_pod(owner, intent.spec, intent.index, intent.attempt, gated=True)
        try:
            return await self._patch_gate(kube, owner, name, gated, intent.executor, intent.host)
        except ApiError as exc:
            if exc.status == 404:  # it went away: create it released (its workflow there?)
                create = dataclasses.replace(intent.released, owner_check=True)
                return await self._create(kube, create)
            if exc.status not in (409, 422):
                raise
            lost = exc.lost
        # the guarded removal was refused: the gates moved (patch again), or ours is gone
        current = await kube.get_pod(owner.namespace, name)
        info = read_task_pod(current)
        if release_patch(current, intent.executor):
            return await self._patch_gate(kube, owner, name, current, intent.executor, intent.host)
        if info is not None and info.executor == intent.executor:
            if lost:  # a try whose answer was lost removed it
                self.metrics.gate_removals.inc()
            return current
        add = [{"op": "add", "path": EXECUTOR_PATH, "value": str(intent.executor)}]
        return await kube.patch_pod(owner.namespace, name, add)

    @staticmethod
    async def _evict(kube: KubeApi, intent: EvictPod) -> Mapping[str, Any] | None:
        """As `EvictPod` says: the stop marked on the running pod, then its eviction; a
        PodDisruptionBudget's refusal (429) takes the mark off again."""
        namespace, name = intent.owner.namespace, intent.name
        pod = await kube.get_pod(namespace, name)
        info = read_task_pod(pod)
        if info is None or info.terminal or info.deleting:
            return pod  # (ended first, or on its way out already)
        if (marking := mark_patch(pod, intent.stop)) is not None:
            pod = await kube.patch_pod(namespace, name, marking)
        try:
            await kube.evict_pod(namespace, name)
        except ApiError as exc:
            if exc.status == 429 and (unmarking := unmark_patch(pod)) is not None:
                with contextlib.suppress(ApiError):  # (a mark left: evicted by a restart)
                    await kube.patch_pod(namespace, name, unmarking)
            raise
        return pod

    @staticmethod
    async def _release_stop(kube: KubeApi, intent: ReleaseStop) -> Mapping[str, Any] | None:
        """As `ReleaseStop` says: the stop's finalizer off, read again while the guard is
        refused (the finalizers moved); a pod gone, or without it, is done."""
        namespace, name = intent.owner.namespace, intent.name
        for _ in range(3):
            try:
                pod = await kube.get_pod(namespace, name)
                if (ops := unhold_patch(pod)) is None:
                    return pod
                return await kube.patch_pod(namespace, name, ops)
            except ApiError as exc:
                if exc.status == 404:
                    return None
                if exc.status not in (409, 422):
                    raise
        raise Retry(f"the finalizers of pod {name} kept changing")

    async def _release_argo(self, kube: KubeApi, intent: RemoveGate) -> Mapping[str, Any] | None:
        # (as RemoveGate says: read, then patch, again while the gates move under the guard)
        namespace, name, executor = intent.owner.namespace, intent.name, intent.executor
        for _ in range(3):
            try:
                pod = await kube.get_pod(namespace, name)
                ops = release_patch(pod, executor, intent.host)
                if not ops:
                    return pod
                body = await kube.patch_pod(namespace, name, ops)
                how = "unscheduled" if executor is None else "scheduled"
                airflow = intent.owner.kind != "Workflow"  # (Argo's; Airflow's: DagRun, Pod)
                (self.metrics.airflow_released if airflow else self.metrics.argo_released).labels(
                    how
                ).inc()
                return body
            except ApiError as exc:
                if exc.status == 404:
                    return None
                if exc.status not in (409, 422):
                    raise
        return None

    async def _patch_gate(
        self,
        kube: KubeApi,
        owner: Owner,
        name: str,
        pod: Mapping[str, Any],
        executor: int | None,
        host: str | None = None,
    ) -> dict[str, Any]:
        ops = release_patch(pod, executor, host)
        if not ops:
            raise ApiError(422, "Invalid", f"pod {name} of the operator's making has no gate")
        body = await kube.patch_pod(owner.namespace, name, ops)
        self.metrics.gate_removals.inc()
        return body

    @staticmethod
    async def _delete_workflow(kube: KubeApi, intent: DeleteWorkflow) -> None:
        owner = intent.owner
        body = await _workflow(kube, owner)
        finished = ((body or {}).get("status") or {}).get("phase") in FINISHED
        if body is None or not (finished or intent.running_too):
            return  # gone, re-created under its name, or running again
        await kube.delete_workflow(owner.namespace, owner.name)
        log.info("Deleted %s/%s: %s.", owner.namespace, owner.name, intent.why)

    async def _create_workflow(
        self, kube: KubeApi, intent: CreateWorkflow
    ) -> Mapping[str, Any] | None:
        try:
            body = await kube.create_workflow(intent.owner.namespace, dict(intent.body))
        except ApiError as exc:
            if exc.status != 409:
                raise
            body = None  # made before: the same one, not a second
        self.apply(intent.then)
        return body

    # -- status ------------------------------------------------------------------------

    def _patch_status(self, intent: PatchStatus) -> None:
        key = _key(intent.owner)
        lane = self._status.get(key)
        if lane is None or lane.owner.uid != intent.owner.uid:
            lane = self._status[key] = _StatusLane(self, intent.owner)
        lane.give(intent)

    def _ended(self, intent: Intent, ended: asyncio.Event | None) -> None:
        if ended is None:
            return
        ended.set()
        events = self._freeing.get(_key(intent.owner))
        if events is not None:
            events.discard(ended)
            if not events:
                del self._freeing[_key(intent.owner)]

    def _after(self, owner: Owner, wanted: bool) -> tuple[asyncio.Event, ...]:
        lane = self._status.get(_key(owner)) if wanted else None
        if lane is not None:  # (a release waits for it: not held by the pace)
            lane.flush()
        return (lane.landed,) if lane is not None else ()


class _StatusLane:
    """One object's status writes: one at a time, coalesced (a PatchStatus not sent yet is
    replaced by the next one) and paced (`Pace`: one per status interval at most, a change
    that is not urgent batched); `landed` is set once the latest has ended. It forgets
    itself once idle and past its pace."""

    def __init__(self, applier: Applier, owner: Owner) -> None:
        self.applier, self.owner = applier, owner
        self.waiting: PatchStatus | None = None
        self.queued: Op | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.pace = Pace(applier.status_interval)
        self.landed = asyncio.Event()
        self.landed.set()

    def give(self, intent: PatchStatus) -> None:
        self.waiting = intent
        self.landed.clear()
        if intent.urgent and self.queued is not None:  # (not counts only: hurried)
            self.queued.priority = Priority.STATUS
            if (slots := self.applier.lanes.slots) is not None:
                slots.hurry((_key(self.owner), _STATUS), Priority.STATUS)
        self.pace.change(asyncio.get_running_loop().time(), intent.urgent)
        self._wake()

    def _wake(self) -> None:
        """Send what waits once the pace allows, else wake then; idle and past its pace,
        the lane is forgotten (a sent one's end wakes it)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.queued is not None:
            return
        loop = asyncio.get_running_loop()
        at = self.pace.due() if self.waiting is not None else self.pace.idle_until()
        if at is not None and at > loop.time():
            self.timer = loop.call_at(at, self._wake)
        elif self.waiting is not None:
            self.flush()
        elif self.applier._status.get(_key(self.owner)) is self:
            del self.applier._status[_key(self.owner)]

    def flush(self) -> None:
        """Send what waits now, whatever the pace (a drain; a release waits for it)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.queued is not None or self.waiting is None:
            return
        since = self.pace.sent(asyncio.get_running_loop().time())  # (its lag's start)
        priority = Priority.STATUS if self.waiting.urgent else Priority.COUNTS
        what = f"status of {self.owner.name}"
        self.queued = Op(what, self._send, priority=priority, write="status", since=since)
        self.applier.lanes.submit(_key(self.owner), self.queued, lane=_STATUS)

    def dropped(self) -> None:
        """The workflow left and the lanes dropped its writes not started: the one held
        or queued here goes too (the next PatchStatus carries the whole state anyway)."""
        self.queued, self.waiting = None, None
        self._ended()

    async def _send(self, kube: KubeApi) -> None:
        intent, self.queued, self.waiting = self.waiting, None, None
        if intent is None:
            return
        outcome: Outcome
        try:
            status = intent.status
            sent = dict(status) if isinstance(status, Mapping) else status.read(self.applier.now())
            patches = {CRON_KIND: kube.patch_cron_status, POOL_KIND: kube.patch_pool_status}
            patch = patches.get(self.owner.kind, kube.patch_workflow_status)
            await patch(self.owner.namespace, self.owner.name, sent)
            outcome = Confirmed(intent, sent)
        except ApiError as exc:  # (404: deleted meanwhile)
            outcome = Confirmed(intent) if exc.status == 404 else _refused(intent, exc)
        except Exception as exc:
            log.exception("Could not write the status of %s.", self.owner.name)
            outcome = _refused(intent, exc)
        self._ended()
        self.applier.on_outcome(outcome)

    def _ended(self) -> None:
        if self.waiting is None:  # (else one given meanwhile goes as the pace allows)
            self.landed.set()
        self._wake()


_STATUS = "status"


class _Gone(Exception):
    """The workflow a write was for no longer exists (or has another uid)."""


async def _workflow(kube: KubeApi, owner: Owner) -> Mapping[str, Any] | None:
    """The workflow `owner` as it is now; None if it is gone (or has another uid)."""
    body = await kube.get_workflow(owner.namespace, owner.name)
    same = body is not None and (body.get("metadata") or {}).get("uid") == owner.uid
    return body if same else None


def _key(owner: Owner) -> tuple[str, str]:
    """The lanes' key of a workflow's writes (another kind's apart from a DagWorkflow of
    the same name)."""
    return (owner.namespace, owner.name if owner.kind == KIND else f"{owner.kind}/{owner.name}")


def _refused(intent: Intent, exc: Exception) -> Refused:
    if isinstance(exc, _Gone):
        return Refused(intent, 404, "NotFound", "the workflow is gone", gone=True)
    if isinstance(exc, ApiError):
        permanent = not exc.retryable and exc.status != 409
        return Refused(intent, exc.status or None, exc.reason, exc.message, permanent=permanent)
    return Refused(intent, None, type(exc).__name__, str(exc))
