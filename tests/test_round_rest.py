"""Resting the clear losers (`PortfolioConfig.rest`, `state.Standings.rested`, issue 79
item 4): a candidate that lost n ≥ 2 rounds in a row by more than `rest` is left out of
the next n rounds, but the last round's runner-up; with known answers."""

from __future__ import annotations

from idlegate.policy.portfolio.rounds import Choice
from idlegate.policy.portfolio.state import REST_AFTER, Standings


def standings(*rounds: dict[str, float]) -> Standings:
    """Standings that remember `rounds` (each its candidates' excess over the best), 10
    new workflows each."""
    out = Standings()
    out.stood = [(10, dict(r)) for r in rounds]
    return out


def test_a_candidate_that_lost_n_rounds_in_a_row_rests_n_rounds():
    assert REST_AFTER == 2
    lost = standings({"a": 0.0, "b": 0.10, "c": 0.10}, {"a": 0.0, "b": 0.20, "c": 0.01})
    # b lost both by more than 5 %; c the first only (its last, 1 %, is within)
    assert lost.rested(0.05) == {"b"}
    assert lost.rested(0.15) == set()  # (b's first loss, 10 %, is within 15 %)
    lost.stood.append((10, {"a": 0.0, "c": 0.0}))  # (a round that rested b)
    assert lost.rested(0.05) == {"b"}  # (one round since, of two)
    lost.stood.append((10, {"a": 0.0, "c": 0.0}))
    assert lost.rested(0.05) == set()  # (two rounds since: back, judged again)
    three = standings(*({"a": 0.0, "b": 0.3} for _ in range(3)), {"a": 0.0}, {"a": 0.0})
    assert three.rested(0.05) == {"b"}  # (three lost, two rounds since)
    assert standings({"a": 0.0, "b": 0.3}).rested(0.05) == set()  # (one loss is not enough)


def test_the_last_rounds_runner_up_and_the_one_followed_never_rest():
    lost = standings(
        {"srpt": 0.0, "fair": 0.10, "fifo": 0.30}, {"srpt": 0.0, "fair": 0.20, "fifo": 0.30}
    )
    out = dict(window=200, drop=0.02, early=40, far=None)
    assert lost.dropped("srpt", **out) == frozenset()  # (without rest: 20 workflows of evidence)
    assert lost.dropped("srpt", rest=0.05, **out) == {"fair", "fifo"}
    scores = {"srpt": 10.0, "fair": 12.0}
    lost.remember(Choice("srpt", 10.0, "fair", 12.0, 40, "best", scores=scores), 1000)
    assert lost.runner_up == "fair"
    assert "fair" not in lost.dropped("srpt", rest=0.05, **out)
    assert "fifo" not in lost.dropped("fifo", rest=0.05, **out)  # (the one followed)


def test_the_scheduler_leaves_a_resting_candidate_out_of_its_next_round():
    from idlegate.policy import make_scheduler
    from idlegate.policy.portfolio import PortfolioScheduler

    scores = {"srpt": 100.0, "fair": 140.0, "fifo": 101.0}
    for rest, out in (("0.05", {"fair"}), ("none", set())):
        brain = make_scheduler(
            "portfolio?candidates=fifo+srpt+fair&replayer=worker&records=fed&start=srpt"
            f"&min_window=2&far=none&rest={rest}"
        )
        assert isinstance(brain, PortfolioScheduler)
        for _ in range(2):  # (fair 40 % behind twice; fifo, 1 %, the runner-up)
            brain.adopt(Choice("srpt", 100.0, "fifo", 101.0, 10, "best", scores=scores, new=10))
        assert brain.dropped() == out
