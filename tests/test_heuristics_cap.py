"""The keyed rules' `cap` (`srpt?cap=0.9`): a reserve of executors kept for arrivals, on
hand-built clusters with known answers; `cap=1` is the plain rule, decision for decision."""

from __future__ import annotations

import numpy as np
import pytest

from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.policy.spec import SchedulerSpec
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import Fidelity, JobArrival, Workload, simulate
from idlegate.sim.protocol import WAIT, Decision
from idlegate.sim.resources import ResourceVector
from tests.helpers import cpu_stage, dag, spec_dag
from tests.test_heuristics import Checked, _mixed_workload, jcts, launches, one, run

KEYED = ("srpt", "sjf-cp", "sjf")

# A wide job alone (40 tasks of 10 s) and a small one arriving a second later, on 10 executors
WIDE_THEN_SMALL = [(0, "A", one(40, 10)), (1, "B", one(2, 1))]


@pytest.mark.parametrize("name", KEYED)
def test_plain_rule_makes_the_arrival_wait_for_the_wide_stage(name):
    """Without a cap the wide job takes all 10 executors, and a freed executor stays on its
    stage while it has tasks left: B starts when A's last wave does, at 40 s."""
    r = run(make_scheduler(name), WIDE_THEN_SMALL, k=10)
    assert launches(r) == [(0, 0, 0, (10, 10)), (40, 1, 0, (2, 10))]
    assert jcts(r) == {"A": 40, "B": 40}


@pytest.mark.parametrize("name", KEYED)
def test_a_cap_keeps_executors_for_the_arrival(name):
    """cap=0.8 of 10 executors: A holds at most 8, B finds the 2 kept back at once."""
    r = run(make_scheduler(name, cap=0.8), WIDE_THEN_SMALL, k=10)
    assert launches(r) == [(0, 0, 0, (8, 8)), (1, 1, 0, (2, 8))]
    assert jcts(r) == {"A": 50, "B": 1}


@pytest.mark.parametrize(
    ("cap", "k", "limit"),
    [(0.8, 10, 8), (0.85, 10, 8), (0.29, 100, 29), (0.7, 10, 7), (0.05, 10, 1), (1, 7, 7)],
)
def test_the_limit_is_the_floor_of_cap_times_k_and_at_least_one(cap, k, limit):
    """(0.29 · 100 is 28.999999999999996 in floats: the slack keeps it 29.)"""
    c = Cluster(k)
    c.add_job(one(200, 1), 0.0, "A")
    d = make_scheduler("srpt", cap=cap).decide(c)
    assert isinstance(d, Decision) and d.parallelism_cap == limit


def test_a_job_at_its_cap_is_skipped_and_the_rule_waits_when_all_are():
    c = Cluster(10)
    a = c.add_job(one(40, 10), 0.0, "A")
    srpt = make_scheduler("srpt", cap=0.8)
    d = srpt.decide(c)
    assert isinstance(d, Decision)
    c.apply(d, 0.0)
    assert a.held == 8 and c.free_executors == 2
    assert srpt.decide(c) is WAIT  # A is the smallest job, but at its cap
    b = c.add_job(one(50, 10), 0.0, "B")  # larger than A: srpt would take A first
    d = srpt.decide(c)
    assert isinstance(d, Decision) and d.stage.job is b and d.parallelism_cap == 8


def test_a_gang_stage_wider_than_the_cap_gets_its_width():
    c = Cluster(10)
    c.add_job(dag(("g", 9, 5, [], True)), 0.0, "G")
    d = make_scheduler("srpt", cap=0.5).decide(c)
    assert isinstance(d, Decision) and d.parallelism_cap == 9


@pytest.mark.parametrize("name", KEYED)
def test_cap_one_is_the_plain_rule_decision_for_decision(name):
    jobs = _mixed_workload(np.random.default_rng(7), 40, 6)
    plain = run(make_scheduler(name), jobs, k=6, seed=7)
    capped = run(make_scheduler(name, cap=1.0), jobs, k=6, seed=7)
    assert capped.trace == plain.trace
    assert [r.jct for r in capped.records] == [r.jct for r in plain.records]
    # and the cap is used at all: below 1 the same workload runs otherwise
    assert run(make_scheduler(name, cap=0.5), jobs, k=6, seed=7).trace != plain.trace


