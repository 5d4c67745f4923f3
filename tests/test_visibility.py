"""The visibility API's document (idlegate.api.visibility) from a pool's state machine, its
narrowing and filtering, its table, its HTTP route, and the ``status.forecast`` shape
(idlegate.api.forecast_status) it carries."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import aiohttp.web
import pytest
from aiohttp.test_utils import TestClient, TestServer

from idlegate.api.forecast_status import (
    Forecast,
    ForecastFormatError,
    Unavailable,
    describe,
    dump_forecast,
    parse_forecast,
    relative,
)
from idlegate.api.task_pods import Owner
from idlegate.api.visibility import PATH, narrow, only_namespaces, pending, table
from idlegate.operator.edge.visibility_http import add_visibility
from idlegate.policy.heuristics import FifoScheduler
from idlegate.sim.admission import Admission
from idlegate.sim.cluster import Cluster
from idlegate.sim.queues import queues_from
from tests.helpers import chain

T0 = 1_800_000_000.0
LAST = ("t", "last", 0)


# -- status.forecast ---------------------------------------------------------------------------


def test_a_forecast_goes_to_the_status_and_back():
    f = Forecast(T0, T0 + 60, (T0 + 30, T0 + 120), T0 + 600, (T0 + 400, T0 + 900), position=3)
    status = {"forecast": dump_forecast(f)}
    assert status["forecast"]["start"] == "2027-01-15T08:01:00Z"
    assert status["forecast"]["position"] == 3
    assert parse_forecast(status) == f
    gone = Unavailable(T0, "stage 'load' has no duration estimate and no history")
    assert dump_forecast(gone) == {
        "computedAt": "2027-01-15T08:00:00Z",
        "unavailable": "stage 'load' has no duration estimate and no history",
    }
    assert parse_forecast({"forecast": dump_forecast(gone)}) == gone
    assert parse_forecast({}) is None and parse_forecast(None) is None


@pytest.mark.parametrize(
    ("forecast", "said"),
    [
        ("soon", "status.forecast is 'soon', not a mapping"),
        ({"computedAt": "yesterday"}, "status.forecast.computedAt is 'yesterday'"),
        (
            {"computedAt": "2027-01-15T08:00:00Z", "start": "2027-01-15T08:00:00Z"},
            "status.forecast.finish is None, not an RFC 3339 time",
        ),
        (
            {
                "computedAt": "2027-01-15T08:00:00Z",
                "start": "2027-01-15T08:00:00Z",
                "startInterval": "soon",
            },
            "status.forecast.startInterval is 'soon', not [lo, hi]",
        ),
        ({"computedAt": "2027-01-15T08:00:00Z", "unavailable": ""}, "not a sentence"),
    ],
)
def test_a_malformed_forecast_is_a_sentence(forecast: Any, said: str):
    with pytest.raises(ForecastFormatError, match=said.replace("[", r"\[").replace("]", r"\]")):
        parse_forecast({"forecast": forecast})


def test_a_forecast_time_lies_in_its_interval():
    with pytest.raises(ForecastFormatError, match="outside its interval"):
        Forecast(T0, T0 + 60, (T0 + 70, T0 + 80), T0 + 100, (T0 + 90, T0 + 110))


def test_forecasts_read_as_relative_times():
    assert relative(T0 + 240, T0) == "in 4m" and relative(T0 - 7200, T0) == "2.0h ago"
    assert relative(T0, T0) == "now"
    f = Forecast(T0, T0 + 240, (T0 + 120, T0 + 420), T0 + 900, (T0 + 660, T0 + 1260))
    assert describe(f, T0) == "start in 4m (in 2m – in 7m), finish in 15m (in 11m – in 21m)"
    assert describe(None, T0) == "no forecast yet"
    assert describe(Unavailable(T0, "no history"), T0) == "forecast unavailable: no history"


# -- the document from a pool ------------------------------------------------------------------


@dataclass
class Held:
    """A job's payload as the operator's kinds are: its owner (and maybe a forecast)."""

    owner: Owner
    forecast: Any = None


@dataclass
class Pools:
    bridges: dict[str, Any]
    waiting: dict[tuple[str, str], Any] = field(default_factory=dict)


def pool(jobs: list[tuple[str, str, int]], size: int = 3, tasks: int = 1) -> tuple[Pools, Cluster]:
    """A pool of `size` executors with queues a (1 pod, borrowing 1) and b (2 pods), and
    `jobs` (namespace, name, priority) arriving at 0, 1, 2, ... in queue a, each a stage
    of `tasks` tasks, run by FIFO (a decision round at each arrival)."""
    cluster = Cluster(size)
    raw = [
        {"name": "a", "nominal": {"pods": 1}, "borrowingLimit": {"pods": 1}},
        {"name": "b", "nominal": {"pods": 2}},
    ]
    cluster.admission = Admission(queues_from(raw), cluster.capacity, cluster.resource_names)
    for t, (ns, name, priority) in enumerate(jobs):
        owner = Owner(ns, name, f"uid-{name}", "DagWorkflow")
        job = cluster.add_job(chain(100.0, tasks=tasks), float(t), name, Held(owner))
        job.queue, job.priority = 0, priority
        while cluster.decide_once(FifoScheduler(), float(t)) is not None:
            pass
    now = float(len(jobs))
    cluster.advance(now)
    core = SimpleNamespace(cluster=cluster, settings=SimpleNamespace(pool_size=size), at=now)
    return Pools({"shared": SimpleNamespace(core=core, forecasts=None)}), cluster


def test_the_waiting_workflows_in_order_with_priority_and_the_admissions_reason():
    pools, cluster = pool([("t", "first", 0), ("t", "second", 0), ("u", "urgent", 5), LAST])
    doc = pending(pools)
    ((shared,),) = [[p] for p in doc["pools"]]
    a, b = shared["queues"]
    assert b == {"name": "b", "waiting": []}
    assert [(w["position"], w["name"], w["priority"]) for w in a["waiting"]] == [
        (1, "urgent", 5),  # (arrived after `last`: its priority puts it first)
        (2, "last", 0),
    ]
    running = [j.name for j in cluster.jobs if j.first_start is not None]
    assert running == ["first", "second"]  # (second borrowing b's idle pod)
    urgent = a["waiting"][0]
    assert urgent["reason"] == "queue a: pods 2/1 used, borrowing limit reached"
    assert urgent["namespace"] == "u" and urgent["kind"] == "DagWorkflow"
    assert urgent["started"] is False and urgent["forecast"] is None
    assert urgent["waitingSeconds"] == 2.0  # (arrived at 2, now is 4)


def test_a_full_pool_says_so_and_a_kept_forecast_is_carried():
    pools, cluster = pool([("t", "first", 0), ("t", "second", 0)], size=1)
    (second,) = [j for j in cluster.jobs if j.name == "second"]
    kept = Forecast(T0, T0 + 60, (T0 + 30, T0 + 120), T0 + 600, (T0 + 400, T0 + 900))
    second.payload.forecast = kept
    (w,) = pending(pools)["pools"][0]["queues"][0]["waiting"]
    # (the admission's own sentence: its queue holds the pool's one pod)
    assert w["reason"] == "queue a: pods 1/1 used, nothing idle to borrow in the cohort"
    result = cluster.admission_result()
    assert result is not None and w["reason"] == result.of(second).message
    assert w["forecast"] == dump_forecast(kept)


def test_narrowed_filtered_and_printed():
    pools, _ = pool([("t", "first", 0), ("t", "second", 0), ("u", "urgent", 5), LAST])
    waiting = SimpleNamespace(pool="big", reason="PoolNotFound", owner=Owner("t", "lost", "u1"))
    pools.waiting[("t", "lost")] = waiting
    doc = pending(pools)
    assert narrow(doc, "shared", "b")["pools"][0]["queues"] == [{"name": "b", "waiting": []}]
    assert narrow(doc, "other", None)["pools"] == []
    assert [u["name"] for u in narrow(doc, "big", None)["unpooled"]] == ["lost"]
    seen = only_namespaces(doc, ["t"])
    assert [w["name"] for w in seen["pools"][0]["queues"][0]["waiting"]] == ["last"]
    assert [u["name"] for u in only_namespaces(doc, ["u"])["unpooled"]] == []
    lines = table(doc, T0).splitlines()
    assert lines[0].split() == [
        "POOL", "QUEUE", "POS", "WORKFLOW", "KIND", "PRIO", "WAITING", "START", "FINISH"
    ]  # fmt: skip
    assert lines[1].split() == ["shared", "a", "1", "u/urgent", "DagWorkflow", "5", "2s", "-", "-"]
    assert lines[2:4] == [
        "    queue a: pods 2/1 used, borrowing limit reached",
        "    no forecast yet",
    ]
    assert lines[-2].split()[:4] == ["big", "-", "-", "t/lost"]
    assert lines[-1] == "    waits for its pool (PoolNotFound)"
    assert table(pending(None), T0) == "No workflow waits."


def test_the_table_fits_a_terminal_and_lists_the_started_apart_unnumbered():
    """Issue 80: on a node pool a line was 322 characters (the reason and the forecast on
    it), and a started workflow waiting for room for its next task was numbered among
    those waiting to start ("start 59s ago")."""
    pools, cluster = pool([("t", "first", 0), ("t", "second", 0)], size=1, tasks=2)
    first, second = cluster.jobs
    assert first.first_start is not None and second.first_start is None
    now = T0 + 2
    second.payload.forecast = Forecast(
        now, now + 240, (now + 120, now + 420), now + 900, (now + 660, now + 1260), position=1
    )
    doc = pending(pools)
    listed = {w["name"]: w for w in doc["pools"][0]["queues"][0]["waiting"]}
    assert (listed["first"]["started"], listed["first"]["position"]) == (True, None)
    assert (listed["second"]["started"], listed["second"]["position"]) == (False, 1)
    reason = (
        "the policy fair chose to wait for a better moment: no node has room for stage "
        "'transform''s task (cpu 2, memory 4Gi) now; node-1 has cpu 0.25 and memory 1Gi "
        "free, node-2 cpu 0.25 and memory 3Gi, node-3 cpu 0.5 and memory 0.5Gi; the stage "
        "waits 41 s past its queue's waitBound"
    )
    listed["second"]["reason"] = reason
    lines = table(doc, now).splitlines()
    assert max(len(line) for line in lines) <= 120, lines
    assert lines[1].split() == [
        "shared", "a", "1", "t/second", "DagWorkflow", "0", "1s", "in", "4m", "in", "15m"
    ]  # fmt: skip
    details = " ".join(line.strip() for line in lines[2 : lines.index("")])
    assert reason in details  # (wrapped, never cut)
    assert "start in 4m (in 2m – in 7m), finish in 15m (in 11m – in 21m)" in details
    apart = lines[lines.index("") + 1 :]
    assert apart[0] == "Started, waiting for room for a next stage:"
    assert apart[1].split()[:4] == ["shared", "a", "-", "t/first"]


@pytest.mark.asyncio
async def test_the_route_serves_the_document_and_says_what_it_lacks():
    pools, _ = pool([("t", "first", 0), ("t", "second", 0), LAST])
    app = aiohttp.web.Application()
    add_visibility(app, lambda: pools)
    async with TestClient(TestServer(app)) as client:
        await served(client)


async def served(client: TestClient) -> None:
    answer = await client.get(PATH, params={"pool": "shared", "queue": "a"})
    assert answer.status == 200
    doc = await answer.json()
    assert doc["kind"] == "PendingWorkflows"
    assert [w["name"] for w in doc["pools"][0]["queues"][0]["waiting"]] == ["last"]
    missing = await client.get(PATH, params={"pool": "nope"})
    assert missing.status == 404
    assert (await missing.json())["error"] == (
        "pool 'nope' is not one of the operator's (its pools: shared)"
    )
    assert (await client.get(PATH, params={"queue": "zz"})).status == 404


@pytest.mark.asyncio
async def test_a_replica_that_does_not_lead_says_so():
    app = aiohttp.web.Application()
    add_visibility(app, lambda: None)
    async with TestClient(TestServer(app)) as client:
        answer = await client.get(PATH)
        assert answer.status == 503
        assert "does not lead" in (await answer.json())["error"]


# -- idlegate visibility -----------------------------------------------------------------------


def test_idlegate_visibility_prints_the_operators_table(tmp_path):
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qs, urlparse

    from typer.testing import CliRunner

    from idlegate.cli import app

    pools, _ = pool([("t", "first", 0), ("t", "second", 0), ("u", "urgent", 5), LAST])
    asked: list[dict[str, list[str]]] = []

    class Operator(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # (the operator's route, as add_visibility serves it)
            url = urlparse(self.path)
            asked.append(parse_qs(url.query))
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            body = json.dumps(narrow(pending(pools), query.get("pool"), query.get("queue")))
            self.send_response(200 if url.path == PATH else 404)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Operator)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        shown = CliRunner().invoke(app, ["visibility", "--url", url, "--pool", "shared"])
        assert shown.exit_code == 0, shown.output
        lines = shown.output.splitlines()
        assert lines[0].startswith("POOL") and "u/urgent" in lines[1] and "t/last" in lines[4]
        assert asked == [{"pool": ["shared"]}]
        as_json = CliRunner().invoke(app, ["visibility", "--url", url, "--json"])
        assert json.loads(as_json.output)["kind"] == "PendingWorkflows"
    finally:
        server.shutdown()
        server.server_close()
    gone = CliRunner().invoke(app, ["visibility", "--url", url])
    assert gone.exit_code == 1
    assert "is the operator's metrics port forwarded" in gone.output
    assert "Traceback" not in gone.output
    # a URL without its scheme is not taken for an API path
    bad = CliRunner().invoke(app, ["visibility", "--url", "localhost:9090"])
    assert bad.exit_code == 1 and "--url 'localhost:9090' is neither" in bad.output


def test_idlegate_visibility_with_a_url_needs_no_extra():
    # a base install has no aiohttp (the operator's and the dashboard's): with --url the
    # command reads the operator through the standard library alone
    import subprocess
    import sys

    code = (
        "import sys; sys.modules.update(dict.fromkeys(['aiohttp', 'kopf', 'kubernetes']))\n"
        "from idlegate.cli import main\n"
        "main(['visibility', '--url', 'http://127.0.0.1:9'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr
    assert "cannot reach the operator at http://127.0.0.1:9" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_forecast_written_is_what_the_crd_and_the_status_model_take():
    import jsonschema

    from idlegate.api.status import WorkflowStatus, dump
    from tests.deploy_files import committed_crd

    (version,) = committed_crd()["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    f = Forecast(T0, T0 + 60, (T0 + 30, T0 + 120), T0 + 600, (T0 + 400, T0 + 900), position=2)
    for written in (dump_forecast(f), dump_forecast(Unavailable(T0, "no history"))):
        jsonschema.validate(written, schema["forecast"])
        status = WorkflowStatus.model_validate({"forecast": written})
        assert parse_forecast(dump(status)) == parse_forecast({"forecast": written})


@pytest.mark.parametrize("queued", [True, False])
def test_the_two_positions_probe_gives_one_position_everywhere(queued: bool):
    # issue 81: three workflows in one queue, the last of priority 5; the forecast ranked
    # by arrival (position 2) where the admission put it first (position 1). One position
    # now: the visibility document's, status.forecast.position's and the entries' are the
    # admission's, and the started one is numbered nowhere. A pool without queues too.
    from idlegate.operator.forecasting.book import as_shown
    from idlegate.sim.forecast import forecast
    from idlegate.sim.forecast_calibration import Calibration

    cluster = Cluster(1)
    if queued:
        specs = queues_from([{"name": "a"}])
        cluster.admission = Admission(specs, cluster.capacity, cluster.resource_names)
    for t, (name, priority) in enumerate([("first", 0), ("second", 0), ("last", 5)]):
        owner = Owner("t", name, f"uid-{name}", "DagWorkflow")
        job = cluster.add_job(chain(100.0), float(t), name, Held(owner))
        job.priority = priority
        cluster.touch(job)
        while cluster.decide_once(FifoScheduler(), float(t)) is not None:
            pass
    cluster.advance(3.0)
    core = SimpleNamespace(cluster=cluster, at=3.0)
    (queue,) = pending(Pools({"p": SimpleNamespace(core=core, forecasts=None)}))["pools"][0][
        "queues"
    ]
    listed = {w["name"]: w["position"] for w in queue["waiting"]}
    assert listed == {"last": 1, "second": 2}  # (first runs: not waiting)
    result = cluster.admission_result()
    entries = {j.name: result.position(j) for j in cluster.jobs}
    assert entries == {"first": None, "second": 2, "last": 1}
    made = forecast(cluster, FifoScheduler(), replays=2)
    calibration = {"start": Calibration(), "finish": Calibration()}
    shown = {
        e.name: as_shown(e, 3.0, calibration).position  # type: ignore[union-attr]
        for e in made.workflows
    }
    assert shown == entries
