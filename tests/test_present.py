"""The present check (`policy.portfolio.present`): a switch must not cost the pool's workflows."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from idlegate.policy import make_scheduler
from idlegate.policy.portfolio import Choice, PortfolioConfig, ReplayRequest, Scores
from idlegate.policy.portfolio.decision import play_round
from idlegate.policy.portfolio.present import Present, from_present, futures_like
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import JobArrival, simulate
from idlegate.sim.protocol import WAIT
from idlegate.sim.rollout import planning_fork
from idlegate.sim.workloads import build_workload
from tests.helpers import chain, dag

CAPPED = "fair?scale=0.5"
"""A rule that keeps half the pool from a lone job (its share is ceil(0.5 · K / n))."""


def _window(times: Sequence[float] = (0.0, 10.0, 20.0, 30.0)) -> tuple[JobArrival, ...]:
    """Short one-task workflows arrived at `times` (the window a round replayed)."""
    return tuple(JobArrival(t, f"w{i}", chain(1.0)) for i, t in enumerate(times))


def _busy_pool() -> Cluster:
    """10 executors, all on the first stage of a job (ten 10-second tasks, then forty), at
    t = 30 (srpt started it). An executor stays on its stage while it has tasks, so a
    rule's cap tells only when the second stage starts."""
    pool = Cluster(10)
    pool.add_job(dag(("a", 10, 10.0, []), ("b", 40, 10.0, ["a"])), 30.0, "big")
    rule = make_scheduler("srpt")
    pool.needs_schedule = False
    while (step := pool.decide_once(rule, 30.0)) is not None and step[0] is not WAIT:
        pass
    assert pool.free_executors == 0
    return pool


# -- the futures ---------------------------------------------------------------------------


def test_futures_span_the_windows_arrivals_at_its_rate_with_copies_of_its_workflows():
    window = _window()
    horizon, futures = futures_like(window, 100.0, 3, seed=5)
    assert horizon == 30.0  # (the window's arrivals span 0..30 s)
    assert len(futures) == 3
    dags = {id(a.dag) for a in window}
    for future in futures:
        assert all(100.0 < a.time <= 130.0 for a in future.arrivals)
        assert all(id(a.dag) in dags for a in future.arrivals)
    # three arrivals in 30 s: the mean count over many futures is the window's rate × H
    _, many = futures_like(window, 0.0, 2000, seed=1)
    assert np.mean([len(f.arrivals) for f in many]) == pytest.approx(3.0, rel=0.05)


def test_the_same_seed_gives_the_same_futures_and_a_window_without_a_span_gives_none():
    window = _window()
    a = futures_like(window, 0.0, 2, seed=9)
    b = futures_like(window, 0.0, 2, seed=9)
    assert a == b and a[1][0] != a[1][1]
    assert futures_like(_window((5.0,)), 0.0, 2, seed=9) == (0.0, [])
    assert futures_like(_window((5.0, 5.0)), 0.0, 2, seed=9) == (0.0, [])


# -- the rollouts --------------------------------------------------------------------------


RARE = (0.0, 500.0, 1000.0)
"""A window whose workflows arrive every 500 s: H = 1000 s, about two arrivals a future."""
OFTEN = (0.0, 10.0, 20.0, 30.0)
"""... every 10 s: H = 30 s, about three."""


def test_a_rule_that_keeps_half_the_pool_from_the_present_job_costs_more_from_the_present():
    pool = _busy_pool()
    rules = {s: make_scheduler(s) for s in ("srpt", CAPPED)}
    present = from_present(planning_fork(pool), _window(RARE), rules, 2, seed=3)
    assert present is not None
    assert present.jobs == 1
    assert futures_like(_window(RARE), 30.0, 2, seed=3)[0] == 1000.0  # (H)
    assert present.costs[CAPPED] > present.costs["srpt"]
    assert present.events > 0
    assert pool.free_executors == 0 and pool.now == 30.0  # (the pool itself is untouched)


def test_the_same_rule_costs_less_from_the_present_when_arrivals_need_the_room_it_keeps():
    # (srpt's executors stay on the big job's stages: each short arrival waits for one)
    rules = {s: make_scheduler(s) for s in ("srpt", CAPPED)}
    present = from_present(planning_fork(_busy_pool()), _window(OFTEN), rules, 2, seed=3)
    assert present is not None
    assert present.costs[CAPPED] < present.costs["srpt"]


def test_a_candidate_whose_rollout_raises_costs_infinity():
    class Broken:
        def reset(self, rng: object) -> None:
            pass

        def decide(self, view: object) -> object:
            raise RuntimeError("broken policy")

    rules = {"srpt": make_scheduler("srpt"), "broken": Broken()}
    present = from_present(planning_fork(_busy_pool()), _window(), rules, 1, seed=3)  # type: ignore[dict-item]
    assert present is not None
    assert present.costs["broken"] == float("inf")
    assert np.isfinite(present.costs["srpt"])


