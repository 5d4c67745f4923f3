"""How late the operator is (issue 79, src/idlegate/operator/lag/lag.py): the API server's times of
an object's change, the watch lag measured once per change, the bound's state machine, and
the heartbeat that measures the event loop's stalls and says, on each ExecutorPool, when a
lag stays above the bound and when it recovers (fake loop time: looptime)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from idlegate.api.pool_spec import ExecutorPoolSpec, pool_conditions
from idlegate.api.settings import Settings
from idlegate.operator.lag.lag import (
    HOLD,
    LAGGING,
    RECOVERED,
    WINDOW,
    Lag,
    LagBound,
    Stamps,
    changed_at,
    quantile,
)
from tests.operator_fakes import FakeClock, harness

T0 = 1_700_000_000.0
"""2023-11-14T22:13:20Z."""


def pod(uid: str = "u1", **status: Any) -> dict[str, Any]:
    meta = {"uid": uid, "creationTimestamp": "2023-11-14T22:13:20Z"}
    return {"metadata": meta, "status": status}


def ended(at: str) -> dict[str, Any]:
    return {"containerStatuses": [{"state": {"terminated": {"finishedAt": at}}}]}


# -- the API server's times ------------------------------------------------------------------


def test_a_change_is_the_newest_time_the_server_wrote_at_the_middle_of_its_second():
    assert changed_at(pod()) == T0 + 0.5
    body = pod(**ended("2023-11-14T22:13:30Z"), startTime="2023-11-14T22:13:21Z")
    assert changed_at(body) == T0 + 10.5
    body["status"]["conditions"] = [{"type": "Ready", "lastTransitionTime": "2023-11-14T22:13:31Z"}]
    assert changed_at(body) == T0 + 11.5
    # real Kubernetes stamps each field manager's writes; a MicroTime is exact
    body["metadata"]["managedFields"] = [{"manager": "kubelet", "time": "2023-11-14T22:13:40.25Z"}]
    assert changed_at(body) == T0 + 20.25
    # a deletion's time is ahead of it by the grace period: never the change's
    body["metadata"]["deletionTimestamp"] = "2023-11-14T22:20:00Z"
    assert changed_at(body) == T0 + 20.25
    assert changed_at({"metadata": {}}) is None


def test_a_change_is_measured_once_by_the_newest_time_it_added():
    stamps = Stamps()
    assert stamps.lag(pod(), T0 + 3.0, "ADDED") == 2.5
    assert stamps.lag(pod(), T0 + 9.0, "MODIFIED") is None  # (a label, the operator's patch)
    # started and ended within the second it was made: each change added a time
    scheduled = {
        "conditions": [{"type": "PodScheduled", "lastTransitionTime": "2023-11-14T22:13:20Z"}]
    }
    assert stamps.lag(pod(**scheduled), T0 + 1.0, "MODIFIED") == 0.5
    done = {**scheduled, **ended("2023-11-14T22:13:20Z")}
    assert stamps.lag(pod(**done), T0 + 2.0, "MODIFIED") == 1.5
    assert stamps.lag(pod(**done), T0 + 2.0, "MODIFIED") is None
    assert stamps.lag(pod("u2"), T0, "ADDED", to_clock=lambda t: t - 5) == 4.5  # (scaled)
    assert stamps.lag(pod("u2"), T0, "DELETED", to_clock=lambda t: t - 5) is None
    assert stamps.lag(pod("u2"), T0 + 1.0, "ADDED") == 0.5  # (forgotten at its deletion)
    assert stamps.lag(pod("u3"), T0 - 10, "ADDED") == 0.0  # (never below 0)


def test_an_object_first_seen_by_a_list_or_forgotten_is_not_measured_until_it_changes():
    stamps = Stamps(size=1)
    assert stamps.lag(pod("a"), T0 + 3600, None) is None  # (kopf's list at a start: its age)
    assert stamps.lag(pod("a", **ended("2023-11-14T22:13:30Z")), T0 + 11, "MODIFIED") == 0.5
    stamps.lag(pod("b"), T0 + 1, "ADDED")  # ("a" forgotten: one object remembered)
    assert stamps.lag(pod("a", **ended("2023-11-14T22:13:30Z")), T0 + 60, "MODIFIED") is None
    assert stamps.lag(pod("a", **ended("2023-11-14T22:13:40Z")), T0 + 21, "MODIFIED") == 0.5


def test_quantile_by_nearest_rank():
    assert quantile([], 0.9) is None
    assert quantile([3.0], 0.9) == 3.0
    assert quantile(range(1, 11), 0.9) == 9
    assert quantile(range(1, 11), 0.5) == 5


# -- the bound ---------------------------------------------------------------------------


def test_the_bound_fires_after_the_lag_stayed_above_it_for_the_hold_and_says_what():
    bound = LagBound(2.0, hold=30.0)
    for t in range(0, 30):
        bound.observe("watch", 4.0, t)
        assert bound.check(t) is None, t  # (above since 0: not for 30 s yet)
    bound.observe("watch", 4.0, 30)
    assert bound.check(30) is True
    assert bound.lagging == (
        "The operator lags: watch lag p90 4.0 s over the last 10 s (bound 2 s, --lag-bound)."
    )
    bound.observe("loop", 2.5, 31)
    assert bound.check(31) is None and bound.lagging is not None
    assert "event-loop stall p90 2.5 s" in bound.lagging and "watch lag p90 4.0 s" in bound.lagging


def test_one_slow_reading_in_ten_is_no_lag_and_a_short_spike_never_fires():
    bound = LagBound(2.0, hold=30.0)
    for t in range(0, 120):
        bound.observe("watch", 9.0 if t % 10 == 0 else 0.1, t)
        assert bound.check(t) is None
    spiky = LagBound(2.0, hold=30.0)
    for t in range(0, 120):
        spiky.observe("loop", 5.0 if 10 <= t < 25 else 0.0, t)  # (15 s of stalls)
        assert spiky.check(t) is None


def test_the_bound_clears_once_every_lag_was_within_it_for_the_hold():
    bound = LagBound(2.0, hold=10.0)
    for t in range(0, 11):
        bound.observe("write", 3.0, t)
        changed = bound.check(t)
    assert changed is True
    # readings of 0.5 s from 11 on: the window's p90 (its last 10 readings) is within the
    # bound once one of them at most is 3 s (at 19), and the bound clears 10 s after
    results = {}
    for t in range(11, 40):
        bound.observe("write", 0.5, t)
        results[t] = bound.check(t)
    assert [t for t, r in results.items() if r is not None] == [29]
    assert results[29] is False and bound.lagging is None
    assert "within its bound of 2 s again" in bound.recovered()


def test_no_readings_is_no_lag():
    bound = LagBound(2.0, hold=5.0)
    assert all(bound.check(t) is None for t in range(0, 20))


# -- the heartbeat, and what the operator says -----------------------------------------------


@pytest.mark.looptime
@pytest.mark.asyncio
async def test_a_stalled_loop_is_measured_said_on_each_pool_and_cleared_on_fake_time():
    """A loop that stalls 3 s at each heartbeat for a minute: the stalls are in
    idlegate_loop_stall_seconds, the operator lags HOLD s after they began (a Warning on
    each ExecutorPool, the gauge 1), and recovers HOLD s after they left the p90's window."""
    h = harness(pool=2)
    for name in ("batch", "gpu"):
        body = h.kube.add_pool(name, {"size": 1})
        h.pools.apply(name, ExecutorPoolSpec(size=1), body["metadata"]["uid"])
    lag = h.metrics.families.lag.configure(Settings(pool_size=1, lag_bound=2.0), h.pools.say)
    loop = asyncio.get_running_loop()
    lost = [0.0]  # (what the stalled loop lost so far)

    def now() -> float:  # the loop's clock, as a loop that stalled would have it
        return loop.time() + lost[0]

    start = now()

    def stall() -> None:  # (a stall of 3 s between two heartbeats, for a minute)
        lost[0] += 3.0 if now() < start + 60 else 0.0
        loop.call_later(1.0, stall)

    loop.call_later(0.5, stall)
    beat = asyncio.create_task(lag.heartbeat(1.0, now))
    said: list[tuple[float, str, str]] = []
    gauge: set[float] = set()
    posted = len(h.kube.events)
    try:
        while len([s for s in said if s[1] == RECOVERED]) < 2:
            await asyncio.sleep(1.0)
            await h.settle()
            for e in h.kube.events[posted:]:
                said.append((now() - start, e["reason"], e["involvedObject"]["name"]))
            posted = len(h.kube.events)
            gauge.add(h.metrics.value("idlegate_lagging"))
            assert now() - start < 300, said
    finally:
        beat.cancel()
    # 15 heartbeats 3 s late (4 s apart) in the stalled minute, then on time (1 s apart)
    count = h.metrics.value("idlegate_loop_stall_seconds_count")
    assert count - h.metrics.value("idlegate_loop_stall_seconds_bucket", le="2.0") == 15
    assert h.metrics.value("idlegate_loop_stall_seconds_bucket", le="5.0") == count
    fired = [(t, name) for t, reason, name in said if reason == LAGGING]
    cleared = [(t, name) for t, reason, name in said if reason == RECOVERED]
    assert (
        sorted(name for _, name in fired)
        == sorted(name for _, name in cleared)
        == [
            "batch",
            "gpu",
        ]
    )
    # lagging HOLD s after the first stall (4 s in), within a beat; recovered HOLD s after
    # the last stall left the p90's window
    assert all(4 + HOLD <= t <= 4 + HOLD + 4 for t, _ in fired), said
    assert all(60 + WINDOW + HOLD - 1 <= t <= 60 + WINDOW + HOLD + 4 for t, _ in cleared), said
    assert gauge == {0.0, 1.0}
    (warning,) = [e for e in h.kube.events if e["reason"] == LAGGING][:1]
    assert warning["type"] == "Warning" and warning["message"].startswith(
        "The operator lags: event-loop stall p90 3.0 s"
    )
    assert h.metrics.value("idlegate_lagging") == 0 and lag.lagging is None


