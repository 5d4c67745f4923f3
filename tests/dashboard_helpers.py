"""The dashboard's browser tests' pieces: the dashboard served from a thread, an RBAC stand-in
before the test API server, and Debian's chromium for Playwright.

* :class:`DashboardThread`: ``idlegate dashboard``'s server (`idlegate.dashboard.server`)
  on 127.0.0.1 in a thread with its own event loop, reading the API through a kubeconfig;
* :class:`RbacProxy`: the fault proxy (tests/k8s/faults.py) answering 403, as RBAC would, to
  every cluster-wide listing and to everything in the `forbidden` namespaces (the test API
  server does no RBAC);
* :func:`demo_cluster`: the operator running pools, queues and workflows for the page to show
  (the browser tests' cluster, and benchmarks/dashboard_screenshots.py's);
* :func:`chromium`: the browser's path, or None (the tests skip, saying so): ``make test``
  installs Debian's ``chromium`` when it is missing (the Makefile's ``chromium`` target).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp.web

from idlegate.api.kinds import API_VERSION, GROUP, POOL_KIND, POOL_PLURAL, VERSION
from idlegate.dashboard.kube import Reader
from idlegate.dashboard.server import Dashboard
from idlegate.kubeconfig import load_configuration
from tests.e2e import DWF, SPEED, new_namespace, running_operator, stage, wait, wait_phase, workflow
from tests.k8s.faults import FaultProxy, _status
from tests.k8s.harness import ApiServer, LoopThread
from tests.k8s.kubelet import SimKubelet

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str | None:
    """Debian's chromium (never one Playwright downloads: no `playwright install`)."""
    for path in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if path and Path(path).exists():
            return path
    return None


class DashboardThread(LoopThread):
    """The dashboard reading the API through `kubeconfig` (see the module docstring)."""

    what = "the dashboard"

    def __init__(self, kubeconfig: Path, **options: Any) -> None:
        super().__init__("dashboard")
        self.kubeconfig, self.options = kubeconfig, options
        self.url = ""
        self.board: Dashboard | None = None

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        reader = Reader(load_configuration(self.kubeconfig), timeout=2.0)
        self.board = Dashboard(reader, **{"interval": 0.2, "poll_ms": 300, **self.options})
        runner = aiohttp.web.AppRunner(self.board.app(), handle_signals=False)
        await runner.setup()
        site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()


