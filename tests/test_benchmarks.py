"""The benchmark scripts' own schedulers do what their docstrings claim (no data needed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from idlegate.policy.heuristics import FairScheduler
from idlegate.sim.cluster import WAIT
from idlegate.sim.engine import simulate
from idlegate.sim.workloads import build_workload

_PATH = Path(__file__).parents[1] / "benchmarks" / "fair_variants.py"
_spec = importlib.util.spec_from_file_location("fair_variants", _PATH)
assert _spec is not None and _spec.loader is not None
fair_variants = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fair_variants)


class Watch:
    """Wraps a scheduler; counts WAITs given while a stage could have launched."""

    def __init__(self, inner: object) -> None:
        self.inner, self.name, self.waits_with_work = inner, "watch", 0

    def reset(self, rng: object) -> None:
        self.inner.reset(rng)

    def decide(self, view):
        action = self.inner.decide(view)
        if action is WAIT and view.free_executors and view.runnable_stages():
            self.waits_with_work += 1
        return action


def _run(scheduler: object) -> Watch:
    workload = build_workload("tpch-like", 3, num_executors=10, init=4, num_stream=12)
    watch = Watch(scheduler)
    assert simulate(workload, watch, seed=3).unfinished == 0
    return watch


def test_fair_without_wait_never_waits_while_a_stage_could_launch() -> None:
    assert _run(FairScheduler()).waits_with_work > 0  # fair itself does
    assert _run(fair_variants.NoWaitFair()).waits_with_work == 0


def test_scaled_fair_shares() -> None:
    jobs = [object()] * 3
    assert fair_variants.ScaledFair().shares(50, jobs) == [17] * 3  # plain fair
    assert fair_variants.ScaledFair(limit=10).shares(50, jobs) == [10] * 3
    assert fair_variants.ScaledFair(factor=1.5).shares(50, jobs) == [25] * 3
