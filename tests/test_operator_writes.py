"""The operator's own writes under API faults (issue 21): lanes that never wait for each
other, retries woken by the API's return and honouring Retry-After, and pod counters that
equal what the API holds. On the in-memory fakes of tests/operator_fakes.py, in fake loop
time (looptime): a 20 s outage takes no wall time, and every delay is exact.

The end-to-end measurements (a fault-injecting proxy before the API emulator) are in
tests/test_e2e_faults.py and benchmarks/api_faults.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from idlegate.api.labels import ANNOTATION_EXECUTOR, GATE, LABEL_WORKFLOW
from idlegate.operator.core.events import PodSeen
from idlegate.operator.edge.kube import ApiError
from idlegate.operator.edge.lanes import Lanes, Op
from idlegate.operator.edge.watchdog import ApiHealth
from idlegate.operator.lag.pacing import Priority, Slots
from idlegate.operator.metrics import Metrics
from tests.operator_fakes import (
    FakeClock,
    FakeKube,
    Harness,
    IdleRootsOnce,
    Throttled,
    harness,
    stage,
)

pytestmark = pytest.mark.looptime

TWO_STAGES = {"stages": [stage("a", tasks=4, duration=10), stage("b", tasks=4, deps=("a",))]}


def now() -> float:
    return asyncio.get_running_loop().time()


async def until(condition: Callable[[], bool], limit: float = 120.0) -> float:
    """Loop time at which `condition` first holds (polled every 10 ms of loop time)."""
    start = now()
    while not condition():
        if now() - start > limit:
            raise AssertionError(f"not within {limit} s")
        await asyncio.sleep(0.01)
    return now()


class Window:
    """A fault: every call fails with `error()` while loop time is in [start, end)."""

    def __init__(
        self, start: float, end: float, error: Callable[[], ApiError], only: str | None = None
    ) -> None:
        self.start, self.end, self.error, self.only = start, end, error, only

    def __call__(self, method: str) -> ApiError | None:
        hit = self.start <= now() < self.end and self.only in (None, method)
        return self.error() if hit else None


def unavailable() -> ApiError:
    return ApiError(503, "ServiceUnavailable", "the API server is down")


def throttled(seconds: float = 3.0) -> Callable[[], ApiError]:
    return lambda: Throttled(seconds)


@contextlib.asynccontextmanager
async def prober(h: Harness, interval: float = 1.0):
    """What the operator's watchdog does during an outage: probe the API every second."""

    async def probe() -> None:
        while True:
            with contextlib.suppress(ApiError):
                await h.bridge.kube.ping()
            await asyncio.sleep(interval)

    task = asyncio.get_running_loop().create_task(probe())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def complete(h: Harness, name: str) -> None:
    """The kubelet ends pod `name` and the watch reports it (without waiting for writes)."""
    pod = h.kube.pods[("default", name)]
    pod["status"]["phase"] = "Succeeded"
    h.pools.handle(PodSeen(copy.deepcopy(pod)))


def running(h: Harness, stage_name: str) -> list[str]:
    return [n for n in h.released() if f"-{stage_name}-" in n]


# -- 1. lanes that never wait for each other ---------------------------------------------------


@pytest.mark.asyncio
async def test_after_a_20_s_outage_the_pool_is_full_again_within_2_s():
    h = harness(pool=4)
    await h.submit("w", TWO_STAGES)
    assert len(running(h, "a")) == 4
    start = now() + 1
    h.kube.fault = Window(start, start + 20, unavailable)
    async with prober(h):
        await asyncio.sleep(1.5)  # the API is down; stage a ends and b's writes fail
        for i in range(4):
            complete(h, f"w-a-{i}")
        await asyncio.sleep(10)
        assert running(h, "b") == [] and h.metrics.value("idlegate_api_up") == 0
        full = await until(lambda: len(running(h, "b")) == 4)
    assert full - (start + 20) <= 2.0
    assert h.metrics.value("idlegate_api_up") == 1
    assert 19 <= h.metrics.value("idlegate_api_unreachable_seconds_total") <= 21
    assert h.metrics.value("idlegate_api_errors_total", status="503") > 0
    await h.settle()
    assert h.kube.status("w")["stages"][1]["running"] == 4  # the status caught up too


