"""A live pool's forecasts learn from the pool (issue 80, "Calibrate live"): the operator
records each task's latency (release to its pod seen Running) and stretch (its run over what
its stage declares) as it ends; a pool that has seen too few end says it cannot forecast
yet, with why, and refreshes as soon as it has; then its replays draw from them, the tasks
running now correcting the quick ones that ended first (`sim.task_times`), and its
calibration has no prior fitted on the simulator. On fake time: the refresh alone
(tests/test_forecast_refresh.py's pool), and the operator's bridge against the fakes."""

from __future__ import annotations

import copy
import math

import pytest

from idlegate.api.forecast_status import Forecast, Unavailable
from idlegate.operator.core.events import PodSeen
from idlegate.policy import make_scheduler
from idlegate.sim.forecast_calibration import LIVE_COLD, LIVE_MIN_SCORES, cold_margin
from idlegate.sim.task_times import EVIDENCE, TaskTimes
from tests.clocks import run_in_loop_time
from tests.operator_fakes import FakeClock, FakeKube, Harness, stage
from tests.test_forecast_refresh import T0, busy_pool, refresh_of


def test_a_pool_that_has_seen_too_few_tasks_end_says_so_then_forecasts_from_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from idlegate.operator.forecasting import book as forecast_book

    monkeypatch.setattr(forecast_book, "DUTY", 1.0)  # (no pause after a refresh: its own test)

    async def scenario() -> None:
        cluster = busy_pool()  # (one executor; w0 runs since T0, w1-w3 of 100 s wait)
        times = TaskTimes()
        refresh, _ = refresh_of(cluster, times=times, debounce=2.0)
        refresh.changed()
        at, fire = refresh.timers.pop("forecast-change")  # type: ignore[attr-defined]
        await fire()
        assert refresh.running is None and refresh.cpu == [0.0]  # (nothing replayed)
        for job in cluster.jobs:
            said = job.payload.forecast
            assert isinstance(said, Unavailable)
            assert said.reason.startswith(f"fewer than {EVIDENCE} tasks of its pool have ended")
        assert refresh.kept == {}  # (nothing made: nothing to score)
        # its tasks run half again what they declare, 2 s after their release
        for _ in range(EVIDENCE):
            times.record(100.0, 152.0, 150.0)
        refresh.changed()  # (after the event that ended the last of them)
        at, fire = refresh.timers.pop("forecast-change")  # type: ignore[attr-defined]
        assert at == T0 + 2.0  # (knowing them is a change: refreshed at once)
        await fire()
        await refresh.idle()
        for i, job in enumerate(cluster.jobs):
            f = job.payload.forecast
            assert isinstance(f, Forecast)
            assert f.start == pytest.approx(T0 + 152 * i)  # (not the 100 s they declare)
        # (not the simulator's prior: the stated cold default, while its tasks are too
        # few to bound how far off they are, 8 scored, the 3rd on...)
        assert refresh.calibration["start"].prior == cold_margin(times) == LIVE_COLD
        for _ in range(3):  # (... then 11: each took the 152 s the ones before predicted)
            times.record(100.0, 152.0, 150.0)
        refresh.with_arrivals(cluster)
        assert refresh.calibration["start"].prior == cold_margin(times) == 0.0
        assert refresh.calibration["start"].least == LIVE_MIN_SCORES
        refresh.close()

    run_in_loop_time(scenario())


def test_a_pool_whose_quick_tasks_alone_have_ended_says_so_until_their_median_is_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # issue 97: its first forecasts came at the 10th end of a burst, the quick ones, and
    # held 6 % of its starts; a pool now waits until its tasks' median is known, once
    cluster = busy_pool()
    times = TaskTimes()
    refresh, _ = refresh_of(cluster, times=times)
    for _ in range(EVIDENCE):
        times.record(100.0, 80.0, 80.0)
    running = [(90.0, 100.0)] * 14  # (as their pods were seen Running)
    monkeypatch.setattr(refresh, "running_tasks", lambda now: running)
    said = refresh.unknown()
    assert said is not None and said.startswith("of the tasks its pool has run, only the quick")
    refresh.poke()
    assert all(isinstance(j.payload.forecast, Unavailable) for j in cluster.jobs)
    del running[8:]  # (six of them ended past the rest: half are known)
    assert refresh.unknown() is None
    running.extend([(1.0, 100.0)] * 30)  # (a new wave: what was known stays known)
    assert refresh.unknown() is None
    refresh.not_before = -math.inf  # (the duty cap paces refreshes: its own test)
    refresh.poke()
    assert all(isinstance(j.payload.forecast, Forecast) for j in cluster.jobs)
    refresh.close()


def test_a_what_if_on_a_live_pool_draws_from_its_task_times() -> None:
    from idlegate.operator.forecasting.whatif import answer, what_if

    cluster = busy_pool(1)
    times = TaskTimes()
    for _ in range(EVIDENCE):
        times.record(100.0, 150.0, 150.0)
    refresh, _ = refresh_of(cluster, times=times)
    body = {"kind": "DagWorkflow", "metadata": {"name": "asked"}, "spec": {"stages": [stage("a")]}}
    snap, job = what_if(cluster, make_scheduler("fifo"), body, 0, 0, T0)
    snap, calibration = refresh.for_what_if(snap)
    shown, _ = answer(snap, job, calibration=calibration)
    assert isinstance(shown, Forecast) and shown.start == pytest.approx(T0 + 150)


@pytest.mark.asyncio
async def test_the_operator_records_each_tasks_latency_and_stretch_as_it_ends() -> None:
    h = Harness(FakeKube(), FakeClock(T0), 2, make_scheduler("fifo"), forecast_interval=30.0)
    await h.submit("w", {"stages": [stage("a", tasks=2, duration=10.0)]})
    first, second = h.released("w")
    h.clock.advance(3.0)
    pod = h.kube.pods[("default", first)]
    pod["status"]["phase"] = "Running"  # (its kubelet started it 3 s after its release)
    h.pools.handle(PodSeen(copy.deepcopy(pod)))
    await h.settle()
    core = h.bridge.core
    wf = core.workflows[("default", "w")]
    executor = wf.stages[0].tasks[0].executor
    assert executor is not None and wf.running_since(0, executor) == T0 + 3.0
    await h.finish(first, after=12.0)  # (ran 12 s of the 10 declared)
    await h.finish(second)  # (never seen Running: its 15 s all count as its run)
    assert list(core.times.seen) == [(3.0, 1.2), (0.0, 1.5)]


@pytest.mark.asyncio
async def test_the_operator_records_the_dispatch_delay_of_a_freed_room_not_of_a_task_going_on() -> (
    None
):
    """A task whose stage goes on releases its next on its executor as it ends (no delay);
    one that frees its executor while a workflow waits leaves its room to the next round,
    which pairs it with what it released (`TaskTimes.freed`, `dispatched`)."""
    h = Harness(FakeKube(), FakeClock(T0), 1, make_scheduler("fifo"), forecast_interval=30.0)
    await h.submit("w", {"stages": [stage("a", tasks=2, duration=10.0)]})
    await h.submit("v", {"stages": [stage("b", tasks=1, duration=10.0)]})
    (first,) = h.released("w")
    core = h.bridge.core
    await h.finish(first, after=10.0)  # (w's second task goes on on its executor)
    assert not core.times.delays and not core.times.free
    (second,) = h.released("w")
    await h.finish(second, after=10.0)  # (its room freed: v's release takes it)
    assert h.released("v") and list(core.times.delays) == [0.0] and not core.times.free
