"""`fair` on a pods-only pool asks the cluster's index of shares (`sim.shares`, with no
resource but pods) instead of passing over every job: the pass's answer, question by
question."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idlegate.policy import make_scheduler
from idlegate.policy.heuristics import FairScheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import Engine, simulate
from idlegate.sim.protocol import WAIT, Decision
from idlegate.sim.workloads import build_workload
from tests.test_orders import Pass, answers_as_the_pass, chain, job


@pytest.fixture
def both_ways(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every question fair answers of a cluster, compared with its pass; the answers."""
    answers: list[object] = []
    indexed = FairScheduler.decide

    def both(self: FairScheduler, view: Any) -> object:
        answer = indexed(self, view)
        if isinstance(view, Cluster):
            assert answer == indexed(self, Pass(view)), f"{self!r} at {view.now}"
            answers.append(answer)
        return answer

    monkeypatch.setattr(FairScheduler, "decide", both)
    return answers


@settings(max_examples=150, deadline=None)
@given(
    executors=st.integers(1, 7),
    jobs=st.lists(job, min_size=1, max_size=12),
    scale=st.sampled_from([0.5, 1.0, 2.0, 3.0]),
)
def test_the_index_chooses_as_the_pass_on_random_small_pools(executors, jobs, scale):
    """Random pods-only pools of 1 to 7 executors and up to 12 chains of gang and plain
    stages: every answer is the pass's (the same stage and cap, a job with free executors
    of its own first), with shares narrowed and widened."""
    answers_as_the_pass(make_scheduler(f"fair?scale={scale}"), executors, jobs)


@pytest.mark.parametrize("scale", [0.5, 1.0, 2.0])
def test_the_index_answers_as_the_pass_on_an_overloaded_stream(both_ways, scale):
    """k8s-batch at three times the pool's capacity (with Decima's moving delay): each
    answer is the pass's, WAITs included."""
    workload = build_workload("k8s-batch", 3, num_jobs=120, load=3.0)
    simulate(workload, make_scheduler(f"fair?scale={scale}"), seed=3)
    assert WAIT in both_ways and any(isinstance(a, Decision) for a in both_ways)


def test_keep_source_and_weighted_shares_take_the_pass(monkeypatch):
    """Fair with keep_source, and weighted fair, are not what the index answers: they pass
    over the jobs (the index is never asked)."""
    monkeypatch.setattr(
        FairScheduler, "_decide_pods_indexed", lambda *a: pytest.fail("asked the index")
    )
    workload = build_workload("k8s-batch", 3, num_jobs=20)
    for spec in ("fair?keep_source=true", "weighted-fair"):
        assert simulate(workload, make_scheduler(spec), seed=3).decisions


def test_known_answer_a_job_with_its_own_free_executor_goes_first():
    """Two jobs below their share of 2 (4 executors, 2 jobs); the later one just freed an
    executor of its own: it is chosen, with the share as its cap."""
    cluster = Cluster(4)
    first = cluster.add_job(chain([(3, 10, False)]), 0.0)
    mine = cluster.add_job(chain([(1, 1, False), (2, 5, False)]), 0.0)
    cluster.apply(Decision(mine.stages[0], 1), 0.0)
    assert cluster.task_finished(0, 1.0) is None  # its first stage is done
    assert cluster.free_executors_from(mine) == 1
    answer = make_scheduler("fair").decide(cluster)
    assert answer == Decision(mine.stages[1], 2) and answer.stage.job is not first
    assert answer == make_scheduler("fair").decide(Pass(cluster))


def test_a_pool_whose_rule_never_asks_keeps_no_job_that_left():
    # srpt's pool touches the shares at every change but never asks them: the jobs that
    # came and left are not kept (a long-lived operator's pool would keep every one)
    stream = build_workload("k8s-batch", 0, num_jobs=60)
    engine = Engine.for_workload(stream, make_scheduler("srpt"), 0)
    engine.run()
    shares = engine.cluster.shares
    assert len(engine.cluster.done) == 60
    assert [j for j in shares.stale if j.finish is not None] == []
