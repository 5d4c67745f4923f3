"""The operator through API-server outages and a missing CRD (issue 21, items 2 and 4).

Units: kopf's back-off that never ends, its retries counted and logged once per object; the rebuild after an outage catching up with what the watches
missed (pods that finished or went, workflows deleted or created); /metrics and /readyz.

End to end (the real kopf operator, behind :class:`~tests.k8s.faults.FaultProxy`): an
outage with more retries than kopf's default watch back-off allows is survived, seen (readiness,
``idlegate_api_up``), counted and reported by an Event on the operator's Pod, and the
state is caught up when the API returns; without the CRD, the operator waits for it
with readiness down and ``idlegate_crd_missing`` 1, and serves once it is installed.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from idlegate.api.crd import render_crd
from idlegate.api.labels import LABEL_WORKFLOW
from idlegate.api.settings import Settings
from idlegate.operator.core.events import PodSeen
from idlegate.operator.core.tracking import TaskState
from idlegate.operator.edge import intake
from idlegate.operator.edge.endpoints import Endpoints
from idlegate.operator.edge.kube import ApiError
from idlegate.operator.edge.lanes import Op
from idlegate.operator.edge.pod_index import TASK, Tagged
from idlegate.operator.edge.watchdog import Watchdog, operator_pod
from idlegate.operator.kopf_retries import KopfRetryLog, RetryForever
from idlegate.operator.metrics import Metrics
from idlegate.operator.runtime import Operator
from tests.clocks import run_in_loop_time
from tests.e2e import (
    DWF,
    HANG_SECONDS,
    SPEED,
    PodMonitor,
    new_namespace,
    running_operator,
    serving_proxy,
    stage,
    wait,
    workflow,
)
from tests.k8s.faults import FaultProxy
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import SimKubelet
from tests.operator_fakes import harness
from tests.operator_fakes import stage as fake_stage

KOPF_DEFAULT_RETRIES = 8
"""Retries kopf's default back-off (1, 1, 2, 3, 5, 8, 13, 21 s) allows before it gives up."""


# -- kopf's back-off and its failed requests ----------------------------------------------------


def test_kopfs_back_off_never_ends_starts_anew_for_each_request_and_counts_retries():
    retries = []
    backoffs = RetryForever(cap=1.0, on_retry=lambda: retries.append(1))
    assert not hasattr(backoffs, "__len__")  # kopf counts "#N/total" and gives up only if Sized
    first = list(itertools.islice(backoffs, 40))
    assert first[:5] == [0.1, 0.2, 0.4, 0.8, 1.0] and set(first[5:]) == {1.0}
    assert len(retries) == 39  # (kopf takes the first delay before its first attempt)
    assert list(itertools.islice(backoffs, 3)) == [0.1, 0.2, 0.4]  # a fresh one per request
    assert list(itertools.islice(RetryForever(cap=0.05), 2)) == [0.05, 0.05]


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_kopfs_retries_are_logged_once_per_object_at_warning():
    objects = logging.getLogger("kopf.objects")
    watching = logging.getLogger("kopf._cogs.clients.watching")
    kept = _Kept()
    patch = "PATCH http://h/apis/idlegate.io/v1alpha1/namespaces/ns/dagworkflows/a"
    pods = "GET http://h/api/v1/namespaces/ns/pods?watch=true&resourceVersion="

    def failed(logger: logging.Logger, what: str, n: int) -> None:
        logger.error(f"Request attempt #{n} failed; will retry: {what} -> APIServerError()")

    retry_log = KopfRetryLog()
    for logger in (objects, watching):
        logger.addHandler(kept)
    retry_log.install()
    try:
        for n in range(1, 200):
            failed(objects, patch, n)
            failed(watching, f"{pods}{n}", n)  # (the query differs: the same watch)
        failed(objects, patch.replace("/a", "/b"), 1)
        objects.error("Some other error of kopf's.")
    finally:
        retry_log.uninstall()
        for logger in (objects, watching):
            logger.removeHandler(kept)
    retries = [r for r in kept.records if "will retry" in r.getMessage()]
    assert len(retries) == 3 and {r.levelno for r in retries} == {logging.WARNING}
    others = [r for r in kept.records if "will retry" not in r.getMessage()]
    assert [r.levelno for r in others] == [logging.ERROR]


# -- the rebuild after an outage -------------------------------------------------------------