@pytest.mark.asyncio
async def test_after_a_429_storm_with_retry_after_the_pool_is_full_within_5_s():
    h = harness(pool=4)
    await h.submit("w", TWO_STAGES)
    start = now() + 1
    h.kube.fault = Window(start, start + 20, throttled(3.0))
    await asyncio.sleep(1.5)
    for i in range(4):
        complete(h, f"w-a-{i}")
    full = await until(lambda: len(running(h, "b")) == 4)
    assert full - (start + 20) <= 5.0
    # every retry waited the server's 3 s, never the client's back-off
    by_write: dict[tuple[str, str], list[float]] = {}
    for at, method, name in h.kube.attempts:
        if start <= at and name and method != "get_pod":
            by_write.setdefault((method, name), []).append(at)
    gaps = [b - a for times in by_write.values() for a, b in itertools.pairwise(times)]
    assert gaps and min(gaps) >= 3.0 - 1e-6
    assert h.metrics.value("idlegate_api_throttled_requests_total") > 0
    assert h.metrics.value("idlegate_api_up") == 1  # throttled is not down


@pytest.mark.asyncio
async def test_a_status_write_in_back_off_never_delays_pods_and_is_coalesced():
    h = harness(pool=4)
    h.kube.fault = Window(0, 1e9, throttled(30.0), only="patch_workflow_status")
    body = h.kube.add_workflow("w", TWO_STAGES)
    t0 = now()
    h.admit(body)
    assert await until(lambda: len(running(h, "a")) == 4) - t0 < 0.1
    for i in range(4):  # many status changes while its write waits
        complete(h, f"w-a-{i}")
    assert await until(lambda: len(running(h, "b")) == 4) - t0 < 0.2
    assert h.kube.calls.count("patch_workflow_status") == 1
    h.kube.fault = None
    await until(lambda: "status" in h.kube.workflows[("default", "w")], limit=40)
    status = h.kube.status("w")
    assert status["stages"][0]["succeeded"] == 4 and status["stages"][1]["running"] == 4
    written = [m for _, m, _ in h.kube.attempts if m == "patch_workflow_status"]
    # one refused; the client's retry of the same body; then one with the newest state
    assert len(written) == 3


@pytest.mark.asyncio
async def test_a_pod_is_created_before_its_gate_is_removed():
    h = harness(pool=1)
    await h.submit("hold", {"stages": [stage("a", duration=100)]})
    h.kube.fail["create_pod"] = [unavailable() for _ in range(3)]
    body = h.kube.add_workflow("next", {"stages": [stage("a")]})
    h.admit(body)  # its gated pod's creation retries
    complete(h, "hold-a-0")  # its release is decided while the creation still retries
    await h.settle()
    done = [(m, n) for _, m, n in h.kube.done if n == "next-a-0"]
    assert done == [("create_pod", "next-a-0"), ("patch_pod", "next-a-0")]
    assert h.released() == ["next-a-0"]


@pytest.mark.asyncio
async def test_a_release_waits_for_the_status_write_that_persists_its_idle_slot():
    h = Harness(FakeKube(), FakeClock(), 1, IdleRootsOnce(delay=7))
    refused = Window(0, 1e9, throttled(5.0), only="patch_workflow_status")
    h.kube.fault = refused
    body = h.kube.add_workflow("late", {"stages": [stage("a")]})
    h.admit(body)
    await until(lambda: ("default", "late-a-0") in h.kube.pods)
    h.clock.advance(7)
    await h.timers.fire_due(h.clock.now())  # the slot ends: release, but it is not persisted
    await asyncio.sleep(12)
    assert h.released() == []
    refused.end = now() + 3
    released = await until(lambda: h.released() == ["late-a-0"])
    slots = [(at, n) for at, m, n in h.kube.done if m == "patch_workflow_status"]
    assert slots and slots[0][0] <= released
    assert h.kube.status("late")["idleSlots"][0]["stage"] == "a"


@pytest.mark.asyncio
async def test_a_persisted_idle_slot_does_not_hold_the_release_behind_a_later_status_write():
    h = Harness(FakeKube(), FakeClock(), 1, IdleRootsOnce(delay=7))
    await h.submit("late", {"stages": [stage("a")]})
    assert h.kube.status("late")["idleSlots"][0]["released"] is False
    h.kube.fault = Window(0, 1e9, throttled(30.0), only="patch_workflow_status")
    t0 = now()
    h.clock.advance(7)
    await h.timers.fire_due(h.clock.now())
    assert await until(lambda: h.released() == ["late-a-0"]) - t0 < 0.1


