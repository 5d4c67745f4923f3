"""A DagWorkflow's first forecast across an operator restart: the operator keeps the first
forecast made while a workflow waited until it starts and ends, then scores it (the metric,
the pool's calibration, the history record). A DagWorkflow's is also in its status
(``status.firstForecast``), so an operator restarted while the workflow waits or runs keeps
it again as it rebuilds the pool, and scores it as the operator that never stopped does. One
that cannot be read is ignored with a Warning: no crash, no made-up score. On fake time: the
operator's bridge against the fakes (tests/operator_fakes.py), the refresh poked by hand."""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import pytest

from idlegate.api.forecast_first import first_status, parse_first
from idlegate.api.forecast_status import Forecast
from idlegate.errors import SpecError
from idlegate.operator.edge import intake
from idlegate.operator.forecasting.book import resumed_calibration
from idlegate.sim.forecast import Span
from idlegate.sim.history import load_history
from idlegate.sim.timestamps import stamp
from tests.operator_fakes import FakeKube, Harness, forecasting, refreshed, stage

T0 = 1_717_200_000.0
LATE = 30.0
"""Each task runs this much longer than its estimate (100 s): every forecast is off."""
RUN = 100.0 + LATE
ERROR = "idlegate_forecast_error_seconds"


async def restarted(h: Harness, kube: FakeKube, sink: Path) -> Harness:
    """The next operator, at `h`'s instant, on the same API and sink, its pool rebuilt."""
    await h.settle()
    h.bridge.history.close()  # (the records queued are written)
    assert h.bridge.forecasts is not None
    h.bridge.forecasts.close()
    second = forecasting(kube, sink, h.clock.now())
    await intake.rebuild(second.pools)
    await second.settle()
    return second


async def submit(h: Harness, name: str) -> None:
    body = h.kube.add_workflow(name, {"stages": [stage("a", duration=100.0)]})
    body["metadata"]["creationTimestamp"] = stamp(h.clock.now())  # (its arrival, as the API's)
    h.admit(body)
    await h.settle()


async def begin(kube: FakeKube, sink: Path) -> Harness:
    """w0 runs on the pool of one, w1 waits behind it and is forecast at T0."""
    h = forecasting(kube, sink, T0)
    await submit(h, "w0")
    await submit(h, "w1")
    await refreshed(h)
    return h


async def w0_ends(h: Harness) -> None:
    """w0 ends `LATE`, w1 starts; a refresh follows (the start's score)."""
    await h.finish("w0-a-0", after=T0 + RUN - h.clock.now())
    assert h.released() == ["w1-a-0"]
    await h.run("w1-a-0")  # (its pod runs: the start its user sees)
    await refreshed(h)


async def w1_ends(h: Harness) -> None:
    await h.finish("w1-a-0", after=T0 + 2 * RUN - h.clock.now())
    await refreshed(h)
    h.bridge.history.close()


def observed(*hs: Harness) -> dict[str, tuple[float, float]]:
    """(count, sum) of the error metric per which, over the operators `hs`."""
    return {
        which: (
            sum(h.metrics.value(f"{ERROR}_count", queue="", which=which) for h in hs),
            sum(h.metrics.value(f"{ERROR}_sum", queue="", which=which) for h in hs),
        )
        for which in ("start", "finish")
    }


def scores(h: Harness) -> dict[str, list[float]]:
    refresh = h.bridge.forecasts
    assert refresh is not None
    return {which: list(c.scores) for which, c in refresh.calibration.items()}


def as_recorded(sink: Path) -> dict[str, list[float]]:
    """The scores the history records in `sink` give (`resumed_calibration`)."""
    return {k: list(c.scores) for k, c in resumed_calibration(load_history(sink)).items()}


def recorded(sink: Path, name: str) -> dict[str, float]:
    (record,) = [r for r in load_history(sink) if r.name == f"default/{name}"]
    return dict(record.forecast or ())


async def never_restarted(tmp_path: Path) -> tuple[Harness, Path]:
    sink = tmp_path / "never.jsonl"
    h = await begin(FakeKube(), sink)
    h.clock.advance(20.0)
    await refreshed(h)  # (a later forecast moves; the first stays the one kept)
    await w0_ends(h)
    await w1_ends(h)
    return h, sink


@pytest.mark.asyncio
async def test_a_workflow_waiting_at_the_restart_is_scored_as_if_none_happened(
    tmp_path: Path,
) -> None:
    never, never_sink = await never_restarted(tmp_path)
    made = recorded(never_sink, "w1")
    assert made["madeAt"] == T0 and made["startedAt"] == T0 + RUN
    assert observed(never)["finish"][0] == observed(never)["start"][0] == 1

    kube, sink = FakeKube(), tmp_path / "history.jsonl"
    first = await begin(kube, sink)
    status = kube.workflows[("default", "w1")]["status"]
    assert status["firstForecast"]["computedAt"] == "2024-06-01T00:00:00Z"  # (T0)
    assert "startedAt" not in status["firstForecast"]
    first.clock.advance(20.0)
    second = await restarted(first, kube, sink)  # (w1 waits)
    await refreshed(second)  # (the restarted pool forecasts w1 again, and keeps the first)
    await w0_ends(second)
    await w1_ends(second)
    # on the old code the restarted pool kept its own first forecast (made at T0 + 20)
    assert recorded(sink, "w1") == made
    assert observed(first, second) == observed(never)
    assert observed(first)["start"][0] == 0
    # scored as made: its status keeps no typical stretch of the refresh that made it (the
    # pool that never stopped scores it relative to the stretch learned since), so as its
    # history record gives it
    assert scores(second) == as_recorded(sink)
    assert all(len(s) == 1 for s in scores(second).values())


