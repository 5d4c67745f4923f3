"""benchmarks/optimum.py: the CP-SAT offline optimum is right on hand-solved cases,
never worse than a scheduler, and its schedules are feasible (no data needed)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from idlegate.sim.workloads import build_workload
from tests.helpers import dag, load_benchmark, workload

pytest.importorskip("ortools", reason="ortools (the dev extra) runs the optimum benchmark")


optimum = load_benchmark("optimum")

ONE = dag(("s0", 1, 20.0, []))


def _solve(wl, **kw):
    return optimum.solve(optimum.instance_from_workload(wl), time_limit=10, workers=1, **kw)


def test_the_design_notes_example_idles_before_the_long_job() -> None:
    # A 20 s at t=0, B 4 s at t=2, one executor: idling 2 s for B gives 26 and 4
    wl = workload((0.0, "A", ONE), (2.0, "B", dag(("s0", 1, 4.0, []))), executors=1)
    best = _solve(wl)
    assert best.proven and best.avg_jct == pytest.approx(15.0)
    assert best.completions == pytest.approx((26.0, 6.0))
    # without idling A starts at once: 20 and 22
    no_idle = _solve(wl, non_delay=True)
    assert no_idle.proven and no_idle.avg_jct == pytest.approx(21.0)


def test_a_small_dag_with_a_gang_job() -> None:
    # D: a (2 × 3 s) and b (1 × 5 s) feed c (1 × 2 s); G: one gang stage of 2 × 1 s; two
    # executors, both at t=0. D alone needs 8 s and leaves no 1 s window with both
    # executors free before 8, so G first (0–1) then D (1–9) is best: 1 + 9 = 10.
    d = dag(("a", 2, 3.0, []), ("b", 1, 5.0, []), ("c", 1, 2.0, ["a", "b"]))
    g = dag(("g", 2, 1.0, [], True))
    best = _solve(workload((0.0, "D", d), (0.0, "G", g), executors=2))
    assert best.proven and best.avg_jct == pytest.approx(5.0)
    assert best.completions == pytest.approx((9.0, 1.0))
    assert best.starts[1, 0] == pytest.approx((0.0,))  # the gang: one start


def test_a_gang_wider_than_the_cluster_is_refused() -> None:
    wl = workload((0.0, "G", dag(("g", 3, 1.0, [], True))), executors=2)
    with pytest.raises(optimum.IdlegateError, match="at least 3 executors"):
        optimum.instance_from_workload(wl)


def _tiny(seed: int):
    if seed % 2:
        return build_workload(
            "tpch-like",
            seed,
            num_executors=2,
            num_jobs=3,
            max_stages=3,
            max_tasks=2,
            min_task_seconds=1.0,
            max_task_seconds=4.0,
            load=0.9,
        )
    return build_workload("synthetic", seed, num_executors=2, num_jobs=7, load=0.9)


def _check_feasible(wl, sol) -> None:
    """Releases, precedences, gangs and the capacity, from the returned start times."""
    inst = optimum.instance_from_workload(wl)
    step = 1 / inst.scale
    events = []
    for j, job in enumerate(wl.jobs):
        d, finish = job.dag, {}
        for s in range(d.num_stages):
            starts = sol.starts[j, s]
            assert len(starts) == (1 if d.gang[s] else d.tasks[s])
            assert min(starts) >= job.time - step  # releases are floored onto the grid
            for p in d.parents[s]:
                assert min(starts) >= finish[p] - 1e-9
            finish[s] = max(starts) + d.durations[s]
            width = d.tasks[s] if d.gang[s] else 1
            events += [(round(x, 6), width) for x in starts]
            events += [(round(x + d.durations[s], 6), -width) for x in starts]
        assert sol.completions[j] == pytest.approx(max(finish.values()))
    busy = 0
    for _, change in sorted(events, key=lambda e: (e[0], e[1])):  # ends before starts
        busy += change
        assert busy <= wl.num_executors


@pytest.mark.parametrize("seed", range(4))
def test_the_optimum_is_feasible_and_never_worse_than_a_scheduler(seed: int) -> None:
    wl = _tiny(seed)
    runs = {s: optimum.run_scheduler(wl, s, seed) for s in ("fifo", "sjf-cp", "fair")}
    jcts = {s: optimum.average_jct(r) for s, r in runs.items()}
    best = _solve(wl, hint=optimum.simulated_starts(runs["fair"]))
    assert best.proven
    _check_feasible(wl, best)
    assert best.avg_jct <= min(jcts.values()) + 1e-9
    if optimum.instance_from_workload(wl).one_stage:
        no_idle = _solve(wl, non_delay=True)
        _check_feasible(wl, no_idle)
        assert best.avg_jct - 1e-9 <= no_idle.avg_jct <= jcts["sjf-cp"] + 1e-9


def test_non_delay_schedules_leave_no_executor_free_while_a_job_waits() -> None:
    wl = build_workload("synthetic", 5, num_executors=2, num_jobs=8, load=0.9)
    sol = _solve(wl, non_delay=True)
    assert sol.proven
    spans = [
        (sol.starts[j, 0][0], sol.starts[j, 0][0] + job.dag.durations[0])
        for j, job in enumerate(wl.jobs)
    ]
    checks = {job.time for job in wl.jobs} | {end for _, end in spans}
    for j, job in enumerate(wl.jobs):
        start = spans[j][0]
        for t in checks:
            if job.time <= t < start - 1e-9:
                assert sum(s <= t < e for s, e in spans) == 2, (j, t)


def test_the_cli_writes_a_table_and_json(tmp_path: Path, capsys) -> None:
    out = tmp_path / "optimum.json"
    code = optimum.main(
        [
            "--executors=2",
            "--jobs=5",
            "--seeds=1",
            "--time-limit=5",
            "--workers=1",
            "--workloads=synthetic@0.8",
            f"--json={out}",
        ]
    )
    assert code == 0
    text = capsys.readouterr()
    assert "synthetic@0.8 K=2 n=5 s=0" in text.out
    assert "solved synthetic@0.8" in text.err
    (row,) = json.loads(out.read_text())
    assert row["optimum"]["status"] == "optimal"
    assert all(gap >= -1e-9 for gap in row["gap_to_bound"].values())
    assert not math.isnan(row["no_idle"]["avg_jct"])