def test_the_rebuild_after_an_outage_catches_up_with_what_the_watches_missed():
    """While the operator did not see the API: a pod finished, a running pod and a gated
    one were deleted, a workflow was deleted and another created. The rebuild reads it all
    as a restart would, without re-admitting what it knows or creating any pod twice."""

    async def scenario() -> None:
        h = harness(pool=3)
        await h.submit("a", {"stages": [fake_stage("x", tasks=2, backoffLimit=1)]})
        await h.submit("b", {"stages": [fake_stage("y", tasks=2)]})
        assert h.released() == ["a-x-0", "a-x-1", "b-y-0"]
        assert ("default", "b-y-1") in h.kube.pods  # gated, waiting for an executor
        # what happened during the outage, unseen by the bridge
        h.kube.pods[("default", "a-x-0")]["status"]["phase"] = "Succeeded"
        del h.kube.pods[("default", "a-x-1")]
        del h.kube.workflows[("default", "b")]
        for name in ("b-y-0", "b-y-1"):
            del h.kube.pods[("default", name)]
        h.kube.add_workflow("c", {"stages": [fake_stage("z", tasks=1)]})
        created = h.metrics.value("idlegate_pods_created_total")
        counts = await intake.rebuild(h.pools)
        await h.settle()
        assert counts == (2, 1)  # a and c; a-x-0 (a-x-1 and b's pods are gone)
        assert set(h.bridge.core.workflows) == {("default", "a"), ("default", "c")}
        assert h.metrics.value("idlegate_workflows_finished_total", result="deleted") == 1
        a = h.bridge.core.workflows[("default", "a")]
        assert a.job.stages[0].finished == 1 and a.stages[0].failed == 1  # a-x-1: retried
        assert h.released() == ["a-x-1-r1", "c-z-0"]
        assert h.metrics.value("idlegate_pods_created_total") == created + 2
        assert h.bridge.core.busy == 2
        # the same again is a no-op
        await intake.rebuild(h.pools)
        await h.settle()
        assert h.released() == ["a-x-1-r1", "c-z-0"] and h.bridge.core.busy == 2

    run_in_loop_time(scenario())


def test_a_workflow_that_finishes_while_the_rebuild_reads_is_not_admitted_again():
    """The rebuild after an outage lists the workflows and pods, then the namespaces; the
    watch's events that come meanwhile finish a workflow, whose lists are older: its
    final status stays the last written, and it is counted finished once."""

    async def scenario() -> None:
        h = harness(pool=1)
        spec = {"stages": [fake_stage("a"), fake_stage("b", deps=("a",))]}
        await h.submit("w", spec)
        await h.finish("w-a-0", after=10)
        assert h.released() == ["w-b-0"]

        def the_watch_meanwhile(_: str) -> None:
            pod = h.kube.pods[("default", "w-b-0")]
            pod["status"]["phase"] = "Succeeded"
            h.pools.handle(PodSeen(copy.deepcopy(pod)))

        h.kube.fault = lambda method: (
            the_watch_meanwhile(method) if method == "list_namespaces" else None
        )
        await intake.rebuild(h.pools)
        h.kube.fault = None
        await h.settle()
        assert h.kube.status("w")["phase"] == "Succeeded"
        assert h.metrics.value("idlegate_workflows_finished_total", result="succeeded") == 1
        assert h.bridge.core.workflows == {}

    run_in_loop_time(scenario())


def test_the_first_rebuild_reads_kopfs_indexes_and_one_after_an_outage_lists():
    """A standby elected rebuilds from the pods and namespaces its kopf indexes hold
    (`Watchdog.cached`), listing only the workflows and pools; after an outage (before its
    election or since) it lists them all (an index may keep an object deleted meanwhile)."""

    async def scenario() -> None:
        leader = harness(pool=2)
        await leader.submit("w", {"stages": [fake_stage("x", tasks=2)]})
        leader.kube.pods[("default", "w-x-0")]["status"]["phase"] = "Succeeded"
        # the standby: kopf's indexes hold what its watches saw; its state is empty
        h = harness(pool=2, kube=leader.kube)
        cache = (copy.deepcopy(list(h.kube.pods.values())), copy.deepcopy(h.kube.namespaces))
        watchdog = Watchdog(h.pools, h.health, reporter=None, cached=lambda: cache)
        h.health.unsynced = 30.0  # an outage while it stood by
        h.kube.fail["list_namespaces"] = [ApiError(403, "Forbidden", "not yet")]
        await watchdog._sync()  # it lists (the last list is refused: no state yet)
        assert "list_pods" in h.kube.calls and not watchdog.rebuilt.is_set()
        h.health.unsynced = 0.0
        h.kube.calls.clear()
        await watchdog._sync()
        await h.settle()
        assert watchdog.rebuilt.is_set()
        assert "list_pods" not in h.kube.calls and "list_namespaces" not in h.kube.calls
        wf = h.bridge.core.workflows[("default", "w")]
        assert wf.job.stages[0].finished == 1 and h.bridge.core.busy == 1  # w-x-0 as cached
        h.health.unsynced = 30.0  # an outage ended
        await watchdog._sync()
        assert {"list_pods", "list_namespaces"} <= set(h.kube.calls)

    run_in_loop_time(scenario())


