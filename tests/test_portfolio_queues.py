"""The portfolio on a pool with queues: its rounds replay under the pool's queues, on the
whole pool, each workflow in the queue it was in (issue 68, item 4)."""

from __future__ import annotations

from idlegate.policy import make_scheduler
from idlegate.policy.portfolio.prior import Prior
from idlegate.policy.portfolio.replay import ReplayOptions, ReplayRequest, replay_portfolio
from idlegate.policy.portfolio.scheduler import PortfolioScheduler
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival, Workload, simulate
from idlegate.sim.queues import QueueSpec
from idlegate.sim.resources import MILLI
from idlegate.sim.spec import parse_workflow

# two queues of 5 pods each of a pool of 10; "a" may not borrow
QUEUES = (
    QueueSpec("a", {"pods": 5 * MILLI}, borrowing_limit={"pods": 0}),
    QueueSpec("b", {"pods": 5 * MILLI}),
)


def dag(tasks: int, seconds: float) -> Dag:
    spec = {"name": "s", "tasks": tasks, "taskDurationSeconds": seconds}
    return Dag.from_spec(parse_workflow({"stages": [spec]}))


def test_a_replay_runs_under_the_pools_queues():
    """One workflow of 10 tasks x 10 s in queue "a" on 10 executors: with no queues one
    wave (10 s); under the queues "a" holds at most its 5 pods, two waves (20 s)."""
    window = [JobArrival(0.0, "x", dag(10, 10), queue="a")]
    fifo = {"fifo": make_scheduler("fifo")}
    assert replay_portfolio(window, fifo, 10, 0).means == {"fifo": 10.0}
    assert replay_portfolio(window, fifo, 10, 0, ReplayOptions(queues=QUEUES)).means == {
        "fifo": 20.0
    }


def test_a_round_in_a_queued_pool_replays_under_its_queues():
    """Simulated with two queues, the portfolio is asked through each queue's view (sized
    to the queue's quota): its rounds still replay on the whole pool under both queues,
    with every workflow of the pool in its queue, and each round's record says so."""
    jobs = tuple(
        JobArrival(10.0 * (i // 4), f"w{i}", dag(2 + i % 5, 10 + i % 3), queue="ab"[i % 2])
        for i in range(40)
    )
    workload = Workload("queued", jobs, 10, queues=QUEUES)
    brain = make_scheduler("portfolio?candidates=fifo+srpt&tune=false&prior=false&start=fifo")
    assert isinstance(brain, PortfolioScheduler)
    requests: list[ReplayRequest] = []
    replay = brain.replay

    def seen(request: ReplayRequest, check=None):  # type: ignore[no-untyped-def]
        requests.append(request)
        return replay(request, check)

    brain.replay = seen  # type: ignore[method-assign]
    result = simulate(workload, brain, seed=0)
    assert result.unfinished == 0 and result.queues is not None
    assert requests, "no round ran"
    for request in requests:
        assert request.queues == QUEUES
        assert request.num_executors == 10  # (the pool's, not a queue's 5)
        assert {a.queue for a in request.window} == {"a", "b"}
    replayed = [c for c in brain.rounds if c.scores]
    assert replayed and all(c.queues == 2 and c.to_dict()["queues"] == 2 for c in replayed)
    # per queue, its workflows of the replay and their mean JCT (item 2 of issue 71)
    for c in replayed:
        per_queue = c.to_dict()["per_queue"]
        assert list(per_queue) == [q for q in ("a", "b") if q in per_queue]  # (the pool's order)
        assert sum(q["workflows"] for q in per_queue.values()) == c.workflows
        assert all(c.candidate in q["jct"] for q in per_queue.values())
        assert "; per queue: " in c.why
    # the pool's workflows reach the window, in their queues (but the last to finish,
    # after the last decision: recorded when the portfolio next sees the pool)
    names = {a.name: a.queue for a in brain.finished}
    assert len(names) >= 36
    assert all(q == "ab"[int(n[1:]) % 2] for n, q in names.items())


def test_one_queue_replays_as_before():
    """No admission: the request has no queues and the rounds say one."""
    jobs = tuple(JobArrival(5.0 * i, f"w{i}", dag(2 + i % 5, 10)) for i in range(12))
    brain = make_scheduler("portfolio?candidates=fifo+srpt&tune=false&prior=false&start=fifo")
    assert isinstance(brain, PortfolioScheduler)
    simulate(Workload("one", jobs, 10), brain, seed=0)
    replayed = [c for c in brain.rounds if c.scores]
    assert replayed and all(c.queues == 1 for c in replayed)
    assert all("per_queue" not in c.to_dict() and "per queue" not in c.why for c in replayed)
    assert all(a.queue is None for a in brain.finished)


def test_the_prior_weighs_entries_of_the_pools_kind():
    """An entry measured under queues answers a pool of queues only; a pool of one queue
    never sees it (its lookups as before queued entries existed), and a prior with none
    answers a pool of queues from every entry."""
    features = {"one": (4.6, 1.0, 1.0, 1.0), "queued": (4.6, 1.0, 1.0, 1.0)}
    losses = {
        "one": {"srpt?cap=0.9": (0.0, 0.0), "srpt": (0.1, 0.3)},
        "queued": {"srpt?cap=0.9": (0.2, 0.3), "srpt": (0.0, 0.0)},
    }
    allowed = ["srpt", "srpt?cap=0.9"]
    prior = Prior(features, losses, queues={"queued": 3})
    here = (4.6, 1.0, 1.0, 1.0)
    assert prior.safest(here, allowed) == "srpt?cap=0.9"
    assert prior.safest(here, allowed, queued=True) == "srpt"
    assert prior.safest_overall(allowed) == "srpt?cap=0.9"
    assert prior.safest_overall(allowed, queued=True) == "srpt"
    assert prior.neighbours(here) == ["one"]
    alone = Prior({"one": features["one"]}, {"one": losses["one"]})
    assert alone.safest(here, allowed, queued=True) == "srpt?cap=0.9"
    assert alone.safest_overall(allowed, queued=True) == "srpt?cap=0.9"
