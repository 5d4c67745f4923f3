"""End-to-end tests under API-server faults (issue 21): the real kopf operator talks to the
test API server through :class:`~tests.k8s.faults.FaultProxy`, which injects one fault per
test; the simulated kubelet and the checks talk to the server directly, so they see what
really happened.

Each test runs a few tens of two- and three-stage workflows on a small pool, injects its
fault once the pool is full (or for the whole run, for the faults that are weather rather
than events: latency, watch cuts, dropped connections) and asserts the same three things
(:func:`assert_recovered`):

* every workflow finished (Succeeded);
* no pod was created twice, and no (workflow, stage, task, attempt) has two pods;
* ``idlegate_pods_created_total`` and ``idlegate_gate_removals_total`` equal the pods the
  emulator created and the gates really removed.

No test here bounds a wall-clock time, which a busy machine breaks: how soon the pool is
full again after an outage or a storm is measured on fake time by
tests/test_operator_writes.py and in wall seconds by benchmarks/api_faults.py. The API
client's retries (urllib3's ``Retry``) are the operator's, with its default back-off.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import pytest

from idlegate.api.settings import Settings
from idlegate.operator.runtime import Operator
from tests.e2e import (
    DWF,
    SPEED,
    PodMonitor,
    new_namespace,
    running_operator,
    serving_proxy,
    stage,
    wait,
    workflow,
)
from tests.k8s.faults import FaultProxy, Faults, retries_after
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import SimKubelet

# On an accelerated wall clock, not fake loop time: the real operator, the API emulator
# and the simulated kubelet run in threads (or processes) of their own; why: tests/e2e.py,
# at SPEED.

RETRY_AFTER = 3
CHURN = 1.0
KOPF_DEFAULT_RETRIES = 8


@pytest.fixture(scope="module")
def proxy(api: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultProxy]:
    yield from serving_proxy(api, tmp_path_factory.mktemp("proxy"))


@pytest.fixture()
def ns(api: ApiServer, proxy: FaultProxy) -> str:
    proxy.set(**asdict(Faults()))
    return new_namespace(api, "faults")


@dataclass
class Run:
    """What one run under a fault left: the operator's counters and the emulator's truth."""

    names: list[str]
    phases: Counter[str]
    monitor: PodMonitor
    counters: dict[str, float]


def workflows(count: int) -> dict[str, dict[str, Any]]:
    """`count` workflows of two or three stages (3 + 2, or 2 + 2 + 1 tasks of 10 s)."""
    bodies = {}
    for i in range(count):
        name = f"wf-{i:02d}"
        if i % 2:
            stages = (stage("a", 3, 10), stage("b", 2, 10, ("a",)))
        else:
            stages = (stage("a", 2, 10), stage("b", 2, 10, ("a",)), stage("c", 1, 10, ("b",)))
        bodies[name] = workflow(name, *stages)
    return bodies


def run_under(
    api: ApiServer,
    proxy: FaultProxy,
    ns: str,
    fault: Callable[[Operator, PodMonitor], None],
    *,
    count: int = 16,
    pool: int = 6,
    timeout: float = 120,
    **settings: Any,
) -> Run:
    """Run `count` workflows on `pool` executors; once the pool is full, `fault(op, monitor)`
    (which injects a fault and returns when it is over); then wait for every workflow to
    end and the operator's writes to settle, and read its counters."""
    bodies = workflows(count)
    monitor = PodMonitor(api, ns)
    try:
        with (
            SimKubelet(api, ns, time_factor=1 / SPEED),
            running_operator(
                api,
                ns,
                pool=pool,
                kubeconfig=proxy.kubeconfig,
                retry_backoff_max=Settings.model_fields["retry_backoff_max"].default,
                **settings,
            ) as op,
        ):
            for body in bodies.values():
                api.create(DWF, body, namespace=ns)
            wait(lambda: len(monitor.running()) == pool, 30, "the pool to fill")
            fault(op, monitor)
            wait(lambda: finished(api, ns) == count, timeout, f"{count} workflows to end")
            wait(lambda: op.bridge.core.busy == 0, 10, "no executor counted busy")
            wait(lambda: op.bridge.lanes.pending() == 0, 10, "the last writes")
            counters = {
                name: op.metrics.value(name)
                for name in ("idlegate_pods_created_total", "idlegate_gate_removals_total")
            }
    finally:
        monitor.close()
    phases = Counter((w.get("status") or {}).get("phase") for w in api.list(DWF, ns))
    return Run(list(bodies), phases, monitor, counters)


