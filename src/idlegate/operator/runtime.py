"""One operator instance at run time (:class:`Operator`): its settings, policy, metrics,
timers and pools, and what each kopf handler asks of them.

The handlers are module-level functions, one module per resource they watch
(:mod:`idlegate.operator.handlers`), each given this object by name
(:func:`idlegate.operator.main.build_registry`) and calling one of its methods below,
level-triggered:

* **startup** -> :meth:`Operator.started`, then :meth:`Operator.start`; kopf's own
  requests are retried for ever (:func:`configure_kopf`), so no outage ends the process.
* DagWorkflow **create** and **resume** -> :meth:`Operator.workflow_created`: once the
  first rebuild is done, the workflow is admitted (`Pools.admit`). What retrying may fix raises
  ``kopf.TemporaryError``, the rest ``kopf.PermanentError``; an invalid spec is marked
  ``Invalid`` and the handler succeeds. An **update of spec** re-validates an invalid
  workflow and refuses to change a running one (a Warning Event).
* DagWorkflow **events** -> :meth:`Operator.workflow_seen`: a deleted (or
  foreground-deleting) workflow leaves the state machine; a finished one gets its TTL and
  pod GC (:mod:`idlegate.operator.features.cleanup`). No finalizer: the pods are owned by
  the workflow and garbage-collected with it, the operator's only clean-up is in memory,
  and a finalizer would only block deletions whenever the operator is not running.
* Pod **events** -> :meth:`Operator.pod_seen`: the index of pods, the room of the pools on
  nodes, and a task pod (labelled ``idlegate.io/workflow``) handed to its pool as it is
  now; the same state twice is a no-op.
* DagCronWorkflows, ExecutorPools, nodes and PriorityClasses: their methods below; Argo
  Workflows: :mod:`.features.argo`; Airflow's pods: :mod:`.features.airflow`.

With ``--leader-election`` (:mod:`idlegate.operator.edge.leader`; docs/architecture.md) a
standby keeps the indexes and serves the webhooks, and its handlers wait until it leads.
Handlers return nothing but an ExecutorPool's status: kopf would store results in
``status.<handler-id>``, which the CRD's schema prunes. The process never imports torch
(an ONNX policy runs on onnxruntime).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from functools import cached_property, partial
from typing import Any

import kopf

from idlegate.api.labels import LABEL_CRON, LABEL_WORKFLOW
from idlegate.api.notices import Notice
from idlegate.api.pool_spec import namespace_labels, parse_pool_spec, pool_conditions
from idlegate.api.queueing import priority_classes
from idlegate.api.settings import Settings
from idlegate.api.status import FINISHED, FINISHED_OR_INVALID, Conditions
from idlegate.api.task_pods import Owner
from idlegate.errors import IdlegateError
from idlegate.kubeconfig import load_configuration
from idlegate.operator.core.events import Forget, PodSeen
from idlegate.operator.core.intents import PostEvent
from idlegate.operator.decisions import load_scheduler
from idlegate.operator.edge import intake, leader
from idlegate.operator.edge.bridge import Bridge
from idlegate.operator.edge.cron import CronController
from idlegate.operator.edge.endpoints import Endpoints
from idlegate.operator.edge.kube import ApiError, KubeApi, WriteGate
from idlegate.operator.edge.nodes import SWEEP_SECONDS
from idlegate.operator.edge.pod_index import POD, TASK, Listing, PodIndex, Tagged, install, plain
from idlegate.operator.edge.pools import Pools, pool_status
from idlegate.operator.edge.reload import Reloads
from idlegate.operator.edge.timers import Timers
from idlegate.operator.edge.watchdog import ApiHealth, Watchdog, operator_pod
from idlegate.operator.features import airflow, argo
from idlegate.operator.features.shadow import make_shadow
from idlegate.operator.kinds.workflow import AdmitLaterError
from idlegate.operator.kopf_retries import KopfRetryLog
from idlegate.operator.kopf_settings import configure_kopf
from idlegate.operator.metrics import Metrics
from idlegate.sim.protocol import Scheduler, followed

log = logging.getLogger(__name__)

RETRY_DELAY = 5.0
"""Seconds before kopf retries a handler that time may fix (`retried`)."""
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
        self.argo = argo.ArgoSide(self) if settings.argo else None
        """Argo's Workflows (``--argo``), which its handlers are given."""
        self.airflow = airflow.AirflowSide(self) if settings.airflow_url is not None else None
        """Airflow's DAG runs (``--airflow-url``), which its handlers are given."""
        if self.argo is not None:  # (what each rebuild reads of its kind, then admits)
            self.restorers.append(self.argo.restore)
        if self.airflow is not None:  # (and its API's trouble, said on /readyz)
            self.restorers.append(self.airflow.restore)
            self.notes.append(self.airflow.note)

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

    # -- what each watched resource's handler asks (operator/handlers/) ---------------------

    async def started(
        self, settings: kopf.OperatorSettings, namespaces: kopf.Index, cluster_nodes: kopf.Index
    ) -> None:
        """kopf starts (its indexes filled): kopf configured, the pods' first listing
        followed (`install`), the indexes read, then :meth:`start`."""
        configure_kopf(settings, self.settings, self.metrics)
        install(settings, self.listing.listed)  # (the end of the pods' first listing)
        self.indexes = Tagged(self.pod_index, TASK), namespaces
        self.cluster_indexes = cluster_nodes, Tagged(self.pod_index, POD)
        if self.settings.leader_election:  # (kopf's own Events: the leader's only)
            self.kopf_posting, settings.posting.enabled = settings.posting, False
        await self.start()

    def indexes_filled(self) -> None:
        """kopf ran a handler, which it does only once every index is filled."""
        self.filled.set()
        self.room_read()

    def node_seen(self, event: Mapping[str, Any]) -> None:
        """A node's event: the nodes' ledger (each event, ready or not), then the room."""
        self.lag.seen("node", event["object"], event["type"])
        self.indexes_filled()
        if self._pools is not None:
            self.pools.watch.seen(event, node=True)
        if self.ready:
            self.pools.room_soon()

    def pod_seen(self, event: Mapping[str, Any], labels: Mapping[str, str]) -> None:
        """Any pod's event: the index of pods, the room of the pools on nodes and a
        released pod left pending; then a task pod goes to its workflow's pool, whatever
        the room's part raised (kopf logs it)."""
        type_, body = event["type"], event["object"]
        self.lag.seen("pod", body, type_)
        self.listing.handled(self.pod_index.seen(event))
        self.indexes_filled()
        try:
            if self._pools is not None:
                self.pools.watch.seen(event)
            if self.ready:
                pending = self.pools.watch.unschedulable(body)
                if pending is not None:
                    self.pools.carry([pending])
                if self.pools.watch.changed(type_, body):
                    self.pools.room_soon()
        finally:
            if LABEL_WORKFLOW in labels:  # (not kopf's label filter: it takes a handler more)
                self.pools.handle(PodSeen(body, type_ == "DELETED"))

    def ours(self, status: Mapping[str, Any]) -> bool:
        """kopf is blind to a workflow while standing by or once it finished: a takeover
        writes kopf's bookkeeping to none (the rebuild admits and records them all)."""
        return not self.standby and status.get("phase") not in FINISHED

    async def workflow_created(self, body: Mapping[str, Any]) -> None:
        """A DagWorkflow created (or there at kopf's start): admitted into its pool."""
        pools, fresh = await self.fresh_pools()
        if not fresh:  # (the rebuild admitted it, or found it finished or gone)
            return
        with retried(AdmitLaterError):
            pools.admit(plain(body), *self.indexed(body), soon=True)

    async def spec_changed(self, body: Mapping[str, Any]) -> None:
        """A DagWorkflow's spec changed (`intake.spec_changed`)."""
        pools, fresh = await self.fresh_pools()
        if not fresh:  # (the rebuild took its spec in)
            return
        with retried(AdmitLaterError):
            intake.spec_changed(pools, plain(body), *self.indexed(body))

    async def workflow_seen(
        self, type_: str | None, body: Mapping[str, Any], meta: Mapping[str, Any]
    ) -> None:
        """A DagWorkflow's event: one deleted leaves its pool; one finished gets its TTL and
        pod GC (`features.cleanup`)."""
        self.lag.seen("dagworkflow", body, type_)
        self.filled.set()
        if self.standby:  # (its election's rebuild reads every workflow as it is then)
            return
        status = body.get("status") or {}
        if type_ == "DELETED" or meta.get("deletionTimestamp"):
            self.pools.carry(self.pools.cleanup.forget(meta.get("uid")))
            key = meta.get("namespace", ""), meta.get("name", "")
            self.pools.handle(Forget(*key, meta.get("uid")))
        elif status.get("phase") in FINISHED:
            await self.listing.done.wait()  # (its pods all in the index)
            pods = self.indexed(body)[0]
            self.pools.carry(self.pools.cleanup.seen(plain(body), pods))  # TTL, pod GC

    async def cron_synced(self, body: Mapping[str, Any], namespace: str, name: str) -> None:
        """A DagCronWorkflow created, changed or there at kopf's start: synced (its runs
        routed by its namespace's labels)."""
        pools, fresh = await self.fresh_pools()
        for found in self.indexes[1].get(namespace, ()):  # (its runs' routing: its labels)
            pools.labels[namespace] = namespace_labels(found)
        with retried(ApiError):
            await (self.cron.sync(plain(body)) if fresh else self.cron.resync(namespace, name))

    def cron_seen(self, type_: str | None, namespace: str, name: str) -> None:
        """A DagCronWorkflow's event: one deleted is forgotten."""
        if type_ == "DELETED" and self.ready:
            self.cron.forget(namespace, name)

    async def cron_run_seen(
        self, type_: str | None, meta: Mapping[str, Any], status: Mapping[str, Any]
    ) -> None:
        """A cron's run finished or went: it may let a Forbid cron start, or exceed a
        history limit (its cron synced again)."""
        if self.ready and (type_ == "DELETED" or status.get("phase") in FINISHED_OR_INVALID):
            try:
                await self.cron.resync(meta.get("namespace", ""), meta["labels"][LABEL_CRON])
            except ApiError as exc:
                log.info("Cannot sync the cron workflow of %s now: %s", meta.get("name"), exc)

    async def pool_synced(self, body: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
        """An ExecutorPool created, changed or there at kopf's start: its pool runs with its
        spec; the status to write (Ready, or Invalid with why: a spec or policy that cannot
        run is said, not retried)."""
        name, uid = meta.get("name", ""), meta.get("uid", "")
        self.indexes_filled()  # (its pool counts what its nodes have)
        try:
            with retried(ApiError):
                status = await self.pool_changed(name, body.get("spec"), uid)
        except IdlegateError as exc:
            ran = (body.get("status") or {}).get("observedGeneration")
            why = await self.pool_invalid(name, str(exc), uid, ran)
            now = self.settings.clock.now()
            return {"conditions": pool_conditions(False, "Invalid", why, now, body)}
        ready = self.running(name, body)
        return {**status, "observedGeneration": meta.get("generation"), "conditions": ready}

    def pool_counts(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """An ExecutorPool's counts to write (every `POOL_STATUS_SECONDS`), and its Ready
        condition while it runs (not while Invalid); nothing before the rebuild."""
        if not (self.ready and name in self.pools.bridges):
            return {}
        status = pool_status(name, self.pools)
        was = Conditions((body.get("status") or {}).get("conditions")).get("Ready")
        if was is not None and was.reason in ("Running", "NoNodes"):  # (not Invalid)
            status["conditions"] = self.running(name, body)
        return status

    def running(self, name: str, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Ready for a pool that runs: False, NoNodes, while it has no node to release onto;
        ForecastArrivalsFallback while its forecasts invent other arrivals than it
        inherits (`Pools.arrivals_fallback`); Lagging while the operator lags (`lag.lag`)."""
        pools, now = self.pools, self.settings.clock.now()
        why = pools.bridges[name].no_room
        held = pools.arrivals_fallback.get(name), self.lag.lagging  # (what they say)
        if why is not None:
            return pool_conditions(False, "NoNodes", why, now, body, *held)
        message = "The pool runs its workflows."
        return pool_conditions(True, "Running", message, now, body, *held)

    async def pool_seen(self, type_: str | None, name: str) -> None:
        """An ExecutorPool's event: one deleted sends its workflows to wait."""
        if type_ == "DELETED" and self.ready:
            await self.pool_deleted(name)

    def priority_class_seen(self, type_: str | None, name: str, body: Mapping[str, Any]) -> None:
        """A PriorityClass's event: a workflow's priority in its queue (docs/queues.md)."""
        if self._pools is not None:
            self.pools.priorities.pop(name, None)
            self.pools.priorities.update(priority_classes(body) if type_ != "DELETED" else {})

    def webhook_server(self) -> kopf.WebhookServer:
        """kopf's admission server on ``--webhook-port`` (TLS from ``--webhook-certs``),
        where the gates of Argo's and Airflow's pods are served."""
        s = self.settings
        certs = s.webhook_certs
        return kopf.WebhookServer(
            addr=s.listen_host,
            port=s.webhook_port,
            certfile=None if certs is None else str(certs / "tls.crt"),
            pkeyfile=None if certs is None else str(certs / "tls.key"),
            insecure=certs is None,
        )


@contextlib.contextmanager
def retried(*errors: type[Exception]) -> Iterator[None]:
    """The handler is retried in `RETRY_DELAY` seconds if the block raises one of `errors`
    (what time may fix: the API, a namespace not in the index yet)."""
    try:
        yield
    except errors as exc:
        raise kopf.TemporaryError(str(exc), delay=RETRY_DELAY) from exc