def test_the_pools_condition_says_the_lag_while_it_holds():
    said = "The operator lags: watch lag p90 4.0 s over the last 10 s (bound 2 s, --lag-bound)."
    written = pool_conditions(True, "Running", "The pool runs.", 10.0, {}, None, said)
    (lagging,) = [c for c in written if c["type"] == LAGGING]
    assert (lagging["status"], lagging["reason"], lagging["message"]) == (
        "True",
        "LagAboveBound",
        said,
    )
    after = pool_conditions(
        True, "Running", "The pool runs.", 20.0, {"status": {"conditions": written}}
    )
    assert [c["type"] for c in after] == ["Ready"]


@pytest.mark.asyncio
async def test_the_watch_lag_is_read_on_the_operators_clock_by_kind():
    lag = Lag(CollectorRegistry())
    clock = FakeClock(T0 + 1.5)
    lag.configure(Settings(pool_size=1, clock=clock), lambda notice: None)
    lag.seen("pod", pod(), "ADDED")
    lag.seen("pod", pod(), "MODIFIED")  # (no time added: not measured)
    clock.advance(2)
    lag.seen("dagworkflow", pod("w1"), "ADDED")
    assert lag.watch.labels("pod")._sum.get() == 1.0
    assert lag.watch.labels("dagworkflow")._sum.get() == 3.0
    assert lag.bound.readings["watch"][-1][1] == 3.0


def test_a_bound_of_zero_never_lags():
    lag = Lag(CollectorRegistry()).configure(Settings(pool_size=1, lag_bound=0), print)
    assert lag.bound.bound == math.inf