@pytest.mark.asyncio
async def test_ops_of_a_cleared_workflow_are_dropped_and_its_running_op_ends():
    lanes = Lanes(FakeKube())  # type: ignore[arg-type]
    gate = asyncio.Event()
    ran: list[str] = []

    async def blocked(api: Any) -> None:
        await gate.wait()
        ran.append("first")

    async def record(api: Any) -> None:
        ran.append("second")

    first = Op("first", blocked)
    queued = Op("queued", record)
    lanes.submit("w", first, lane="a")
    lanes.submit("w", queued, lane="a")
    await asyncio.sleep(0)  # the lane's worker starts: "first" runs, "queued" waits
    assert lanes.pending() == 1 and not lanes.settled("w")
    assert lanes.clear("w") == 1 and lanes.pending() == 0
    gate.set()
    await lanes.wait_idle(1)
    assert ran == ["first"] and lanes.settled("w")


# -- 2. Retry-After ----------------------------------------------------------------------------


# -- 3. counters equal what the API holds ------------------------------------------------------


def counted(h: Harness) -> tuple[float, float]:
    return (
        h.metrics.value("idlegate_pods_created_total"),
        h.metrics.value("idlegate_gate_removals_total"),
    )


@pytest.mark.asyncio
async def test_a_creation_whose_answer_was_lost_is_counted_once_through_the_409():
    h = harness(pool=2)
    h.kube.lose["create_pod"] = 1  # the first creation happens, its answer is lost
    await h.submit("w", {"stages": [stage("a", tasks=2)]})
    assert len(h.kube.pods) == 2 and h.kube.calls.count("create_pod") == 3
    assert counted(h) == (2, 2)  # each creation and each release counted once


def watched(h: Harness) -> None:
    """The watch reports each pod write as it takes effect (before its answer comes)."""

    def event(method: str, name: str) -> None:
        if method in ("create_pod", "patch_pod"):
            h.pools.handle(PodSeen(copy.deepcopy(h.kube.pods[("default", name)])))

    h.kube.on_effect = event


@pytest.mark.asyncio
async def test_a_creation_whose_answers_are_lost_twice_is_counted_once_with_the_watch_between():
    h = harness(pool=1)
    watched(h)
    h.kube.lose["create_pod"] = 1  # it happens, its answer is lost
    # the retry's 409 is lost as well; the next retry's 409 and read find the same pod
    h.kube.fail["create_pod"] = [ApiError(0, "ConnectionError", "the 409 was dropped")]
    await h.submit("w", {"stages": [stage("a")]})
    assert counted(h) == (1, 1) and h.kube.calls.count("create_pod") == 3


async def release_with_lost_answer() -> Harness:
    """`hold` on the pool's one executor and `w` gated behind it; then `hold` ends, so `w`'s
    release (its gate removal) is sent, and its answer will be lost."""
    h = harness(pool=1)
    await h.submit("hold", {"stages": [stage("a", duration=100)]})
    await h.submit("w", {"stages": [stage("a")]})  # gated: the pool is full
    h.kube.lose["patch_pod"] = 1
    complete(h, "hold-a-0")
    return h


@pytest.mark.asyncio
async def test_a_release_whose_answers_are_lost_twice_is_counted_once_with_the_watch_between():
    h = await release_with_lost_answer()
    watched(h)
    h.kube.fail["patch_pod"] = [ApiError(0, "ConnectionError", "the 422 was dropped")]
    await h.settle()
    assert h.released() == ["w-a-0"]
    assert counted(h) == (2, 2) and h.kube.calls.count("patch_pod") == 4


@pytest.mark.asyncio
async def test_a_release_whose_answer_was_lost_is_counted_once_through_the_422():
    h = await release_with_lost_answer()
    await h.settle()
    assert h.released() == ["w-a-0"]
    assert h.kube.calls.count("get_pod") == 1  # the retry's test op failed: it read the pod
    assert counted(h) == (2, 2)  # (hold's pod too)
    assert [m for _, m, n in h.kube.done if n == "w-a-0"] == ["create_pod", "patch_pod"]


@pytest.mark.asyncio
async def test_a_gate_removed_by_someone_else_is_not_counted_as_the_operators():
    h = harness(pool=1)
    await h.submit("hold", {"stages": [stage("a", duration=100)]})
    await h.submit("w", {"stages": [stage("a")]})
    pod = h.kube.pods[("default", "w-a-0")]
    complete(h, "hold-a-0")  # the release is decided ...
    pod["spec"]["schedulingGates"] = []  # ... and someone removes the gate before it runs
    await h.settle()
    assert pod is not h.kube.pods[("default", "w-a-0")]  # (patched: the executor recorded)
    annotations = h.kube.pods[("default", "w-a-0")]["metadata"]["annotations"]
    assert annotations[ANNOTATION_EXECUTOR] == "0"
    assert counted(h) == (2, 1)  # (hold's removal only)


