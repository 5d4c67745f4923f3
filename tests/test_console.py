"""The console tables' wording (known answers on hand-built accounts)."""

from __future__ import annotations

import pytest

from idlegate.evaluation.console import render_followed

ROUND = {
    "at": 180.0,
    "candidate": "srpt",
    "reason": "best",
    "workflows": 40,
    "score": 32.4,
    "runner_up": "fifo",
    "runner_up_score": 33.0,
    "left_out": [],
}


@pytest.mark.parametrize(
    ("rounds", "switches", "title"),
    [
        (0, 0, "Followed: learned:default, no round ran"),
        (1, 1, "Followed: learned:default until the first round, then 1 round, 1 switch"),
        (2, 0, "Followed: learned:default until the first round, then 2 rounds, 0 switches"),
    ],
)
def test_the_followed_table_counts_rounds_and_switches(
    rounds: int, switches: int, title: str
) -> None:
    account = {
        "start": "learned:default",
        "rounds": [ROUND] * rounds,
        "switches": switches,
        "time_followed": {"learned:default": 180.0, "srpt": 60.0},
    }
    table = render_followed(account)
    assert table.title == title
    assert table.row_count == rounds
    assert table.caption == "share of the run: learned:default 75 %, srpt 25 %"
