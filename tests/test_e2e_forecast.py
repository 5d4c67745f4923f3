"""Issue 70, the operator's forecasts end to end: the real kopf operator against the test API
server with three nodes and two queues (tests/nodes_e2e.py's cluster), on a pool that follows
the nodes (``--pool-nodes``: its replays give room back node by node, sim/pool.py) and on one
of the nodes' allocatable (``--pool-resources``), the simulated kubelet, the clock `SPEED` times faster than the wall, forecasts refreshed every 30 s of
its clock (``--forecast-interval``).

Checked: every waiting DagWorkflow shows ``status.forecast`` within one refresh (the one
after they all waited); the visibility API carries them, an Argo Workflow's (under Argo's
controller stand-in, when Argo's CRD is at hand) and an Airflow DAG run's (under the stand-in
for Airflow's scheduler and KubernetesExecutor, tests/k8s/airflow_executor.py, its pods
asking what the DagWorkflows' do), which are not ours to write; a what-if (``idlegate forecast
FILE`` over the operator's endpoint) answers without creating anything; the forecasts made
while the workflows waited are scored against their real start and finish
(``idlegate_forecast_error_seconds``), and the test prints the errors (no bound: accuracy is
measured in docs/research/forecasts.md, not here). A policy that raises gives
``ForecastUnavailable`` with why, never a number."""

from __future__ import annotations

import contextlib
import json
import socket
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from idlegate.api.forecast_status import UNAVAILABLE_REASON, Forecast, parse_forecast
from idlegate.api.queueing import QueueFile
from idlegate.cli import app
from idlegate.policy.heuristics import FifoScheduler
from idlegate.sim.queues import queues_from
from tests.airflow_data import PASSWORD
from tests.argo_data import WORKFLOW_CRD
from tests.argo_workflows import diamond, phase
from tests.clocks import ScaledClock
from tests.e2e import (
    DWF,
    SPEED,
    kubelet_for,
    new_namespace,
    running_operator,
    stage,
    wait,
    workflow,
)
from tests.k8s.airflow_executor import AirflowExecutor, layered
from tests.k8s.apiserver import NODES
from tests.k8s.argo_controller import DONE, WORKFLOWS, ArgoController
from tests.k8s.harness import ApiServer, serving_crd
from tests.k8s.scheduler import node
from tests.nodes_e2e import NODE_COUNT, NODE_CPU, NODE_MEMORY, POOL_PODS, POOLS
from tests.operator_fakes import as_declared

pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")

FLOOD = 8
TASKS, CPU, MEMORY = 2, "4", "4Gi"
"""Each workflow: one stage of 2 tasks of 4 CPU: three run at once on the 24 CPU."""
QUOTA = {"cpu": "12", "memory": "48Gi"}
QUEUED_TIMEOUT = 86_400.0
"""Airflow's ``task_queued_timeout`` (simulated seconds): beyond the test, so that its run's
pods wait for room as the others do, never released early by the pending timeout."""


ARGO = WORKFLOW_CRD.exists()
"""Argo's CRD is at hand (../shared/data/argo): an Argo Workflow waits with them."""


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    for server in serving_crd(tmp_path_factory.mktemp("k8s")):
        if ARGO:
            server.create("customresourcedefinitions", yaml.safe_load(WORKFLOW_CRD.read_text()))
        yield server


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _nodes(api: ApiServer) -> None:
    for i in range(NODE_COUNT):
        if api.get(NODES, None, f"node-{i}") is None:
            api.create(NODES, node(f"node-{i}", cpu=NODE_CPU, memory=NODE_MEMORY))


def _body(name: str, seconds: float = 60.0) -> dict[str, Any]:
    container = {
        "name": "task",
        "image": "busybox",
        "resources": {"requests": {"cpu": CPU, "memory": MEMORY}},
    }
    return workflow(
        name, stage("s", TASKS, seconds, template={"spec": {"containers": [container]}})
    )


