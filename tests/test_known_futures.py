"""``futures=known``: a planner told the scheduled runs in advance (cron workflows)."""

from __future__ import annotations

import numpy as np

from idlegate.policy import make_scheduler
from idlegate.policy.futures import KnownSource
from idlegate.sim.engine import simulate
from idlegate.sim.workloads import build_workload


def test_k8s_batch_marks_its_cron_runs_scheduled_and_nothing_else():
    w = build_workload("k8s-batch", 3, num_jobs=60)
    marked = {j.name.split("-")[0] for j in w.jobs if j.scheduled}
    unmarked = {j.name.split("-")[0] for j in w.jobs if not j.scheduled}
    assert (marked, unmarked) == ({"cron"}, {"adhoc"})


def test_every_future_holds_the_known_runs_ahead_and_samples_only_the_others():
    w = build_workload("k8s-batch", 3, num_jobs=60)
    source = KnownSource()
    source.foresee(w.jobs)
    seen: list = []

    class Probe:
        """Asks the source once 30 jobs have arrived, with the recent ones, as the planner
        does (its `window` of recent arrivals, finished ones included)."""

        name = "probe"

        def __init__(self) -> None:
            self.fair = make_scheduler("fair")
            self.arrived: dict[str, object] = {}

        def reset(self, rng: np.random.Generator) -> None:
            self.fair.reset(rng)

        def decide(self, view):
            for job in view.jobs:
                self.arrived.setdefault(job.name, job)
            if not seen and len(self.arrived) >= 30:
                recent = list(self.arrived.values())
                rng = np.random.default_rng(0)
                seen.append((view.now, source.futures(view, recent, 3600.0, 4, rng)))
            return self.fair.decide(view)

    simulate(w, Probe())
    now, futures = seen[0]
    ahead = [a.name for a in w.jobs if a.scheduled and now < a.time <= now + 3600.0]
    assert ahead, "the probe should see cron runs ahead"
    names = {j.name for j in w.jobs}
    for f in futures:
        told = [a.name for a in f.arrivals if a.name in names]
        assert told == ahead  # the known runs, in order, in every future
        sampled = [a for a in f.arrivals if a.name not in names]
        assert all(a.name.startswith("future-") for a in sampled)
    assert len({len(f.arrivals) for f in futures}) > 1  # the ad-hoc part is sampled


def test_a_planner_with_known_futures_runs_every_job():
    w = build_workload("k8s-batch", 1, num_jobs=40)
    planner = make_scheduler("lookahead?futures=known&max_decisions=20:srpt")
    result = simulate(w, planner, seed=1)
    assert len(result.records) == 40


def test_the_operator_tells_its_planner_the_known_runs_again_after_a_reload():
    from idlegate.operator.core.decider import Decider
    from idlegate.operator.metrics import Metrics
    from idlegate.sim.engine import JobArrival

    w = build_workload("k8s-batch", 1, num_jobs=10)
    runs = [JobArrival(j.time, j.name, j.dag, None, scheduled=True) for j in w.jobs[:3]]
    first = make_scheduler("lookahead?futures=known:srpt")
    decider = Decider(first, Metrics(4, first.name))
    decider.foresee(runs)
    assert first.futures.known == tuple(runs)
    second = make_scheduler("lookahead?futures=known:fair")
    decider.use(second)  # a hot reload: the new planner starts with the same knowledge
    assert second.futures.known == tuple(runs)
    decider.foresee([])
    assert second.futures.known == ()
