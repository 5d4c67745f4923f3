"""Status fields the operator stops writing go away (issue 97). The operator writes a status
by JSON merge patch, and an API server keeps every key a merge patch omits: a field that
went away must be written as null. Each test writes a status over an older one as the API
server does (tests/operator_fakes.py's FakeKube applies RFC 7386, tests/k8s/_patching.py)
and reads it back as a user does: ``parse_forecast``, the dashboard's line, the visibility
fallback, the printer columns. On fake time: the operator's bridge against the fakes."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from idlegate.api.forecast_status import UNAVAILABLE_REASON, Forecast, parse_forecast, rfc3339
from idlegate.api.status import Conditions, invalid_status
from idlegate.api.visibility import forecast_of
from idlegate.dashboard.model import forecast_text
from idlegate.operator.core.intents import LiveStatus
from idlegate.policy import make_scheduler
from idlegate.sim.task_times import EVIDENCE
from idlegate.sim.timestamps import from_datetime, stamp
from tests.k8s._patching import merge_patch
from tests.operator_fakes import (
    FakeClock,
    FakeKube,
    Harness,
    as_declared,
    forecasting,
    refreshed,
    stage,
)

T0 = 1_717_200_000.0


def status(h: Harness, name: str) -> dict[str, Any]:
    return h.kube.workflows[("default", name)]["status"]


async def submit(h: Harness, *names: str) -> None:
    for name in names:  # (one at a time: their arrival order is their queue's)
        body = h.kube.add_workflow(name, {"stages": [stage("a", duration=100.0)]})
        body["metadata"]["creationTimestamp"] = stamp(h.clock.now())
        h.admit(body)
        await h.settle()


def as_users_read(h: Harness, name: str) -> list[Any]:
    """The forecast of workflow `name` as each reader takes it from its stored status:
    `parse_forecast` (`kubectl`'s tools), the visibility API's fallback (a workflow's
    ``status.forecast`` mapping, with nothing shown by a refresh) and the dashboard's state."""
    stored = status(h, name)
    job = SimpleNamespace(payload=SimpleNamespace(forecast=stored.get("forecast")))
    _, state = forecast_text(stored, h.clock.now(), started=False)
    return [parse_forecast(stored), forecast_of(job, {}), state]


@pytest.mark.asyncio
async def test_a_forecast_that_becomes_available_keeps_no_unavailable() -> None:
    # the cold burst: "fewer than 10 tasks of its pool have ended" stayed beside the
    # numbers that followed, and every reader took the workflow for unavailable
    h = Harness(FakeKube(), FakeClock(T0), 1, make_scheduler("fifo"), forecast_interval=30.0)
    await submit(h, "w0", "w1")
    await refreshed(h)
    said = status(h, "w1")["forecast"]["unavailable"]
    assert said.startswith(f"fewer than {EVIDENCE} tasks of its pool have ended")
    as_declared(h.core.times)  # (ten of its tasks ended)
    h.clock.advance(5.0)
    await refreshed(h)
    stored = status(h, "w1")
    assert "unavailable" not in stored["forecast"]
    parsed, fallback, state = as_users_read(h, "w1")
    assert isinstance(parsed, Forecast) and fallback == parsed and state == "ok"
    assert not stored["startSummary"].startswith("unavailable")
    assert UNAVAILABLE_REASON not in {c["type"] for c in stored["conditions"]}


@pytest.mark.asyncio
async def test_a_started_workflows_forecast_has_no_position_nor_start_interval() -> None:
    # the issue: forecasts written after a start kept the last position from before it,
    # and a start interval a few seconds wide, which a started workflow does not have
    h = forecasting(FakeKube(), None, T0)
    await submit(h, "w0", "w1", "w2")
    await refreshed(h)
    assert status(h, "w1")["forecast"]["position"] == 1
    await h.finish("w0-a-0", after=100.0)
    await h.run("w1-a-0", after=1.5)  # (its pod runs 1.5 s after its release)
    h.clock.advance(5.0)
    await refreshed(h)
    forecast = status(h, "w1")["forecast"]
    assert "position" not in forecast and "startInterval" not in forecast
    parsed, fallback, state = as_users_read(h, "w1")
    assert isinstance(parsed, Forecast) and fallback == parsed and state == "ok"
    assert parsed.position is None and parsed.start_interval is None
    assert parsed.start == from_datetime(rfc3339(T0 + 101.5))  # (when it started: Running)
    line, _ = forecast_text(status(h, "w1"), h.clock.now(), started=True)
    assert line.startswith("started 6s ago, finish in")  # (its status says it to the second)
    assert status(h, "w2")["forecast"]["position"] == 1  # (the waiting one moved up)


@pytest.mark.asyncio
async def test_the_first_forecast_is_scored_on_the_first_pod_running_not_the_release() -> None:
    # the issue: firstForecast.startedAt was the release, 0.5-1.5 s before the first pod
    # ran; the start a user sees (START, the score) is the pod's
    h = forecasting(FakeKube(), None, T0)
    await submit(h, "w0", "w1")
    await refreshed(h)
    made = h.core.workflows[("default", "w1")].forecast_made
    assert made is not None
    await h.finish("w0-a-0", after=100.0)
    stored = status(h, "w1")
    assert stored["firstForecast"]["startedAt"] == stamp(T0 + 100.0)  # (released: so far)
    await h.run("w1-a-0", after=1.25)
    await refreshed(h)
    stored = status(h, "w1")
    assert from_datetime(stored["firstForecast"]["startedAt"]) == T0 + 101.25
    assert stored["startSummary"] == rfc3339(T0 + 101.25)
    error = h.metrics.value("idlegate_forecast_error_seconds_sum", queue="", which="start")
    assert error == pytest.approx(abs(T0 + 101.25 - made.start))


def test_a_cap_the_policy_no_longer_sets_is_removed() -> None:
    async def scenario() -> dict[str, Any]:
        h = forecasting(FakeKube(), None, T0)
        await submit(h, "w0")
        wf = h.core.workflows[("default", "w0")]
        stored: dict[str, Any] = {}
        for cap in (3, 0):  # (a portfolio's candidate with a cap, then one without)
            wf.job.cap = cap
            stored = merge_patch(stored, LiveStatus(wf).read(h.clock.now()))
        return stored

    assert "parallelismCap" not in asyncio.run(scenario())


def test_an_invalid_workflow_keeps_no_forecast_nor_cap() -> None:
    old = {
        "phase": "Pending",
        "parallelismCap": 4,
        "forecast": {"computedAt": rfc3339(T0), "unavailable": "no history"},
        "startSummary": "unavailable",
        "finishSummary": "unavailable",
    }
    conditions = Conditions()
    conditions.set("Valid", False, "InvalidSpec", "stage 'a' has no tasks", 2, T0)
    stored = merge_patch(old, invalid_status(conditions, 2, 1))
    assert parse_forecast(stored) is None
    assert not {"parallelismCap", "startSummary", "finishSummary"} & set(stored)


@pytest.mark.asyncio
async def test_a_pool_without_queues_nor_resources_keeps_none_of_their_status() -> None:
    h = forecasting(FakeKube(), None, T0)
    old = {
        "queues": [{"name": "a", "waiting": 3}],
        "queuesSummary": "a=3",
        "capacity": {"cpu": "24"},
        "used": {"cpu": "8"},
        "usage": {"cpu": "8/24"},
    }
    stored = merge_patch(old, h.bridge.status())  # (its queues and resources went away)
    assert not set(old) & set(stored)
    assert stored["size"] == 1
