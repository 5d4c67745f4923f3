"""A pool's forecast calibration across operator restarts (issue 70): the calibration is a
function of the resolved forecasts, which each finished DagWorkflow's history record holds
(its first forecast, the replays' interval before the calibration widened it, its real start
and finish); a restarted operator with the same history sink rebuilds it from the pool's last
records and goes on from there. A corrupt stored interval leaves it cold, loudly (a Warning
and ``idlegate_forecast_calibration_errors_total``), never the pool's end. On fake time: the
operator's bridge against the fakes (tests/operator_fakes.py), the refresh poked by hand."""

from __future__ import annotations

import json
import logging
from concurrent.futures import Future
from pathlib import Path

import aiohttp.web
import pytest
from aiohttp.test_utils import TestClient, TestServer

from idlegate.api.forecast_ask import WHAT_IF_PATH
from idlegate.errors import SpecError
from idlegate.operator.edge.visibility_http import add_visibility
from idlegate.operator.forecasting.book import resumed_calibration
from idlegate.operator.forecasting.refresh import ForecastRefresh
from idlegate.sim.history import HistoryWorkflow, Tail, load_history
from tests.operator_fakes import FakeKube, Harness, forecasting, refreshed, stage

T0 = 1_717_200_000.0
FLOOD = 6
"""One-stage workflows of 100 s (estimate) on a pool of one: five wait."""
LATE = 30.0
"""Each task runs this much longer than its estimate: every forecast is off."""


async def flood(h: Harness) -> ForecastRefresh:
    """Submit `FLOOD` workflows, forecast them, run them one by one `LATE`, refreshing
    (and so scoring) at each start and end."""
    for i in range(FLOOD):
        await h.submit(f"w{i}", {"stages": [stage("a", duration=100.0)]})
    refresh = await refreshed(h)
    for _ in range(FLOOD):
        (pod,) = h.released()
        await h.finish(pod, after=100.0 + LATE)
        await refreshed(h)
    return refresh


def scores(refresh: ForecastRefresh) -> dict[str, list[float]]:
    return {which: list(c.scores) for which, c in refresh.calibration.items()}


def as_recorded(records: list[HistoryWorkflow]) -> dict[str, list[float]]:
    """The scores the pool's history records give (`resumed_calibration`)."""
    return {which: list(c.scores) for which, c in resumed_calibration(records).items()}


@pytest.mark.asyncio
async def test_a_restarted_operator_resumes_its_pools_calibration_from_the_history_sink(
    tmp_path: Path,
) -> None:
    sink = tmp_path / "history.jsonl"
    first = forecasting(FakeKube(), sink, T0)
    live = scores(await flood(first))
    first.bridge.history.close()  # (the records queued are written)
    assert len(live["start"]) == len(live["finish"]) == FLOOD - 1  # (w0 never waited)
    assert all(s > 0 for s in live["finish"])  # (each ended after its interval)
    records = load_history(sink)
    assert "startLow" in dict(records[-1].forecast or ())
    before = as_recorded(records)
    # (a record keeps no typical stretch of its refresh: its scores are as made, where the
    # pool scored each relative to the stretch it learned since, here 1.3 for 1: lower)
    assert all(a < b for a, b in zip(live["finish"], before["finish"], strict=True))
    # the next operator: the workflows are gone, only the sink remembers them
    second = forecasting(FakeKube(), sink, T0 + 100_000)
    await second.submit("next", {"stages": [stage("a", duration=100.0)]})
    refresh = await refreshed(second)
    assert scores(refresh) == before
    assert second.metrics.value("idlegate_forecast_calibration_errors_total") == 0
    second.bridge.history.close()


@pytest.mark.asyncio
async def test_a_sink_without_records_starts_the_calibration_cold(
    tmp_path: Path,
) -> None:
    h = forecasting(FakeKube(), tmp_path / "history.jsonl", T0)  # (no file yet: nothing to resume)
    await h.submit("next", {"stages": [stage("a", duration=100.0)]})
    refresh = await refreshed(h)
    assert scores(refresh) == {"start": [], "finish": []}
    assert h.metrics.value("idlegate_forecast_calibration_errors_total") == 0
    h.bridge.history.close()


def sink_line(name: str, forecast: dict[str, float]) -> str:
    record = {
        "name": name, "arrival": T0, "jctSeconds": 300.0, "pool": "default",
        "stages": [stage("a", duration=100.0)], "forecast": forecast,
    }  # fmt: skip
    return json.dumps(record)


GOOD = {
    "madeAt": T0, "start": T0 + 100, "finish": T0 + 200, "startedAt": T0 + 120,
    "startLow": T0 + 90, "startHigh": T0 + 110, "finishLow": T0 + 190, "finishHigh": T0 + 210,
}  # fmt: skip