@pytest.mark.parametrize("name", KEYED)
@pytest.mark.parametrize("fidelity", [Fidelity.none(), Fidelity()], ids=["plain", "moving"])
def test_capped_rules_make_legal_decisions_and_finish_mixed_workloads(name, fidelity):
    k = 5
    jobs = _mixed_workload(np.random.default_rng(3), 25, k)
    w = Workload("mixed", tuple(JobArrival(t, n, d) for t, n, d in jobs), k, fidelity)
    checked = Checked(make_scheduler(name, cap=0.5))
    r = simulate(w, checked, 3)
    assert r.unfinished == 0 and r.decisions == checked.decisions > 0


@pytest.mark.parametrize("cap", [0, -0.5, 1.5, float("nan"), float("inf"), True, "0.9", None])
def test_a_cap_outside_zero_to_one_is_an_error_saying_so(cap):
    with pytest.raises(IdlegateError, match=r"cap must be a fraction of the executors in \(0, 1\]"):
        make_scheduler("srpt", cap=cap)


def test_the_spec_text_carries_the_cap_and_the_plain_rule_reads_as_before():
    capped = make_scheduler("srpt?cap=0.9")
    assert capped.cap == 0.9  # type: ignore[attr-defined]
    assert repr(capped) == "SrptScheduler(cap=0.9)"
    assert SchedulerSpec.parse("srpt?cap=0.9").format() == "srpt?cap=0.9"
    assert repr(make_scheduler("srpt")) == "SrptScheduler()"
    assert repr(make_scheduler("sjf-cp?cap=1")) == "SjfCpScheduler()"
    with pytest.raises(IdlegateError, match=r"cap must be a fraction.*got 2$"):
        make_scheduler("srpt?cap=2")
    with pytest.raises(IdlegateError, match="it takes no parameters"):
        make_scheduler("fifo?cap=0.9")


# on a resource pool: 10 executors, 8 CPUs; cap=0.5 is 4 CPUs (and 5 pods)
R = ResourceVector.parse


def _pool_with(*jobs: tuple[str, int, float, str]) -> tuple[Cluster, list]:
    c = Cluster(10, resources=R("cpu=8"))
    return c, [c.add_job(spec_dag(cpu_stage(n, t, s, cpu)), 0.0, n) for n, t, s, cpu in jobs]


def test_on_a_resource_pool_the_cap_is_a_share_of_every_resource():
    c, (a,) = _pool_with(("a", 20, 10, "1"))
    plain = make_scheduler("srpt").decide(c)
    assert isinstance(plain, Decision) and plain.parallelism_cap == 10  # the CPUs stop it at 8
    srpt = make_scheduler("srpt", cap=0.5)
    d = srpt.decide(c)
    assert isinstance(d, Decision) and d.parallelism_cap == 4  # 4 tasks of 1 CPU: half of 8
    c.apply(d, 0.0)
    assert a.held == 4 and srpt.decide(c) is WAIT  # at its share: skipped, no reservation
    b = c.add_job(spec_dag(cpu_stage("b", 2, 1, "1")), 0.0, "B")
    d = srpt.decide(c)
    assert isinstance(d, Decision) and d.stage.job is b and d.parallelism_cap == 4


def test_on_a_resource_pool_a_job_holding_nothing_may_start_one_task_over_the_share():
    c, (a,) = _pool_with(("a", 3, 10, "6"))  # 6 of 8 CPUs a task: over half the pool
    srpt = make_scheduler("srpt", cap=0.5)
    d = srpt.decide(c)
    assert isinstance(d, Decision) and d.parallelism_cap == 1
    c.apply(d, 0.0)
    assert a.held == 1 and srpt.decide(c) is WAIT
