"""Cluster.fork and the planner's forward model (sim.rollout)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idlegate.policy import make_scheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.durations import MeasuredDurations, Uniforms, duration_model
from idlegate.sim.engine import JobArrival, simulate
from idlegate.sim.protocol import WAIT, Decision, Job, Stage
from idlegate.sim.rollout import Future, remaining_flow_estimate, rollout
from idlegate.sim.workloads import build_workload
from tests.helpers import chain, dag


def snapshot(c: Cluster) -> Any:
    """Everything a fork could change, as plain values."""
    return (
        c.now,
        c.free_executors,
        c.decisions,
        c.jobs_time_integral,
        len(c.arrival_log),
        [(e, s.key, t) for e, s, t in c.running_tasks()],
        sorted((-1 if j is None else j.id, tuple(p)) for j, p in c._free.items()),
        [
            (
                j.id,
                j.held,
                j.cap,
                j.unlaunched,
                j.remaining_work,
                [s.key for s in j.runnable],
                [(s.launched, s.finished, s.executors, s.idle_until, s.delayed) for s in j.stages],
            )
            for j in c.jobs
        ],
    )


def decide_round(c: Cluster, scheduler: Any, now: float) -> None:
    """Ask `scheduler` until it waits or nothing more can start (one decision round)."""
    c.needs_schedule = False
    while (step := c.decide_once(scheduler, now)) is not None and step[0] is not WAIT:
        pass


def busy_cluster() -> Cluster:
    c = Cluster(3)
    c.add_job(dag(("a", 4, 2.0, []), ("b", 2, 3.0, ["a"])), 0.0, "x")
    c.add_job(chain(5.0, 1.0), 0.0, "y")
    decide_round(c, make_scheduler("fair"), 0.0)
    return c


def test_a_fork_copies_the_state_and_shares_only_immutable_parts():
    c = busy_cluster()
    twin = c.fork()
    assert snapshot(twin) == snapshot(c)
    assert twin.jobs[0] is not c.jobs[0] and twin.jobs[0].dag is c.jobs[0].dag
    assert twin.jobs[0].stages[0].job is twin.jobs[0]
    assert twin.jobs[0].runnable[0] is twin.jobs[0].stages[0]
    # a field added to Cluster later must be added to fork() too
    assert set(vars(twin)) == set(vars(c))
    # and a slot added to Job or Stage to its copy (sim.fork writes each one out)
    for job, copy in zip(c.jobs, twin.jobs, strict=True):
        for name in Job.__slots__:
            if name not in ("holding", "runnable", "stages"):
                assert getattr(copy, name) is getattr(job, name), name
        assert copy.holding == job.holding and copy.holding is not job.holding
        for stage, copied in zip(job.stages, copy.stages, strict=True):
            for name in Stage.__slots__:
                if name != "job":
                    assert getattr(copied, name) is getattr(stage, name), name


@settings(max_examples=25, deadline=None)
@given(
    steps=st.integers(0, 40),
    seed=st.integers(0, 10_000),
    policy=st.sampled_from(["fair", "srpt", "fifo"]),
)
def test_a_fork_never_changes_the_original(steps, seed, policy):
    """Run a fork to its end with arrivals and idle slots; the original stays as it was."""
    w = build_workload("tpch-like", seed, num_executors=4, num_stream=6, load=0.9)
    c = Cluster(4)
    for a in w.jobs[:3]:
        c.add_job(a.dag, a.time, a.name)
    decide_round(c, make_scheduler(policy), w.jobs[2].time)
    for _ in range(steps):  # finish some tasks by hand, in executor order
        running = c.running_tasks()
        if not running:
            break
        e, stage, started = running[0]
        c.task_finished(e, max(c.now, started + stage.duration))
        if c.needs_schedule:
            decide_round(c, make_scheduler(policy), c.now)
    before = snapshot(c)
    future = Future(
        tuple(JobArrival(c.now + 1.0 + i, f"f{i}", a.dag) for i, a in enumerate(w.jobs[3:])), 1
    )
    cost = rollout(c, make_scheduler(policy), future, 1e9, terminal_weight=0).cost
    assert cost >= 0
    assert snapshot(c) == before


@pytest.mark.parametrize("policy", ["fair", "srpt", "sjf-cp", "analytic:srpt"])
def test_a_rollout_with_the_true_future_reproduces_the_simulator(policy):
    """From an empty cluster, the true arrivals and no horizon: the simulator's very cost."""
    w = build_workload("tpch-like", 3, num_executors=6, num_stream=12, load=0.85)
    truth = simulate(w, make_scheduler(policy), 0)
    assert truth.unfinished == 0
    cost = rollout(
        Cluster(6), make_scheduler(policy), Future(w.jobs, 0), 1e9, terminal_weight=0
    ).cost
    assert cost == pytest.approx(truth.jobs_time_integral, rel=1e-12)


