"""What a portfolio's round may cost (`PortfolioConfig.budget`, `hourly`): the window's
running workflows trimmed to a modelled budget (`replay.trim`), and a credit per hour of
the scheduler's clock (`state.Credit`), and the pace after rounds on full windows
(`backoff_full`), with known answers."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from idlegate.policy import make_scheduler
from idlegate.policy.portfolio import PortfolioScheduler
from idlegate.policy.portfolio import scheduler as scheduler_module
from idlegate.policy.portfolio.candidates import analytic_specs, candidate_specs
from idlegate.policy.portfolio.replay import (
    EVENT_SECONDS,
    HEAVIEST_KEPT,
    ReplayRequest,
    projected_seconds,
    trim,
)
from idlegate.policy.portfolio.state import Credit
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import JobArrival, simulate
from idlegate.sim.workloads import build_workload
from tests.helpers import dag


def arrival(name: str, tasks: int, t: float = 0.0) -> JobArrival:
    return JobArrival(t, name, dag(("a", tasks, 1.0, [])))


def request(finished: list[JobArrival], running: list[JobArrival], heavy: int = 0) -> ReplayRequest:
    return ReplayRequest(
        window=(*finished, *running),
        num_executors=4,
        moving_delay=0.0,
        following="fifo",
        seed=0,
        at=0.0,
        running=len(running),
        heavy=heavy,
        new=len(finished),
    )


def test_a_replay_is_projected_at_one_event_a_task_and_one_a_workflow():
    window = [arrival("a", 9), arrival("b", 19)]
    assert projected_seconds(window, 3) == pytest.approx(3 * 30 * EVENT_SECONDS)


def test_trim_leaves_the_finished_and_drops_the_running_waiting_least_first():
    finished = [arrival(f"f{i}", 99) for i in range(3)]
    running = [arrival(f"r{i}", 99) for i in range(5)]  # (in the order they have waited)
    one = projected_seconds([running[0]], 2)
    trimmed = trim(request(finished, running), 2, 2.5 * one)
    assert [a.name for a in trimmed.window] == ["f0", "f1", "f2", "r0", "r1"]
    assert (trimmed.running, trimmed.trimmed, trimmed.new) == (2, 3, 3)
    assert trim(request(finished, running), 2, 5 * one) == request(finished, running)
    assert trim(request(finished, running), 2, None) == request(finished, running)


def test_trim_drops_the_heavy_last_the_lightest_first_and_keeps_the_heaviest():
    plain = [arrival("p", 9)]
    heavy = [arrival(f"h{n}", n) for n in (50, 10, 40, 20, 30, 60)]
    trimmed = trim(request([], [*plain, *heavy], heavy=6), 1, 0.0)
    kept = [a.name for a in trimmed.window]
    assert len(kept) == HEAVIEST_KEPT and set(kept) == {"h60", "h50", "h40", "h30"}
    assert (trimmed.running, trimmed.heavy, trimmed.trimmed) == (4, 4, 3)


def test_the_credit_refills_with_the_clock_up_to_its_cap_and_waits_for_the_last_cost():
    credit = Credit(hourly=8.0, cap=2.0)
    assert credit.held(0.0) == 2.0 and credit.covers(0.0)
    credit.spend(3.0, 100.0)  # (a round above the credit: it goes below zero)
    assert credit.held(100.0) == pytest.approx(-1.0)
    assert not credit.covers(100.0 + 3600 * 2.9 / 8)  # (1.9 held; the cap, 2, is owed)
    assert credit.covers(100.0 + 3600 * 3.0 / 8)
    assert credit.held(1e6) == 2.0
    assert Credit(hourly=None, cap=0.0).held(5.0) == math.inf


def test_a_flood_of_large_workflows_is_replayed_within_the_budget():
    # teams: team a's 300 workflows arrive at once; the first round replays them running
    workload = build_workload("teams", 1, num_jobs=60)
    workload = replace(workload, jobs=workload.jobs[:60])
    rounds = {}
    for budget in ("none", "0.2"):
        brain = make_scheduler(f"portfolio?budget={budget}&prior=false&start=srpt")
        assert isinstance(brain, PortfolioScheduler)
        simulate(workload, brain, seed=1)
        rounds[budget] = [c for c in brain.rounds if c.workflows]
    first, trimmed = rounds["none"][0], rounds["0.2"][0]
    assert first.trimmed == 0 and trimmed.trimmed > 0
    assert trimmed.workflows == first.workflows - trimmed.trimmed
    assert trimmed.modelled_seconds < first.modelled_seconds


def test_a_budget_of_nothing_keeps_two_workflows_and_the_rounds_say_what_they_left_out():
    # (a budget of 0 trimmed an early round of running workflows to none, and its replay
    # failed: "a replay needs at least one finished workflow")
    running = [arrival(f"r{i}", 9) for i in range(5)]
    trimmed = trim(request([], running), 3, 0.0)
    assert [a.name for a in trimmed.window] == ["r0", "r1"] and trimmed.trimmed == 3
    brain = make_scheduler("portfolio?budget=0&prior=false&start=srpt")
    assert isinstance(brain, PortfolioScheduler)
    simulate(build_workload("k8s-batch", 1, num_jobs=30), brain, seed=1)
    said = [c for c in brain.rounds if c.trimmed]
    assert said and all(c.workflows >= 2 for c in said)
    from idlegate.evaluation.console import _left

    assert "out of the window to fit its budget" in _left(said[0].to_dict())


def _jobs(prefix: str, count: int) -> list[JobArrival]:
    return [JobArrival(float(i), f"{prefix}{i}", dag(("a", 1, 1.0, []))) for i in range(count)]


def _due_after(brain: PortfolioScheduler, prefix: str) -> int:
    """Workflows recorded, ten at a time, until a round is due; then that round, adopted
    (every candidate ties on jobs of one size: each round keeps the one followed)."""
    recorded = 0
    while not brain.needs_replay(0.0):
        brain.record(_jobs(f"{prefix}{recorded}-", 10))
        recorded += 10
    choice = brain.replay(brain.request(Cluster(1)))
    brain.adopt(choice)
    assert choice.candidate == choice.previous == "srpt"
    return recorded


@pytest.mark.parametrize(("window", "full", "paces"), [
    # the first round, on 10 of 20: not full, the stretch up to `backoff` (2); then full
    (20, "8", [10, 20, 40, 80, 80]),  # on full windows the stretch doubles up to 8
    (20, None, [10, 20, 40, 80, 160]),  # the default: up to 16
    (20, "none", [10, 20, 20, 20, 20]),  # `backoff` alone: up to 2
    (200, "8", [10, 20, 20, 20, 20]),  # a window never full: `backoff`'s pace
])  # fmt: skip
def test_rounds_that_keep_the_leader_on_a_full_window_back_off_up_to_backoff_full(
    window: int, full: str | None, paces: list[int]
) -> None:
    brain = make_scheduler(
        "portfolio?candidates=srpt&replayer=worker&records=fed&start=srpt&min_window=2"
        f"&confidence=0&every=10&period=none&backoff=2&window={window}"
        + ("" if full is None else f"&backoff_full={full}")
    )
    assert isinstance(brain, PortfolioScheduler)
    assert [_due_after(brain, f"r{i}-") for i in range(5)] == paces


@pytest.mark.parametrize("rested", [True, False])
def test_the_candidates_resting_count_in_the_budget_as_if_replayed(monkeypatch, rested):
    # (resting fifo and fair left a round 2 fewer candidates, and so room in the budget for
    # more of the workflows still running: on teams 18 and 25 of them instead of 4 and 5)
    brain = make_scheduler(f"portfolio?prior=false&start=srpt&budget_rested={str(rested).lower()}")
    assert isinstance(brain, PortfolioScheduler)
    far_behind, resting = frozenset({"weighted-fair"}), frozenset({"fifo", "fair"})

    def dropped(*_: object, rest: float | None = None, **__: object) -> frozenset[str]:
        return far_behind | (resting if rest is not None else frozenset())

    monkeypatch.setattr(brain._standings, "dropped", dropped)
    counted: list[int] = []
    monkeypatch.setattr(scheduler_module, "trim", lambda r, n, b: counted.append(n) or r)
    every = len(candidate_specs(brain.config)) + len(analytic_specs(brain.config, "srpt"))
    brain._trimmed(replace(request([], []), dropped=brain.dropped()))
    assert counted == [every - 1 if rested else every - 3]