def test_a_pod_that_ends_while_the_first_rebuild_lists_is_seen_ended():
    """The elected standby's first rebuild reads kopf's indexes after its lists: a pod that
    ends meanwhile (the leader stopped with SIGTERM released it just before) has its event
    go nowhere, its workflow not admitted yet, so only the index tells it ended."""

    async def scenario() -> None:
        leader = harness(pool=2)
        await leader.submit("w", {"stages": [fake_stage("x")]})
        assert leader.released() == ["w-x-0"]
        h = harness(pool=2, kube=leader.kube)

        def index() -> intake.Cached:  # (what the standby's watches keep, now)
            return copy.deepcopy(list(h.kube.pods.values())), copy.deepcopy(h.kube.namespaces)

        def the_watch_meanwhile(method: str) -> None:
            if method == "list_workflows":
                pod = h.kube.pods[("default", "w-x-0")]
                pod["status"]["phase"] = "Succeeded"
                h.pools.handle(PodSeen(copy.deepcopy(pod)))

        h.kube.fault = the_watch_meanwhile
        watchdog = Watchdog(h.pools, h.health, reporter=None, cached=index)
        await watchdog._sync()
        h.kube.fault = None
        await h.settle()
        assert h.kube.status("w")["phase"] == "Succeeded"

    run_in_loop_time(scenario())


def test_the_operator_gives_its_indexes_to_a_rebuild_once_filled_and_listed():
    """The index of pods is the operator's (`operator.edge.pod_index`), of namespaces kopf's: a
    rebuild reads them once kopf ran a handler and the pods' first listing ended."""
    operator = Operator(Settings(pool_size=1, policy="fair"))
    pod = {"metadata": {"name": "w-x-0", "namespace": "default", "uid": "u0"}}
    pod["metadata"]["labels"] = {LABEL_WORKFLOW: "w"}
    namespace = {"metadata": {"name": "default"}}
    operator.indexes = Tagged(operator.pod_index, TASK), {"default": [namespace]}
    operator.listing.handled(operator.pod_index.seen({"type": None, "object": pod}))
    assert operator.cached() is None  # kopf has run no handler yet, nor ended the listing
    operator.filled.set()
    assert operator.cached() is None  # the listing has not ended
    operator.listing.listed(None, {"u0"})
    assert operator.cached() == ([pod], {"default": namespace})
    w = {"metadata": {"name": "w", "namespace": "default"}}  # (what its admission reads)
    assert operator.indexed(w) == ([pod], namespace)
    operator.pod_index.seen({"type": "DELETED", "object": pod})
    assert operator.cached() == ([], {"default": namespace}) and operator.pod_index == {}


