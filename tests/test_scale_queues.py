"""benchmarks/scale_queues.py's reclaim questions (issue 82, item 1's cost): each question
stops a borrowing queue's task and starts an owner's, or the benchmark says so."""

from __future__ import annotations

from benchmarks.scale_queues import reclaim_question_cost


def test_each_reclaim_question_stops_a_task_and_starts_one():
    # (its own asserts: a question that stopped nothing, or started nothing, fails it)
    cost = reclaim_question_cost(40, 4, questions=3)
    assert set(cost) == {"decision_ms", "reclaim_ms"}
    assert cost["decision_ms"] > 0 and cost["reclaim_ms"] >= 0