@pytest.mark.asyncio
async def test_a_gate_moved_by_another_controller_is_removed_and_counted_once():
    h = harness(pool=1)
    await h.submit("hold", {"stages": [stage("a", duration=100)]})
    h.kube.webhook_gates = ["x/first"]
    await h.submit("shift", {"stages": [stage("a")]})
    h.kube.pods[("default", "shift-a-0")]["spec"]["schedulingGates"].pop(0)
    complete(h, "hold-a-0")
    await h.settle()
    assert h.released() == ["shift-a-0"]
    assert counted(h) == (2, 2)


@pytest.mark.asyncio
async def test_a_pod_that_went_away_is_created_released_and_counted_as_a_creation():
    h = harness(pool=1)
    await h.submit("hold", {"stages": [stage("a", duration=100)]})
    await h.submit("w", {"stages": [stage("a")]})
    del h.kube.pods[("default", "w-a-0")]  # deleted; the watch has not told yet
    h.kube.lose["create_pod"] = 1  # and the released creation's answer is lost
    complete(h, "hold-a-0")
    await h.settle()
    assert h.released() == ["w-a-0"]
    pods = [n for _, m, n in h.kube.done if m == "create_pod"]
    assert counted(h) == (len(pods), 1) == (3, 1)  # (the removal: hold's)


@pytest.mark.asyncio
async def test_an_unanswered_write_that_did_not_happen_is_counted_once_by_its_retry():
    h = harness(pool=1)
    h.kube.fail["create_pod"] = [ApiError(0, "ConnectTimeout", "timed out")]
    await h.submit("w", {"stages": [stage("a")]})
    assert counted(h) == (1, 1) and len(h.kube.pods) == 1


@pytest.mark.asyncio
async def test_a_pod_found_on_the_first_try_is_not_counted_as_the_operators():
    h = harness(pool=1)
    body = h.kube.add_workflow("w", {"stages": [stage("a")]})
    uid = body["metadata"]["uid"]
    foreign = {  # made by someone else after the operator listed the pods
        "metadata": {
            "name": "w-a-0",
            "namespace": "default",
            "labels": {LABEL_WORKFLOW: "w", "idlegate.io/stage": "a", "idlegate.io/task": "0"},
            "annotations": {"idlegate.io/attempt": "0"},
            "ownerReferences": [{"kind": "DagWorkflow", "uid": uid, "controller": True}],
        },
        "spec": {"schedulingGates": [{"name": GATE}], "containers": []},
        "status": {"phase": "Pending"},
    }

    def appears(method: str) -> None:
        if method == "create_pod":
            h.kube.pods.setdefault(("default", "w-a-0"), foreign)

    h.kube.fault = appears
    h.admit(body)
    await h.settle()
    assert h.released() == ["w-a-0"]
    assert counted(h) == (0, 1)  # its release is the operator's; its creation is not


@pytest.mark.asyncio
async def test_an_outage_is_requests_unanswered_for_a_second_not_one_dropped_connection():
    metrics = Metrics(1, "fifo")
    health = ApiHealth(metrics)
    health.report("GET /version", 0)  # (as the API client reports its tries)
    await asyncio.sleep(0.5)
    health.report("GET /version", 200)  # answered within the second: no outage
    assert health.up and not health.recovered.is_set() and health.unsynced == 0
    assert not health.ended.is_set()
    assert metrics.value("idlegate_api_up") == 1
    t0 = now()
    while now() < t0 + 10:
        health.report("GET /version", 503)
        assert health.up == (now() - t0 < 1.0)  # down once a second passed unanswered
        await asyncio.sleep(0.25)
    waiting = health.ended  # (what the client's back-offs in progress wait on)
    health.report("GET /version", 404)  # (an error, but an answer)
    assert health.up and health.recovered.is_set()
    assert waiting.is_set() and not health.ended.is_set()  # woken; the next ones wait anew
    assert health.unsynced == pytest.approx(10.0)
    assert metrics.value("idlegate_api_unreachable_seconds_total") == pytest.approx(10.0)
    assert metrics.value("idlegate_api_errors_total", status="0") == 1
    assert metrics.value("idlegate_api_errors_total", status="503") == 40
    assert metrics.value("idlegate_api_errors_total", status="404") == 1
    assert metrics.value("idlegate_api_errors_total", status="200") == 0