def test_a_restart_decides_on_the_index_of_pods_only_once_its_first_listing_ended():
    """A restart while a's two pods run and b's waits gated, before their statuses were
    written, the pods watch's listing half told (a-x-0 seen, a-x-1 not yet): a rebuild that
    read the index then would find a-x-1 not started and release it again (its creation and
    release written anew). Until the listing ends the rebuild lists the pods itself, and an
    admission waits for it (`Operator.ready_pools`)."""

    async def scenario() -> None:
        before = harness(pool=2)
        await before.submit("a", {"stages": [fake_stage("x", tasks=2)]})
        await before.submit("b", {"stages": [fake_stage("x")]})
        assert before.released() == ["a-x-0", "a-x-1"]
        for name in ("a", "b"):  # (the restart came before their statuses were written)
            before.kube.status(name).clear()
        h = harness(pool=2, kube=before.kube)
        h.kube.calls.clear()
        operator = Operator(Settings(pool_size=2, policy="fair"))
        namespaces = {name: [body] for name, body in h.kube.namespaces.items()}
        operator.indexes = Tagged(operator.pod_index, TASK), namespaces
        first = copy.deepcopy(h.kube.pods[("default", "a-x-0")])
        operator.listing.handled(operator.pod_index.seen({"type": None, "object": first}))
        operator.filled.set()  # (kopf ran the handler: its own indexes are filled)
        operator.watchdog = watchdog = Watchdog(
            h.pools, h.health, reporter=None, cached=operator.cached
        )
        operator._pools = h.pools
        admitted = asyncio.ensure_future(operator.ready_pools())
        await watchdog._sync()
        await h.settle()
        writes = [c for c in h.kube.calls if c in ("create_pod", "patch_pod")]
        assert writes == [] and h.released() == ["a-x-0", "a-x-1"] and h.bridge.core.busy == 2
        assert "list_pods" in h.kube.calls  # (the index half filled: the API's pods)
        await asyncio.sleep(1.0)
        assert not admitted.done()  # (the listing has not ended: an admission waits)
        ready, why = operator.readiness()  # (and /readyz says so)
        assert not ready and why.startswith("listing the pods")
        uids = {p["metadata"]["uid"] for p in h.kube.pods.values()}
        operator.listing.listed(None, uids)
        for key, pod in h.kube.pods.items():  # (the rest of the listing: a-x-1, b's gated)
            if key != ("default", "a-x-0"):
                assert not admitted.done()
                event = {"type": None, "object": copy.deepcopy(pod)}
                operator.listing.handled(operator.pod_index.seen(event))
        assert await admitted is h.pools
        assert operator.cached() is not None and operator.readiness()[0]

    run_in_loop_time(scenario())


def test_a_pod_not_listed_while_its_workflow_has_a_write_running_is_not_taken_for_deleted():
    """The lists may miss a pod whose creation is on its way: only once every write of the
    workflow has ended is a missing pod read again and, still missing, taken for deleted."""

    async def scenario() -> None:
        h = harness(pool=2)
        await h.submit("a", {"stages": [fake_stage("x", tasks=2, backoffLimit=1)]})
        assert h.released() == ["a-x-0", "a-x-1"]
        lifted = asyncio.Event()

        async def held(_: Any) -> None:
            await lifted.wait()

        h.bridge.lanes.submit(("default", "a"), Op("a write on its way", held), lane="test")
        pod = h.kube.pods.pop(("default", "a-x-1"))  # "not created yet", as the list sees it
        await intake.rebuild(h.pools)
        track = h.bridge.core.workflows[("default", "a")].stages[0]
        assert track.tasks[1].state is TaskState.RELEASED and track.failed == 0
        lifted.set()
        await h.settle()
        await intake.rebuild(h.pools)  # settled, and still not there: deleted
        await h.settle()
        assert track.failed == 1 and h.released() == ["a-x-0", "a-x-1-r1"]
        assert pod["metadata"]["name"] == "a-x-1"

    run_in_loop_time(scenario())


# -- /metrics and /readyz --------------------------------------------------------------------


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_metrics_and_readiness_are_served_on_one_port():
    metrics = Metrics(4, "fair")
    state = {"ready": (False, "rebuilding the state from the API")}

    async def scenario() -> list[tuple[int, bytes]]:
        endpoints = Endpoints(metrics, lambda: state["ready"])
        port = await endpoints.start(0, "127.0.0.1")
        base = f"http://127.0.0.1:{port}"
        loop = asyncio.get_running_loop()
        try:
            answers = [await loop.run_in_executor(None, _get, f"{base}/readyz")]
            state["ready"] = (True, "ok")
            answers.append(await loop.run_in_executor(None, _get, f"{base}/readyz"))
            answers.append(await loop.run_in_executor(None, _get, f"{base}/metrics"))
        finally:
            await endpoints.stop()
        assert endpoints.port is None
        return answers

    (status, body), (status_after, body_after), (status_metrics, text) = asyncio.run(scenario())
    assert (status, json.loads(body)) == (
        503,
        {"ready": False, "reason": "rebuilding the state from the API"},
    )
    assert (status_after, json.loads(body_after)) == (200, {"ready": True, "reason": "ok"})
    assert status_metrics == 200
    for name in (
        "idlegate_workflow_completion_time_seconds_bucket",
        "idlegate_pending_workflows",
        "idlegate_busy_executors",
        'idlegate_executors{pool="default"} 4.0',
        "idlegate_idle_inserted_seconds_total",
        'idlegate_decisions_total{kind="idle",pool="default"}',
        "idlegate_decision_duration_seconds_bucket",
        "idlegate_gate_removals_total",
        "idlegate_api_up 1.0",
        "idlegate_crd_missing 0.0",
        "idlegate_watch_restarts_total",
    ):
        assert name in text.decode(), name