def finished(api: ApiServer, ns: str) -> int:
    return sum(
        (w.get("status") or {}).get("phase") in ("Succeeded", "Failed") for w in api.list(DWF, ns)
    )


def assert_recovered(api: ApiServer, run: Run) -> None:
    """The three checks of the module docstring."""
    assert run.phases == {"Succeeded": len(run.names)}, run.phases
    assert not run.monitor.duplicates, run.monitor.duplicates
    truth = {
        "idlegate_pods_created_total": len(run.monitor.created),
        "idlegate_gate_removals_total": len(run.monitor.released),
    }
    assert run.counters == truth, f"counters {run.counters} != emulator {truth}"
    api.assert_no_internal_errors()


def for_seconds(proxy: FaultProxy, seconds: float, **faults: Any) -> Callable[..., None]:
    """A fault for :func:`run_under`: `faults` switched on for `seconds`, `CHURN` s after
    the pool filled (tasks end and start then: writes are under way when it begins)."""

    def fault(op: Operator, monitor: PodMonitor) -> None:
        time.sleep(CHURN)
        with proxy.fault(**faults):
            time.sleep(seconds)

    return fault


def test_a_503_outage_longer_than_the_write_backoffs(api, proxy, ns):
    run = run_under(api, proxy, ns, for_seconds(proxy, 8.0, outage=True))
    assert_recovered(api, run)


def test_a_429_storm_with_retry_after(api, proxy, ns):
    run = run_under(api, proxy, ns, for_seconds(proxy, 8.0, throttle=RETRY_AFTER))
    assert_recovered(api, run)
    hits = proxy.requests()
    throttled = [h for h in hits if h.fault == "throttle" and not h.kopf]
    assert throttled, "the operator made no request during the storm"
    early = [
        (f"{h.method} {h.path} {h.name}", round(retry.start - h.end, 2))
        for h, retry in retries_after(hits, 429)
        if not h.kopf and h.end is not None and retry.start - h.end < RETRY_AFTER - 0.05
    ]
    assert not early, f"retried sooner than Retry-After: {RETRY_AFTER} s: {early[:10]}"


def test_latency_on_every_request(api, proxy, ns):
    run = run_under(api, proxy, ns, for_seconds(proxy, 8.0, latency=0.5))
    assert_recovered(api, run)


def test_watch_streams_cut_every_two_seconds(api, proxy, ns):
    proxy.set(cut_watches=2.0)
    run = run_under(api, proxy, ns, lambda op, monitor: None)
    assert_recovered(api, run)
    assert sum(h.fault == "cut" for h in proxy.requests()) >= 2


@pytest.mark.parametrize("where", ["drop_before", "drop_after"])
def test_dropped_connections(api, proxy, ns, where):
    proxy.set(**{where: 0.1})
    run = run_under(api, proxy, ns, lambda op, monitor: None)
    assert_recovered(api, run)
    assert any(h.fault == where.replace("_", "-") for h in proxy.requests())


def test_an_outage_beyond_kopfs_default_retries(api, proxy, ns):
    # kopf's default back-off (1, 1, 2, 3, 5, 8, 13, 21 s) gives a watch up after 8
    # retries, and with it the whole operator; capped at 0.2 s, they come faster here
    began = len(proxy.requests())
    fault = for_seconds(proxy, 6.0, outage=True)
    run = run_under(api, proxy, ns, fault, count=8, pool=4, watch_retry_cap=0.2)
    assert_recovered(api, run)
    tries = [h for h in proxy.requests()[began:] if h.kopf and h.fault == "outage"]
    assert len([h for h in tries if "/pods" in h.path]) > KOPF_DEFAULT_RETRIES