@pytest.mark.asyncio
async def test_a_pod_about_to_run_takes_the_next_free_connection_then_events_pods_status():
    """The next free connection goes to a release, then an Event (issue 79: what was
    decided, said before the gated creations ahead of need), then a gated creation, then a
    status."""
    lanes = Lanes(FakeKube(), concurrency=2)  # type: ignore[arg-type]
    order: list[str] = []

    def op(name: str, priority: Priority, seconds: float = 0.5) -> Op:
        async def run(api: Any) -> None:
            await asyncio.sleep(seconds)
            order.append(name)

        return Op(name, run, priority=priority)

    for i in range(2):  # both connections busy
        lanes.submit("w", op(f"status-{i}", Priority.STATUS), lane=f"s{i}")
    await asyncio.sleep(0)
    lanes.submit("w", op("event", Priority.EVENT, 0.1), lane="e")
    lanes.submit("w", op("status", Priority.STATUS, 0.1), lane="s")
    lanes.submit("w", op("gated", Priority.POD, 0.1), lane="p1")
    lanes.submit("w", op("release", Priority.RUN, 0.1), lane="p2")
    await lanes.wait_idle(5)
    assert order[:2] == ["status-0", "status-1"]
    assert order[2:] == ["release", "event", "gated", "status"]


@pytest.mark.asyncio
async def test_a_release_queued_behind_its_pods_creation_hurries_that_creation():
    """After an outage hundreds of gated creations wait for a connection: a gate removal
    behind its own pod's creation lends that creation its priority, so it does not wait
    for every other creation first."""
    lanes = Lanes(FakeKube(), concurrency=1)  # type: ignore[arg-type]
    order: list[str] = []
    busy = asyncio.Event()

    def op(name: str, priority: Priority = Priority.POD) -> Op:
        async def run(api: Any) -> None:
            if name == "busy":
                await busy.wait()
            order.append(name)

        return Op(name, run, priority=priority)

    lanes.submit("w", op("busy"), lane="p0")  # the one connection is taken
    await asyncio.sleep(0)
    for i in range(3):
        lanes.submit("w", op(f"gated-{i}"), lane=f"p{i + 1}")
    lanes.submit("w", op("gated-x"), lane="px")
    await asyncio.sleep(0)
    lanes.submit("w", op("release-x", Priority.RUN), lane="px")  # behind its creation
    busy.set()
    await lanes.wait_idle(5)
    # (the slot gated-x frees goes to the op waiting then; release-x takes the next)
    assert order == ["busy", "gated-x", "gated-0", "release-x", "gated-1", "gated-2"]


@pytest.mark.asyncio
async def test_a_status_write_takes_a_connection_within_a_bounded_number_of_pod_writes():
    """Issue 61: at scale thousands of pod writes wait for a connection at once; a
    workflow's status (its phase Succeeded) still goes out after a handful of them, not
    after all, and its Event right after the releases (issue 79); the pod writes keep their
    order, releases first."""
    lanes = Lanes(FakeKube(), concurrency=1)  # type: ignore[arg-type]
    order: list[str] = []
    busy = asyncio.Event()

    def op(name: str, priority: Priority) -> Op:
        async def run(api: Any) -> None:
            if name == "busy":
                await busy.wait()
            order.append(name)

        return Op(name, run, priority=priority)

    lanes.submit("w", op("busy", Priority.POD), lane="p")  # the one connection is taken
    await asyncio.sleep(0)
    for i in range(100):
        lanes.submit("w", op(f"gated-{i}", Priority.POD), lane=f"g{i}")
        lanes.submit("w", op(f"release-{i}", Priority.RUN), lane=f"r{i}")
    lanes.submit("w", op("event", Priority.EVENT), lane="e")
    lanes.submit("w", op("status", Priority.STATUS), lane="s")
    busy.set()
    await lanes.wait_idle(5)
    assert order.index("status") <= Slots.SHARE  # (its share)
    # the Event right after the releases, before the gated creations
    assert order.index("release-99") < order.index("event") < order.index("gated-0")
    pods = [n for n in order[1:] if n not in ("status", "event")]
    assert pods == [f"release-{i}" for i in range(100)] + [f"gated-{i}" for i in range(100)]


@pytest.mark.asyncio
async def test_a_watch_event_during_a_retry_is_not_counted_besides_the_retrys_answer():
    h = harness(pool=1)
    h.kube.fail["create_pod"] = [ApiError(0, "ConnectionError", "dropped before the server")]
    h.kube.fail["patch_pod"] = [ApiError(0, "ConnectionError", "dropped before the server")]

    def watch(method: str, name: str) -> None:  # the event arrives before the answer
        h.pools.handle(PodSeen(copy.deepcopy(h.kube.pods[("default", name)])))

    h.kube.on_effect = watch
    await h.submit("w", {"stages": [stage("a")]})
    assert h.released() == ["w-a-0"]
    assert counted(h) == (1, 1)
