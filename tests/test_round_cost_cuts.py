"""`benchmarks/round_cost.py --cuts` says how far past its reference a wrong cut ended
against the margin the rounds cut by: `CUT` (5 %), or with `cut_behind` (the default) a
hair over the followed candidate's score."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from idlegate.policy.portfolio import runs
from tests.helpers import load_benchmark

round_cost = load_benchmark("round_cost")


def test_the_margin_follows_the_rounds_rule() -> None:
    assert round_cost.cut_margin("default") == runs._BEHIND
    assert round_cost.cut_margin("default?cut_behind=false") == runs.CUT
    assert round_cost.cut_margin("srpt") == runs.CUT  # (no rounds: the default, unused)


def test_a_wrong_cut_is_measured_against_its_own_margin(monkeypatch: Any) -> None:
    """A test's cut whose whole replay ended 2 % under its limit: 3 % past the reference
    with a 5 % margin, about 2 % ahead of it with `cut_behind`'s."""
    limit = 100.0

    def simulate(workload: Any, scheduler: Any, seed: int, cap: Any, test: Any) -> Any:
        if cap is None:
            return SimpleNamespace(jobs_time_integral=0.98 * limit, events=100)
        if test is None:
            return runs._Cut(area=cap, at=9.0, events=90, decisions=0)
        return runs._Cut(area=0.5 * cap, at=4.0, events=40, decisions=0)

    found = []
    for margin in (runs.CUT, runs._BEHIND):
        monkeypatch.setattr(runs, "_simulate", simulate)
        cuts = round_cost.Cuts(margin)
        runs._simulate(None, None, 0, limit, object())
        cuts.close()
        assert (cuts.cuts, cuts.wrong, cuts.saved, cuts.would) == (1, 1, 50, 90)
        found.append(cuts.beyond[0])
    assert abs(found[0] - 0.029) < 1e-9
    assert abs(found[1] + 0.02) < 1e-6