def test_the_motivating_example_costs_21_then_15_per_job():
    """DESIGN.md: A (20 s) at 0, B (4 s) at 2, one executor: 42 without a slot, 30 with 2 s."""
    c = Cluster(1)
    c.add_job(chain(20.0), 0.0, "A")
    future = Future((JobArrival(2.0, "B", chain(4.0)),), 0)
    srpt = make_scheduler("srpt")
    assert rollout(c, srpt, future, 100.0).cost == pytest.approx(42.0)
    slot = Decision(c.jobs[0].stages[0], 1, 2.0)
    assert rollout(c, srpt, future, 100.0, first=slot).cost == pytest.approx(30.0)
    assert c.jobs[0].stages[0].idle_until is None  # the slot stayed on the fork


def test_wait_first_leaves_the_event_alone_and_the_horizon_cuts_the_integral():
    c = Cluster(1)
    c.add_job(chain(10.0), 0.0, "A")
    # waiting with nothing running: the job just sits there for the whole horizon
    assert rollout(
        c, make_scheduler("fifo"), Future((), 0), 5.0, first=WAIT, terminal_weight=0
    ).cost == pytest.approx(5.0)
    # 5 s into a 10 s task: 5 s of integral, then R = max(10/1, 10) = 10 (no progress counted)
    assert rollout(c, make_scheduler("fifo"), Future((), 0), 5.0).cost == pytest.approx(5.0 + 10.0)


def test_remaining_flow_estimate_is_srpt_on_perfectly_packed_executors():
    c = Cluster(2)
    c.add_job(dag(("a", 4, 1.0, [])), 0.0, "four")  # work 4, cp 1
    c.add_job(dag(("a", 1, 6.0, [])), 0.0, "six")  # work 6, cp 6
    c.add_job(dag(("a", 2, 1.0, [])), 0.0, "two")  # work 2, cp 1
    # SRPT order two (2/2 = 1), four ((2+4)/2 = 3), six (max(12/2, 6) = 6)
    assert remaining_flow_estimate(c) == pytest.approx(1.0 + 3.0 + 6.0)


class DriverObject:
    """A payload that is no duration model, like the operator's Workflow."""

    def __init__(self, durations: MeasuredDurations | None = None) -> None:
        if durations is not None:
            self.durations = durations


def test_a_rollout_of_jobs_with_driver_payloads_takes_their_estimates():
    """The operator's bug: its payload has no `sample` (AttributeError in the engine)."""
    c = Cluster(1)
    c.add_job(dag(("a", 3, 10.0, [])), 0.0, "w", DriverObject())
    cost = rollout(c, make_scheduler("fifo"), Future((), 0), 1e9, terminal_weight=0).cost
    assert cost == pytest.approx(30.0)  # three tasks of their 10 s estimate


def test_a_rollout_draws_from_the_measured_durations_once_a_stage_has_some():
    measured = MeasuredDurations((10.0, 4.0))
    measured.record(0, 2.0)
    c = Cluster(1)
    c.add_job(dag(("a", 3, 10.0, []), ("b", 1, 4.0, ["a"])), 0.0, "w", DriverObject(measured))
    cost = rollout(c, make_scheduler("fifo"), Future((), 0), 1e9, terminal_weight=0).cost
    assert cost == pytest.approx(3 * 2.0 + 4.0)  # a measured (2 s), b not yet (its 4 s)
    assert isinstance(c.jobs[0].payload, DriverObject)  # only the fork's payloads change


def test_measured_durations_sample_uniformly_and_freeze_for_another_thread():
    m = MeasuredDurations((5.0,))
    for d in (1.0, 2.0, 3.0):
        m.record(0, d)
    frozen = duration_model(DriverObject(m))
    m.record(0, 100.0)
    assert isinstance(frozen, MeasuredDurations) and frozen.measured == [(1.0, 2.0, 3.0)]
    u = Uniforms(np.random.default_rng(0))
    draws = {frozen.sample(0, 1, True, False, u) for _ in range(200)}
    assert draws == {1.0, 2.0, 3.0}
    # a simulator's own model passes as it is (k8s-batch's pods: no data needed, where
    # TPC-H's waves made this test fail on a machine without the traces)
    model = build_workload("k8s-batch", 1, num_jobs=1).jobs[0].durations
    assert model is not None and duration_model(model) is model and duration_model(None) is None
    assert duration_model(object()) is None


def test_a_decision_budget_cuts_the_rollout_at_the_event_that_used_it_up():
    c = Cluster(1)
    for i in range(5):
        c.add_job(chain(1.0), 0.0, f"j{i}")
    full = rollout(c, make_scheduler("fifo"), Future((), 0), 100.0, terminal_weight=0)
    assert full.end == 100.0 and full.cost == pytest.approx(1 + 2 + 3 + 4 + 5)
    cut = rollout(c, make_scheduler("fifo"), Future((), 0), 100.0, max_decisions=2)
    # decisions at t=0 and t=1: cut at 1 s, 5 job-seconds so far, R = 1+2+3+4 after
    assert cut.end == 1.0 and cut.cost == pytest.approx(5.0 + 10.0)
