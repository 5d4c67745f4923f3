"""End-to-end tests under API-server faults (issue 21): the real kopf operator talks to the
test API server through :class:`~tests.k8s.faults.FaultProxy`, which injects one fault per
test; the simulated kubelet and the checks talk to the server directly, so they see what
really happened.

Each test runs a few tens of two- and three-stage workflows on a small pool, injects its
fault once the pool is full (or for the whole run, for the faults that are weather rather
than events: latency, watch cuts, dropped connections) and asserts the same four things
(:func:`assert_recovered`):

* every workflow finished (Succeeded);
* no pod was created twice, and no (workflow, stage, task, attempt) has two pods;
* no executor stayed counted busy while its pod did not run for longer than the bound,
  counted from the API's return (:class:`~tests.e2e.HeldSampler`, every 50 ms): 2 s after
  an outage, 5 s after a 429 storm (its Retry-After included), 2 s plus four back-offs
  under dropped connections;
* ``idlegate_pods_created_total`` and ``idlegate_gate_removals_total`` equal the pods the
  emulator created and the gates really removed.

The write back-offs are the operator's defaults divided by `BACKOFF_SCALE`, so that an 8 s
outage outlasts them as the issue's 20 s one outlasts the defaults (a write that failed
as it began is in its longest back-off when the API returns); kopf's own back-off is left
as the operator configures it, and the outage longer than kopf's default watch back-off
(54 s) lasts 60 s of wall time.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import pytest

from idlegate.operator.main import Operator
from idlegate.operator.settings import Settings
from tests.e2e import (
    DWF,
    SPEED,
    HeldSampler,
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

BACKOFF_SCALE = 4.0
RETRY_DELAYS = tuple(d / BACKOFF_SCALE for d in Settings.model_fields["retry_delays"].default)
OUTAGE_BOUND = 2.0
"""Wall seconds an executor may stay counted busy without its pod, after an outage ends."""
DROP_BOUND = OUTAGE_BOUND + sum(RETRY_DELAYS[:4])
"""The same under dropped connections, which go on for the whole run: a release whose
request is dropped k times in a row waits out its first k back-offs first (the API never
went away, so no return wakes it). Drops come in runs (a dropped connection fails the
requests pooled on it), and up to 4 in a row were seen (2.4 and 3.1 s held)."""
STORM_BOUND = 5.0
"""The same after a 429 storm ends (its Retry-After of `RETRY_AFTER` s included)."""
RETRY_AFTER = 3
CHURN = 1.0


@pytest.fixture(scope="module")
def proxy(api: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultProxy]:
    yield from serving_proxy(api, tmp_path_factory.mktemp("proxy"))


@pytest.fixture()
def ns(api: ApiServer, proxy: FaultProxy) -> str:
    proxy.set(**asdict(Faults()))
    return new_namespace(api, "faults")


def calm_since(proxy: FaultProxy) -> Callable[[], float | None]:
    return lambda: proxy.calm_since if proxy.faults.calm else None


@dataclass
class Run:
    """What one run under a fault left: the operator's counters and the emulator's truth."""

    names: list[str]
    phases: Counter[str]
    monitor: PodMonitor
    held: HeldSampler
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
                api, ns, pool=pool, kubeconfig=proxy.kubeconfig, retry_delays=RETRY_DELAYS
            ) as op,
            HeldSampler(op, monitor, calm_since(proxy)) as held,
        ):
            for body in bodies.values():
                api.create(DWF, body, namespace=ns)
            wait(lambda: len(monitor.running()) == pool, 30, "the pool to fill")
            fault(op, monitor)
            wait(lambda: finished(api, ns) == count, timeout, f"{count} workflows to end")
            wait(lambda: op.bridge.busy == 0, 10, "no executor counted busy")
            wait(lambda: op.bridge.actuator.pending() == 0, 10, "the last writes")
            counters = {
                name: op.metrics.value(name)
                for name in ("idlegate_pods_created_total", "idlegate_gate_removals_total")
            }
    finally:
        monitor.close()
    phases = Counter((w.get("status") or {}).get("phase") for w in api.list(DWF, ns))
    return Run(list(bodies), phases, monitor, held, counters)


def finished(api: ApiServer, ns: str) -> int:
    return sum(
        (w.get("status") or {}).get("phase") in ("Succeeded", "Failed") for w in api.list(DWF, ns)
    )


def assert_recovered(api: ApiServer, run: Run, bound: float) -> None:
    """The issue's four checks (see the module docstring)."""
    assert run.phases == {"Succeeded": len(run.names)}, run.phases
    assert not run.monitor.duplicates, run.monitor.duplicates
    assert run.held.worst <= bound, (
        f"executor of {run.held.worst_pod} counted busy without its pod for "
        f"{run.held.worst:.1f} s after the API was back (bound {bound} s)"
    )
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
    assert_recovered(api, run, OUTAGE_BOUND)


def test_a_429_storm_with_retry_after(api, proxy, ns):
    run = run_under(api, proxy, ns, for_seconds(proxy, 8.0, throttle=RETRY_AFTER))
    assert_recovered(api, run, STORM_BOUND)
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
    latency = 0.5
    run = run_under(api, proxy, ns, for_seconds(proxy, 8.0, latency=latency))
    # a released task may need its pod created, then its gate removed: two requests late
    assert_recovered(api, run, OUTAGE_BOUND + 2 * latency)


def test_watch_streams_cut_every_two_seconds(api, proxy, ns):
    proxy.set(cut_watches=2.0)
    run = run_under(api, proxy, ns, lambda op, monitor: None)
    assert_recovered(api, run, OUTAGE_BOUND)
    assert sum(h.fault == "cut" for h in proxy.requests()) >= 2


@pytest.mark.parametrize("where", ["drop_before", "drop_after"])
def test_dropped_connections(api, proxy, ns, where):
    proxy.set(**{where: 0.1})
    run = run_under(api, proxy, ns, lambda op, monitor: None)
    assert_recovered(api, run, DROP_BOUND)
    assert any(h.fault == where.replace("_", "-") for h in proxy.requests())


@pytest.mark.slow
def test_an_outage_longer_than_kopfs_watch_backoff(api, proxy, ns):
    # kopf's default back-off (1, 1, 2, 3, 5, 8, 13, 21 s) gives a watch up after 54 s,
    # and with it the whole operator; this outage lasts 60 s of wall time
    run = run_under(api, proxy, ns, for_seconds(proxy, 60.0, outage=True), count=8, pool=4)
    assert_recovered(api, run, OUTAGE_BOUND)