def test_a_round_whose_challenger_fails_from_the_present_says_so():
    choice = _round(roll=True, present=Cluster(10), costs=(100.0, float("inf")))
    assert (choice.candidate, choice.reason) == ("srpt", "present")
    assert choice.why.endswith("but failed when rolled out from the 1 workflow in the pool now")
    assert choice.to_dict()["present"] == {"srpt": 100.0, CAPPED: None}


# -- the round -----------------------------------------------------------------------------


def _round(roll: bool, present: Cluster | None, costs: tuple[float, float] | None = None) -> Choice:
    """A round following srpt whose replay puts CAPPED 51 % ahead, beyond any noise (the
    other candidates of the grid far behind)."""
    srpt = np.full(40, 20.0)
    srpt[::2] += 1.0  # (a spread, so the noise rule has a standard error)
    jcts = {"srpt": srpt, CAPPED: np.full(40, 10.0)}

    def replay(_: ReplayRequest, specs: Sequence[str]) -> Scores:
        out = {s: jcts.get(s, np.full(40, 99.0)) for s in specs}
        return Scores({s: float(np.mean(v)) for s, v in out.items()}, 40, 0, {}, {}, out)

    def rolled(req: ReplayRequest, specs: Sequence[str]) -> Present | None:
        assert req.present is not None
        if costs is not None:  # (given: the followed candidate's, then the challenger's)
            return Present(dict(zip(specs, costs, strict=True)), 1, 0)
        rules = {s: make_scheduler(s) for s in specs}
        return from_present(req.present, req.window, rules, 2, req.seed)

    request = ReplayRequest(_window(RARE), 10, 0.0, "srpt", 11, 30.0, present=present)
    config = PortfolioConfig(candidates=("srpt", "fair"), carriers=None)
    return play_round(request, config, replay, rolled if roll else None)


def test_a_switch_the_replay_backs_is_kept_off_when_it_costs_more_from_the_present():
    choice = _round(roll=True, present=planning_fork(_busy_pool()))
    assert (choice.candidate, choice.reason, choice.runner_up) == ("srpt", "present", CAPPED)
    assert choice.present_jobs == 1
    assert choice.present[CAPPED] > choice.present["srpt"]
    setback = choice.present[CAPPED] / choice.present["srpt"] - 1
    assert choice.why == (
        f"kept srpt: {CAPPED} was 51.2 % better over the last 40 workflows, but would cost "
        f"{100 * setback:.1f} % more from the 1 workflow in the pool now"
    )
    assert choice.to_dict()["present"] == dict(choice.present)


def test_without_the_check_or_without_a_present_the_replay_switches():
    assert _round(roll=False, present=planning_fork(_busy_pool())).candidate == CAPPED
    no_pool = _round(roll=True, present=None)
    assert (no_pool.candidate, dict(no_pool.present)) == (CAPPED, {})


def test_a_switch_that_costs_no_more_from_the_present_stands():
    pool = Cluster(10)  # (one short job alone: the capped rule loses nothing on it)
    pool.add_job(chain(1.0), 30.0, "small")
    choice = _round(roll=True, present=planning_fork(pool))
    assert choice.candidate == CAPPED
    assert choice.present[CAPPED] <= choice.present["srpt"]


@pytest.mark.parametrize(("challenger", "kept"), [(101.9, False), (102.1, True)])
def test_a_challenger_costing_more_from_the_present_is_kept_off_only_beyond_the_margin(
    challenger: float, kept: bool
):
    choice = _round(roll=True, present=Cluster(10), costs=(100.0, challenger))
    assert (choice.candidate == "srpt") is kept  # (the margin: 2 %)
    assert choice.reason == ("present" if kept else "best")


# -- the scheduler -------------------------------------------------------------------------

FIFO_TO_SRPT = "portfolio?start=fifo&candidates=fifo+srpt&tune=false&min_window=10&early=4&every=5"
"""A brain that starts on fifo and, on synthetic seed 0, switches to srpt once."""


def _switching_round(spec: str) -> Choice:
    brain = make_scheduler(spec)
    simulate(build_workload("synthetic", 0, num_jobs=60), brain, seed=0)
    (switch,) = [c for c in brain.rounds if c.previous != c.candidate and c.previous]
    return switch


def test_the_schedulers_switch_was_checked_from_the_pool_it_left_and_stood():
    switch = _switching_round(FIFO_TO_SRPT)
    assert (switch.previous, switch.candidate) == ("fifo", "srpt")
    assert switch.present_jobs > 0
    assert switch.present["srpt"] <= switch.present["fifo"]


def test_with_present_false_the_scheduler_makes_the_same_switch_unchecked():
    switch = _switching_round(FIFO_TO_SRPT + "&present=false")
    assert (switch.previous, switch.candidate, dict(switch.present)) == ("fifo", "srpt", {})
