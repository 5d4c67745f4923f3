"""A policy error never stalls the pool (operator/decisions.py): whatever the policy raises
or answers illegally, that question goes to the fallback rules (a lookahead planner's
base, then fair); the error is counted, logged once with its traceback, and evented as
``PolicyError``; the Events never describe a wait that did not happen."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from idlegate.operator.decisions import fallback_rules
from idlegate.policy import make_scheduler
from idlegate.sim.protocol import WAIT, Action, ClusterView, Decision
from tests.operator_fakes import Harness, harness, stage

pytestmark = pytest.mark.asyncio

CHAIN = {"stages": [stage("a", 2), stage("b", 1, deps=("a",))]}


class Raising:
    """A policy that raises on every call."""

    def __init__(self, name: str = "raising", message: str = "no attribute 'sample'") -> None:
        self.name, self.message, self.calls = name, message, 0

    def reset(self, rng: Any) -> None:
        pass

    def decide(self, view: ClusterView) -> Action:
        self.calls += 1
        raise AttributeError(self.message)


class NotRunnable:
    """Answers a stage that is not runnable (a child whose parent has not finished)."""

    name = "not-runnable"

    def reset(self, rng: Any) -> None:
        pass

    def decide(self, view: ClusterView) -> Action:
        job = view.runnable_stages()[0].job
        return Decision(job.stages[-1], view.num_executors)


def _events(h: Harness, reason: str) -> list[dict[str, Any]]:
    return [e for e in h.kube.events if e["reason"] == reason]


def _tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info and r.name.endswith("decisions")]


async def test_a_policy_that_always_raises_still_runs_every_workflow_under_fair(caplog):
    h = harness(pool=2, scheduler=Raising())
    with caplog.at_level(logging.ERROR, "idlegate.operator.decisions"):
        for name in ("w1", "w2", "w3"):
            await h.submit(name, CHAIN)
        await h.run_to_completion()
    assert all(h.kube.status(w)["phase"] == "Succeeded" for w in ("w1", "w2", "w3"))
    failures = h.metrics.value("idlegate_policy_errors_total", policy="raising")
    assert failures == h.bridge.scheduler.calls > 3
    # one traceback for the one distinct error, however often it happened
    (record,) = _tracebacks(caplog)
    assert "no attribute 'sample'" in record.getMessage()
    errors = _events(h, "PolicyError")
    assert {e["involvedObject"]["name"] for e in errors} == {"w1", "w2", "w3"}
    assert all(e["type"] == "Warning" for e in errors)
    assert errors[0]["message"] == (
        "Policy raising failed to decide (AttributeError: no attribute 'sample'); "
        "the fallback rule fair decided instead."
    )
    released = [e["message"] for e in _events(h, "Released") if "chose" in e["message"]]
    assert released and all("the fallback rule fair (policy raising failed)" in m for m in released)
    assert not any("chose to wait" in e["message"] for e in h.kube.events)


async def test_distinct_errors_each_log_one_traceback_and_repeats_are_counted(caplog):
    policy = Raising(message="stuck")
    h = harness(pool=1, scheduler=policy)
    with caplog.at_level(logging.ERROR, "idlegate.operator.decisions"):
        for i in range(12):
            await h.submit(f"w{i}", {"stages": [stage("a")]})
        policy.message = "other"  # the next 11 questions, one at each completion
        await h.run_to_completion()
    assert [r.getMessage().split("(")[1].split(")")[0] for r in _tracebacks(caplog)] == [
        "AttributeError: stuck",
        "AttributeError: other",
    ]
    decider = h.bridge.decider
    assert decider.errors.seen[("raising", "AttributeError", "stuck")] == 1
    assert decider.errors.seen[("raising", "AttributeError", "other")] == 11
    # the 10th repeat is logged again, as one line without a traceback
    assert any("failed the same way 10 times" in r.getMessage() for r in caplog.records)


async def test_an_illegal_answer_falls_back_and_the_event_goes_to_the_named_workflow():
    h = harness(pool=2, scheduler=NotRunnable())
    await h.submit("first", CHAIN)
    await h.submit("second", CHAIN)
    await h.run_to_completion()
    assert all(h.kube.status(w)["phase"] == "Succeeded" for w in ("first", "second"))
    assert h.metrics.value("idlegate_policy_errors_total", policy="not-runnable") > 0
    (error, *_) = _events(h, "PolicyError")
    assert "IllegalDecisionError" in error["message"] and "is not runnable" in error["message"]
    assert error["involvedObject"]["name"] == "first"  # the workflow its answer named


async def test_a_lookahead_planner_falls_back_to_its_base():
    planner = make_scheduler("lookahead:srpt")
    assert [r.name for r in fallback_rules(planner)] == ["srpt", "fair"]
    assert [r.name for r in fallback_rules(make_scheduler("srpt"))] == ["fair"]
    assert fallback_rules(make_scheduler("fair")) == ()

    def broken(view: ClusterView) -> Action:
        raise RuntimeError("planning failed")

    planner.decide = broken  # type: ignore[method-assign]
    h = harness(pool=2, scheduler=planner)
    await h.submit("w", CHAIN)
    await h.run_to_completion()
    assert h.kube.status("w")["phase"] == "Succeeded"
    released = [e["message"] for e in _events(h, "Released") if "chose" in e["message"]]
    assert all(f"the fallback rule srpt (policy {planner.name} failed)" in m for m in released)
    assert h.metrics.value("idlegate_policy_errors_total", policy=planner.name) > 0


async def test_when_the_fallback_fails_too_the_pool_waits_and_the_events_say_why():
    h = harness(pool=2, scheduler=Raising())
    h.bridge.decider.fallbacks = (Raising("fallback", "also broken"),)
    await h.submit("w", CHAIN)
    assert h.released() == []  # nothing could be decided
    (waiting,) = _events(h, "Waiting")
    assert waiting["message"] == (
        "Stage 'a' is runnable and waits for an executor: policy raising failed to decide and "
        "so did its fallback rule(s) fallback, so nothing was decided; 2 executor(s) stay "
        "free until the next event."
    )
    (error,) = _events(h, "PolicyError")
    assert error["involvedObject"]["name"] == "w"  # the workflow left waiting
    assert "AttributeError: no attribute 'sample'" in error["message"]
    assert "the fallback rule failed too (AttributeError: also broken)" in error["message"]
    assert error["message"].endswith(
        "nothing was decided: free executors stay free until the next event."
    )
    for policy in ("raising", "fallback"):
        assert h.metrics.value("idlegate_policy_errors_total", policy=policy) == 1
    # the policy's own WAIT is described as its choice, and only then
    h.bridge.decider.fallbacks = fallback_rules(h.bridge.scheduler)
    h.bridge.cluster.needs_schedule = True
    h.bridge.schedule()
    await h.settle()
    assert len(h.released()) == 2


class _WaitFirst:
    """Waits at its first question, then runs FIFO."""

    name = "wait-first"

    def __init__(self) -> None:
        self.fifo, self.asked = make_scheduler("fifo"), 0

    def reset(self, rng: Any) -> None:
        self.fifo.reset(rng)

    def decide(self, view: ClusterView) -> Action:
        self.asked += 1
        return WAIT if self.asked == 1 else self.fifo.decide(view)


async def test_a_policy_that_waits_is_said_to_have_chosen_to():
    h2 = harness(pool=3, scheduler=_WaitFirst())
    await h2.submit("w", CHAIN)
    (waiting,) = _events(h2, "Waiting")
    assert waiting["message"].endswith(
        "policy wait-first chose to wait for a better moment; 3 executor(s) stay free until "
        "the next event."
    )
    assert not _events(h2, "PolicyError")
