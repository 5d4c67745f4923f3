"""`benchmarks/reclaim_stops.py`'s window and count of the stops it lets the reclaim carry
out (issue 96: what a single stop moves), on a stand-in for `Reclaimer.plan`."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from benchmarks import reclaim_stops
from idlegate.sim.reclaim_plan import Reclaimer


def _planned(monkeypatch: pytest.MonkeyPatch) -> None:
    def plan(self: Any, pool: Any, now: float, *rest: Any) -> str:
        return f"stop at {now:g}"

    monkeypatch.setattr(Reclaimer, "plan", plan)


def test_at_most_the_first_plans_in_the_window_are_carried_out(monkeypatch) -> None:
    _planned(monkeypatch)
    undo = reclaim_stops.hooked(reclaim_stops.Log(), (10.0, 20.0), most=2)
    try:
        asked = [Reclaimer.plan(None, None, now) for now in (5, 10, 12, 15, 20)]  # type: ignore[arg-type]
    finally:
        undo()
    assert asked == [None, "stop at 10", "stop at 12", None, None]
    assert Reclaimer.plan(None, None, 15) == "stop at 15"  # type: ignore[arg-type]


def test_without_a_count_every_plan_in_the_window_is(monkeypatch) -> None:
    _planned(monkeypatch)
    undo = reclaim_stops.hooked(reclaim_stops.Log(), (0.0, 100.0))
    try:
        asked = [Reclaimer.plan(None, None, now) for now in (1, 2, 3)]  # type: ignore[arg-type]
    finally:
        undo()
    assert asked == ["stop at 1", "stop at 2", "stop at 3"]


@pytest.mark.parametrize("text", ["0", "-1", "one", "1.5"])
def test_a_count_that_is_no_whole_number_of_one_or_more_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="--most takes a whole number"):
        reclaim_stops.positive_int(text)
