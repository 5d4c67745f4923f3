"""Rigid-job schedulers: priority orders, commitment, EASY backfilling, the reject rule."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.policy.rigid import ORDERS, EasyScheduler, RejectScheduler, StrictScheduler
from idlegate.sim.engine import simulate
from idlegate.sim.metrics import job_metrics
from idlegate.sim.protocol import Job
from idlegate.sim.rigid import RigidJob, RigidRun, rigid_dag, rigid_workload
from idlegate.sim.workloads import build_workload
from tests.helpers import load_benchmark


def _starts(jobs: list[tuple[float, float, int, float]], spec: str, k: int = 4, **params):
    """First start per job of (submit, run, processors, requested) jobs on k executors."""
    rigid = [RigidJob(i, s, r, n, q) for i, (s, r, n, q) in enumerate(jobs)]
    result = simulate(rigid_workload("t", rigid, k), make_scheduler(spec, **params))
    assert result.unfinished == 0
    return job_metrics(result).first_start.tolist()


def test_strict_order_commits_to_its_blocked_pick() -> None:
    jobs = [
        (0, 10, 3, 10),  # A runs 0-10 on 3 of 4
        (1, 50, 2, 50),  # B: SJF's pick at t=2, cannot start (1 free)
        (2, 100, 1, 100),  # C fits, but B is the committed head
        (3, 5, 1, 5),  # D: shorter than B and fits, still waits behind B
    ]
    # at t=10 A ends: B, then D, then C fill the 4 executors
    assert _starts(jobs, "strict:sjf") == [0, 10, 10, 10]
    # the reject rule picks again at t=3: D is then the pick and starts at once
    assert _starts(jobs, "reject:sjf")[3] == 3
    # FCFS: B heads the queue; C and D wait behind it although they fit
    assert _starts(jobs, "fcfs") == [0, 10, 10, 10]
    assert _starts(jobs, "easy:fcfs")[2:] == [2, 10]  # C takes the spare executor


def test_easy_backfills_jobs_that_end_before_the_reservation() -> None:
    jobs = [
        (0, 10, 3, 10),  # A: 0-10
        (1, 50, 4, 50),  # B: needs all 4, reserved at t=10
        (2, 5, 1, 5),  # C: 2-7 ends before 10: backfilled
        (3, 30, 1, 30),  # D: would end at 33 and the reservation needs every executor
    ]
    assert _starts(jobs, "fcfs") == [0, 10, 60, 60]
    assert _starts(jobs, "easy:fcfs") == [0, 10, 2, 60]


def test_easy_extra_nodes_let_long_jobs_use_what_the_reservation_leaves() -> None:
    jobs = [
        (0, 10, 2, 10),  # A: 0-10 on 2
        (1, 50, 3, 50),  # B: needs 3, shadow 10, one executor to spare then
        (2, 100, 1, 100),  # C: ends long after 10 but needs only the spare one
    ]
    assert _starts(jobs, "easy:fcfs") == [0, 10, 2]
    assert _starts(jobs, "easy:fcfs", extra_nodes=False) == [0, 10, 10]


def test_easy_reserves_by_requested_time_and_the_simulator_runs_the_real_one() -> None:
    jobs = [
        (0, 10, 3, 100),  # A asks for 100 s, really runs 10
        (1, 5, 4, 5),  # B needs all 4: shadow 100 by A's request
        (2, 50, 1, 50),  # C ends at 52 <= 100: backfilled
    ]
    # A really ends at 10; B then still waits for C's executor (52)
    assert _starts(jobs, "easy:fcfs") == [0, 52, 2]


def test_reject_cap_zero_is_the_base_and_caps_count_rejections() -> None:
    w = build_workload("lublin", seed=7, num_jobs=120, num_executors=64)
    strict = job_metrics(simulate(w, make_scheduler("strict:sjf"))).first_start
    capped = job_metrics(simulate(w, make_scheduler("reject:sjf", max_rejections=0))).first_start
    assert strict.tolist() == capped.tolist()
    rule = make_scheduler("reject:sjf", max_rejections=3)
    assert isinstance(rule, RejectScheduler)
    capped_rule = job_metrics(simulate(w, rule)).first_start
    assert max(rule.rejections.values()) >= 3  # some job was accepted at the cap
    uncapped = make_scheduler("reject:sjf", max_rejections=10**6)
    assert job_metrics(simulate(w, uncapped)).first_start.tolist() != capped_rule.tolist()


def test_reject_easy_composes_and_names() -> None:
    rule = make_scheduler("reject:easy:sjf", extra_nodes=False, max_rejections=5)
    assert isinstance(rule, RejectScheduler) and isinstance(rule.base, EasyScheduler)
    assert (rule.name, rule.base.extra_nodes, rule.max_rejections) == ("reject:easy:sjf", False, 5)
    assert make_scheduler("fcfs").name == "fcfs"
    assert make_scheduler("strict:fifo").name == "strict:fcfs"
    # the same, with each parameter in the spec it belongs to
    text = make_scheduler("reject?max_rejections=5:easy:sjf?extra_nodes=false")
    assert (text.name, text.base.extra_nodes, text.max_rejections) == ("reject:easy:sjf", False, 5)


@pytest.mark.parametrize(
    ("spec", "params", "message"),
    [
        ("easy:nope", {}, "unknown rigid priority order"),
        ("easy:", {}, "needs a priority order"),
        ("reject:fair:sjf", {}, "fair takes no argument"),
        ("reject:fair", {}, "unknown rigid priority order 'fair'"),
        ("reject:easy:sjf", {"alpha": 1}, "has no parameter 'alpha'"),
        ("reject?max_rejections=-1:sjf", {}, "max_rejections must be >= 0"),
        ("reject?interval=5:easy:sjf?extra_nodes=maybe", {}, "extra_nodes must be true or false"),
        ("strict:sjf", {"extra_nodes": False}, "takes only lock_in"),
        ("strict:sjf", {"lock_in": "maybe"}, "lock_in must be true or false"),
        ("easy:sjf", {"alpha": 1}, "has no parameter 'alpha'"),
        ("easy:sjf", {"backfill_order": "lifo"}, "backfill_order"),
        ("reject:sjf", {"max_rejections": -1}, "max_rejections must be >= 0"),
        ("reject:sjf", {"interval": 0}, "interval must be"),
    ],
)
def test_spec_errors(spec: str, params: dict, message: str) -> None:
    with pytest.raises(IdlegateError, match=message):
        make_scheduler(spec, **params)


def _job(i: int, run: float, procs: int, submit: float) -> Job:
    return Job(i, f"j{i}", rigid_dag(procs, run), submit, RigidRun(run, submit))


def test_priority_keys_follow_schedinspector() -> None:
    a = _job(0, 100, 1, 1000)  # r·n 100, r/n 100
    b = _job(1, 10, 64, 2000)  # r·n 640, r/n 0.16
    c = _job(2, 50, 4, 10)  # r·n 200, r/n 12.5
    jobs = [a, b, c]

    def first(order: str) -> int:
        return min(jobs, key=ORDERS[order]).id

    assert first("fcfs") == 2 and first("lcfs") == 1
    assert first("sjf") == 1  # requested time only
    assert first("saf") == 0
    assert first("srf") == 1
    # F1: log10(r)·n + 870·log10(s): a 2 + 2610; b 64 + 2872; c 6.8 + 870
    assert first("f1") == 2
    f1 = ORDERS["f1"](a)[0]
    assert f1 == pytest.approx(math.log10(100) * 1 + 870 * math.log10(1000))
    zero = Job(3, "z", rigid_dag(2, 1.0), 0.0, None)  # no trace submit time: arrival 0 -> 0.1
    assert ORDERS["f1"](zero)[0] == pytest.approx(870 * math.log10(0.1))


def test_rigid_orders_also_run_dag_workloads() -> None:
    w = build_workload("tpch-like", seed=1, num_jobs=8, num_executors=6)
    for spec in ("fcfs", "easy:sjf", "reject:easy:f1"):
        result = simulate(w, make_scheduler(spec))
        assert result.unfinished == 0, spec
    assert isinstance(make_scheduler("saf"), StrictScheduler)


def test_calibration_benchmark_table() -> None:
    bench = load_benchmark("rigid_calibration")
    assert set(ORDERS) == {"fcfs", "lcfs", "sjf", "saf", "srf", "f1"}
    ours = {"bsld": [2.0, 4.0], "wait": [10.0, 30.0], "util": [0.5, 0.5]}
    theirs = {"bsld": [2.0, 2.0], "wait": [10.0, 30.0]}
    row = bench.Row("SJF", "strict:sjf", ours, theirs)
    assert row.agreeing("bsld") == 1 and row.gap("bsld") == pytest.approx(0.5)
    table = bench.render([row])
    assert "3.0 / 2.0" in table and "+50.0%" in table and "1/2" in table and "2/2" in table
    with pytest.raises(IdlegateError, match="no reference file"):
        bench.load_reference(Path("/nonexistent/ref.json"))


def test_lock_in_keeps_the_blocked_pick_and_greedy_lets_a_later_job_overtake() -> None:
    # the one-line example of docs/rigid.md and the module docstring: the machine is busy
    # until t=100; B (4 executors) is the pick when it arrives, C (1, shorter) after it
    jobs = [(0, 100, 4, 100), (1, 50, 4, 50), (2, 10, 1, 10)]
    assert _starts(jobs, "strict:sjf") == [0, 100, 150]
    assert _starts(jobs, "strict:sjf", lock_in=False) == [0, 110, 100]
    assert make_scheduler("strict:sjf?lock_in=false").name == "strict:sjf?lock_in=false"
    assert make_scheduler("easy:sjf?lock_in=false").lock_in is False
