"""The dashboard's pure parts: what it shows of the API's objects (idlegate.dashboard.model)
and its SVG pictures (idlegate.dashboard.svg)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import kubernetes.client
import pytest

from idlegate.api.forecast_status import Forecast, dump_forecast
from idlegate.api.labels import LABEL_STAGE
from idlegate.api.task_pods import Owner
from idlegate.api.visibility import pending
from idlegate.dashboard import model, svg
from idlegate.dashboard.commands import listening
from idlegate.dashboard.kube import Reader
from idlegate.dashboard.server import Dashboard
from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.sim.admission import Admission
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.engine import decision_round
from idlegate.sim.queues import queues_from
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import parse_workflow

T0 = 1_800_000_000.0
TS = "2027-01-15T08:00:{:02d}Z"


def dwf(ns: str, name: str, phase: str | None = None, **status: object) -> dict:
    meta = {"namespace": ns, "name": name, "creationTimestamp": TS.format(0)}
    return {"metadata": meta, "spec": {"stages": []}, "status": {"phase": phase, **status}}


def test_a_diamonds_stages_take_their_state_from_the_status():
    body = {
        "spec": {
            "stages": [
                {"name": "a", "tasks": 2},
                {"name": "b", "tasks": 1, "dependsOn": ["a"]},
                {"name": "c", "tasks": 1, "dependsOn": ["a"]},
                {"name": "d", "tasks": 1, "dependsOn": ["b", "c"]},
            ]
        },
        "status": {
            "phase": "Running",
            "stages": [
                {"name": "a", "tasks": 2, "succeeded": 2},
                {"name": "b", "tasks": 1, "running": 1},
                {"name": "c", "tasks": 1},
            ],
            "idleSlots": [{"stage": "c", "delaySeconds": 5, "releaseTime": TS.format(9)}],
        },
    }
    views = model.stage_views(body)
    assert [(v["name"], v["state"]) for v in views] == [
        ("a", "done"),
        ("b", "running"),
        ("c", "idle"),
        ("d", "blocked"),
    ]
    assert views[0]["label"] == "2/2 done, 0 running"
    drawn = svg.dag_svg(views)
    assert drawn.count('class="stage state-') == 4 and drawn.count('class="edge"') == 4
    assert svg.levels(views) == [0, 1, 1, 2]


def test_one_bar_per_pod_that_started():
    def pod(name: str, stage: str, status: dict) -> dict:
        return {"metadata": {"name": name, "labels": {LABEL_STAGE: stage}}, "status": status}

    done = {"state": {"terminated": {"startedAt": TS.format(1), "finishedAt": TS.format(4)}}}
    pods = [
        pod("w-a-0", "a", {"phase": "Succeeded", "containerStatuses": [done]}),
        pod("w-a-1", "a", {"phase": "Running", "startTime": TS.format(2)}),
        pod("w-b-0", "b", {"phase": "Pending"}),  # (gated: no bar)
    ]
    bars = model.pod_bars(pods, T0)
    assert [(b["pod"], b["state"]) for b in bars] == [("w-a-0", "done"), ("w-a-1", "running")]
    assert bars[0]["end"] - bars[0]["start"] == 3.0 and bars[1]["end"] is None
    drawn = svg.gantt_svg(bars, bars[1]["start"] + 10)
    assert drawn.count('class="bar ') == 2
    assert "No pod has started yet" in svg.gantt_svg([], T0)


def test_every_attempt_has_its_bar_and_an_evicted_one_is_marked():
    # issue 93: a preempted workflow's page said "No pod has started yet" while it ran (its
    # kubelet reported no start time), and its Gantt dropped the evicted attempt
    def pod(name: str, status: dict, **meta: object) -> dict:
        labels = {LABEL_STAGE: "a"}
        return {"metadata": {"name": name, "labels": labels, **meta}, "status": status}

    stop = {"idlegate.io/stop": '{"queue": "b", "reason": "reclaim"}'}
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": TS.format(5)}
    deleting = {"deletionTimestamp": TS.format(6)}
    pods = [
        pod("w-a-1", {"phase": "Running", "startTime": TS.format(1)}, annotations=stop),
        pod("w-a-2", {"phase": "Running", "startTime": TS.format(2)}, annotations=stop, **deleting),
        pod("w-a-0-r1", {"phase": "Running", "conditions": [ready]}),
    ]
    stopped = [
        {
            "pod": "w-a-0",
            "stage": "a",
            "queue": "b",
            "startTime": TS.format(0),
            "stopTime": TS.format(3),
            "lostSeconds": 3.0,
        },
        {"pod": "w-a-2", "stage": "a", "queue": "b", "stopTime": TS.format(6), "lostSeconds": 4},
    ]
    bars = model.pod_bars(pods, T0, stopped)
    assert [(b["pod"], b["state"]) for b in bars] == [
        ("w-a-0", "evicted"),  # (gone: from the status)
        ("w-a-1", "running"),  # (marked, not yet evicted: it runs)
        ("w-a-2", "evicted"),  # (being deleted with its mark: its end is the deletion)
        ("w-a-0-r1", "running"),  # (no start time: when it became ready)
    ]
    assert (bars[0]["end"] - bars[0]["start"], bars[2]["end"] - bars[2]["start"]) == (3.0, 4.0)
    drawn = svg.gantt_svg(bars, T0)
    assert drawn.count('class="bar state-evicted"') == 2 and "(evicted: stopped" in drawn


def test_what_the_cluster_says_is_escaped_in_the_pictures():
    bars = [{"pod": '<img src=x onerror="alert(1)">', "stage": "<b>", "start": T0, "end": T0}]
    drawn = svg.gantt_svg(bars, T0)
    assert "<img" not in drawn and "<b>" not in drawn and "&lt;img" in drawn


def cpu_pool(queues: list[dict] | None, **waiting: int) -> SimpleNamespace:
    """The operator's pools as the visibility API reads them: the default pool alone, of
    10 pods and 8 CPU, with `queues` (as ``--queues`` gives them; None: none) and
    `waiting[name]` one-CPU workflows in each (all in the one queue without queues),
    after a round of fifo."""
    cluster = Cluster(10, resources=ResourceVector.parse("cpu=8"))
    specs = queues_from(queues) if queues else ()
    if specs:
        cluster.admission = Admission(specs, cluster.capacity, cluster.resource_names)
    one = {"name": "s", "tasks": 1, "taskDurationSeconds": 10, "resources": {"cpu": "1"}}
    for q, name in enumerate([s.name for s in specs] or [""]):
        for i in range(waiting.get(name or "whole", 0)):
            owner = Owner("t", f"{name}-{i}", f"uid-{name}-{i}", "DagWorkflow")
            dag = Dag.from_spec(parse_workflow({"stages": [one]}))
            cluster.add_job(dag, 0.0, owner.name, SimpleNamespace(owner=owner)).queue = q
    list(decision_round(cluster, make_scheduler("fifo"), 0.0))
    core = SimpleNamespace(cluster=cluster, settings=SimpleNamespace(pool_size=10), at=0.0)
    return SimpleNamespace(
        bridges={"default": SimpleNamespace(core=core, forecasts=None)}, waiting={}
    )


def test_the_operators_queues_show_use_beside_quota_in_the_pools_own_resources():
    # issue 80, item 8: queues of --queues (no ExecutorPool) showed "- / -" and a flat chart
    a = {"name": "a", "nominal": {"cpu": 4}, "borrowingLimit": {"cpu": 1}}
    doc = pending(cpu_pool([a, {"name": "b", "nominal": {"cpu": 4}}], a=6))
    ((view,),) = [model.pool_views([], doc)]
    assert view["name"] == "default"
    assert view["use"] == "cpu 5 / 8, pods 5 / 10 in use"
    rows = {q["name"]: q for q in view["queues"]}
    assert [rows["a"][k] for k in ("used", "borrowed", "lent", "waiting")] == [
        "pods 5, cpu 5 / 4",
        "cpu 1",
        "cpu 0",
        1,
    ]
    assert [rows["b"][k] for k in ("used", "borrowed", "lent")] == [
        "pods 0, cpu 0 / 4",
        "cpu 0",
        "cpu 1",
    ]
    assert rows["a"]["shares"] == {"cpu": 1.25} and rows["b"]["shares"] == {"cpu": 0.0}
    drawn = svg.spark_svg([(T0, rows["a"]["shares"])], T0 + 30)
    assert 'data-resource="cpu"' in drawn and 'class="quota"' in drawn


def test_a_pool_without_queues_shows_its_whole_use_from_either_source():
    # issue 80, item 8: a node pool showed executors busy, no CPU, and a queue table of no rows
    doc = pending(cpu_pool(None, whole=9))
    ((view,),) = [model.pool_views([], doc)]
    (row,) = view["queues"]
    assert (row["name"], row["used"], row["borrowed"]) == (
        "",
        "pods 8 / 10, cpu 8 / 8",
        "no other queue",
    )
    assert row["waiting"] == 1 and row["shares"] == {"cpu": 1.0}
    nodes = {  # (what its ExecutorPool says, when the visibility API cannot be read)
        "metadata": {"name": "nodes"},
        "spec": {"size": 330, "nodeSelector": {}},
        "status": {
            "size": 330,
            "busy": 15,
            "pending": 36,
            "capacity": {"cpu": "24", "memory": "96Gi"},
            "used": {"cpu": "9500m", "memory": "40Gi"},
        },
    }
    ((view,),) = [model.pool_views([nodes], None)]
    assert view["use"] == (
        "cpu 9.5 / 24, memory 40Gi / 96Gi, pods 15 / 330 in use, 36 workflows not finished"
    )
    (row,) = view["queues"]
    assert row["used"] == "pods 15 / 330, cpu 9.5 / 24, memory 40Gi / 96Gi"
    assert row["shares"] == {"cpu": 9.5 / 24, "memory": 40 / 96}


def test_an_executorpools_queues_show_use_beside_quota_from_its_status():
    pool = {
        "metadata": {"name": "shared"},
        "spec": {"size": 4, "queues": [{"name": "a", "nominal": {"pods": 2}}]},
        "status": {
            "size": 4,
            "busy": 3,
            "following": "sjf-cp: 12 % lower mean JCT than fair on the last 40 workflows",
            "queues": [
                {"name": "a", "used": {"pods": "3"}, "borrowed": {"pods": "1"}, "waiting": 2}
            ],
        },
    }
    old = {"pools": [{"name": "default", "queues": [{"name": "", "waiting": []}]}]}
    views = model.pool_views([pool], old)  # (an operator whose visibility API has no use)
    assert [v["name"] for v in views] == ["shared", "default"]
    assert views[1]["queues"][0]["used"] == "not reported"
    (a,) = views[0]["queues"]
    assert (a["used"], a["borrowed"], a["lent"], a["waiting"]) == (
        "pods 3 / 2",
        "pods 1",
        "pods 0",
        2,
    )
    assert a["shares"] == {"pods": 1.5} and views[0]["following"].startswith("sjf-cp")


def test_amounts_read_as_people_read_them():
    assert model.amount("cpu", [9500, 24000]) == ["9.5", "24"]
    assert model.amount("memory", [40 * 2**30 * 1000, 96 * 2**30 * 1000]) == ["40Gi", "96Gi"]
    assert model.amount("memory", [int(1.5 * 2**20) * 1000, 2**30 * 1000]) == ["0Gi", "1Gi"]


def test_without_the_visibility_api_pending_workflows_say_what_their_status_says():
    held = dwf("t", "held", "Pending", conditions=[{"status": "False", "message": "no pool"}])
    rows = model.waiting_views([held, dwf("t", "done", "Succeeded")], None, None, T0)
    assert [(r["name"], r["position"], r["reason"]) for r in rows] == [("held", None, "no pool")]
    assert rows[0]["forecast"] == "no forecast yet"


def test_with_it_only_the_namespaces_the_user_may_list_are_shown():
    waiting = [
        {"namespace": ns, "name": n, "kind": "DagWorkflow", "priority": 0, "position": i}
        | {"reason": "queue a: pods 1/1 used", "started": False, "forecast": None}
        for i, (ns, n) in enumerate([("mine", "w1"), ("theirs", "w2")], start=1)
    ]
    doc = {"pools": [{"name": "p", "queues": [{"name": "a", "waiting": waiting}]}]}
    doc["unpooled"] = [{"namespace": "theirs", "name": "w3", "kind": "DagWorkflow"}]
    doc["unpooled"][0] |= {"pool": "big", "reason": "PoolNotFound"}
    forecast = {
        "computedAt": TS.format(0),
        "unavailable": "stage 'load' has no duration estimate and no history",
    }
    mine = dwf("mine", "w1", "Pending", forecast=forecast)
    rows = model.waiting_views([mine], doc, ["mine"], T0)
    assert [(r["namespace"], r["name"], r["position"]) for r in rows] == [("mine", "w1", 1)]
    assert rows[0]["forecastState"] == "unavailable"
    assert rows[0]["forecast"].startswith("forecast unavailable: stage 'load'")
    everyone = model.waiting_views([mine], doc, None, T0)
    assert [r["name"] for r in everyone] == ["w1", "w2", "w3"]


def test_the_samples_keep_the_last_hour():
    samples = model.Samples()
    for t in range(0, 5000, 1000):
        samples.add(T0 + t, [{"name": "p", "queues": [{"name": "a", "shares": {"cpu": t / 2000}}]}])
    assert [v["cpu"] for _, v in samples.of("p", "a")] == [0.5, 1.0, 1.5, 2.0]
    drawn = svg.spark_svg(samples.of("p", "a"), T0 + 4000)
    assert drawn.count("<polyline") == 1 and 'class="quota"' in drawn


def test_the_dashboard_listens_or_says_why_it_cannot():
    with pytest.raises(IdlegateError, match="--port is a port number from 0 to 65535, not -1"):
        listening("127.0.0.1", -1)
    taken = listening("127.0.0.1", 0)  # (any free port)
    try:
        port = taken.getsockname()[1]
        with pytest.raises(IdlegateError, match=f"cannot listen on 127.0.0.1:{port}"):
            listening("127.0.0.1", port)
    finally:
        taken.close()


def test_the_workflows_are_listed_in_the_order_of_what_happens_next():
    # issue 80, item 9: the list was by age alone, whatever each workflow was doing
    def at(second: int) -> str:
        return TS.format(second)

    workflows = [
        dwf("t", "ended-first", "Succeeded", startTime=at(1), completionTime=at(10)),
        dwf("t", "runs-later", "Running", startTime=at(5)),
        dwf("t", "waits-second", "Pending"),
        dwf("t", "ended-last", "Failed", startTime=at(2), completionTime=at(20)),
        dwf("t", "pending-unlisted", "Pending"),
        dwf("t", "runs-first", "Running", startTime=at(3)),
        dwf("t", "waits-first", None),
    ]
    waiting = [{"namespace": "t", "name": n} for n in ("waits-first", "waits-second")]
    rows = model.workflow_rows(workflows, waiting, T0)
    assert [r["name"] for r in rows] == [
        "waits-first",
        "waits-second",
        "pending-unlisted",
        "runs-first",
        "runs-later",
        "ended-last",
        "ended-first",
    ]


def test_an_old_forecast_never_reads_as_an_interval_in_the_past_of_a_workflow_that_waits():
    # issue 80, item 9: after an outage, "finish in 3m (15s ago – in 7m)" of one not started
    made = Forecast(T0, T0 + 60, (T0 + 30, T0 + 120), T0 + 400, (T0 + 200, T0 + 620))
    status = {"forecast": dump_forecast(made)}
    now = T0 + 215
    text, state = model.forecast_text(status, now, started=False)
    assert state == "ok" and "ago –" not in text
    assert text == (
        "start overdue (its 80 % interval ended 2m ago), finish in 3m (now – in 7m); "
        "forecast made 4m ago"
    )
    text, _ = model.forecast_text(status, now, started=True)  # (its start is history)
    assert text.startswith("start 3m ago (3m ago – 2m ago), finish in 3m (now – in 7m)")
    due, _ = model.forecast_text(status, T0 + 90, started=False)
    assert due.startswith("start due 30s ago (80 %: by in 30s), finish in 5m (in 2m – in 9m)")
    fresh, _ = model.forecast_text(status, T0 + 5, started=False)  # (nothing to clamp)
    assert fresh == "start in 55s (in 25s – in 2m), finish in 7m (in 3m – in 10m)"
    assert model.started_of("Pending") is False and model.started_of("Succeeded") is None


def test_an_api_server_that_refuses_connections_is_said_in_a_sentence():
    # issue 80, item 9: the banner said "the API server does not answer (MaxRetryError)"
    closed = listening("127.0.0.1", 0)
    port = closed.getsockname()[1]
    closed.close()
    configuration = kubernetes.client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    board = Dashboard(Reader(configuration, timeout=2.0), namespaces=["t"], clock=lambda: T0)
    try:
        asyncio.run(board.refresh())
    finally:
        board.reader.close()
    assert board.state["outage"] == (
        f"The Kubernetes API server at http://127.0.0.1:{port} refuses connections: check "
        "that the cluster runs and that your kubeconfig's server address reaches it "
        "(kubectl cluster-info)."
    )


def test_the_screenshots_go_to_out_unless_the_maintainer_asks_for_the_docs_copies():
    # issue 80, item 13: the command docs/dashboard.md gives overwrote docs/img's PNGs
    pytest.importorskip("playwright", reason="the dev extra (playwright) is not installed")
    from benchmarks.dashboard_screenshots import folder

    assert folder([]) == Path("out")
    assert folder(["--docs"]) == Path("docs/img")
    assert folder(["--out", "elsewhere"]) == Path("elsewhere")
    with pytest.raises(SystemExit):
        folder(["--docs", "--out", "elsewhere"])
