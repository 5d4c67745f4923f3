"""Forecasts through a burst under queues (issue 96): a replay's cost does not grow with
a flooded queue, and what the speed-ups change is nothing the forecast reads."""

from __future__ import annotations

from idlegate.policy import make_scheduler
from idlegate.policy.analytic import _only_launchable
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import Engine
from idlegate.sim.forecast import replay
from idlegate.sim.protocol import Decision
from idlegate.sim.rollout import Future
from idlegate.sim.workloads import build_workload
from tests.helpers import chain, dag


def test_only_launchable_is_the_list_of_one_stage() -> None:
    """Known answers of analytic's condition 2 (the only launchable stage), read up to a
    second stage: one job waiting, two, and a gang that does not fit the free ones."""
    cluster = Cluster(2)
    a = cluster.add_job(chain(5.0), 0.0)
    assert _only_launchable(cluster, a.stages[0])
    b = cluster.add_job(chain(1.0), 0.0)
    assert not _only_launchable(cluster, a.stages[0])
    assert not _only_launchable(cluster, b.stages[0])
    cluster.apply(Decision(b.stages[0], 1), 0.0)  # (b's one task runs: a alone, 1 free)
    assert _only_launchable(cluster, a.stages[0])
    gang = cluster.add_job(dag(("g", 2, 3.0, [], True)), 0.0)  # (2 tasks > 1 free)
    assert _only_launchable(cluster, a.stages[0])
    assert not _only_launchable(cluster, gang.stages[0])
    for stage in (a.stages[0], gang.stages[0]):
        listed = cluster.runnable_stages()
        assert _only_launchable(cluster, stage) == (listed == [stage])


def test_a_forecasts_replay_without_the_ledger_goes_as_with_it() -> None:
    """A forecast's replays keep no queue ledger (`replay`'s `ledger`): the same starts,
    finishes and events as a replay that keeps it, on `teams`' flooding queue."""
    w = build_workload("teams", 2, num_jobs=8)
    engine = Engine.for_workload(w, make_scheduler("srpt"), 2)
    engine.run(60.0)
    cluster = engine.cluster
    assert cluster.admission is not None and len(cluster.jobs) > 10
    rule = make_scheduler("srpt")
    counted: list[bool] = []

    def note(sim: Cluster) -> None:
        assert sim.admission is not None
        counted.append(sim.admission.counts)

    kept = replay(cluster, rule, Future((), 7), float("inf"), after=note)
    light = replay(cluster, rule, Future((), 7), float("inf"), after=note, ledger=False)
    assert kept == light and counted == [True, False]
    assert cluster.admission.counts  # (the pool's own ledger counts on)
