"""Utilisation counts task execution only; the moving delay is reported as overhead."""

from __future__ import annotations

import pytest

from idlegate.evaluation.comparison import WorkloadOptions, run_one
from idlegate.policy import make_scheduler
from idlegate.sim.engine import Fidelity, Workload, simulate
from idlegate.sim.metrics import run_metrics
from idlegate.sim.workloads import build_workload
from tests.helpers import Scripted, chain, fifo_rule, workload


def _two_jobs(moving_delay: float) -> Workload:
    w = workload((0.0, "A", chain(3.0, tasks=2)), (0.0, "B", chain(3.0)), executors=2)
    return Workload(w.name, w.jobs, 2, Fidelity(moving_delay=moving_delay, wave_durations=False))


def test_moving_delay_is_overhead_not_task_time():
    # A's two tasks start on two executors new to A (2 s move each, then 3 s), B's task on
    # an executor new to B at t=5: three moves of 2 s, 15 busy executor-seconds, ends at 10
    result = simulate(_two_jobs(2.0), Scripted(fifo_rule))
    assert result.overhead_seconds == 6.0 and result.busy_seconds == 15.0
    m = run_metrics(result)
    assert m.makespan == 10.0
    assert m.utilisation == pytest.approx((15.0 - 6.0) / (2 * 10.0))
    assert m.overhead == pytest.approx(6.0 / (2 * 10.0))


def test_no_moving_delay_no_overhead_and_same_schedule_otherwise():
    result = simulate(_two_jobs(0.0), Scripted(fifo_rule))
    assert result.overhead_seconds == 0.0
    assert run_metrics(result).utilisation == pytest.approx(9.0 / (2 * 6.0))


def test_a_run_cut_at_max_time_counts_only_the_delay_before_it():
    result = simulate(_two_jobs(2.0), Scripted(fifo_rule), max_time=1.0)
    # both executors are 1 s into their 2 s move
    assert result.overhead_seconds == 2.0 == result.busy_seconds


@pytest.mark.parametrize("scheduler", ["fair", "fifo"])
def test_utilisation_and_overhead_add_up_to_busy_time(scheduler):
    wl = build_workload("synthetic", 3, num_jobs=30, num_executors=3, moving_delay=1.5)
    result = simulate(wl, make_scheduler(scheduler), seed=3)
    m = run_metrics(result)
    assert result.overhead_seconds > 0
    busy = result.busy_seconds / (result.num_executors * result.end_time)
    assert m.utilisation + m.overhead == pytest.approx(busy)
    outcome = run_one(
        "synthetic",
        scheduler,
        3,
        WorkloadOptions(num_jobs=30, num_executors=3, extra={"moving_delay": 1.5}),
    )
    assert outcome.metrics == m
