"""A policy error never stalls the pool (operator/core/decider.py): whatever the policy raises
or answers illegally, that question goes to the fallback rules (a lookahead planner's
base, then fair); the error is counted, logged once with its traceback, and evented as
``PolicyError``; the Events never describe a wait that did not happen."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from idlegate.operator.core.decider import fallback_rules
from idlegate.operator.core.events import Schedule
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
    return [r for r in caplog.records if r.exc_info and r.name.endswith("decider")]


async def test_a_policy_that_always_raises_still_runs_every_workflow_under_fair(caplog):
    h = harness(pool=2, scheduler=Raising())
    with caplog.at_level(logging.ERROR, "idlegate.operator.core.decider"):
        for name in ("w1", "w2", "w3"):
            await h.submit(name, CHAIN)
        await h.run_to_completion()
    assert all(h.kube.status(w)["phase"] == "Succeeded" for w in ("w1", "w2", "w3"))
    failures = h.metrics.value("idlegate_policy_errors_total", policy="raising")
    assert failures == h.bridge.core.scheduler.calls > 3
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


class Counting:
    """Raises `error` with the state's job count in its message, as the ONNX policy's
    non-finite scores do (`PolicyOutputError`)."""

    name = "counting"

    def __init__(self) -> None:
        self.error: type[Exception] = AttributeError

    def reset(self, rng: Any) -> None:
        pass

    def decide(self, view: ClusterView) -> Action:
        raise self.error(f"stuck on a state of {len(view.jobs)} job(s)")


async def test_each_type_of_error_logs_one_traceback_whatever_its_message_says(caplog):
    policy = Counting()
    h = harness(pool=1, scheduler=policy)
    with caplog.at_level(logging.ERROR, "idlegate.operator.core.decider"):
        for i in range(12):  # one question now, one at each completion: on 12 to 1 jobs
            await h.submit(f"w{i}", {"stages": [stage("a")]})
        await h.run_to_completion()
        policy.error = ValueError
        for i in range(3):
            await h.submit(f"v{i}", {"stages": [stage("a")]})
        await h.run_to_completion()
    assert [r.getMessage().split("(")[1].split(":")[0] for r in _tracebacks(caplog)] == [
        "AttributeError",
        "ValueError",
    ]
    assert h.bridge.core.decider.errors.seen == {
        ("counting", "AttributeError"): 12,
        ("counting", "ValueError"): 3,
    }
    # the 10th repeat is logged again, as one line (the latest message) without a traceback
    (tenth,) = [r for r in caplog.records if "the same way 10 times" in r.getMessage()]
    assert "AttributeError: stuck on a state of" in tenth.getMessage() and not tenth.exc_info


class FailsWhenBusy:
    """FIFO, but fails on a state of more than two jobs (as tests/nan_model.py's model)."""

    name = "busy-shy"

    def __init__(self) -> None:
        self.fifo = make_scheduler("fifo")

    def reset(self, rng: Any) -> None:
        self.fifo.reset(rng)

    def decide(self, view: ClusterView) -> Action:
        if len(view.jobs) > 2:
            raise ValueError(f"cannot decide on {len(view.jobs)} jobs")
        return self.fifo.decide(view)


async def test_the_following_gauge_shows_the_fallback_while_it_decides_then_the_policy():
    h = harness(pool=1, scheduler=FailsWhenBusy())

    def following() -> dict[str, float]:
        return {
            p: h.metrics.value("idlegate_policy_following", policy=p) for p in ("busy-shy", "fair")
        }

    one = {"stages": [stage("a")]}
    await h.submit("w0", one)  # one job: the policy decides
    assert following() == {"busy-shy": 1, "fair": 0}
    for name in ("w1", "w2", "w3"):  # the pool is full: no question yet
        await h.submit(name, one)
    await h.finish("w0-a-0")  # a question on three jobs: fair answers it
    assert h.released() == ["w1-a-0"]
    assert following() == {"busy-shy": 0, "fair": 1}
    await h.run_to_completion()  # the last questions are on two jobs or fewer
    assert following() == {"busy-shy": 1, "fair": 0}
    assert h.metrics.value("idlegate_policy_errors_total", policy="busy-shy") > 0


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
    h.bridge.core.decider.fallbacks = (Raising("fallback", "also broken"),)
    await h.submit("w", CHAIN)
    assert h.released() == []  # nothing could be decided
    # (one Event at its admission says it was accepted and why it waits: issue 79)
    assert _events(h, "Waiting") == []
    (waiting,) = _events(h, "Accepted")
    assert waiting["message"].startswith("Accepted: 2 stages") and waiting["message"].endswith(
        ". Stage 'a' is runnable and waits for an executor: policy raising failed to decide and "
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
    h.bridge.core.decider.fallbacks = fallback_rules(h.bridge.core.scheduler)
    h.bridge.handle(Schedule(force=True))
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
    (waiting,) = _events(h2, "Accepted")  # (it says why it waits too: one Event)
    assert waiting["message"].endswith(
        "policy wait-first chose to wait for a better moment; 3 executor(s) stay free until "
        "the next event."
    )
    assert not _events(h2, "PolicyError")