@pytest.mark.asyncio
async def test_a_workflow_running_at_the_restart_is_scored_as_if_none_happened(
    tmp_path: Path,
) -> None:
    never, never_sink = await never_restarted(tmp_path)
    kube, sink = FakeKube(), tmp_path / "history.jsonl"
    first = await begin(kube, sink)
    first.clock.advance(20.0)
    await refreshed(first)
    await w0_ends(first)  # (w1 starts: the first operator's metric has its start)
    started = kube.workflows[("default", "w1")]["status"]["firstForecast"]["startedAt"]
    assert started == "2024-06-01T00:02:10Z"  # (T0 + RUN)
    first.clock.advance(20.0)
    second = await restarted(first, kube, sink)  # (w1 runs)
    await refreshed(second)
    await w1_ends(second)
    # on the old code the restarted pool had no first forecast of w1: nothing scored
    assert recorded(sink, "w1") == recorded(never_sink, "w1")
    assert observed(first) == {"start": observed(never)["start"], "finish": (0.0, 0.0)}
    assert observed(first, second) == observed(never)  # (its start observed once)
    assert scores(second) == as_recorded(sink)  # (the start's score too, as made)


def bad(status: dict[str, Any], how: str) -> None:
    first = status["firstForecast"]
    if how == "interval":  # (above its start: no replays' interval holds it)
        first["startReplayed"] = ["2030-01-01T00:00:00Z", "2030-01-01T00:00:01Z"]
    elif how == "time":
        first["finish"] = "soon"
    else:
        status["firstForecast"] = ["not", "a", "mapping"]


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["interval", "time", "shape"])
async def test_a_first_forecast_that_cannot_be_read_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    kube, sink = FakeKube(), tmp_path / "history.jsonl"
    first = await begin(kube, sink)
    first.clock.advance(20.0)
    await first.settle()
    bad(kube.workflows[("default", "w1")]["status"], how)
    with caplog.at_level(logging.WARNING, logger="idlegate.operator.forecasting.book"):
        second = await restarted(first, kube, sink)
    (warning,) = [r for r in caplog.records if "first forecast" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert "default/w1 is ignored" in warning.getMessage()
    refresh = second.bridge.forecasts
    assert refresh is not None and refresh.kept == {}  # (nothing made up)
    await refreshed(second)  # (the pool goes on: w1's first forecast is now this one)
    await w0_ends(second)
    await w1_ends(second)
    assert recorded(sink, "w1")["madeAt"] == T0 + 20.0


@pytest.mark.asyncio
async def test_a_started_workflow_whose_status_does_not_say_when_gives_no_score(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Its status write at the start was lost: its start is not known, so no score."""
    kube, sink = FakeKube(), tmp_path / "history.jsonl"
    first = await begin(kube, sink)
    await w0_ends(first)
    del kube.workflows[("default", "w1")]["status"]["firstForecast"]["startedAt"]
    with caplog.at_level(logging.WARNING, logger="idlegate.operator.forecasting.book"):
        second = await restarted(first, kube, sink)
    assert "does not say when" in caplog.text
    await refreshed(second)
    await w1_ends(second)
    assert observed(second) == {"start": (0.0, 0.0), "finish": (0.0, 0.0)}
    assert recorded(sink, "w1") == {}


def test_the_status_gives_back_the_forecast_it_was_written_from() -> None:
    made = Forecast(
        T0 + 0.25, T0 + 100.5, (T0 + 80.0, T0 + 130.0), T0 + 200.5, (T0 + 190, T0 + 260)
    )
    replayed = Span(T0 + 90.0, T0 + 100.5, T0 + 110.0), Span(T0 + 195.0, T0 + 200.5, T0 + 230.0)
    status = {"firstForecast": first_status(made, replayed, T0 + 120.125)}
    back = parse_first(copy.deepcopy(status))
    assert back is not None
    assert (back.made, back.replayed, back.started) == (made, replayed, T0 + 120.125)
    assert status["firstForecast"]["computedAt"] == "2024-06-01T00:00:00.250000Z"
    assert parse_first({}) is None
    status["firstForecast"]["finishReplayed"][0] = "2024-06-01T00:03:21Z"  # (past 200.5)
    with pytest.raises(SpecError, match=r"replays' finish interval .* does not hold"):
        parse_first(status)


@pytest.mark.asyncio
async def test_a_workflow_that_ended_while_none_ran_keeps_its_forecast_in_its_record(
    tmp_path: Path,
) -> None:
    """Its record holds its first forecast (the next restart's calibration has it); the
    restarted pool does not score it: it is done before the pool's refresh sees it."""
    _, never_sink = await never_restarted(tmp_path)
    kube, sink = FakeKube(), tmp_path / "history.jsonl"
    first = await begin(kube, sink)
    await w0_ends(first)
    first.clock.t = T0 + 2 * RUN
    pod = kube.pods[("default", "w1-a-0")]
    pod["status"]["phase"] = "Succeeded"  # (while no operator runs)
    second = await restarted(first, kube, sink)
    await refreshed(second)
    second.bridge.history.close()
    assert recorded(sink, "w1") == recorded(never_sink, "w1")
    assert observed(second) == {"start": (0.0, 0.0), "finish": (0.0, 0.0)}