def test_the_outage_event_is_about_the_operators_own_pod(monkeypatch):
    monkeypatch.delenv("POD_ID", raising=False)
    assert operator_pod() is None
    monkeypatch.setenv("POD_ID", "idlegate-operator-7d9f")
    monkeypatch.setenv("POD_NAMESPACE", "idlegate-system")
    monkeypatch.setenv("POD_UID", "u-1")
    assert operator_pod().object_reference() == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "idlegate-system",
        "name": "idlegate-operator-7d9f",
        "uid": "u-1",
    }


# -- end to end ------------------------------------------------------------------------------
# On an accelerated wall clock, not fake loop time: the real kopf operator (its own thread
# and loop), the fault proxy and the API emulator talk through real sockets; why:
# tests/e2e.py, at SPEED. The scenarios above run in fake loop time (run_in_loop_time).


@pytest.fixture(scope="module")
def proxy(api: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultProxy]:
    yield from serving_proxy(api, tmp_path_factory.mktemp("proxy"))


def _namespace(api: ApiServer) -> str:
    return new_namespace(api, "outage")


def _readyz(port: int | None) -> tuple[int, dict[str, Any]]:
    status, body = _get(f"http://127.0.0.1:{port}/readyz")
    return status, json.loads(body)


def _phase(api: ApiServer, ns: str, name: str) -> str | None:
    return ((api.get(DWF, ns, name) or {}).get("status") or {}).get("phase")


KOPF_CAP = 0.2
"""kopf's back-off is capped at this here, so that its watches soon retry more often than
kopf's default back-off allows before it gives up (and with it the process): the outage
lasts until they have (no wall-clock length); the 70 s outage's figures are
benchmarks/api_faults.py's."""