@pytest.mark.asyncio
async def test_a_corrupt_stored_interval_starts_cold_with_a_warning_and_a_metric(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = tmp_path / "history.jsonl"
    corrupt = {**GOOD, "startLow": T0 + 150}  # (above its start: no interval holds it)
    sink.write_text(sink_line("good", GOOD) + "\n" + sink_line("bad", corrupt) + "\n")
    h = forecasting(FakeKube(), sink, T0 + 1000)
    await h.submit("next", {"stages": [stage("a", duration=100.0)]})
    await h.submit("after", {"stages": [stage("a", duration=100.0)]})
    with caplog.at_level(logging.WARNING, logger="idlegate.operator.forecasting.book"):
        refresh = await refreshed(h)
    assert scores(refresh) == {"start": [], "finish": []}
    assert h.metrics.value("idlegate_forecast_calibration_errors_total") == 1
    (warning,) = [r for r in caplog.records if "not resumed" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert "the forecast's start interval" in warning.getMessage()
    assert h.released() == ["next-a-0"]  # (the pool goes on)
    h.bridge.history.close()


def test_the_calibration_rebuilt_from_records_scores_as_the_refresh_did(tmp_path: Path) -> None:
    sink = tmp_path / "history.jsonl"
    old = {**GOOD}
    for key in ("startLow", "startHigh", "finishLow", "finishHigh"):
        del old[key]  # (an older operator's record: no interval, no score)
    sink.write_text(sink_line("old", old) + "\n" + sink_line("new", GOOD) + "\n")
    resumed = resumed_calibration(load_history(sink))
    # started 120 s after, 10 s past its interval's top, forecast 100 s ahead: 0.1 a second;
    # finished at +300, 90 s past 210, forecast 200 s ahead
    assert list(resumed["start"].scores) == [pytest.approx(0.1)]
    assert list(resumed["finish"].scores) == [pytest.approx(90 / 200)]
    sink.write_text(sink_line("bad", {**GOOD, "finishHigh": T0 + 150}) + "\n")
    with pytest.raises(SpecError, match=r"the forecast's finish interval .* does not hold"):
        resumed_calibration(load_history(sink))


def test_a_read_that_failed_leaves_the_calibration_cold_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tests.test_forecast_refresh import FakeMetrics, busy_pool, refresh_of

    metrics = FakeMetrics()
    refresh, _ = refresh_of(busy_pool(2), metrics=metrics)
    failed: Future[Tail] = Future()
    failed.set_exception(OSError("the volume is gone"))
    refresh.resume_from(failed)
    with caplog.at_level(logging.WARNING):
        refresh.poke()  # (no loop: in place)
    assert refresh.resuming is None and metrics.forecast_calibration_errors.value == 1
    assert "OSError: the volume is gone" in caplog.text
    assert [len(c.scores) for c in refresh.calibration.values()] == [0, 0]


@pytest.mark.asyncio
async def test_a_what_if_before_the_first_refresh_after_a_restart_has_the_resumed_calibration(
    tmp_path: Path,
) -> None:
    """The sink is read but no refresh has run yet: a what-if takes the resumed calibration
    itself, and answers as it does after the pool's first refresh (cold, its interval
    would be the priors')."""
    sink = tmp_path / "history.jsonl"
    first = forecasting(FakeKube(), sink, T0)
    await flood(first)
    first.bridge.history.close()
    before = as_recorded(load_history(sink))
    second = forecasting(FakeKube(), sink, T0 + 100_000)
    refresh = second.bridge.forecasts
    assert refresh is not None and refresh.resuming is not None
    refresh.resuming.result(timeout=10)  # (read; taken by nothing yet)
    assert refresh.refreshes == 0 and scores(refresh) == {"start": [], "finish": []}
    app = aiohttp.web.Application()
    add_visibility(app, lambda: second.pools)
    body = {"kind": "DagWorkflow", "metadata": {"name": "asked"}, "spec": {"stages": [stage("a")]}}
    async with TestClient(TestServer(app)) as client:
        asked = await client.post(WHAT_IF_PATH, json=body)
        assert asked.status == 200, await asked.text()
        early = (await asked.json())["forecast"]
        assert scores(refresh) == before
        await refreshed(second)
        assert refresh.refreshes == 1
        again = await client.post(WHAT_IF_PATH, json=body)
        assert (await again.json())["forecast"] == early
        refused = await client.post(WHAT_IF_PATH, json={"kind": "ConfigMap", "data": {}})
        assert refused.status == 400
        assert (await refused.json())["error"] == (
            "the body: it is a ConfigMap, not a DagWorkflow (kind: DagWorkflow, with a spec)"
        )
    second.bridge.history.close()
