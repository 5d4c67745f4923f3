"""The starvation guard (policy.guard)."""

from __future__ import annotations

import pytest

from idlegate.errors import IdlegateError
from idlegate.policy import DEFAULT_POLICY_PATH, make_scheduler
from idlegate.policy.guard import StarvationGuard
from idlegate.sim.engine import JobArrival, Workload, simulate
from idlegate.sim.protocol import WAIT, Decision
from tests.helpers import Scripted, chain


def never_big(view, stages):
    """Runs every job but 'big' (a policy that would starve it for ever)."""
    for s in stages:
        if s.job.name != "big":
            return Decision(s, view.num_executors)
    return WAIT


def stream_with_a_big_job() -> Workload:
    # 'big' (10 s alone) arrives first; small 1 s jobs keep one executor busy back to back
    jobs = [JobArrival(0.0, "big", chain(10.0))]
    jobs += [JobArrival(float(t), f"s{t}", chain(1.0)) for t in range(0, 400)]
    return Workload("starve", tuple(jobs), 1)


def test_the_guard_launches_a_job_held_back_beyond_its_bound():
    guard = StarvationGuard(Scripted(never_big), factor=3.0, minimum=50.0)
    result = simulate(stream_with_a_big_job(), guard, 0)
    big = next(r for r in result.records if r.name == "big")
    # held back from t=0; bound max(50, 3 × 10) = 50 s; launched at the first decision after
    assert 50.0 < big.first_start <= 52.0
    assert guard.fired == 1


def test_without_the_guard_the_job_never_runs():
    result = simulate(stream_with_a_big_job(), Scripted(never_big), 0)
    assert result.unfinished == 1
    assert "big" not in {r.name for r in result.records}


def test_a_job_at_its_share_is_not_held_back():
    """Two jobs on two executors, each holding one (fair's share): the guard never fires."""
    w = Workload(
        "pair", (JobArrival(0.0, "a", chain(100.0)), JobArrival(0.0, "b", chain(100.0))), 2
    )
    guard = StarvationGuard(make_scheduler("fair"), factor=0.01, minimum=0.01)
    simulate(w, guard, 0)
    assert guard.fired == 0


def test_learned_specs_are_guarded_unless_asked_not_to():
    guarded = make_scheduler(f"learned:{DEFAULT_POLICY_PATH}")
    assert isinstance(guarded, StarvationGuard) and guarded.name == "default"
    assert guarded.greedy is True  # the wrapped policy's attributes stay reachable
    plain = make_scheduler(f"learned:{DEFAULT_POLICY_PATH}", starvation_factor=None)
    assert not isinstance(plain, StarvationGuard)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "x", True])
def test_bad_bounds_are_sentences(bad):
    with pytest.raises(IdlegateError, match="starvation factor must be a number"):
        StarvationGuard(make_scheduler("fair"), factor=bad)


@pytest.mark.parametrize(
    ("workload", "options"),
    [("tpch-like", {"num_executors": 50, "load": 0.85, "num_stream": 100}), ("bursty", {})],
)
def test_the_shipped_policys_guard_stays_quiet_on_the_evaluation_workloads(workload, options):
    from idlegate.sim.workloads import build_workload

    guarded = make_scheduler(f"learned:{DEFAULT_POLICY_PATH}")
    result = simulate(build_workload(workload, 1000, **options), guarded, 1000)
    assert result.unfinished == 0 and guarded.fired == 0
