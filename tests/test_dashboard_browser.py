"""The dashboard in a real browser (issue 70, item 4): Debian's chromium driven by Playwright
against the dashboard, which reads the test API server (tests/k8s/) while the real kopf
operator runs its pools (tests/e2e.py).

The cluster: ExecutorPool ``shared`` (2 executors) with queue ``a`` (1 pod, no borrowing;
namespaces ``dash`` and ``dash-secret``) and queue ``b`` (1 pod). ``hold`` runs in ``a`` for
good, so ``waiter`` and ``secret-wait`` wait behind it for the queue's quota; ``diamond``
runs to its end in the operator's default pool (namespace ``dash-plain``). Checked: the
queue's row shows the numbers its ExecutorPool's status holds; a waiting workflow shows the
reason the operator's visibility API gives, and its ``status.forecast`` once one is set; a
new workflow appears without a reload; a workflow's page draws its DAG and one Gantt bar per
pod; an API outage shows a banner that goes once the API is back; a user whose RBAC refuses
a namespace sees nothing of it. No page logs a console error.

Every wait is on page content (Playwright's ``expect``, which polls) or on what the API
holds; the timeouts are safety nets against a hang, never bounds on speed.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from idlegate.api.forecast_status import Forecast, dump_forecast
from tests.dashboard_helpers import (
    CHROMIUM_ARGS,
    Cluster,
    DashboardThread,
    RbacProxy,
    chromium,
    demo_cluster,
    node_cluster,
    queue_status,
)
from tests.e2e import (
    DWF,
    pods_of,
    stage,
    status_of,
    workflow,
)
from tests.k8s.faults import FaultProxy
from tests.k8s.harness import ApiServer, serving_crd

pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")
CHROMIUM = chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Debian's chromium is not installed: `make chromium` (or apt-get install "
    "chromium) installs it; `make test` does so itself",
)
if CHROMIUM is not None:
    from playwright.sync_api import Browser, Page, expect, sync_playwright

NET = 120_000
"""Milliseconds: Playwright's safety net against a hang (see the module docstring)."""


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    yield from serving_crd(tmp_path_factory.mktemp("k8s"))


@pytest.fixture(scope="module")
def cluster(api: ApiServer) -> Iterator[Cluster]:
    with demo_cluster(api) as found:
        yield found


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        found = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield found
        found.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A page whose console errors and uncaught exceptions fail the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    found = context.new_page()
    errors: list[str] = []
    found.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    found.on("pageerror", lambda e: errors.append(str(e)))
    expect.set_options(timeout=NET)
    yield found
    context.close()
    assert errors == [], errors


@pytest.fixture(scope="module")
def board(cluster: Cluster) -> Iterator[DashboardThread]:
    with DashboardThread(cluster.api.kubeconfig, namespaces=[], visibility=cluster.visibility) as b:
        yield b


@contextlib.contextmanager
def dashboard(page: Page, kubeconfig: Path, **options: Any) -> Iterator[DashboardThread]:
    """A dashboard of one test's own, which `page` leaves before it stops (else the page's
    next poll finds it gone, a console error that fails the test on a slow machine)."""
    with DashboardThread(kubeconfig, **options) as b:
        try:
            yield b
        finally:
            page.goto("about:blank")


def test_the_queue_shows_its_status_and_each_waiting_workflow_its_reason(
    cluster: Cluster, board: DashboardThread, page: Page
) -> None:
    said = "fair: 8 % lower mean JCT than sjf-cp on a replay of the last 40 workflows"
    followed: dict[str, Any] = {
        "metadata": {"name": "shared.followed", "namespace": "default"},
        "involvedObject": {"apiVersion": "idlegate.io/v1alpha1", "kind": "ExecutorPool"},
        "reason": "PolicyFollowed",
        "message": said,
        "type": "Normal",
        "lastTimestamp": "2026-11-27T03:00:00Z",
    }
    followed["involvedObject"]["name"] = "shared"
    cluster.api.create("events", followed, namespace="default")
    page.goto(board.url)
    shared = page.locator(".pool[data-pool=shared]")
    expect(shared.locator(".following")).to_have_text("Follows: fair")
    expect(shared.locator(".sentence")).to_contain_text(said)  # (why: the pool's Events)
    status = queue_status(cluster.api, "a")
    row = page.locator(".pool[data-pool=shared] tr.queue[data-queue=a]")
    expect(row).to_contain_text(f"pods {status['used']['pods']} / 1")
    expect(row.locator("td").nth(4)).to_have_text(str(status["waiting"]))
    expect(row.locator("svg.spark polyline")).to_have_count(1)
    waiter = page.locator(f'#waiting tr[data-workflow="{cluster.pooled}/waiter"]')
    # the reason the operator's visibility API gives (the admission's quota sentence)
    expect(waiter).to_contain_text("queue a: pods 1/1 used, no borrowing allowed")
    expect(waiter.locator("td").first).to_have_text("1")
    expect(waiter).to_contain_text("no forecast yet")
    # the operator's default pool has no ExecutorPool: its use is the visibility API's
    whole = page.locator(".pool[data-pool=default] tr.queue")
    expect(whole).to_have_count(1)
    expect(whole).to_contain_text(re.compile(r"\(whole pool\)pods \d+ / 4"))


