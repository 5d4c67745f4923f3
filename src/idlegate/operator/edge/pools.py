"""The operator's pools: one state machine (:class:`~idlegate.operator.edge.bridge.Bridge`) per
ExecutorPool, and which pool holds each workflow.

:class:`Pools` stands where the one bridge stood for :mod:`.intake`, :mod:`.watchdog`, the
kopf handlers and the job kinds' features: it is their one way into a pool. One door,
:meth:`Pools.place`, puts a workflow of any kind in its pool, queue and priority (a
DagWorkflow by :meth:`Pools.admit`, an Argo Workflow or an Airflow run by
:meth:`Pools.join`, a cron's runs foreseen, a workflow whose pool changed); anything of a
workflow in a pool (a pod, a deletion, a write's outcome, a change) goes to the bridge that
holds it (:meth:`Pools.handle`). Each pool has its own cluster, policy (``spec.policy``,
else ``--scheduler``), planning worker and size; all share the API writes, the history and
the cleanup. The implicit pool :data:`~.pool_spec.DEFAULT_POOL` is that of ``--pool-size``
and ``--scheduler``.

A pool created, changed or deleted at run time (:meth:`Pools.apply`, :meth:`Pools.remove`)
moves the workflows of every kind whose pool changed as a restart would: each leaves its old
bridge (in memory only: no pod is touched, no running task preempted); a DagWorkflow is
admitted again from the API with its pods (:meth:`Pools.moving`), an Argo or Airflow job
enters its new pool with its progress (`Moved`). What a user sees of it: deploy/README.md,
"Executor pools".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

from idlegate.api import notices
from idlegate.api.kinds import API_VERSION, KIND, POOL_KIND
from idlegate.api.podsecurity import namespace_policy
from idlegate.api.pool_spec import (
    ARRIVALS_FALLBACK,
    DEFAULT_POOL,
    ExecutorPoolSpec,
    namespace_labels,
    parse_pool_spec,
    pool_arrivals,
)
from idlegate.api.queueing import QueueFile, placement, priority_of, quotas_on_nodes
from idlegate.api.routing import (
    NoPlaceError,
    Routing,
    asked,
    pool_named,
    route_workflow,
)
from idlegate.api.status import FINISHED, Phase
from idlegate.api.task_pods import Owner, owner_of, read_task_pod
from idlegate.errors import DemandTooLargeError, GangTooWideError, IdlegateError
from idlegate.operator.core.events import (
    Admit,
    Ended,
    Event,
    Forget,
    Join,
    Leave,
    Moved,
    Observed,
    PodSeen,
    Schedule,
    SpecChanged,
    Unpooled,
)
from idlegate.operator.core.intents import Confirmed, Outcome, PostEvent, Refused
from idlegate.operator.core.tracking import Workflow, WorkflowKey
from idlegate.operator.decisions import load_scheduler
from idlegate.operator.edge.bridge import Bridge
from idlegate.operator.edge.nodes import Lister, NodeWatch
from idlegate.operator.features.history import HistoryRecorder
from idlegate.operator.kinds.external import ExternalJob
from idlegate.operator.kinds.workflow import AdmitLaterError
from idlegate.operator.lag.pacing import ROOM_SECONDS, Coalesced
from idlegate.operator.metrics import Metrics
from idlegate.operator.nodes.ledger import named
from idlegate.sim.engine import JobArrival
from idlegate.sim.external import Mapped

log = logging.getLogger(__name__)


class Placed(NamedTuple):
    """Where the one door (:meth:`Pools.place`) puts a workflow of any kind."""

    pool: str
    queue: int
    """The index of its queue among its pool's (0 with no queues)."""
    priority: int
    """Its priority in its queue (its PriorityClass's value)."""


class Waiting(NamedTuple):
    """A workflow held out of every pool (:meth:`Pools._wait`)."""

    pool: str
    """The pool it waits for."""
    reason: str
    """Why: PoolNotFound, PoolInvalid, PoolTooSmall."""
    owner: Owner


def pool_object(name: str, uid: str) -> Owner:
    """An ExecutorPool as the involved object of its pool's own Events (a portfolio's
    PolicyFollowed), in the namespace ``default`` as Kubernetes' own cluster-scoped ones."""
    return Owner("default", name, uid, POOL_KIND, API_VERSION, namespaced=False)