class RbacProxy(FaultProxy):
    """403 to cluster-wide listings and to the `forbidden` namespaces (module docstring)."""

    what = "the RBAC proxy"

    def __init__(self, upstream: ApiServer, directory: Path, forbidden: set[str]) -> None:
        super().__init__(upstream, directory)
        self.kubeconfig = Path(directory) / "kubeconfig-rbac"
        self.forbidden = forbidden

    async def _handle(self, request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        path = request.path.rstrip("/")
        wide = "/namespaces/" not in path and path.endswith(("/namespaces", "/dagworkflows"))
        hidden = any(
            f"/namespaces/{ns}/" in path or path.endswith(f"/namespaces/{ns}")
            for ns in self.forbidden
        )
        if wide or hidden:
            return _status(403, "Forbidden", f"RBAC stand-in: {path} is forbidden")
        return await super()._handle(request)


POOLS = f"{GROUP}/{VERSION}/{POOL_PLURAL}"
FOREVER = 600_000  # simulated seconds (the CRD allows a week): `hold` runs till the end


@dataclass
class Cluster:
    api: ApiServer
    pooled: str
    secret: str
    plain: str
    visibility: str
    """The operator's metrics port, where its visibility API is served."""


def queue_status(api: ApiServer, queue: str) -> dict[str, Any]:
    """Queue `queue`'s entry of ExecutorPool ``shared``'s status (empty before it has one)."""
    found = ((api.get(POOLS, None, "shared") or {}).get("status") or {}).get("queues") or []
    return next((q for q in found if q["name"] == queue), {})


@contextlib.contextmanager
def demo_cluster(api: ApiServer, scale: float = 1.0) -> Iterator[Cluster]:
    """The real operator on `api` with ExecutorPool ``shared`` (2 executors; queue ``a`` of 1
    pod, no borrowing, for namespaces ``dash`` and ``dash-secret``; queue ``b`` of 1 pod):
    ``hold`` runs in ``a`` for good, ``waiter`` and ``secret-wait`` wait behind it;
    ``diamond`` (namespace ``dash-plain``, the operator's default pool) has run to its end,
    its tasks `scale` times their 1 to 2 simulated seconds (the API's timestamps are whole
    seconds: a screenshot's Gantt needs tasks of seconds of the wall)."""
    pooled, secret = new_namespace(api, "dash"), new_namespace(api, "dash-secret")
    plain = new_namespace(api, "dash-plain")
    for ns in (pooled, secret):
        api.patch("namespaces", None, ns, {"metadata": {"labels": {"dashboard": "e2e"}}})
    queues: list[dict[str, Any]] = [
        {"name": "a", "nominal": {"pods": 1}, "borrowingLimit": {"pods": 0}},
        {"name": "b", "nominal": {"pods": 1}},
    ]
    queues[0]["namespaces"] = [pooled, secret]
    spec = {"size": 2, "policy": "fair", "queues": queues}
    spec["namespaceSelector"] = {"matchLabels": {"dashboard": "e2e"}}
    pool = {"apiVersion": API_VERSION, "kind": POOL_KIND, "metadata": {"name": "shared"}}
    api.create(POOLS, {**pool, "spec": spec})
    with contextlib.ExitStack() as stack:
        for ns in (pooled, secret, plain):
            stack.enter_context(SimKubelet(api, ns, time_factor=1 / SPEED))
        operator = stack.enter_context(
            running_operator(
                api,
                pooled,
                pool=4,
                namespaces=(pooled, secret, plain),
                metrics_port=0,
                listen_host="127.0.0.1",
            )
        )
        api.create(DWF, workflow("hold", stage("s", 1, FOREVER)), namespace=pooled)
        wait(lambda: queue_status(api, "a").get("used", {}).get("pods") == "1", 60, "hold runs")
        api.create(DWF, workflow("waiter", stage("s", 1, 5)), namespace=pooled)
        api.create(DWF, workflow("secret-wait", stage("s", 1, 5)), namespace=secret)
        diamond = workflow(
            "diamond",
            stage("a", 2, 2 * scale),
            stage("b", 1, 2 * scale, ("a",)),
            stage("c", 2, 1 * scale, ("a",)),
            stage("d", 1, 1 * scale, ("b", "c")),
        )
        api.create(DWF, diamond, namespace=plain)
        wait(lambda: queue_status(api, "a").get("waiting") == 2, 60, "two waiting in queue a")
        ended = wait_phase(api, plain, "diamond", ("Succeeded", "Failed"), 60)
        assert ended["phase"] == "Succeeded", ended
        yield Cluster(api, pooled, secret, plain, f"http://127.0.0.1:{operator.endpoints.port}")


@dataclass
class NodeCluster:
    api: ApiServer
    namespace: str
    visibility: str


@contextlib.contextmanager
def node_cluster(api: ApiServer, directory: Path) -> Iterator[NodeCluster]:
    """Issue 80's page on nodes: the operator's default pool follows nodes ``node-0`` and
    ``node-1`` (label ``pool=main``, 8 CPU each) with queues ``a`` (4 CPU, no borrowing)
    and ``b`` (4 CPU) from its ``--queues`` file, and ExecutorPool ``np`` follows
    ``node-2`` (``pool=np``) without queues; tasks of 2 CPU run for good: three in ``a``
    (two run, one waits at its quota), one in ``b``, one in ``np``."""
    from idlegate.api.queueing import QueueFile
    from tests.k8s.apiserver import NODES
    from tests.k8s.scheduler import node
    from tests.nodes_e2e import requests

    for i, label in enumerate(("main", "main", "np")):
        api.create(NODES, node(f"node-{i}", cpu="8", memory="32Gi", labels={"pool": label}))
    namespace = new_namespace(api, "dash-nodes")
    queues = Path(directory) / "queues.yaml"
    queues.write_text(
        "- {name: a, nominal: {cpu: 4}, borrowingLimit: {cpu: 0}}\n- {name: b, nominal: {cpu: 4}}\n"
    )
    spec = {"size": 110, "nodeSelector": {"matchLabels": {"pool": "np"}}}
    pool = {"apiVersion": API_VERSION, "kind": POOL_KIND, "metadata": {"name": "np"}}
    api.create(POOLS, {**pool, "spec": spec})
    template = {"spec": {"containers": [{"name": "t", "image": "b", "resources": requests("m")}]}}
    with (
        SimKubelet(api, namespace, time_factor=1 / SPEED),
        running_operator(
            api,
            namespace,
            pool=220,
            pool_nodes="pool=main",
            queues=QueueFile.parse(str(queues)),
            metrics_port=0,
            listen_host="127.0.0.1",
        ) as operator,
    ):
        for name, queue, pool_name in [
            ("a-0", "a", None),
            ("a-1", "a", None),
            ("a-2", "a", None),
            ("b-0", "b", None),
            ("np-0", None, "np"),
        ]:
            body = workflow(name, stage("s", 1, FOREVER, template=template))
            body["spec"] |= {"queueName": queue} if queue else {"pool": pool_name}
            api.create(DWF, body, namespace=namespace)
        yield NodeCluster(api, namespace, f"http://127.0.0.1:{operator.endpoints.port}")
