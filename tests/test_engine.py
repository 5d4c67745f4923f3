"""The stepping engine: peek, step, run, and a driver deciding one action at a time."""

from __future__ import annotations

from math import inf

import numpy as np
import pytest

from idlegate.errors import IdlegateError, IllegalDecisionError
from idlegate.policy import make_scheduler
from idlegate.sim.engine import Engine, simulate
from idlegate.sim.protocol import WAIT, Action, ClusterView, Decision, Stage
from idlegate.sim.workloads import build_workload
from tests.helpers import Scripted, chain, tpch_traces, workload


def drive(engine: Engine, scheduler, until: float = inf) -> int:
    """Answer every decision point of `engine` with `scheduler`'s choices; the answers."""
    answers = 0
    while True:
        engine.run(until)
        if not engine.deciding:
            return answers
        engine.decide(scheduler.decide(engine.cluster))
        answers += 1


def idle_or_wait(view: ClusterView, stages: list[Stage]) -> Action:
    """Idles every third job's fresh stages once, waits while a job holds two, else launches."""
    s = stages[-1]
    if s.job.id % 3 == 0 and not s.delayed and s.launched == 0:
        return Decision(s, view.num_executors, 1.5)
    if s.job.held >= 2 and view.free_executors < view.num_executors:
        return WAIT  # some task is running, so an event will come
    return Decision(s, s.job.held + 2)


@pytest.mark.parametrize(
    ("name", "spec", "max_time"),
    [("tpch", "fair", inf), ("tpch-like", "analytic:srpt", inf), ("tpch", None, 200.0)],
)
def test_a_driver_deciding_step_by_step_gets_exactly_the_simulated_run(name, spec, max_time):
    """Moving delays and sampled waves (tpch), idle slots, WAIT, a cut at max_time."""
    if name == "tpch":
        tpch_traces()
    w = build_workload(name, 2, num_executors=6, num_stream=8, load=0.9)
    make = (lambda: Scripted(idle_or_wait)) if spec is None else (lambda: make_scheduler(spec))
    expected = simulate(w, make(), 7, max_time=max_time, trace=True)
    scheduler = make()
    scheduler.reset(np.random.default_rng(np.random.default_rng(7).integers(2**63)))
    engine = Engine.for_workload(w, None, 7, max_time=max_time, trace=True)
    answers = drive(engine, scheduler, max_time)
    got = engine.result(w.name, scheduler.name, 7)
    assert answers >= got.decisions > 0
    assert got == expected


def test_peek_step_run_and_the_decision_point():
    engine = Engine.for_workload(workload((0, "A", chain(4.0)), (2, "B", chain(1.0))), None, 0)
    assert engine.peek() == 0.0 and not engine.deciding
    engine.step()  # A arrives; one executor is free: a decision point
    assert engine.deciding and engine.now == 0.0
    with pytest.raises(IdlegateError, match="waits for a decision at t=0"):
        engine.step()
    stage = engine.cluster.jobs[0].stages[0]
    with pytest.raises(IllegalDecisionError, match="cap 0"):
        engine.decide(Decision(stage, 0))
    assert engine.deciding and engine.cluster.free_executors == 1  # nothing changed
    engine.decide(Decision(stage, 1))  # no executor left: the point closes
    assert not engine.deciding and engine.peek() == 2.0
    with pytest.raises(IdlegateError, match="no decision is pending"):
        engine.decide(WAIT)
    assert engine.run(1.0) == 1.0 and engine.cluster.now == 1.0  # cut: the clock moves on
    # B arrives at 2 with no executor free (no decision point); A ends at 4: one for B
    assert engine.run() == 4.0 and engine.deciding
    engine.decide(Decision(engine.cluster.jobs[0].stages[0], 1))
    assert engine.run() == 5.0 and engine.peek() == inf
    assert [r.jct for r in engine.cluster.done] == [4.0, 3.0]
    with pytest.raises(IdlegateError, match="no event is left"):
        engine.step()


@pytest.mark.parametrize("spec", ["default", "analytic:srpt", "fair"])
def test_a_run_told_its_progress_is_the_same_run(spec):
    # `simulate`'s progress stops the run at each arrival time: the same trace, and every
    # arrival counted once, in order
    w = build_workload("tpch-like", 2, num_executors=6, num_stream=12, load=0.9)
    expected = simulate(w, make_scheduler(spec), 7, trace=True)
    told: list[tuple[int, int]] = []
    got = simulate(w, make_scheduler(spec), 7, trace=True, progress=lambda *a: told.append(a))
    assert got == expected
    total = len(w.jobs)
    assert told[-1] == (total, total) and [t for t, _ in told] == sorted({t for t, _ in told})
