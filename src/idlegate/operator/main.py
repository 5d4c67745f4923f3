"""The operator process: the settings, the pools, timers and metrics wired into kopf.

``idlegate operator`` ends up in :func:`run`; tests build an :class:`Operator` and run
``build_registry(operator)`` with ``kopf.testing.KopfRunner``. The process never imports
torch (an ONNX policy runs on onnxruntime).

The kopf handlers are thin and level-triggered, all in one registry per operator:

* **startup** -> :meth:`Operator.start`; kopf's own requests are retried for ever
  (:func:`configure_kopf`), so no outage ends the process.
* DagWorkflow **create** and **resume** -> once the first rebuild is done, admit the
  workflow (:func:`idlegate.operator.edge.intake.admit`). What retrying may fix raises
  ``kopf.TemporaryError``, the rest ``kopf.PermanentError``; an invalid spec is marked
  ``Invalid`` and the handler succeeds. An **update of spec** re-validates an invalid
  workflow and refuses to change a running one (a Warning Event).
* DagWorkflow **events** -> a deleted (or foreground-deleting) workflow leaves the state
  machine; a finished one gets its TTL and pod GC (:mod:`idlegate.operator.features.cleanup`).
  No finalizer: the pods are owned by the workflow and garbage-collected with it, the
  operator's only clean-up is in memory, and a finalizer would only block deletions
  whenever the operator is not running.
* Pod **events** (pods labelled ``idlegate.io/workflow``) -> the bridge reads the pod as
  it is now; the same state twice is a no-op.
* DagCronWorkflows and ExecutorPools: below; Argo Workflows: :mod:`.features.argo`;
  Airflow's pods: :mod:`.features.airflow`.

With ``--leader-election`` (:mod:`idlegate.operator.edge.leader`; docs/architecture.md) a
standby keeps the indexes and serves the webhooks, and its handlers wait until it leads.

Handlers return nothing: kopf would store results in ``status.<handler-id>``, which the
CRD's schema prunes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from functools import cached_property, partial
from typing import Any

import kopf

from idlegate.api.kinds import CRON_PLURAL, GROUP, PLURAL, POOL_PLURAL, VERSION
from idlegate.api.labels import LABEL_CRON, LABEL_WORKFLOW
from idlegate.api.notices import Notice
from idlegate.api.pool_spec import namespace_labels, parse_pool_spec, pool_conditions
from idlegate.api.queueing import priority_classes
from idlegate.api.settings import Settings
from idlegate.api.status import FINISHED, FINISHED_OR_INVALID, Conditions
from idlegate.api.task_pods import Owner
from idlegate.errors import IdlegateError
from idlegate.kubeconfig import load_configuration
from idlegate.operator.core.admission import AdmitLaterError
from idlegate.operator.core.events import Forget, PodSeen
from idlegate.operator.core.intents import PostEvent
from idlegate.operator.decisions import load_scheduler
from idlegate.operator.edge import intake, leader
from idlegate.operator.edge.applier import WriteGate
from idlegate.operator.edge.bridge import Bridge
from idlegate.operator.edge.cron import CronController
from idlegate.operator.edge.endpoints import Endpoints, bind
from idlegate.operator.edge.kube import ApiError, KubeApi, connection_info
from idlegate.operator.edge.nodes import SWEEP_SECONDS
from idlegate.operator.edge.pod_index import POD, TASK, Listing, PodIndex, Tagged, install, plain
from idlegate.operator.edge.pools import Pools, pool_status
from idlegate.operator.edge.reload import Reloads
from idlegate.operator.edge.timers import Timers
from idlegate.operator.edge.watchdog import ApiHealth, Watchdog, operator_pod
from idlegate.operator.features import airflow, argo
from idlegate.operator.features.shadow import make_shadow
from idlegate.operator.kopf_retries import KopfRetryLog
from idlegate.operator.kopf_settings import configure_kopf, quiet_event_handlers
from idlegate.operator.metrics import Metrics
from idlegate.sim.protocol import Scheduler, followed

log = logging.getLogger(__name__)

RETRY_DELAY = 5.0
POOL_STATUS_SECONDS = 5.0
"""Seconds of the operator's clock between two refreshes of an ExecutorPool's counts."""


class Operator:
    """One operator instance: its policy, metrics, timers and (once started) its bridge."""

    def __init__(self, settings: Settings, *, kube: KubeApi | None = None) -> None:
        self.settings = settings
        self.scheduler = settings.scheduler or load_scheduler(settings.policy)
        self.metrics = Metrics(settings.pool_size, self.scheduler.name)
        self.lag = self.metrics.families.lag.configure(settings, lambda n: self.pools.say(n))
        self.shadow = make_shadow(settings, self.metrics)
        """The shadow policy (--shadow), compared beside the policy, or None."""
        self.reloads = Reloads(
            settings,
            self.metrics,
            self.report,
            active=lambda: self.scheduler,
            use=self.use_policy,
            shadow=self.shadow,
        )
        """The model files watched for hot reload (:mod:`idlegate.operator.edge.reload`)."""
        self.health = ApiHealth(self.metrics)
        """Whether the API server answers: fed by the operator's own client, read by
        readiness and the watchdog."""
        self.timers = Timers(settings.clock)
        self.pod = operator_pod()
        """The operator's own Pod, where its own Events go; None outside one."""
        self._kube = kube
        self._owns_kube = kube is None
        self._pools: Pools | None = None
        """Every pool's bridge, from :meth:`start` on (with `cron` and `watchdog`)."""
        self.cron: CronController
        """The controller of DagCronWorkflows (it writes through the pools' applier)."""
        self.watchdog: Watchdog
        self._tasks: list[asyncio.Task[None]] = []
        self.kopf_log = KopfRetryLog()
        self.endpoints = Endpoints(self.metrics, self.readiness)
        self.endpoints.pools = lambda: None if self.standby else self._pools  # (visibility)
        self.elector: leader.Elector | None = None
        """The leader election (--leader-election), from :meth:`start` on."""
        self.gate = WriteGate()
        """The gate of every write (the API client's, the lanes'): the elector's, if any."""
        self.restorers: list[intake.Restorer] = []
        """What the kinds whose pods another controller creates read at each rebuild and
        then admit before its first decision (their features add them: `features.airflow`)."""
        self.notes: list[Callable[[], str | None]] = []
        """What a feature adds to /readyz's reason while the operator is ready (Airflow's API)."""
        self.stopped = asyncio.Event()
        """kopf's stop flag: set at a signal, and at a lost Lease (`lost` says why)."""
        self.lost = ""
        self.waiting: set[asyncio.Future[Any]] = set()
        """The handlers waiting for the first rebuild (a standby's: cancelled at a signal)."""
        self.kopf_posting: Any = None
        """kopf's posting settings (its own Events: the leader's only)."""
        self.pod_index, self.listing = PodIndex(), Listing(settings.namespaces, self.room_read)
        """The pods, kept by the pod event handler, and their first listing's end (operator.edge.pod_index)."""
        self.indexes: tuple[Mapping[Any, Any], Mapping[Any, Any]] = {}, {}
        """The task pods' index and kopf's of namespaces; `filled`: kopf ran a handler."""
        self.cluster_indexes: tuple[Mapping[Any, Any], Mapping[Any, Any]] = {}, {}
        """kopf's index of nodes and the index of pods (the node pools' room)."""
        self.filled = asyncio.Event()
        self.metrics.leader.set(0 if settings.leader_election else 1)

    @cached_property
    def configuration(self) -> Any:
        """The kubernetes client's configuration (credentials), loaded on first use."""
        return load_configuration(self.settings.kubeconfig)

    @property
    def pools(self) -> Pools:
        """Every pool's bridge (:mod:`idlegate.operator.edge.pools`)."""
        if self._pools is None:
            raise RuntimeError("the operator has not started yet")
        return self._pools

    @property
    def bridge(self) -> Bridge:
        """The default pool's bridge."""
        return self.pools.default

    @property
    def kube(self) -> KubeApi:
        if self._kube is None:
            s = self.settings
            self._kube = KubeApi(
                self.configuration,
                concurrency=s.api_concurrency,
                timeout=s.api_timeout,
                backoff_max=s.retry_backoff_max,
                retry_after_max=s.retry_after_cap,
                report=self.health.report,
                identity=leader.identity(),  # (its User-Agent: which replica wrote)
                gate=self.gate,
                wake=lambda: self.health.ended,
            )
        return self._kube

    async def start(self) -> None:
        """Start timers, endpoints and the watchdog, which rebuilds the state from the API
        in the background (idempotent: kopf retries a startup handler that raised). Nothing
        here waits for the API: kopf's liveness probe is served once this returns, also
        while the API or the CRD is missing."""
        s = self.settings
        self.timers.start()
        self.kopf_log.install()
        if self._pools is None:
            spec = None if s.scheduler is not None else s.policy or "default"
            self._pools = pools = Pools(
                partial(
                    Bridge,
                    s,
                    self.kube,
                    self.scheduler,
                    metrics=self.metrics,
                    timers=self.timers,
                    spec=spec,
                    gate=self.gate,
                    reporter=self.pod,
                    shadow=self.shadow,
                )
            )
            bridge = pools.default
            if bridge.forecasts is not None:  # (its replay process starts now, not at a burst)
                bridge.forecasts.warm()
            pools.watch.nodes, pools.watch.pods = self.cluster_indexes
            self.cron = CronController(
                bridge.kube,
                self.timers,
                s.clock,
                bridge.applier.apply,
                pools.foresee,
                pod_security=s.pod_security,
                history_samples=s.history_samples,
            )
            self.watchdog = Watchdog(
                pools, self.health, reporter=self.pod, cached=self.cached, restorers=self.restorers
            )
            if s.leader_election:
                self.elector = leader.elect(
                    s, self.kube, self.gate, on_elected=self._elected, on_lost=self._lost
                )
            self._tasks = [
                asyncio.create_task(self._admit_later(RETRY_DELAY)),
                asyncio.create_task(self._serve(self.watchdog)),
                asyncio.create_task(self.lag.heartbeat()),
            ]
            if s.namespaces:  # (kopf's index of pods holds only theirs)
                every = s.clock.wall_delay(SWEEP_SECONDS)
                self._tasks.append(asyncio.create_task(self._sweeping(every)))
            if self.elector is not None:
                self._tasks.append(asyncio.create_task(self.elector.run()))
            self.reloads.start(pools)
            if threading.current_thread() is threading.main_thread():  # (kopf's: in run())
                loop = asyncio.get_running_loop()  # (soon: after kopf's own, which it replaces)
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.call_soon(loop.add_signal_handler, sig, self.terminate, sig)
        if s.metrics_port is not None and self.endpoints.port is None:
            port = await self.endpoints.start(s.metrics_port, s.listen_host)
            log.info("Metrics at http://%s:%d/metrics, readiness at /readyz", s.listen_host, port)
        log.info(
            "Starting: pool of %d executors, policy %s, %s, clock %r.",
            s.pool_size,
            self.scheduler.name,
            f"namespaces {', '.join(s.namespaces)}" if s.namespaces else "all namespaces",
            s.clock,
        )
        if self.shadow is not None:
            where = self.shadow.source(self.scheduler)
            log.info("Shadow policy %s beside it; expected change from %s.", s.shadow, where)

    def use_policy(self, policy: Scheduler) -> None:
        """Decide with `policy` from the next round on (a hot reload of its model)."""
        self.scheduler = policy
        if self._pools is not None:
            self.bridge.use_policy(policy)
        if self.shadow is not None:
            self.shadow.active_changed()

    def post(self, owner: Owner, type_: str, reason: str, message: str) -> None:
        """Post an Event on `owner` (through the applier, as every write)."""
        self.pools.carry([PostEvent(owner, type_, reason, message)])

    def report(self, notice: Notice) -> None:
        """An Event of the operator's own on its Pod (outside a Pod: logged only)."""
        if self.pod is not None and self._pools is not None:
            self.post(self.pod, *notice)

    def indexed(
        self, body: Mapping[str, Any]
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """A workflow's task pods and its namespace as kopf's indexes hold them (None: the
        namespace is not seen yet), as plain dicts."""
        meta, task_pods = body.get("metadata") or {}, self.indexes[0]
        namespace = meta.get("namespace", "")
        pods = [plain(pod) for pod in task_pods.get((namespace, meta.get("name", "")), ())]
        return pods, self.namespace(namespace)

    def namespace(self, name: str) -> dict[str, Any] | None:
        """Namespace `name` as kopf's index holds it (None: not seen yet), as a plain dict."""
        found = [plain(ns) for ns in self.indexes[1].get(name, ())]
        return found[0] if found else None

    def cached(self) -> intake.Cached | None:
        """The task pods and namespaces of the indexes; None until filled and listed."""
        if not (self.filled.is_set() and self.listing.done.is_set()):
            return None
        task_pods, namespaces = self.indexes
        pods = [plain(pod) for found in task_pods.values() for pod in found]
        named = {name: plain(body) for name, found in namespaces.items() for body in found}
        return pods, named

    async def _admit_later(self, every: float) -> None:
        """Retry, every `every` seconds, the workflows that left a pool and could not be
        read again yet (an API error)."""
        while True:
            await asyncio.sleep(every)
            if self.pools.later:
                owners = list(self.pools.later.values())
                self.pools.later.clear()
                with self.pools.moving():
                    await intake.readmit(self.pools, owners)

    async def _sweeping(self, every: float) -> None:
        while True:  # (`Pools.sweep`, every SWEEP_SECONDS; an API error: the next one)
            if self.ready:
                with contextlib.suppress(ApiError):
                    await self.pools.sweep(self.kube, self.settings.namespaces)
            await asyncio.sleep(every)

    async def pool_changed(self, name: str, spec: Any, uid: str = "") -> dict[str, Any]:
        """ExecutorPool `name` (`uid`) was created or changed: its pool runs with `spec` (a
        SpecError or IdlegateError if it cannot); returns its status."""
        pools = await self.ready_pools()
        parsed = parse_pool_spec(spec, name)
        with pools.moving():
            await intake.readmit(pools, pools.apply(name, parsed, uid))
        self.reloads.changed(name)
        return pool_status(name, pools)

    async def pool_invalid(self, name: str, why: str, uid: str = "", ran: Any = None) -> str:
        """ExecutorPool `name` (`uid`, last run at generation `ran`) cannot run (`why`):
        said (`Pools.cannot_run`), and the workflows waiting for it say so; its Ready
        condition's sentence."""
        pools = await self.ready_pools()
        owners, said = pools.cannot_run(name, why, uid, ran if isinstance(ran, int) else None)
        await intake.readmit(pools, owners)
        return said

    async def pool_deleted(self, name: str) -> None:
        pools = await self.ready_pools()
        with pools.moving():
            await intake.readmit(pools, pools.remove(name))
        self.reloads.changed(name)

    async def ready_pools(self) -> Pools:
        """The pools, once the first rebuild is done and the pods' first listing ended
        (admissions wait for both: before, a workflow's running pods could be unknown)."""
        for event in (self.watchdog.rebuilt, self.listing.done):
            self.waiting.add(waiting := asyncio.ensure_future(event.wait()))
            waiting.add_done_callback(self.waiting.discard)
            await waiting
        return self.pools

    def room_read(self) -> None:
        """kopf ran a handler (nodes indexed) and the pods' listing ended: rooms may be read."""
        if self._pools is not None and self.filled.is_set() and self.listing.done.is_set():
            self.pools.watch.read, was = True, self.pools.watch.read
            if not was and self.ready:
                self.pools.room_soon()

    async def fresh_pools(self) -> tuple[Pools, bool]:
        """The ready pools, and whether the handler began after the first rebuild read the
        API, which else took its object in, newer than kopf's body (queued while standing by)."""
        began = asyncio.get_running_loop().time()
        pools = await self.ready_pools()
        return pools, began >= self.watchdog.read_at

    async def _serve(self, watchdog: Watchdog) -> None:
        await self.warn_missing_namespaces()
        if self.elector is not None:  # (a standby builds no state: the leader's may differ)
            await self.elector.elected.wait()
        await watchdog.run()

    def _elected(self) -> None:
        """This replica leads from now on: the watchdog rebuilds the state and it writes."""
        self.metrics.leader.set(1)
        if self.kopf_posting is not None:
            self.kopf_posting.enabled = True
        if (e := self.elector) is None:
            return
        lease = Owner(e.namespace, e.name, e.uid, kind="Lease", api_version=leader.API_VERSION)
        message = f"{e.identity} leads: it rebuilds the state and writes."
        self.post(lease, "Normal", "LeaderElected", message)

    def _lost(self, why: str) -> None:
        """The Lease is lost (writes stopped already): stop kopf; :func:`run` ends."""
        self.metrics.leader.set(0)
        if self.kopf_posting is not None:
            self.kopf_posting.enabled = False
        self.lost = why
        self.stopped.set()

    def terminate(self, sig: signal.Signals) -> None:
        """SIGTERM or SIGINT (kopf's handler replaced): never take the Lease (a leader gives
        it up in :meth:`stop`), end the handlers kopf would wait for, and stop kopf."""
        log.info("%s: stopping.", sig.name)
        if self.elector is not None:
            self.elector.stopping = True
        for task in self.waiting:
            task.cancel()
        self.stopped.set()

    @property
    def standby(self) -> bool:
        """Not elected yet (with --leader-election): no state, no writes."""
        return self.elector is not None and not self.elector.elected.is_set()

    @property
    def ready(self) -> bool:
        """The state is rebuilt from the API (the bridge and its controllers may act), and
        this replica writes."""
        leads = self.elector is None or self.elector.is_leader
        return self._pools is not None and self.watchdog.rebuilt.is_set() and leads

    def readiness(self) -> tuple[bool, str]:
        """(ready, why not): what /readyz answers. A standby is ready while the API
        answers: it serves the Argo webhook."""
        if self._pools is None:
            return False, "starting"
        if self.elector is not None and self.standby:
            if self.health.up:
                return True, f"standby (the leader: {self.elector.holder or 'none yet'})"
            return False, "standby; the API server does not answer"
        ready, reason = self.watchdog.readiness()
        if ready and not self.listing.done.is_set():  # (nothing is admitted before it)
            ready, reason = False, "listing the pods"
        return ready, "; ".join([reason, *filter(None, (note() for note in self.notes))])

    async def warn_missing_namespaces(self) -> list[str]:
        """`intake.warn_missing_namespaces` for ``--namespace``."""
        return await intake.warn_missing_namespaces(self.kube, self.settings.namespaces)

    async def stop(self) -> None:
        """Write what is pending (for at most `Settings.shutdown_timeout` seconds), then drop
        timers and the rest (the state to resume from is in the API). kopf calls it once
        every handler has stopped."""
        if self._pools is not None:
            await self.bridge.applier.drain(self.settings.shutdown_timeout)
        if self.elector is not None:
            await self.elector.release()
        self.timers.shutdown()
        await self.reloads.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.kopf_log.uninstall()
        if self.shadow is not None:
            self.shadow.close()
        if self._pools is not None:
            self.bridge.close_workers()
            self.bridge.replay_process.close()  # (every pool's: after their refreshes)
            self.bridge.history.close()  # (its queued records are written first)
        await self.endpoints.stop()
        if self._owns_kube and self._kube is not None:
            self._kube.close()
            self._kube = None

    def summary(self) -> dict[str, Any]:
        """The health probe's payload."""
        if self._pools is None:
            return {"ready": False, "policy": self.scheduler.name}
        bridge = self.bridge
        return {
            "ready": bridge.rebuilt,
            "workflows": len(bridge.workflows),
            "busyExecutors": bridge.busy,
            "poolSize": self.settings.pool_size,
            "decisions": int(self.metrics.decision_count()),
            "pendingWrites": bridge.lanes.pending(),
            "policy": self.scheduler.name,
            "following": followed(self.scheduler),
        }


@contextlib.contextmanager
def _retried(*errors: type[Exception]) -> Iterator[None]:
    """The handler is retried in `RETRY_DELAY` seconds if the block raises one of `errors`
    (what time may fix: the API, a namespace not in the index yet)."""
    try:
        yield
    except errors as exc:
        raise kopf.TemporaryError(str(exc), delay=RETRY_DELAY) from exc


def build_registry(operator: Operator) -> kopf.OperatorRegistry:
    """A fresh registry with the operator's handlers (one per operator instance)."""
    registry = kopf.OperatorRegistry()
    clock = operator.settings.clock

    # (kopf's handler types know no index argument)
    @kopf.on.startup(registry=registry)  # type: ignore[arg-type]
    async def startup(
        settings: kopf.OperatorSettings,
        namespaces: kopf.Index,
        cluster_nodes: kopf.Index,
        **_: Any,
    ) -> None:
        configure_kopf(settings, operator.settings, operator.metrics)
        install(settings, operator.listing.listed)  # (the end of the pods' first listing)
        operator.indexes = Tagged(operator.pod_index, TASK), namespaces
        operator.cluster_indexes = cluster_nodes, Tagged(operator.pod_index, POD)
        if operator.settings.leader_election:  # (kopf's own Events: the leader's only)
            operator.kopf_posting, settings.posting.enabled = settings.posting, False
        await operator.start()

    @kopf.on.cleanup(registry=registry)
    async def cleanup(**_: Any) -> None:
        await operator.stop()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(operator.configuration)  # (the operator's own client's)

    @kopf.on.probe(registry=registry, id="idlegate")
    async def probe(**_: Any) -> dict[str, Any]:
        return operator.summary()

    # -- a workflow's pods (Operator.pod_index), namespace (async: kopf hops a plain one to a thread)

    @kopf.index("v1", "namespaces", registry=registry, id="namespaces")
    async def namespaces(name: str, body: kopf.Body, **_: Any) -> Any:
        return {name: body}

    # -- nodes and pods: the room of the pools that follow the nodes, and released pods left pending

    @kopf.index("v1", "nodes", registry=registry, id="cluster_nodes")
    async def cluster_nodes(name: str, body: kopf.Body, **_: Any) -> Any:
        return {name: body}

    def indexes_filled() -> None:  # (kopf runs a handler only once every index is filled)
        operator.filled.set()
        operator.room_read()

    @kopf.on.event("v1", "nodes", registry=registry, id="node-events")
    async def node_event(event: kopf.RawEvent, **_: Any) -> None:
        operator.lag.seen("node", event["object"], event["type"])
        indexes_filled()
        if operator._pools is not None:  # (each event, ready or not: the ledger's)
            operator.pools.watch.seen(event, node=True)
        if operator.ready:
            operator.pools.room_soon()

    @kopf.on.event("v1", "pods", registry=registry, id="pod-events")
    async def pod_event(
        type: str | None, event: kopf.RawEvent, labels: kopf.Labels, **_: Any
    ) -> None:
        operator.lag.seen("pod", event["object"], type)
        operator.listing.handled(operator.pod_index.seen(event))
        indexes_filled()
        try:  # (the room's, then the workflow's: whatever the room's part raises)
            if operator._pools is not None:
                operator.pools.watch.seen(event)
            if operator.ready:
                pending = operator.pools.watch.unschedulable(event["object"])
                if pending is not None:
                    operator.pools.carry([pending])
                if operator.pools.watch.changed(type, event["object"]):
                    operator.pools.room_soon()
        finally:
            if LABEL_WORKFLOW in labels:  # (not kopf's label filter: it takes a handler more)
                operator.pools.handle(PodSeen(event["object"], type == "DELETED"))

    # -- DagWorkflows and their pods ------------------------------------------------------------

    def ours(status: kopf.Status, **_: Any) -> bool:
        """kopf is blind to a workflow while standing by or once it finished: a takeover
        writes kopf's bookkeeping to none (the rebuild admits and records them all)."""
        return not operator.standby and status.get("phase") not in FINISHED

    @kopf.on.resume(GROUP, VERSION, PLURAL, registry=registry, id="admit", when=ours)
    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry, id="admit", when=ours)
    async def admit(body: kopf.Body, **_: Any) -> None:
        pools, fresh = await operator.fresh_pools()
        if not fresh:  # (the rebuild admitted it, or found it finished or gone)
            return
        with _retried(AdmitLaterError):
            pools.admit(plain(body), *operator.indexed(body), soon=True)

    @kopf.on.update(GROUP, VERSION, PLURAL, registry=registry, id="spec", field="spec", when=ours)
    async def spec_changed(body: kopf.Body, **_: Any) -> None:
        pools, fresh = await operator.fresh_pools()
        if not fresh:  # (the rebuild took its spec in)
            return
        with _retried(AdmitLaterError):
            intake.spec_changed(pools, plain(body), *operator.indexed(body))

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry, id="workflow-events")
    async def workflow_event(
        type: str | None,
        body: kopf.Body,
        meta: kopf.Meta,
        status: kopf.Status,
        **_: Any,
    ) -> None:
        operator.lag.seen("dagworkflow", body, type)
        operator.filled.set()
        if operator.standby:  # (its election's rebuild reads every workflow as it is then)
            return
        if type == "DELETED" or meta.get("deletionTimestamp"):
            operator.pools.carry(operator.pools.cleanup.forget(meta.get("uid")))
            operator.pools.handle(
                Forget(meta.get("namespace", ""), meta.get("name", ""), meta.get("uid"))
            )
        elif status.get("phase") in FINISHED:
            await operator.listing.done.wait()  # (its pods all in the index)
            pods = operator.indexed(body)[0]
            operator.pools.carry(operator.pools.cleanup.seen(plain(body), pods))  # TTL, pod GC

    # -- DagCronWorkflows: synced on every change, forgotten when deleted, and synced again
    # when one of their runs finishes or goes

    @kopf.on.resume(GROUP, VERSION, CRON_PLURAL, registry=registry, id="cron")
    @kopf.on.create(GROUP, VERSION, CRON_PLURAL, registry=registry, id="cron")
    @kopf.on.update(GROUP, VERSION, CRON_PLURAL, registry=registry, id="cron", field="spec")
    async def cron_sync(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> None:
        namespace = namespace or ""  # (kopf's None: a cluster-scoped resource; this is not)
        pools, fresh = await operator.fresh_pools()
        for found in operator.indexes[1].get(namespace, ()):  # (its runs' routing: its labels)
            pools.labels[namespace] = namespace_labels(found)
        with _retried(ApiError):
            await (
                operator.cron.sync(plain(body)) if fresh else operator.cron.resync(namespace, name)
            )

    @kopf.on.event(GROUP, VERSION, CRON_PLURAL, registry=registry, id="cron-events")
    async def cron_event(type: str, namespace: str | None, name: str, **_: Any) -> None:
        if type == "DELETED" and operator.ready:
            operator.cron.forget(namespace or "", name)

    @kopf.on.event(
        GROUP, VERSION, PLURAL, registry=registry, id="cron-runs", labels={LABEL_CRON: kopf.PRESENT}
    )
    async def cron_run_event(
        type: str | None, meta: kopf.Meta, status: kopf.Status, **_: Any
    ) -> None:
        # a run that finishes (or goes) may let a Forbid cron start, or exceed a history limit
        if operator.ready and (type == "DELETED" or status.get("phase") in FINISHED_OR_INVALID):
            try:
                await operator.cron.resync(meta.get("namespace", ""), meta["labels"][LABEL_CRON])
            except ApiError as exc:
                log.info("Cannot sync the cron workflow of %s now: %s", meta.get("name"), exc)

    # -- ExecutorPools: a change rebuilds the pool's state machine; the status counts are
    # refreshed every POOL_STATUS_SECONDS of the operator's clock (kopf's timer runs on the
    # loop: the clock says how long that is there); a deletion sends its workflows to wait

    @kopf.on.resume(GROUP, VERSION, POOL_PLURAL, registry=registry, id="pool")
    @kopf.on.create(GROUP, VERSION, POOL_PLURAL, registry=registry, id="pool")
    @kopf.on.update(GROUP, VERSION, POOL_PLURAL, registry=registry, id="pool", field="spec")
    async def pool_sync(body: kopf.Body, meta: kopf.Meta, patch: kopf.Patch, **_: Any) -> None:
        name = meta.get("name", "")
        indexes_filled()  # (its pool counts what its nodes have)
        try:
            with _retried(ApiError):
                status = await operator.pool_changed(name, body.get("spec"), meta.get("uid", ""))
        except IdlegateError as exc:  # a spec or policy that cannot run: said, not retried
            ran = (body.get("status") or {}).get("observedGeneration")
            why = await operator.pool_invalid(name, str(exc), meta.get("uid", ""), ran)
            patch.status["conditions"] = pool_conditions(False, "Invalid", why, clock.now(), body)
            return
        ready = running(name, body)
        patch.status.update(
            {**status, "observedGeneration": meta.get("generation"), "conditions": ready}
        )

    def running(name: str, body: kopf.Body) -> list[dict[str, Any]]:
        """Ready for a pool that runs: False, NoNodes, while it has no node to release onto;
        ForecastArrivalsFallback while its forecasts invent other arrivals than it
        inherits (`Pools.arrivals_fallback`); Lagging while the operator lags (`operator.lag.lag`)."""
        pools = operator.pools
        why, now = pools.bridges[name].no_room, clock.now()
        held = pools.arrivals_fallback.get(name), operator.lag.lagging  # (what they say)
        if why is not None:
            return pool_conditions(False, "NoNodes", why, now, body, *held)
        message = "The pool runs its workflows."
        return pool_conditions(True, "Running", message, now, body, *held)

    every = clock.wall_delay(POOL_STATUS_SECONDS)

    @kopf.timer(GROUP, VERSION, POOL_PLURAL, registry=registry, id="pool-status", interval=every)
    async def pool_counts(name: str, body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
        if operator.ready and name in operator.pools.bridges:
            patch.status.update(pool_status(name, operator.pools))
            was = Conditions(body.get("status", {}).get("conditions")).get("Ready")
            if was is not None and was.reason in ("Running", "NoNodes"):  # (not Invalid)
                patch.status["conditions"] = running(name, body)

    @kopf.on.event("scheduling.k8s.io", "v1", "priorityclasses", registry=registry, id="pc")
    async def priority_class(type: str | None, name: str, body: kopf.Body, **_: Any) -> None:
        if operator._pools is not None:  # (a workflow's priority in its queue: docs/queues.md)
            operator.pools.priorities.pop(name, None)
            operator.pools.priorities.update(priority_classes(body) if type != "DELETED" else {})

    @kopf.on.event(GROUP, VERSION, POOL_PLURAL, registry=registry, id="pool-events")
    async def pool_event(type: str | None, name: str, **_: Any) -> None:
        if type == "DELETED" and operator.ready:
            await operator.pool_deleted(name)

    serve_webhooks(registry, operator.settings)
    argo.register(registry, operator)
    airflow.register(registry, operator)
    return registry


def serve_webhooks(registry: kopf.OperatorRegistry, settings: Settings) -> None:
    """kopf's admission server on ``--webhook-port`` (TLS from ``--webhook-certs``), where
    the gates of Argo's and Airflow's pods are served (`features.argo`, `features.airflow`)."""
    if settings.webhook_port is None or not (settings.argo or settings.airflow_url):
        return
    certs = settings.webhook_certs
    server = kopf.WebhookServer(
        addr=settings.listen_host,
        port=settings.webhook_port,
        certfile=None if certs is None else str(certs / "tls.crt"),
        pkeyfile=None if certs is None else str(certs / "tls.key"),
        insecure=certs is None,
    )

    @kopf.on.startup(registry=registry)
    def serve_webhook(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.admission.server = server


def run(settings: Settings, *, verbose: bool = False) -> None:
    """Run the operator in this process until it is stopped (SIGINT/SIGTERM)."""
    kopf.configure(verbose=verbose)
    if not verbose:  # (kopf's INFO: each handler's success, ~3 % of a flood's loop, unread)
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
        logging.getLogger("kopf.objects").addFilter(quiet_event_handlers)
    operator = Operator(settings)
    # the credentials first: without them the process has nothing to do, and a wrong path
    # is one line of the CLI rather than a startup kopf retries every minute
    _ = operator.configuration
    if problem := settings.webhook_certs_problem():
        raise IdlegateError(problem)
    # the ports too: one in use (a second operator on the host) is one line naming it
    if settings.metrics_port is not None:
        operator.endpoints.reserve(settings.metrics_port, settings.listen_host)
    liveness = None  # kopf's /healthz
    if settings.health_port is not None:
        bind(settings.listen_host, settings.health_port, "--health-port").close()  # (kopf binds it)
        liveness = f"http://{settings.listen_host}:{settings.health_port}/healthz"
    kopf.run(
        registry=build_registry(operator),
        standalone=settings.standalone,
        clusterwide=not settings.namespaces,
        namespaces=list(settings.namespaces),
        liveness_endpoint=liveness,
        stop_flag=operator.stopped,
    )
    if operator.lost:
        raise IdlegateError(
            "this replica lost the leader's Lease and stopped (see the log for why); it is "
            "restarted as a standby by its Deployment, or run it again"
        )
    # stopped, its writes made and its files closed (Operator.stop): the interpreter's
    # teardown of the state would only delay the exit (2 s with 200 workflows, loaded)
    logging.shutdown()
    os._exit(0)
