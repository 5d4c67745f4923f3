"""benchmarks/decima_differences.py: its stage-order variant does what it says (no data)."""

from __future__ import annotations

from idlegate.policy.heuristics import FairScheduler
from idlegate.sim.engine import simulate
from tests.helpers import dag, load_benchmark, workload


def test_lowest_index_first_against_critical_path_first():
    # one executor, two independent stages: "a" (index 0) short, "b" (index 1) on the
    # critical path; fair runs b first, the variant runs a first
    job = dag(("a", 1, 1.0, []), ("b", 1, 5.0, []))
    wl = workload((0.0, "J", job), executors=1)
    module = load_benchmark("decima_differences")
    for scheduler, first in ((FairScheduler(), 1), (module.FairLowestIndex(), 0)):
        result = simulate(wl, scheduler, record_tasks=True)
        assert result.tasks[0].stage == first
        assert result.records[0].jct == 6.0