@pytest.mark.parametrize("pool", ["nodes", "fixed"])
def test_every_waiting_workflow_is_forecast_scored_and_a_what_if_answers(
    api: ApiServer, pool: str, tmp_path: Path
) -> None:
    ns = new_namespace(api, f"fc-{pool}")
    _nodes(api)
    raw = [{"name": "a", "namespaces": [ns], "nominal": QUOTA}, {"name": "b", "nominal": QUOTA}]
    port = _port()
    secret = tmp_path / "airflow-password"
    secret.write_text(PASSWORD)
    dag, answers = layered(
        TASKS, width=TASKS, seconds=60.0, requests={"cpu": CPU, "memory": MEMORY}
    )
    # the kubelet starts once the forecasts were checked: until then no pod runs, so the
    # workflows that wait go on waiting whatever the machine's pace (events, not wall time)
    with contextlib.ExitStack() as stack:
        if ARGO:
            stack.enter_context(ArgoController(api, ns))
        airflow = stack.enter_context(
            AirflowExecutor(
                api, dag, dict.fromkeys(answers_tasks(answers, dag), 60.0),
                queued_timeout=QUEUED_TIMEOUT / SPEED, answers=answers,
            )
        )  # fmt: skip
        operator = stack.enter_context(
            running_operator(
                api,
                ns,
                pool=POOL_PODS,
                argo=ARGO,
                clock=ScaledClock(SPEED),
                policy="fifo",
                queues=QueueFile(queues_from(raw)),
                forecast_interval=30.0,
                metrics_port=port,
                listen_host="127.0.0.1",
                airflow_url=airflow.url,
                airflow_username="admin",
                airflow_password_file=secret,
                airflow_queued_timeout=QUEUED_TIMEOUT,
                **POOLS[pool],
            )
        )
        # (no pod runs before the forecasts are checked: the pool is told its tasks run as
        # they declare, as the simulated kubelet's do, else it could not forecast yet)
        as_declared(operator.bridge.core.times)
        names = [f"w{i}" for i in range(FLOOD)]
        for name in names:
            api.create(DWF, _body(name), ns)
        if ARGO:  # (its pods ask what the DagWorkflows' do: it waits for room as they do)
            argo = diamond("argo", 60.0)
            for template in argo["spec"]["templates"]:
                if "container" in template:
                    template["container"]["resources"] = {
                        "requests": {"cpu": CPU, "memory": MEMORY}
                    }
            api.create(WORKFLOWS, argo, ns)
        airflow.trigger(ns, "manual__fc")
        wait(lambda: len(operator.bridge.workflows) == FLOOD, 60, "every workflow admitted")
        seen: dict[str, Forecast] = {}
        """Each workflow's first forecast the test saw in its status while it waited."""

        def waiting() -> list[str]:
            return [
                n
                for n in names
                if (wf := operator.bridge.workflows.get((ns, n))) is not None
                and wf.job.first_start is None
            ]

        # within one refresh: the next one that starts after every workflow was admitted
        refresh = operator.bridge.forecasts
        assert refresh is not None
        after = refresh.refreshes  # (read in another thread than the loop's: counts only)
        wait(lambda: refresh.taken > after, 60, "a refresh")
        assert operator.bridge.forecasts is refresh, "the pool was not rebuilt meanwhile"
        uids = {operator.bridge.workflows[(ns, n)].owner.uid for n in waiting()}
        assert uids and uids <= set(refresh.shown)

        def forecast_in_status() -> bool:
            for n in waiting():
                status = (api.get(DWF, ns, n) or {}).get("status") or {}
                found = parse_forecast(status)
                if not isinstance(found, Forecast):
                    return False
                seen.setdefault(n, found)
            return True

        wait(forecast_in_status, 60, "a forecast in every waiting workflow's status")
        assert seen, "some workflows waited (three run at once)"
        for n, f in seen.items():
            assert f.position is not None and f.start <= f.finish, n

        def waiting_listed() -> list[dict[str, Any]]:
            url = f"http://127.0.0.1:{port}/visibility/pendingworkflows"
            doc = json.loads(urllib.request.urlopen(url).read())
            return [w for p in doc["pools"] for q in p["queues"] for w in q["waiting"]]

        def listed() -> dict[str, Any]:
            return {w["name"]: w for w in waiting_listed()}

        shown = listed()
        assert all(shown[n]["forecast"] is not None for n in waiting() if n in shown)
        if ARGO:  # (not ours to write: in the visibility API only, once its refresh came)

            def argo_forecast() -> Any:
                """The Argo Workflow as the visibility API lists it with its forecast; or,
                once it no longer waits (a loaded machine may start it before the page is
                read), the forecast the pool's refresh made for it (what was listed)."""
                w = listed().get("argo")
                if w is not None:
                    return w if w["forecast"] else None
                uid = ((api.get(WORKFLOWS, ns, "argo") or {}).get("metadata") or {}).get("uid")
                kept = refresh.shown.get(uid) if uid else None
                return {"kind": "Workflow", "kept": kept} if kept is not None else None

            argo_shown = wait(argo_forecast, 60, "the Argo Workflow listed with a forecast")
            assert argo_shown["kind"] == "Workflow"
            if "kept" in argo_shown:
                assert isinstance(argo_shown["kept"], Forecast)
            else:
                assert isinstance(parse_forecast(argo_shown), Forecast)
            assert "forecast" not in (api.get(WORKFLOWS, ns, "argo") or {}).get("status", {})
        # Airflow's DAG run likewise (its kind: DagRun)
        airflow_shown = wait(
            lambda: next(
                (w for w in waiting_listed() if w["kind"] == "DagRun" and w["forecast"]), None
            ),
            60,
            "the Airflow DAG run listed with a forecast",
        )
        assert isinstance(parse_forecast(airflow_shown), Forecast)

        # what if one more were submitted now? (nothing is created)
        with tempfile.TemporaryDirectory() as tmp:
            file = Path(tmp) / "more.yaml"
            body = _body("more") | {"metadata": {"name": "more", "namespace": ns}}
            file.write_text(json.dumps(body))
            url = f"http://127.0.0.1:{port}"
            said = CliRunner().invoke(app, ["forecast", str(file), "--url", url, "--json"])
            assert said.exit_code == 0, said.output
            answer = json.loads(said.output)
            assert answer["pool"] and answer["queue"] == "a"
            assert isinstance(parse_forecast(answer), Forecast)
            line = CliRunner().invoke(app, ["forecast", str(file), "--url", url])
            assert line.exit_code == 0 and line.output.startswith("more.yaml (pool "), line.output
            assert "start " in line.output and "finish " in line.output
            broken = Path(tmp) / "broken.yaml"
            broken.write_text("kind: DagWorkflow\nspec: {stages: []}\n")
            bad = CliRunner().invoke(app, ["forecast", str(broken), "--url", url])
            assert bad.exit_code == 1 and "the workflow has no stages" in bad.output
        assert api.get(DWF, ns, "more") is None

        def done() -> bool:
            phases = [(api.get(DWF, ns, n) or {}).get("status", {}).get("phase") for n in names]
            return all(p == "Succeeded" for p in phases)

        with kubelet_for(api, ns):
            wait(done, 120, "every workflow to finish")
            if ARGO:
                wait(lambda: phase(api, ns, "argo") in DONE, 120, "the Argo Workflow")
            wait(lambda: airflow.done(ns, "manual__fc"), 120, "the Airflow DAG run")
            assert airflow.state(ns, "manual__fc") == "success"
        metrics = operator.bridge.metrics

        def count(which: str) -> float:
            return metrics.value("idlegate_forecast_error_seconds_count", queue="a", which=which)

        # scored at the refresh after each start and end
        wait(lambda: count("finish") >= len(seen) and count("start") >= len(seen), 120, "scores")
        errors: dict[str, tuple[float, float]] = {}
        for which in ("start", "finish"):
            total = metrics.value("idlegate_forecast_error_seconds_sum", queue="a", which=which)
            errors[which] = (count(which), total / count(which))
    # (printed once the operator is gone: its runner holds stdout while it runs)
    for kind, (scored, mean) in errors.items():
        print(
            f"{pool}: forecast {kind} error, {scored:.0f} workflows that waited: mean {mean:.1f} s"
        )