def test_a_forecast_in_the_status_is_shown(cluster: Cluster, page: Page) -> None:
    now = time.time()
    forecast = Forecast(now, now + 600, (now + 300, now + 900), now + 1200, (now + 900, now + 1800))
    status = {"status": {"forecast": dump_forecast(forecast)}}
    cluster.api.patch(DWF, cluster.pooled, "waiter", status, subresource="status")
    assert "forecast" in status_of(cluster.api, cluster.pooled, "waiter")
    # (the dashboard's clock stands still: the relative times read the same however long
    # a loaded machine takes to get here)
    with dashboard(
        page,
        cluster.api.kubeconfig,
        namespaces=[],
        visibility=cluster.visibility,
        clock=lambda: now,
    ) as b:
        page.goto(b.url)
        waiter = page.locator(f'#waiting tr[data-workflow="{cluster.pooled}/waiter"]')
        expect(waiter.locator(".fc-ok")).to_contain_text("start in 10m")
        expect(waiter.locator(".fc-ok")).to_contain_text("finish in 20m")
        # issue 80, item 10: each poll redrew the table, so a click could land on a link
        # a redraw had just taken away (on a loaded machine, the page never navigated);
        # now the polls keep the elements they do not change
        link = waiter.locator("a")
        expect(link).to_have_attribute("href", f"/workflow/{cluster.pooled}/waiter")
        kept = link.element_handle()
        drawn = int(page.locator("body").get_attribute("data-draws") or 0)
        page.wait_for_function(f"Number(document.body.dataset.draws) >= {drawn + 2}", timeout=NET)
        assert kept.evaluate("a => a.isConnected")
        link.click()
        expect(page).to_have_url(f"{b.url}/workflow/{cluster.pooled}/waiter")
        expect(page.locator("#forecast")).to_contain_text("start in 10m")
        expect(page.locator("svg.dag g.stage[data-state=ready]")).to_have_count(1)


def test_the_page_follows_a_change_without_a_reload(
    cluster: Cluster, board: DashboardThread, page: Page
) -> None:
    page.goto(board.url)
    row = page.locator(".pool[data-pool=shared] tr.queue[data-queue=a]")
    expect(row.locator("td").nth(4)).to_have_text("2")
    cluster.api.create(DWF, workflow("late", stage("s", 1, 5)), namespace=cluster.pooled)
    late = page.locator(f'#waiting tr[data-workflow="{cluster.pooled}/late"]')
    expect(late.locator("td").first).to_have_text("3")
    expect(row.locator("td").nth(4)).to_have_text("3")


def test_a_workflow_page_draws_its_dag_and_one_gantt_bar_per_pod(
    cluster: Cluster, board: DashboardThread, page: Page
) -> None:
    pods = pods_of(cluster.api, cluster.plain, "diamond")
    assert len(pods) == 6  # (2 + 1 + 2 + 1 tasks, each one pod)
    page.goto(f"{board.url}/workflow/{cluster.plain}/diamond")
    expect(page.locator("#phase")).to_have_text("Succeeded")
    expect(page.locator("svg.dag g.stage")).to_have_count(4)
    expect(page.locator("svg.dag g.stage[data-state=done]")).to_have_count(4)
    expect(page.locator("svg.dag line.edge")).to_have_count(4)
    expect(page.locator("svg.gantt rect.bar")).to_have_count(len(pods))
    for pod in pods:
        expect(
            page.locator(f'svg.gantt rect.bar[data-pod="{pod["metadata"]["name"]}"]')
        ).to_have_count(1)
    expect(page.locator("#events")).to_contain_text("Released")


