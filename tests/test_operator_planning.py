"""The lookahead planner's worker in the operator (operator/features/planning.py): plans run in a
thread while the event loop keeps deciding, are adopted there (a switch schedules at
once and shows in status, Events and metrics), dropped when stale, and a plan that
raises is counted and logged once while the planner keeps its policy. Also: each
workflow's measured task durations (operator/core/tracking.py)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from idlegate.policy import make_scheduler
from idlegate.sim.durations import MeasuredDurations, duration_model
from tests.helpers import Waits
from tests.operator_fakes import Harness, harness, stage
from tests.planning_helpers import CHAIN, Scripted, planner, settled, worker

pytestmark = [pytest.mark.looptime, pytest.mark.asyncio]


def value(h: Harness, name: str, **labels: str) -> float:
    return h.metrics.value(name, **labels)


async def test_a_switch_is_adopted_in_the_loop_and_starts_what_the_old_policy_held_back():
    plan = Scripted("fifo")
    plan.gate.clear()
    h = harness(pool=2, scheduler=planner(Waits, {"fifo": "fifo"}, plan))
    await h.submit("w", CHAIN)
    assert h.released() == []  # "hold" follows until the plan is adopted
    plan.gate.set()
    await settled(h)
    assert h.released() == ["w-a-0"]  # the switch scheduled at once, no event needed
    assert plan.threads and all(t.startswith("idlegate-planner") for t in plan.threads)
    assert value(h, "idlegate_policy_switches_total", to="fifo") == 1
    assert value(h, "idlegate_planning_duration_seconds_count") == 1
    assert value(h, "idlegate_policy_following", policy="fifo") == 1
    assert value(h, "idlegate_policy_following", policy="hold") == 0
    status = h.kube.status("w")
    assert status["policy"] == "fifo" and status["stages"][0]["policy"] == "fifo"
    released = [e["message"] for e in h.kube.events if e["reason"] == "Released"]
    assert "(following fifo)" in released[0]


async def test_a_workflow_released_by_a_newly_followed_policy_gets_a_policy_switched_event():
    h = harness(pool=1, scheduler=planner("fifo", {"srpt": "srpt"}, Scripted("srpt")))
    await h.submit("w", CHAIN)
    assert h.kube.status("w")["policy"] == "fifo"  # released before the plan was adopted
    await settled(h)
    await h.finish("w-a-0", after=10)
    status = h.kube.status("w")
    assert status["policy"] == "srpt" and status["stages"][1]["policy"] == "srpt"
    assert status["stages"][0]["policy"] == "fifo"
    [event] = [e for e in h.kube.events if e["reason"] == "PolicySwitched"]
    assert event["message"].startswith("The planner is now following srpt (was fifo) since ")
    assert "-8.0 % vs fair over the next 120 s" in event["message"]


async def test_the_loop_keeps_deciding_while_a_plan_runs_and_a_stale_plan_is_dropped():
    plan = Scripted("srpt")
    plan.gate.clear()  # the first plan runs until the test says so
    h = harness(pool=2, scheduler=planner("fifo", {"srpt": "srpt"}, plan))
    await h.submit("a", {"stages": [stage("x", 1, duration=50)]})
    running = worker(h).running
    assert running is not None and not running.done()
    await h.submit("b", {"stages": [stage("x", 1)]})  # decided while the plan runs
    assert not running.done()  # (the plan waits for its gate: nothing waited for the plan)
    assert h.released() == ["a-x-0", "b-x-0"]
    assert worker(h).running is running  # one plan at a time
    plan.gate.set()
    await settled(h)
    assert value(h, "idlegate_plans_dropped_total") == 1  # made for {a}, adopted for {a, b}
    assert worker(h).plans == 2  # the set changed: planned again at once, and adopted
    assert worker(h).planner.last_plan is not None
    assert worker(h).planner.last_plan.key == tuple(j.id for j in h.bridge.core.cluster.jobs)
    assert worker(h).planner.following == "srpt"


async def test_a_plan_that_raises_is_counted_and_logged_once_and_the_policy_kept(caplog):
    plan = Scripted("srpt", error=RuntimeError("rollout exploded"))
    scheduler = planner("fifo", {"srpt": "srpt"}, plan)
    h = harness(pool=1, scheduler=scheduler)
    with caplog.at_level(logging.ERROR, "idlegate.operator.core.decider"):
        await h.submit("a", {"stages": [stage("x", 1)]})
        await settled(h)
        await h.submit("b", {"stages": [stage("x", 1)]})  # another plan, the same error
        await settled(h)
        await h.run_to_completion()
    assert value(h, "idlegate_policy_errors_total", policy=scheduler.name) >= 2
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1 and "failed to plan" in tracebacks[0].getMessage()
    assert scheduler.following == "fifo"
    assert h.kube.status("a")["phase"] == h.kube.status("b")["phase"] == "Succeeded"


async def test_a_real_planner_runs_every_workflow_to_the_end_with_measured_durations():
    scheduler = make_scheduler("lookahead?max_decisions=50:srpt")  # inline in the simulator
    h = harness(pool=2, scheduler=scheduler, plan_budget_ms=100)
    assert scheduler.config.planner == "worker"  # the operator plans beside its decisions
    specs = {
        "long": {"stages": [stage("a", 3, duration=30), stage("b", 2, deps=("a",))]},
        "short": {"stages": [stage("a", 1, duration=5)]},
        "wide": {"stages": [stage("a", 4, duration=8), stage("b", 1, duration=3)]},
    }
    for name, spec in specs.items():
        await h.submit(name, spec)
    tracked = {wf.owner.name: wf for wf in h.bridge.core.workflows.values()}
    for _ in range(50):  # plans end in real time, the fake clock jumps: give them time
        await settled(h)
        if not h.released():
            break
        await h.finish(h.released()[0], after=5)
    await h.run_to_completion()
    await settled(h)
    assert {h.kube.status(n)["phase"] for n in specs} == {"Succeeded"}
    assert value(h, "idlegate_planning_duration_seconds_count") >= 1
    assert scheduler.stats.planned >= 1
    durations = tracked["long"].durations
    assert len(durations.measured[0]) == 3 and len(durations.measured[1]) == 2
    assert all(d > 0 for row in durations.measured for d in row)
    model = duration_model(tracked["long"])
    assert isinstance(model, MeasuredDurations) and model is not durations


async def test_measured_durations_are_release_to_success_of_first_attempts():
    h = harness(pool=1)
    await h.submit("w", {"stages": [stage("a", 3, duration=10, backoffLimit=1)]})
    wf = next(iter(h.bridge.core.workflows.values()))
    assert wf.durations.estimates == (10.0,) and wf.durations.measured == [[]]
    await h.finish("w-a-0", after=12)  # the next task goes on the same executor now
    await h.finish("w-a-1", phase="Failed", after=4)  # its retry is not measured
    await h.finish("w-a-1-r1", after=7)
    await h.finish("w-a-2", after=9)
    assert wf.durations.measured == [[12.0, 9.0]]


async def test_only_a_switch_mode_lookahead_planner_gets_a_worker():
    for policy in ("fifo", "lookahead?mode=decision:srpt"):
        assert harness(pool=1, scheduler=make_scheduler(policy)).bridge.planning is None
    h = harness(pool=1, scheduler=make_scheduler("lookahead:srpt"))
    assert h.bridge.planning is not None
    h.bridge.planning.close()
    await h.submit("w", {"stages": [stage("a", 1)]})  # a closed worker plans nothing
    assert h.bridge.planning.running is None and h.released() == ["w-a-0"]


async def test_a_closed_worker_drops_the_plan_that_was_running():
    plan = Scripted("srpt")
    plan.gate.clear()
    h = harness(pool=1, scheduler=planner("fifo", {"srpt": "srpt"}, plan))
    await h.submit("w", {"stages": [stage("a", 1)]})
    assert worker(h).running is not None
    worker(h).close()
    plan.gate.set()
    await asyncio.sleep(0.05)
    assert worker(h).running is None and worker(h).plans == 0
    assert worker(h).planner.following == "fifo"