class Raising(FifoScheduler):
    """A policy whose every decision raises (the pool falls back to a safe rule)."""

    name = "raising"

    def decide(self, view: Any) -> Any:
        raise RuntimeError("its model file is corrupt")


def test_a_policy_that_raises_gives_forecast_unavailable_with_why(api: ApiServer) -> None:
    ns = new_namespace(api, "fcu")
    with (
        kubelet_for(api, ns),
        running_operator(
            api, ns, pool=1, clock=ScaledClock(SPEED), policy=None, scheduler=Raising(),
            forecast_interval=30.0,
        ) as operator,
    ):  # fmt: skip
        # (tasks of 24,000 s, 20 min of the kubelet's wall time: the first outlasts the
        # wait below however slowly a busy machine starts the replay process, so the
        # second is still waiting when its forecast comes)
        as_declared(operator.bridge.core.times)
        for name in ("first", "second"):
            api.create(DWF, workflow(name, stage("s", 1, 24_000.0)), ns)

        def unavailable() -> dict[str, Any] | None:
            status = (api.get(DWF, ns, "second") or {}).get("status") or {}
            found = [c for c in status.get("conditions", []) if c["type"] == UNAVAILABLE_REASON]
            return found[0] if found and "forecast" in status else None

        condition = wait(unavailable, 60, "ForecastUnavailable on the waiting workflow")
        assert condition["status"] == "True"
        assert condition["message"] == (
            "the scheduler raising raised RuntimeError: its model file is corrupt"
        )
        status = (api.get(DWF, ns, "second") or {})["status"]
        assert set(status["forecast"]) == {"computedAt", "unavailable"}  # (no number)


def answers_tasks(answers: dict[str, Any], dag: str) -> list[str]:
    """The task ids of the DAG `dag` whose answers `layered` made."""
    return [t["task_id"] for t in answers[f"GET /api/v2/dags/{dag}/tasks"]["body"]["tasks"]]