@pytest.mark.slow
def test_an_outage_beyond_kopfs_default_retries_is_survived_seen_and_caught_up(
    api, proxy, monkeypatch
):
    ns = _namespace(api)
    monkeypatch.setenv("POD_ID", "idlegate-operator-0")
    monkeypatch.setenv("POD_NAMESPACE", ns)
    monitor = PodMonitor(api, ns)
    pool = 4
    long = workflow("long", stage("a", 4, 3 * SPEED), stage("b", 4, 3 * SPEED, ("a",)))
    doomed = workflow("doomed", stage("a", 2, 1 * SPEED))
    with (
        SimKubelet(api, ns, time_factor=1 / SPEED),
        running_operator(
            api,
            ns,
            pool=pool,
            # fifo: after the outage, long's stage b takes the pool and doomed (deleted
            # meanwhile) gets no executor. kopf may replay the deletions of doomed's pods
            # (garbage-collected) before doomed's own, on another watch; a free executor
            # would then re-create a pod of the deleted workflow until its deletion is
            # seen: a race of deletions across watches, not of outages (not tested here)
            policy="fifo",
            kubeconfig=proxy.kubeconfig,
            metrics_port=0,
            listen_host="127.0.0.1",
            watch_retry_cap=KOPF_CAP,
        ) as op,
    ):
        m, port = op.metrics, op.endpoints.port
        wait(lambda: _readyz(port)[0] == 200, 10, "ready")
        api.create(DWF, long, namespace=ns)
        wait(lambda: len(monitor.occupying) == pool, 20, "the pool to fill")
        api.create(DWF, doomed, namespace=ns)  # it waits for an executor
        wait(
            lambda: (
                (ns, "doomed") in op.bridge.core.workflows
                and op.bridge.lanes.settled((ns, "doomed"))
            ),
            10,
            "doomed's gated pods",
        )
        proxy.set(outage=True)
        began = len(proxy.requests())
        wait(lambda: not op.health.up, 10, "the outage to be seen")
        status, body = _readyz(port)
        assert status == 503 and body["ready"] is False and body["reason"]
        assert m.value("idlegate_api_up") == 0
        # unseen by the operator: a workflow deleted, another created, long's stage a ends
        api.delete(DWF, ns, "doomed")
        api.create(DWF, workflow("late", stage("a", 1, 1 * SPEED)), namespace=ns)
        wait(lambda: not monitor.occupying, 30, "stage a to end during the outage")

        def kopf_tries(resource: str) -> int:
            hits = proxy.requests()[began:]
            return sum(h.kopf and h.fault == "outage" and resource in h.path for h in hits)

        beyond = KOPF_DEFAULT_RETRIES + 1
        wait(
            lambda: min(kopf_tries("/pods"), kopf_tries("/dagworkflows")) > beyond,
            30,
            "kopf's watches to retry beyond its default back-off",
        )
        assert _readyz(port)[0] == 503 and op.bridge.core.busy == pool  # stale, as api_up says
        proxy.set(outage=False)
        during = proxy.requests()[began:]
        wait(lambda: _readyz(port)[0] == 200, 30, "ready again")
        wait(lambda: len(monitor.occupying) == pool, 30, "the pool to fill again")
        wait(lambda: _phase(api, ns, "long") == _phase(api, ns, "late") == "Succeeded", 30, "done")
        assert api.get(DWF, ns, "doomed") is None and (ns, "doomed") not in op.bridge.core.workflows
        wait(lambda: op.bridge.core.busy == 0, 5, "no executor busy")
        mine = "involvedObject.name=idlegate-operator-0"
        events = wait(lambda: api.list("events", ns, field_selector=mine), 5, "the Event")
        unreachable = m.value("idlegate_api_unreachable_seconds_total")
        restarts = m.value("idlegate_watch_restarts_total")
        up = m.value("idlegate_api_up")
    assert unreachable > 0 and up == 1
    # each watch was retried beyond what kopf's default back-off allows, and kept on
    for resource in ("/pods", "/dagworkflows"):
        tries = [h for h in during if h.kopf and h.fault == "outage" and resource in h.path]
        assert len(tries) > KOPF_DEFAULT_RETRIES, (resource, len(tries))
    assert restarts > 2 * KOPF_DEFAULT_RETRIES
    ((event,),) = [events]
    assert (event["type"], event["reason"], event["involvedObject"]["kind"]) == (
        "Warning",
        "ApiUnreachable",
        "Pod",
    )
    assert not monitor.duplicates and monitor.max_total <= pool
    monitor.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_without_the_crd_the_operator_waits_for_it_then_serves(tmp_path: Path, caplog):
    caplog.set_level(logging.INFO, logger="idlegate.operator.edge.watchdog")
    port = _free_port()
    seen: dict[str, Any] = {}

    def install_when_waiting(api: ApiServer) -> None:
        """While the operator waits: readiness and the gauge say why; then the CRD."""
        try:
            deadline = time.monotonic() + HANG_SECONDS  # a safety net, not a bound on speed
            while time.monotonic() < deadline:
                try:  # the gauge first: once it says 1, readiness already says why
                    metrics = _get(f"http://127.0.0.1:{port}/metrics")[1].decode()
                    readyz = _readyz(port)
                except OSError:
                    time.sleep(0.05)
                    continue
                if "\nidlegate_crd_missing 1.0" in metrics:
                    seen["metrics"], seen["readyz"] = metrics, readyz
                    break
                time.sleep(0.05)
            time.sleep(1.0)  # a few looks more: it keeps waiting, quietly
        finally:
            api.create("customresourcedefinitions", render_crd())

    with ApiServer(tmp_path) as api:
        ns = _namespace(api)
        installer = threading.Thread(target=install_when_waiting, args=(api,), daemon=True)
        installer.start()
        with (
            SimKubelet(api, ns, time_factor=1 / SPEED),
            running_operator(
                api, ns, pool=1, metrics_port=port, listen_host="127.0.0.1", crd_retry_interval=0.2
            ) as op,
        ):
            installer.join(5)
            assert _readyz(port)[0] == 200
            assert op.metrics.value("idlegate_crd_missing") == 0
            api.create(DWF, workflow("first", stage("a", 1, 1 * SPEED)), namespace=ns)
            wait(lambda: _phase(api, ns, "first") == "Succeeded", 20, "the first workflow")
        api.assert_no_internal_errors()
    status, body = seen["readyz"]
    assert status == 503 and body["reason"].startswith("the DagWorkflow CRD is not installed")
    assert "kubectl apply -k deploy/base" in body["reason"]
    assert "metrics" in seen, "idlegate_crd_missing never said 1"
    said = [r.getMessage() for r in caplog.records if r.name == "idlegate.operator.edge.watchdog"]
    missing = [m for m in said if "CRD (dagworkflows.idlegate.io) is not installed" in m]
    assert len(missing) == 1 and "kubectl apply -k deploy/base" in missing[0], said
    assert "The DagWorkflow CRD is installed: serving." in said