def test_an_api_outage_shows_a_banner_that_goes_when_the_api_is_back(
    cluster: Cluster, page: Page, tmp_path: Path
) -> None:
    with (
        FaultProxy(cluster.api, tmp_path) as proxy,
        dashboard(page, proxy.kubeconfig, namespaces=[], visibility=cluster.visibility) as b,
    ):
        page.goto(b.url)
        banner = page.locator("#banner")
        expect(page.locator(".pool[data-pool=shared]")).to_have_count(1)
        expect(banner).to_be_hidden()
        proxy.set(outage=True)
        expect(banner).to_be_visible()
        # (a sentence of what is out and what to check, and since when the page is old)
        expect(banner).to_contain_text(
            f"The Kubernetes API server at {proxy.url} answers 503 to GET /api/v1/namespaces"
        )
        expect(banner).to_contain_text("kubectl get --raw /readyz")
        expect(banner).to_contain_text("The page shows what was read at")
        expect(page.locator(".pool[data-pool=shared]")).to_have_count(1)  # (what it said last)
        proxy.set(outage=False)
        expect(banner).to_be_hidden()


def test_a_namespace_rbac_refuses_is_not_shown_at_all(
    cluster: Cluster, board: DashboardThread, page: Page, tmp_path: Path
) -> None:
    secret = f'#waiting tr[data-workflow="{cluster.secret}/secret-wait"]'
    page.goto(board.url)  # (the operator's identity sees it: the test can fail)
    expect(page.locator(secret)).to_have_count(1)
    names = [cluster.pooled, cluster.secret, cluster.plain]
    with (
        RbacProxy(cluster.api, tmp_path, forbidden={cluster.secret}) as proxy,
        dashboard(page, proxy.kubeconfig, namespaces=names, visibility=cluster.visibility) as b,
    ):
        page.goto(b.url)
        expect(page.locator(f'#waiting tr[data-workflow="{cluster.pooled}/waiter"]')).to_have_count(
            1
        )
        expect(
            page.locator(f'#workflows a[href="/workflow/{cluster.plain}/diamond"]')
        ).to_have_count(1)
        expect(page.locator(secret)).to_have_count(0)
        expect(page.locator("main")).not_to_contain_text(cluster.secret)
        expect(page.locator("#banner")).to_be_hidden()
        page.goto(f"{b.url}/workflow/{cluster.secret}/secret-wait")
        expect(page.locator("#phase")).to_have_text("not found, or not yours to read")


def test_pools_on_nodes_show_use_beside_quota_for_every_queue(
    page: Page, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # issue 80, item 8: a pool on nodes showed "executors busy" and no queue row, and the
    # queues of --queues "- / -" and a flat chart, while their workflows used CPU
    directory = tmp_path_factory.mktemp("nodes")
    for api in serving_crd(directory):
        with (
            node_cluster(api, directory) as nodes,
            dashboard(page, api.kubeconfig, namespaces=[], visibility=nodes.visibility) as b,
        ):
            page.goto(b.url)
            default = page.locator(".pool[data-pool=default]")
            expect(default.locator(".pool-use")).to_contain_text("cpu 6 / 16, memory 12Gi / 64Gi")
            a, b_row = (default.locator(f"tr.queue[data-queue={q}]") for q in "ab")
            expect(a.locator("td").nth(1)).to_have_text("pods 2, cpu 4 / 4, memory 8Gi")
            expect(a.locator("td").nth(4)).to_have_text("1")
            expect(b_row.locator("td").nth(1)).to_have_text("pods 1, cpu 2 / 4, memory 4Gi")
            expect(b_row.locator("td").nth(3)).to_have_text("cpu 0")
            for row in (a, b_row):
                expect(row.locator("svg.spark polyline[data-resource=cpu]")).to_have_count(1)
            np = page.locator(".pool[data-pool=np]")
            expect(np.locator(".pool-use")).to_contain_text("cpu 2 / 8, memory 4Gi / 32Gi")
            (whole,) = [np.locator("tr.queue")]
            expect(whole).to_have_count(1)
            expect(whole.locator("td").nth(1)).to_have_text(
                "pods 1 / 110, cpu 2 / 8, memory 4Gi / 32Gi"
            )
