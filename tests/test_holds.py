"""Holds for expected arrivals (issue 23, item 5): a decision-mode planner whose choice
holds a stage back says for which arrivals (policy.plans.Hold), the operator's Events
and status say so, and the planner's future model learns from what the operator sees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from idlegate.policy import make_scheduler
from idlegate.policy.arrival_model import FuturesConfig
from idlegate.policy.futures import ConditionalSource, PoissonSource
from idlegate.policy.lookahead import LookaheadScheduler
from idlegate.policy.plans import Hold, hold_of, wait_window
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival, simulate
from idlegate.sim.protocol import WAIT, Decision
from idlegate.sim.rollout import Future
from idlegate.sim.spec import parse_workflow
from idlegate.sim.workloads import build_workload
from tests.helpers import chain
from tests.operator_fakes import Harness, harness, stage

ORACLE = "lookahead?mode=decision&futures=oracle&idle_levels=0&idle_at_arrivals=3&horizon=300"


def one_stage(name: str, seconds: float) -> Dag:
    return Dag.from_spec(
        parse_workflow({"stages": [{"name": name, "tasks": 1, "taskDurationSeconds": seconds}]})
    )


def held_state() -> tuple[Cluster, Decision]:
    """Two executors: one runs a 50 s task since 0; a 100 s workflow (stage `extract`)
    arrives at 10 and BASE would start it on the other."""
    c = Cluster(2)
    busy = c.add_job(chain(50.0), 0.0, "busy")
    c.apply(Decision(busy.stages[0], 1), 0.0)
    etl = c.add_job(one_stage("extract", 100.0), 10.0, "etl")
    return c, Decision(etl.stages[0], 2)


def arrivals(now: float, *times_and_lengths: tuple[float, float]) -> tuple[JobArrival, ...]:
    return tuple(
        JobArrival(now + t, f"s-{i}", one_stage("query", length))
        for i, (t, length) in enumerate(times_and_lengths)
    )


# -- the reason: known answers -----------------------------------------------------------


def test_a_hold_counts_the_smaller_arrivals_within_it_over_the_futures():
    c, launch = held_state()
    futures = [
        Future(arrivals(10.0, (2, 5), (4, 5), (6, 5)), 0),  # 3 within 8 s
        Future(arrivals(10.0, (3, 5), (9, 5)), 1),  # 1 (the other comes after the hold)
        Future(arrivals(10.0, (1, 200)), 2),  # none: longer than the held workflow
        Future(arrivals(10.0, (8, 5), (7, 5)), 3),  # 2 (8 s is within: the slot ends then)
    ]
    idle = Decision(launch.stage, 2, 8.0)
    hold = hold_of(c, launch, idle, futures)
    assert hold == Hold(launch.stage, expected=1.5, window=8.0, p=0.75)
    # a wait holds the stage until the first running task is expected to end: 50 - 10 s
    assert wait_window(c) == 40.0
    assert hold_of(c, launch, WAIT, futures) == Hold(launch.stage, 2.0, 40.0, 0.75)
    # launching, or a future without a smaller arrival within the hold: no reason
    assert hold_of(c, launch, launch, futures) is None
    assert hold_of(c, launch, idle, [futures[2]]) is None
    # a WAIT of BASE's own (nothing it would start) holds nothing back
    assert hold_of(c, WAIT, WAIT, futures) is None


def test_an_overdue_task_ends_the_wait_after_a_fraction_of_its_estimate():
    c, _ = held_state()
    c.advance(60.0)
    assert wait_window(c) == pytest.approx(0.05 * 50.0)


def test_the_planner_told_the_future_holds_and_says_for_what():
    c, launch = held_state()
    p = make_scheduler(f"{ORACLE}:sjf")
    p.reset(np.random.default_rng(0))
    p.foresee(arrivals(10.0, (5, 5), (5, 5), (5, 5), (90, 5)))
    action = p.decide(c)
    # waiting to the arrivals and an idle slot ending at them tie; WAIT is offered first
    assert action is WAIT
    assert p.hold == Hold(launch.stage, expected=3.0, window=40.0, p=1.0)
    assert p.stats.holds == 1
    c2, launch2 = held_state()
    q = make_scheduler(f"{ORACLE}&wait=false:sjf")
    q.reset(np.random.default_rng(0))
    q.foresee(arrivals(10.0, (5, 5), (5, 5), (5, 5), (90, 5)))
    assert q.decide(c2) == Decision(launch2.stage, 2, 5.0)
    assert q.hold == Hold(launch2.stage, expected=3.0, window=5.0, p=1.0)


class ToldPoisson(PoissonSource):
    """Poisson futures that happen to hold given arrivals: the planner holds as the
    oracle does, but Poisson arrivals carry no information, so no reason is given."""

    def __init__(self, told: tuple[JobArrival, ...]) -> None:
        self.told = told

    def futures(self, view: Any, recent: Any, horizon: Any, samples: Any, rng: Any) -> list:
        return [Future(tuple(a for a in self.told if a.time > view.now), 0)]


def test_a_poisson_planner_holds_without_a_reason():
    c, _ = held_state()
    p = make_scheduler(f"{ORACLE.replace('oracle', 'poisson')}:sjf")
    p.reset(np.random.default_rng(0))
    p.futures = ToldPoisson(arrivals(10.0, (5, 5), (5, 5), (5, 5)))
    assert p.decide(c) is WAIT and p.hold is None and p.stats.holds == 0


def test_holds_in_a_run_come_with_model_futures_only():
    w = build_workload("follow", 3, num_executors=2, load=0.7, num_jobs=40)
    told = make_scheduler("lookahead?mode=decision&futures=oracle&idle_at_arrivals=2:sjf")
    simulate(w, told, 0)
    assert 0 < told.stats.holds <= told.stats.waits + told.stats.idles
    sampled = make_scheduler("lookahead?mode=decision:sjf")
    simulate(w, sampled, 0)
    assert sampled.stats.waits + sampled.stats.idles > 0 and sampled.stats.holds == 0


# -- the operator ---------------------------------------------------------------------


def short_runs(h: Harness, at: float, n: int = 3) -> tuple[JobArrival, ...]:
    now = h.clock.now()
    return tuple(JobArrival(now + at, f"q-{i}", one_stage("query", 5.0)) for i in range(n))


async def held_harness(spec: str, pool: int = 2) -> Harness:
    """A pool whose first executor runs a 50 s task; the planner is told that 3 short
    workflows arrive 5 s after a 100 s one (`etl`, stage `extract`) is submitted."""
    h = harness(pool=pool, scheduler=make_scheduler(spec))
    h.bridge.core.decider.foresee(short_runs(h, 5.0))
    await h.submit("busy", {"stages": [stage("run", duration=50.0)]})
    assert h.released() == ["busy-run-0"]
    await h.submit("etl", {"stages": [stage("extract", duration=100.0)]})
    return h


@pytest.mark.asyncio
async def test_the_operator_says_an_idle_slot_holds_a_stage_for_expected_arrivals():
    h = await held_harness(f"{ORACLE}&wait=false:sjf")
    status = h.kube.status("etl")
    [slot] = status["idleSlots"]
    assert slot["delaySeconds"] == pytest.approx(5.0)
    assert slot["reason"].startswith(
        "holding extract: 3 short workflows expected within 5 s (p = 1); policy lookahead?"
    )
    assert slot["reason"].endswith("held the stage back for 5 s, parallelism cap 2")
    [event] = [e for e in h.kube.events if e["reason"] == "IdleSlot"]
    assert "holding extract: 3 short workflows expected within 5 s (p = 1)" in event["message"]
    running = {c["type"]: c for c in status["conditions"]}["Running"]
    assert running["reason"] == "IdleSlot" and "holding extract: 3 short" in running["message"]
    assert h.metrics.value("idlegate_holds_total") == 1
    assert "Holding" not in h.kube.reasons("etl")  # an idle slot says it in IdleSlot


@pytest.mark.asyncio
async def test_a_wait_for_expected_arrivals_is_one_holding_event_per_hold():
    h = await held_harness(f"{ORACLE}:sjf")
    assert h.released() == ["busy-run-0"]  # an executor stays free: the planner waits
    [event] = [e for e in h.kube.events if e["reason"] == "Holding"]
    assert event["type"] == "Normal"
    assert event["message"].startswith(
        "Holding extract: 3 short workflows expected within 50 s (p = 1): policy lookahead?"
    )
    assert event["message"].endswith(
        "chose to wait with executors free rather than start the stage now."
    )
    assert h.metrics.value("idlegate_holds_total") == 1
    # another round holding the same stage (a longer workflow arrives) says nothing new
    h.clock.advance(1.0)
    await h.submit("other", {"stages": [stage("run", duration=200.0)]})
    assert h.released() == ["busy-run-0"]
    assert h.metrics.value("idlegate_decisions_total", kind="wait") == 2
    holding = [e for e in h.kube.events if e["reason"] == "Holding"]
    assert len(holding) == 1 and holding[0].get("count", 1) == 1
    assert h.metrics.value("idlegate_holds_total") == 1
    # the foreseen workflows arrive: they go first, then the held one
    h.clock.advance(4.0)
    for i in range(3):
        await h.submit(f"q-{i}", {"stages": [stage("query", duration=5.0)]})
    await h.run_to_completion()
    assert h.kube.status("etl")["phase"] == "Succeeded"
    assert [e for e in h.kube.events if e["reason"] == "Holding"] == holding


@pytest.mark.asyncio
async def test_a_poisson_planners_idle_slot_keeps_todays_reason():
    h = harness(
        pool=2, scheduler=make_scheduler(f"{ORACLE}&wait=false:sjf".replace("oracle", "poisson"))
    )
    planner = h.bridge.core.decider.policy
    assert isinstance(planner, LookaheadScheduler)
    await h.submit("busy", {"stages": [stage("run", duration=50.0)]})
    planner.futures = ToldPoisson(short_runs(h, 5.0))
    await h.submit("etl", {"stages": [stage("extract", duration=100.0)]})
    [slot] = h.kube.status("etl")["idleSlots"]
    assert slot["reason"].startswith("policy lookahead?")
    assert slot["reason"].endswith("held the stage back for 5 s, parallelism cap 2")
    assert "holding" not in slot["reason"]
    assert h.metrics.value("idlegate_holds_total") == 0


# -- the future model learns from what the operator sees -----------------------------------


def source_of(h: Harness) -> ConditionalSource:
    planner = h.bridge.core.decider.policy
    assert isinstance(planner, LookaheadScheduler)
    assert isinstance(planner.futures, ConditionalSource)
    return planner.futures


async def submit_stream(h: Harness, n: int) -> list[float]:
    """`n` one-stage workflows, a long one then two short ones, 4 s apart."""
    times = []
    for i in range(n):
        seconds = 60.0 if i % 3 == 0 else 5.0
        await h.submit(f"job-{i}", {"stages": [stage("run", duration=seconds)]})
        times.append(h.clock.now())
        h.clock.advance(4.0)
    return times


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["conditional", "auto", "expected"])
async def test_a_decision_planner_fits_its_model_on_the_workflows_the_operator_saw(kind):
    h = harness(pool=2, scheduler=make_scheduler(f"lookahead?mode=decision&futures={kind}:sjf"))
    times = await submit_stream(h, 24)
    await h.run_to_completion()
    source = source_of(h)
    assert [a.time for a in source.arrivals] == times  # the operator's clock, in order
    assert [a.stem for a in source.arrivals] == ["default/job"] * 24
    assert source.selector.fitted_at is not None and source.selector.fitted_at >= times[-1]
    assert source.used_model + source.used_poisson > 0


@pytest.mark.asyncio
async def test_a_switch_planner_in_the_worker_sees_arrivals_while_no_executor_is_free():
    h = harness(pool=1, scheduler=make_scheduler("lookahead?futures=conditional:sjf"))
    assert h.bridge.planning is not None
    times = await submit_stream(h, 22)
    await h.bridge.planning.idle()
    assert h.released() == ["job-0-run-0"]  # one decision only: the pool is full since
    source = source_of(h)
    assert [a.time for a in source.arrivals] == times
    assert source.selector.fitted_at is not None  # fitted for the worker's plans


def write_history(path: Path, sessions: int, start: float = 1_717_225_200.0) -> list[float]:
    """A history of `sessions` long workflows (``etl-N``, one every 40–80 s), each followed
    3–10 s later by two short ones (``query-N``, 2 s apart); its submit times."""
    rng = np.random.default_rng(5)
    flows, t = [], start
    for i in range(sessions):
        lag = t + rng.uniform(3.0, 10.0)
        for name, at, seconds in ((f"etl-{i}", t, 60.0), (f"query-{2 * i}", lag, 5.0)):
            flows.append({"name": name, "submitTime": at, "stages": [stage("run", 1, seconds)]})
        flows.append(
            {
                "name": f"query-{2 * i + 1}",
                "submitTime": lag + 2.0,
                "stages": [stage("run", 1, 5.0)],
            }
        )
        t += rng.uniform(40.0, 80.0)
    path.write_text(yaml.safe_dump(flows))
    return [f["submitTime"] for f in flows]


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["conditional", "auto", "expected"])
async def test_a_history_makes_the_model_ready_from_the_operators_first_arrival(tmp_path, kind):
    times = write_history(tmp_path / "history.yaml", 30)
    path = tmp_path / "history.yaml"
    spec = f"lookahead?mode=decision&futures={kind}&futures_history={path}:sjf"
    h = harness(pool=2, scheduler=make_scheduler(spec))
    await h.submit("busy", {"stages": [stage("run", duration=50.0)]})
    source = source_of(h)
    first = h.clock.now()
    # the history is the past just before the first arrival (not before the epoch)
    prior = source.arrivals[:-1]
    gap = (times[-1] - times[0]) / (len(times) - 1)
    assert len(prior) == 90 and prior[-1].time == pytest.approx(first - gap)
    assert prior[-1].time - prior[0].time == pytest.approx(times[-1] - times[0])
    assert source.used_model == 1 and source.used_poisson == 0  # the model from the start
    span = source.selector.fitted_at - source.selector.model.seen[0].time
    assert span < times[-1] - times[0] + 2 * gap  # the history's pace, not 54 years'


def test_arrivals_seen_out_of_order_are_kept_in_time_order():
    # an operator restarting re-adopts the workflows in the system in any order
    source = ConditionalSource(FuturesConfig(), auto=False)
    c = Cluster(2)
    late = c.add_job(chain(5.0), 30.0, "late")
    early = c.add_job(chain(5.0), 30.0, "early", arrival=10.0)
    source.observe(late)
    source.observe(early)
    assert [a.time for a in source.arrivals] == [10.0, 30.0]