class Pools:
    """Every pool's bridge, the ExecutorPools known, and the workflows waiting for a pool.
    `default` makes the default pool's bridge, given ``outcomes=``: its applier is every
    pool's, and :meth:`outcome` routes what it hands back."""

    def __init__(self, make: Callable[..., Bridge]) -> None:
        self.default = default = make(outcomes=self.handle)
        self.bridges: dict[str, Bridge] = {DEFAULT_POOL: default}
        # what every pool shares is the default bridge's
        self.kube, self.settings = default.kube, default.settings
        self.lanes, self.cleanup = default.lanes, default.cleanup
        self.timers = default.timers
        self.specs: dict[str, ExecutorPoolSpec] = {}
        self.invalid: dict[str, str] = {}
        """The ExecutorPools that exist but cannot run (not in :attr:`specs`), with why."""
        self.waiting: dict[WorkflowKey, Waiting] = {}
        """Workflows held out of every pool, each with the pool it waits for."""
        self.labels: dict[str, dict[str, str]] = {}
        """The labels of each namespace, as last read (routing by namespaceSelector)."""
        self.later: dict[WorkflowKey, Owner] = {}
        """Workflows that left a pool and could not be read again yet (retried)."""
        self._moving = 0
        """Moves of workflows between pools under way (:meth:`moving`)."""
        self.upcoming: dict[WorkflowKey, tuple[str | None, tuple[JobArrival, ...]]] = {}
        """Each cron workflow's ``workflowSpec.pool`` and upcoming runs (:meth:`foresee`)."""
        self.watch = NodeWatch(default.metrics, default.applier.releasing)
        """The nodes and pods (kopf's indexes, given by the operator) of node pools' room."""
        self._room = Coalesced(lambda: self.nodes_changed(), ROOM_SECONDS, paced=True)
        self.arrivals_fallback: dict[str, str] = {}
        """ExecutorPools whose forecasts do not invent the arrivals they inherit, and why
        (`pool_arrivals`; said once each time it starts: `_say_arrivals`)."""
        self.priorities: dict[str, int] = {}
        """Each PriorityClass's value, as the operator last saw it (kopf's events)."""

    # -- what intake, the watchdog and the handlers use of a bridge ----------------------------

    @property
    def workflows(self) -> dict[WorkflowKey, Workflow]:
        """Every pool's workflows (a fresh dict)."""
        return {k: wf for b in self.bridges.values() for k, wf in b.workflows.items()}

    def holder(self, key: WorkflowKey, kind: str = KIND) -> Bridge | None:
        """The bridge that holds workflow `key` of `kind`, if any."""
        return next((b for b in self.bridges.values() if key in b.held(kind)), None)

    def known(self, owner: Owner) -> bool:
        return any(b.known(owner) for b in self.bridges.values())

    def handle(self, event: Event | Outcome) -> None:
        """The one routing step between the edge and the pools' bridges: a round goes to
        every pool, anything of one workflow (a pod, a deletion, a write's outcome, a change,
        an external job's new mapping or end) to the pool holding it, else to the default
        one (a pod of a workflow no pool holds may still confirm a write). An admission is
        routed by :meth:`admit`, an external job's by :meth:`join`."""
        kind = KIND
        match event:
            case Schedule():
                self.nodes_changed()  # (the first round after a rebuild: the room read)
                for bridge in list(self.bridges.values()):
                    bridge.handle(event)
                return
            case PodSeen(body):
                info = read_task_pod(body)
                namespace = (body.get("metadata") or {}).get("namespace", "")
                key = (namespace, info.workflow) if info is not None else None
            case Forget(namespace, name):
                key = (namespace, name)
                self.waiting.pop(key, None)
            case SpecChanged(key):
                pass
            case Join(owner) | Ended(owner):
                key, kind = (owner.namespace, owner.name), owner.kind
            case Observed(kind, key):
                pass
            case Confirmed() | Refused():
                owner = event.intent.owner
                key, kind = (owner.namespace, owner.name), owner.kind
            case _:
                raise TypeError(f"the pools route no {type(event).__name__}")
        holder = self.holder(key, kind) if key is not None else None
        (holder or self.default).handle(event)

    def admit(
        self,
        body: Mapping[str, Any],
        pods: Iterable[Mapping[str, Any]],
        namespace: Mapping[str, Any] | None,
        *,
        schedule: bool = True,
        soon: bool = False,
    ) -> Workflow | None:
        """Admit `body` with its `pods` into the pool it routes to (by its `namespace`'s
        labels, unless its spec names one), or make it wait for its pool; None if it is not
        (or not yet) in a pool. One known already or being deleted is left alone; without
        its namespace (not seen yet) its templates' level would be a guess: AdmitLaterError."""
        owner = owner_of(body)
        if self.known(owner) or (body.get("metadata") or {}).get("deletionTimestamp"):
            return None
        if namespace is None:
            raise AdmitLaterError(
                f"namespace {owner.namespace!r}, whose Pod Security level applies, is not seen yet"
            )
        policy = namespace_policy(namespace, self.settings.pod_security)
        self.labels[owner.namespace] = namespace_labels(namespace)
        try:
            placed: Placed | None = self.place(KIND, body, owner)
        except NoPlaceError as exc:  # (its pool or queue: it waits)
            if (body.get("status") or {}).get("phase") not in FINISHED:
                self._wait(body, exc.pool, exc.reason, str(exc))
                return None
            placed = None  # (a finished one needs no pool: never waits)
        name = placed.pool if placed is not None else None
        bridge = self.bridges[name] if name is not None else self.default
        key = (owner.namespace, owner.name)
        if soon:  # (its round: `Bridge.round_soon`'s, armed first: its Accepted Event waits)
            bridge.round_soon()
        try:
            # (an ExecutorPool may grow again; the default pool is --pool-size's)
            waits = name is not None and name != DEFAULT_POOL
            bridge.handle(
                Admit(
                    body,
                    list(pods),
                    policy,
                    schedule and not soon,
                    waits,
                    pool=name,
                    waited=key in self.waiting,
                    queue=placed.queue if placed is not None else 0,
                    priority=placed.priority if placed is not None else 0,
                )
            )
        except (GangTooWideError, DemandTooLargeError) as exc:  # (only with `waits`)
            assert name is not None
            what = (
                f"A gang stage of {exc.tasks} tasks needs at least {exc.tasks} executors, and "
                f"ExecutorPool {name!r} has {bridge.settings.pool_size}"
                if isinstance(exc, GangTooWideError)
                else f"In ExecutorPool {name!r}, {exc}"
            )
            message = (
                f"{what}: the workflow waits until the pool is resized (kubectl edit "
                "executorpool), or spec.pool names a larger one."
            )
            self._wait(body, name, "PoolTooSmall", message)
            return None
        self.waiting.pop(key, None)
        wf = bridge.workflows.get(key)
        return wf if wf is not None and wf.owner.uid == owner.uid else None

    # -- what the job kinds' features use of the pools (`features.external.FeaturePools`) --------

    def carry(self, outputs: Iterable[Any]) -> None:
        """Carry out writes and timers of no pool's workflow (an Event, a gate lifted for a
        pod left to its controller): the default pool's applier is every pool's."""
        self.default.carry(outputs)

    def say(self, notice: tuple[str, str, str]) -> None:
        """An Event of the operator's on every ExecutorPool and its own Pod (its lag)."""
        said = [b.reporter for b in self.bridges.values() if b.reporter is not None]
        self.carry([PostEvent(reporter, *notice) for reporter in said])

    def held(self, kind: str) -> dict[WorkflowKey, Any]:
        """Every pool's workflows of `kind` (a fresh dict)."""
        return {k: wf for b in self.bridges.values() for k, wf in b.held(kind).items()}

    def ended(self, uid: str) -> bool:
        return any(b.ended(uid) for b in self.bridges.values())

    @property
    def history(self) -> HistoryRecorder:
        return self.default.history

    def now(self) -> float:
        return self.default.now()

    async def pods(self, namespace: str | None, selector: str) -> list[dict[str, Any]] | None:
        return await self.default.pods(namespace, selector)

    async def list_objects(
        self, api_version: str, plural: str, namespace: str | None
    ) -> list[dict[str, Any]]:
        return await self.default.list_objects(api_version, plural, namespace)

    def _wait(self, body: Mapping[str, Any], pool: str, reason: str, message: str) -> None:
        """Hold `body` out of every pool until `pool` exists or changes (it is admitted
        again then), with a condition and a Warning saying why (`reason`, `message`)."""
        owner = owner_of(body)
        key = (owner.namespace, owner.name)
        if self.waiting.get(key, Waiting("", "", owner))[:2] == (pool, reason):
            return
        self.waiting[key] = Waiting(pool, reason, owner)
        self.default.handle(Unpooled(body, reason, message))
        log.info("%s/%s waits for ExecutorPool %r (%s).", owner.namespace, owner.name, pool, reason)

    def join(
        self,
        owner: Owner,
        body: Mapping[str, Any],
        namespace: Mapping[str, Any] | None,
        mapped: Mapped,
        arrival: float,
        pods: Sequence[Any] = (),
        seen: Sequence[Any] = (),
    ) -> Bridge:
        """Workflow `owner`, whose pods another controller creates (an Argo Workflow; an
        Airflow run, `body` one of its pods), is the job `mapped`: it enters the pool
        :meth:`place` gives (the one holding it, if any), with its `pods` and those `seen`
        since; returns that pool's bridge. NoPlaceError: its pool or queue does not exist
        (or cannot run); AdmitLaterError: its namespace is not seen yet, and
        its labels may pick the pool; DemandTooLargeError: the pool could never hold it."""
        held = self.holder((owner.namespace, owner.name), owner.kind)
        if held is not None:
            held.handle(Join(owner, mapped))
            return held
        if namespace is None:
            raise AdmitLaterError(
                f"namespace {owner.namespace!r}, whose labels may pick the pool, is not seen yet"
            )
        self.labels[owner.namespace] = namespace_labels(namespace)
        placed = self.place(owner.kind, body, owner)
        bridge = self.bridges[placed.pool]
        what = asked(owner.kind, body)
        bridge.handle(Join(owner, mapped, arrival, pods, seen, what, *placed[1:]))
        return bridge

    def place(self, kind: str, body: Mapping[str, Any], owner: Owner | None = None) -> Placed:
        """The one door: the pool, queue and priority of workflow `body` of `kind` (any kind
        :data:`~idlegate.api.routing.FIELDS` names; for an Airflow run, one of its pods), by
        its namespace's labels as last read. Every way in takes it: an admission, a pool's
        change (:meth:`apply`, :meth:`remove`), a cron's runs foreseen (:meth:`tell`).
        NoPlaceError (its pool or queue is missing, or cannot run): it waits; a PriorityClass
        missing is priority 0, with a Warning on `owner` if given."""
        namespace = str((body.get("metadata") or {}).get("namespace", ""))
        labels = self.labels.get(namespace, {})
        routing = route_workflow(kind, body, labels, self.specs.items(), self.invalid)
        queues = self.bridges[routing.pool].queues
        # (a queue named in a pool without queues is ignored: one queue)
        queue = placement(queues, routing, namespace, kind) if queues else 0
        return Placed(routing.pool, queue, self._priority(owner, routing))

    def _priority(self, owner: Owner | None, routing: Routing) -> int:
        """The value of the PriorityClass `routing` names (0, with a Warning, if it is missing)."""
        value, warning = priority_of(self.priorities, routing.priority_class)
        if warning is not None and owner is not None:
            self.carry([PostEvent(owner, "Warning", "PriorityClassNotFound", warning)])
        return value

    def _pool(self, kind: str, body: Mapping[str, Any]) -> str | None:
        """The pool :meth:`place` puts `body` in; None if it waits (for its pool or queue)."""
        try:
            return self.place(kind, body).pool
        except NoPlaceError:
            return None

    def foresee(
        self, key: WorkflowKey, runs: tuple[JobArrival, ...], pool: str | None = None
    ) -> None:
        """Cron workflow `key`'s upcoming runs are now `runs` (none: it has none), for the
        pool its ``workflowSpec.pool`` names (None: the one its namespace's labels pick)."""
        if runs:
            self.upcoming[key] = (pool, runs)
        elif self.upcoming.pop(key, None) is None:
            return
        self.tell()

    def tell(self) -> None:
        """Tell each pool's policy the upcoming runs of the cron workflows routed to it (by
        ``workflowSpec.pool``, else their namespace's labels), again whenever pools change."""
        told: dict[str, list[JobArrival]] = {name: [] for name in self.bridges}
        for (namespace, _), (wanted, runs) in self.upcoming.items():
            pool = self._pool(
                KIND, {"metadata": {"namespace": namespace}, "spec": {"pool": wanted}}
            )
            if pool in told:  # (None: its pool does not exist; its runs will wait for it)
                told[pool] += runs
        for name, bridge in self.bridges.items():
            bridge.foresee(sorted(told[name], key=lambda a: a.time))

    # -- pools appearing, changing and going ---------------------------------------------------

    @contextmanager
    def moving(self) -> Iterator[None]:
        """While workflows move between pools (:meth:`apply` or :meth:`remove`, then their
        admission again from the API), no pool runs a round: a moved workflow's running
        pods must be counted where it lands before its pool releases anything. One round
        each afterwards."""
        self._moving += 1
        self._pause()
        try:
            yield
        finally:
            self._moving -= 1
            self._pause()
            if not self._moving:
                self.handle(Schedule())

    def _pause(self) -> None:
        for bridge in self.bridges.values():
            bridge.pause(self._moving > 0)

    def apply(self, name: str, spec: ExecutorPoolSpec, uid: str = "") -> list[Owner]:
        """ExecutorPool `name` (`uid`) is created or changed: (re)build its bridge if its
        size, policy or budget changed (a portfolio keeps the old one's `Decider.window`);
        returns the DagWorkflows to admit again (those leaving a pool or waiting for this
        one). The workflows of other kinds that leave a pool move in memory (`Moved`)."""
        selector = spec.node_selector
        if selector is not None and spec.queue_specs and self.watch.read:
            quotas_on_nodes(name, spec.queue_specs, spec.executors, self.watch.counted(selector))
        previous = self.specs.get(name)
        self.invalid.pop(name, None)
        moved: list[Owner] = []
        carried: list[ExternalJob] = []
        if (
            previous is None
            or previous.engine != spec.engine
            or name not in self.bridges
            or self._recount(self.bridges[name])
        ):
            old = self.bridges.get(name)
            if old is not None:  # (out first: its last round must not write the new series)
                moved += self._evacuate(old, carried)
            self.bridges[name] = new = self._bridge(name, spec, uid)
            if old is not None:  # (a portfolio goes on from the old one's window)
                new.learn_from(old)
        else:  # (what its forecasts invent changes in place, not by a new bridge)
            arrivals, _ = pool_arrivals(spec, self.default.settings.forecast_arrivals, name)
            self.bridges[name].forecast_arrivals(arrivals)
        self._say_arrivals(name, spec, uid)
        self.specs[name] = spec  # (after its bridge: a policy that cannot run routes nothing)
        moved += self._rerouted(carried)
        self._move(carried)
        self.tell()
        return moved + [w.owner for w in self.waiting.values() if w.pool == name]

    def _say_arrivals(self, name: str, spec: ExecutorPoolSpec, uid: str) -> None:
        """Say, once each time it starts, that ExecutorPool `name`'s forecasts do not invent
        the arrivals it inherits (`pool_arrivals`: ``queues`` without queues, as poisson): a
        Warning in the log and on the pool, and ``idlegate_forecast_arrivals_fallback``; its
        condition reads :attr:`arrivals_fallback`. A pool without forecasts says nothing."""
        bridge = self.bridges[name]
        _, why = pool_arrivals(spec, self.default.settings.forecast_arrivals, name)
        if bridge.forecasts is None:
            why = None
        bridge.metrics.forecast_arrivals_fallback.set(why is not None)
        if self.arrivals_fallback.get(name) == why:
            return
        if why is None:
            del self.arrivals_fallback[name]
            log.info("ExecutorPool %r's forecasts invent the arrivals it is set to again.", name)
            return
        self.arrivals_fallback[name] = why
        log.warning("%s", why)
        pool = pool_object(name, uid)
        self.carry([PostEvent(pool, "Warning", ARRIVALS_FALLBACK, why)])

    def _recount(self, bridge: Bridge) -> bool:
        """`bridge`'s pool on nodes was built counting other resources than its nodes have
        (built before kopf's index of nodes was filled, at a start): it is built again."""
        selector = bridge.settings.pool_nodes
        if selector is None or not self.watch.read:
            return False
        return bridge.counted != tuple(named(self.watch.counted(selector)))

    def restore(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        """The ExecutorPools a rebuild lists (:func:`~idlegate.operator.edge.intake.rebuild`),
        applied before it admits any workflow, so that each goes to its pool from the first
        (kopf's handler of a pool runs only after the rebuild: the workflows admitted before
        it would wait for their pool, or run in the default one). The workflows moved are
        known to no pool now: the rebuild admits them from its lists. A pool whose spec or
        policy cannot run is left to its handler, which says why on the pool."""
        for body in bodies:
            meta = body.get("metadata") or {}
            name = str(meta.get("name", ""))
            try:
                self.apply(name, parse_pool_spec(body.get("spec"), name), meta.get("uid", ""))
            except IdlegateError as exc:
                log.info("ExecutorPool %r is not applied by the rebuild: %s", name, exc)
                self.invalid[name] = str(exc)

    def remove(self, name: str) -> list[Owner]:
        """ExecutorPool `name` is deleted: its workflows leave it (no pod is touched); the
        DagWorkflows returned are admitted again, to wait for it unless another pool now
        selects them, the other kinds move now to the pool that takes them."""
        self.specs.pop(name, None)
        self.invalid.pop(name, None)
        self.arrivals_fallback.pop(name, None)
        old = self.bridges.pop(name, None)
        if old is not None:
            old.metrics.forecast_arrivals_fallback.set(0)
        self.tell()
        if old is None:
            return []
        carried: list[ExternalJob] = []
        owners = self._evacuate(old, carried)
        self._move(carried)
        return owners

    def cannot_run(
        self, name: str, why: str, uid: str = "", ran: int | None = None
    ) -> tuple[list[Owner], str]:
        """ExecutorPool `name` (`uid`) exists but its spec or policy cannot run (`why`): a
        workflow it would take waits saying so, not that it is missing; one running with
        an earlier spec (generation `ran`) runs its workflows on (`notices.pool_invalid`:
        said in a Warning and the log). The workflows waiting for it, to admit again (so
        they say it), and the sentence (its Ready condition's)."""
        self.invalid[name] = why
        said = notices.pool_invalid(why, name in self.bridges, ran)
        log.warning("%s", said)
        pool = pool_object(name, uid)
        self.carry([PostEvent(pool, "Warning", "Invalid", said)])
        return [w.owner for w in self.waiting.values() if w.pool == name], said

    async def sweep(self, kube: Lister, watched: Sequence[str]) -> None:
        """With ``--namespace`` (`watched`), kopf watches pods in those namespaces only:
        while a pool follows nodes, the pods of the others (node agents, services) are
        listed cluster-wide (the ClusterRole lists pods) and their room subtracted too."""
        following = any(b.settings.pool_nodes is not None for b in self.bridges.values())
        if following and await self.watch.sweep(kube, watched):
            self.room_soon()

    def room_soon(self) -> None:
        """`nodes_changed` at this turn's end, then at most once in `ROOM_SECONDS` or
        `pause_after` the last reading (`Coalesced`): a burst of pod events is a reading of
        the room, a stream of them (thousands of nodes) a tenth of a core at most."""
        self._room.ask()

    def nodes_changed(self) -> None:
        """A node or a pod changed: each pool that follows its nodes is told their room."""
        for bridge in list(self.bridges.values()):
            if bridge.settings.pool_nodes is not None:
                counted = bridge.counted
                bridge.handle(self.watch.capacity(bridge.settings.pool_nodes, counted))

    def _bridge(self, name: str, spec: ExecutorPoolSpec, uid: str) -> Bridge:
        d = self.default
        resources, selector = spec.capacity, spec.node_selector
        if selector is not None:  # (their room is told below)
            resources = named(self.watch.counted(selector))
        update: dict[str, Any] = {
            "pool_size": spec.executors,
            "pool_resources": resources,
            "pool_nodes": selector,
            "queues": QueueFile(spec.queue_specs, f"ExecutorPool {name}") if spec.queues else None,
            "forecast_arrivals": pool_arrivals(spec, d.settings.forecast_arrivals, name)[0],
        }
        if spec.plan_budget_ms is not None:
            update["plan_budget_ms"] = spec.plan_budget_ms
        settings = d.settings.model_copy(update=update)
        built = d.spec  # (the default pool's: None for a scheduler object)
        if spec.policy or d.settings.scheduler is None:
            # a policy object of its own: its Decider resets it and it keeps one pool's state, so
            # pools never share one (without spec.policy: --scheduler, as its model files are now)
            built = spec.policy or d.settings.policy or "default"
            scheduler = load_scheduler(built)
        else:
            scheduler = d.scheduler  # (a scheduler object given to the operator: embedding)
        metrics = Metrics(spec.executors, scheduler.name, pool=name, beside=d.metrics)
        bridge = Bridge(
            settings,
            d.kube,
            scheduler,
            metrics=metrics,
            timers=d.timers,
            beside=d,
            spec=built,
            reporter=pool_object(name, uid),
        )
        bridge.pause(self._moving > 0)
        bridge.pool_status = _Status(self, name)
        if selector is not None:
            bridge.handle(self.watch.capacity(selector, bridge.counted))
        return bridge

    def _evacuate(self, bridge: Bridge, carried: list[ExternalJob]) -> list[Owner]:
        """Every workflow of every kind leaves `bridge`: the DagWorkflows returned (read
        again from the API), the others added to `carried` (moved in memory: `_move`)."""
        owners: list[Owner] = []
        for wf in bridge.every():
            bridge.handle(Leave(wf.owner))
            _leaving(wf, owners, carried)
        bridge.handle(Schedule())
        bridge.close_workers()
        bridge.metrics.remove()  # (a rebuilt pool declares its series again)
        return owners

    def _rerouted(self, carried: list[ExternalJob]) -> list[Owner]:
        """Workflows of any kind whose pool is another now (their namespace's labels, or
        the pools' selectors, changed): the DagWorkflows returned, the others `carried`.
        A running one stays where it runs unless it names its pool, or its pool goes."""
        out: list[Owner] = []
        for name, bridge in [(n, b) for n, b in self.bridges.items() if n not in self.invalid]:
            for wf in bridge.every():  # (an invalid pool's run on: `cannot_run`)
                external = isinstance(wf, ExternalJob)
                kind = wf.owner.kind
                body = wf.asked if external else _dag_asked(wf)
                running = wf.job.first_start is not None if external else wf.phase is Phase.RUNNING
                named = pool_named(kind, body) is not None
                if self._pool(kind, body) != name and not (running and not named):
                    bridge.handle(Leave(wf.owner))
                    _leaving(wf, out, carried)
        return out

    def _move(self, carried: list[ExternalJob]) -> None:
        """Workflows of other kinds that left a pool enter, in memory, the one :meth:`place`
        gives them now, with their progress (`Moved`); one with no pool now is in none (a
        Warning says why; its feature admits it again at its next event, as a new one)."""
        for wf in carried:
            try:
                placed = self.place(wf.owner.kind, wf.asked, wf.owner)
            except NoPlaceError as exc:
                self.carry([PostEvent(wf.owner, "Warning", exc.reason, str(exc))])
                continue
            self.bridges[placed.pool].handle(Moved(wf, placed.queue, placed.priority))


@dataclass(frozen=True)
class _Status:
    """ExecutorPool `name`'s status as it is when it is written (`Bridge.pool_status`)."""

    pools: Pools
    name: str

    def read(self, now: float) -> dict[str, Any]:
        return pool_status(self.name, self.pools) if self.name in self.pools.bridges else {}


def _leaving(wf: Any, owners: list[Owner], carried: list[ExternalJob]) -> None:
    """`wf`, leaving its pool, is read again (a DagWorkflow: `owners`) or moved (`carried`)."""
    if isinstance(wf, ExternalJob):
        carried.append(wf)
    else:
        owners.append(wf.owner)


def _dag_asked(wf: Workflow) -> dict[str, Any]:
    """What :meth:`Pools.place` reads of a DagWorkflow held, to see if its pool is another."""
    return {"metadata": {"namespace": wf.owner.namespace}, "spec": {"pool": wf.spec.pool}}


def pool_status(name: str, pools: Pools) -> dict[str, Any]:
    """The status an ExecutorPool is patched with: its busy and pending counts, its policy
    and what it follows (a portfolio's choice, with its figures)."""
    status = pools.bridges[name].status()
    status["pending"] += sum(1 for waiting in pools.waiting.values() if waiting.pool == name)
    return status
