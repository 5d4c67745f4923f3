"""Unit tests of the operator's small parts: pods, clock, settings, policy loading, CLI."""

from __future__ import annotations

import ast
import graphlib
import logging
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from idlegate.api.labels import (
    ANNOTATION_ATTEMPT,
    ANNOTATION_EXECUTOR,
    GATE,
    LABEL_STAGE,
    LABEL_TASK,
    LABEL_WORKFLOW,
)
from idlegate.api.settings import Clock, Settings
from idlegate.api.task_pods import (
    Owner,
    format_seconds,
    pod_name,
    read_task_pod,
    release_patch,
    task_pod,
)
from idlegate.cli import app
from idlegate.errors import IdlegateError
from idlegate.operator.core.decider import Decider
from idlegate.operator.decisions import load_scheduler
from idlegate.operator.metrics import DECISION_KINDS, Metrics
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.protocol import Decision
from idlegate.sim.spec import StageSpec, parse_workflow
from idlegate.sim.timestamps import from_datetime, to_datetime
from tests.clocks import ScaledClock
from tests.operator_fakes import harness

OWNER = Owner("team", "wf", "uid-1")
ROOT = Path(__file__).resolve().parent.parent


def _stage(**kw: Any) -> StageSpec:
    return StageSpec.model_validate({"name": "s", "tasks": 2, "taskDurationSeconds": 2.5, **kw})


# -- pods ---------------------------------------------------------------------------------------


def test_pod_names_are_deterministic_dns_labels():
    assert pod_name("wf", "extract", 3) == "wf-extract-3"
    assert pod_name("wf", "extract", 3, attempt=2) == "wf-extract-3-r2"
    long = pod_name("w" * 63, "s" * 40, 12345)
    assert len(long) <= 63 and long == pod_name("w" * 63, "s" * 40, 12345)
    assert long != pod_name("w" * 63, "s" * 40, 12346)
    assert long[0].isalnum() and long[-1].isalnum()


def test_format_seconds_is_a_plain_decimal():
    assert [format_seconds(x) for x in (5.0, 2.2, 0.25, 1e-5, 3600)] == [
        "5",
        "2.2",
        "0.25",
        "0.00001",
        "3600",
    ]


def test_task_pod_follows_the_contract():
    template = {
        "metadata": {
            "name": "ignored",
            "labels": {"team": "a", LABEL_TASK: "x"},
            "annotations": {"note": "kept"},
        },
        "spec": {
            "restartPolicy": "Always",
            "schedulingGates": [{"name": "example.com/other"}],
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "env": [{"name": "TASK_INDEX", "value": "9"}, {"name": "KEEP", "value": "1"}],
                }
            ],
        },
    }
    pod = task_pod(OWNER, _stage(template=template), 1, attempt=0)
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["name"] == "wf-s-1" and meta["namespace"] == "team"
    assert meta["labels"] == {"team": "a", LABEL_WORKFLOW: "wf", LABEL_STAGE: "s", LABEL_TASK: "1"}
    assert meta["annotations"] == {"note": "kept", ANNOTATION_ATTEMPT: "0"}
    (ref,) = meta["ownerReferences"]
    assert ref == {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "DagWorkflow",
        "name": "wf",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert spec["restartPolicy"] == "Never"
    assert spec["schedulingGates"] == [{"name": "example.com/other"}, {"name": GATE}]
    for container in spec["containers"] + spec["initContainers"]:
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["TASK_DURATION_SECONDS"] == "2.5" and env["TASK_INDEX"] == "1"
        assert env["STAGE_NAME"] == "s" and env["WORKFLOW_NAME"] == "wf"
    assert {"name": "KEEP", "value": "1"} in spec["containers"][0]["env"]


def test_a_stage_without_template_sleeps_its_duration_and_retries_are_ungated():
    pod = task_pod(OWNER, _stage(), 0, attempt=1, gated=False, executor=4)
    assert pod["metadata"]["name"] == "wf-s-0-r1"
    assert "schedulingGates" not in pod["spec"]
    assert pod["metadata"]["annotations"][ANNOTATION_EXECUTOR] == "4"
    (container,) = pod["spec"]["containers"]
    assert container["command"] == ["sleep", "$(TASK_DURATION_SECONDS)"]
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True


def test_release_patch_removes_only_the_gate_of_the_operator_guarded_by_a_test():
    pod = task_pod(
        OWNER,
        _stage(template={"spec": {"schedulingGates": [{"name": "x/y"}], "containers": []}}),
        0,
    )
    ops = release_patch(pod, 3)
    assert ops == [
        {"op": "add", "path": "/metadata/annotations/idlegate.io~1executor", "value": "3"},
        {"op": "test", "path": "/spec/schedulingGates/1/name", "value": GATE},
        {"op": "remove", "path": "/spec/schedulingGates/1"},
    ]
    released = task_pod(OWNER, _stage(), 0, gated=False)
    assert release_patch(released, 3) is None


def test_read_task_pod_reads_back_what_task_pod_wrote():
    pod = task_pod(OWNER, _stage(), 1, attempt=2, gated=False, executor=5)
    pod["status"] = {
        "phase": "Failed",
        "containerStatuses": [
            {"name": "task", "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}
        ],
    }
    info = read_task_pod(pod)
    assert info is not None
    assert (info.workflow, info.stage, info.index, info.attempt) == ("wf", "s", 1, 2)
    assert (info.owner_uid, info.gated, info.executor) == ("uid-1", False, 5)
    assert info.terminal and "exited with code 2" in info.reason
    assert read_task_pod({"metadata": {"labels": {LABEL_WORKFLOW: "wf"}}}) is None


# -- clock and settings ---------------------------------------------------------------------------


def test_clocks():
    # bracketed by wall readings taken around it: true however long the machine pauses
    fast = ScaledClock(speed=50, anchor=time.time() - 1)
    before = time.time()
    wall, scaled = Clock().now(), fast.now()
    after = time.time()
    assert before <= wall <= after
    assert fast.from_wall(before) <= scaled <= fast.from_wall(after)
    assert fast.from_wall(fast.anchor + 1) == pytest.approx(fast.anchor + 50)
    assert fast.wall_delay(10) == pytest.approx(0.2)
    set_back = harness()  # its clock set back (by NTP, say): the bridge's time never is
    readings = iter([5.0, 3.0, 7.0])
    set_back.clock.now = lambda: next(readings)  # type: ignore[method-assign]
    assert [set_back.bridge.now() for _ in range(3)] == [5.0, 5.0, 7.0]
    assert from_datetime(to_datetime(1234.5)) == 1234.5
    assert from_datetime("2024-01-01T00:00:00Z") == 1704067200
    with pytest.raises(ValueError):
        ScaledClock(0)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"pool_size": 0}, "pool_size: Input should be greater than or equal to 1"),
        ({"pool_size": True}, "pool_size: Input should be a valid integer"),
        ({"pool_size": 2, "metrics_port": 70000}, "metrics_port: .* less than or equal to 65535"),
        ({"pool_size": 2, "watch_server_timeout": 100, "watch_client_timeout": 50}, "exceed"),
        # kube-apiserver parses a watch's timeoutSeconds as an integer (400 on "60.5")
        ({"pool_size": 2, "watch_server_timeout": 60.5}, "watch_server_timeout: .* integer"),
        ({"pool_size": 2, "namespaces": ("a", "a")}, "twice"),
        ({"pool_size": 2, "namespaces": ("Bad_NS",)}, "'Bad_NS' is not a namespace's name"),
        ({"pool_size": 2, "namespaces": ("a" * 64,)}, "at most 63 characters"),
        ({"pool_size": 2, "namespaces": ("team-a.b",)}, "is not a namespace's name"),
        ({"pool_size": 2, "api_timeout": 0}, "api_timeout: Input should be greater than 0"),
    ],
)
def test_settings_refuse_nonsense(kwargs, needle):
    with pytest.raises(IdlegateError, match=needle):
        Settings(**kwargs)


def test_webhook_certs_without_their_files_are_one_sentence(tmp_path):
    # kopf reads them only when its webhook server starts, after the API answers
    def problem(certs: Path, **flags: Any) -> str | None:
        settings = Settings(pool_size=2, webhook_port=8443, webhook_certs=certs, **flags)
        return settings.webhook_certs_problem()

    assert problem(tmp_path / "nowhere", argo=True) == (
        f"--webhook-certs {tmp_path / 'nowhere'} holds no tls.crt and no tls.key; give the "
        "directory where the webhook's TLS Secret is mounted (its tls.crt and tls.key)"
    )
    (tmp_path / "tls.crt").write_text("x")
    assert "holds no tls.key;" in str(problem(tmp_path, airflow_url="http://airflow:8080"))
    (tmp_path / "tls.key").write_text("x")
    assert problem(tmp_path, argo=True) is None
    assert problem(tmp_path / "nowhere") is None  # no --argo, no --airflow-url: no webhook


def test_settings_window_defaults_to_the_pool():
    assert Settings(pool_size=8).window == 8
    assert Settings(pool_size=8, gated_pods_per_stage=2).window == 2


# -- policies -------------------------------------------------------------------------------------


def test_load_scheduler_by_name_default_and_file(tmp_path):
    from idlegate.policy.portfolio import PortfolioScheduler

    assert load_scheduler("sjf-cp").name == "sjf-cp"
    default = load_scheduler(None)  # the portfolio, fed by the operator and replaying in a worker
    assert isinstance(default, PortfolioScheduler)
    assert Decider(default, Metrics(2, "test")).learns is default
    assert (default.config.records, default.config.replayer) == ("fed", "worker")
    with pytest.raises(IdlegateError, match="unknown scheduler"):
        load_scheduler("nope")
    with pytest.raises(IdlegateError, match="does not exist"):
        load_scheduler(str(tmp_path / "missing.onnx"))


def test_default_without_its_shipped_model_falls_back_to_fair_loudly(tmp_path, monkeypatch, caplog):
    broken = tmp_path / "default.onnx"
    broken.write_text("not a model")
    monkeypatch.setattr("idlegate.policy.DEFAULT_POLICY_PATH", broken)
    with caplog.at_level(logging.WARNING):
        assert load_scheduler(None).name == "fair"
    assert "The default scheduler cannot be used" in caplog.text
    with pytest.raises(IdlegateError, match="is not an ONNX model"):
        load_scheduler("portfolio")  # only default falls back


class _LaunchThenIllegal:
    """Launches one task, then answers a cap of 0 (below what the job holds: illegal)."""

    name = "half-illegal"

    def __init__(self) -> None:
        self.asked = 0

    def reset(self, rng: Any) -> None:
        pass

    def decide(self, view: Any) -> Any:
        self.asked += 1
        return Decision(view.runnable_stages()[0], 1 if self.asked == 1 else 0)


def test_decide_keeps_the_rounds_launches_when_the_policy_fails_and_counts_every_answer():
    spec = parse_workflow({"stages": [{"name": "a", "tasks": 3, "taskDurationSeconds": 1}]})
    cluster = Cluster(3)
    cluster.add_job(Dag.from_spec(spec), 0.0)
    metrics = Metrics(3, "test")
    first, second = Decider(_LaunchThenIllegal(), metrics).decide(cluster, 0.0).taken
    # the launch before the illegal answer stands; the illegal one is answered by fair
    assert first.decision.parallelism_cap == 1 and len(first.launches) == 1
    assert first.by == "policy half-illegal"
    assert len(second.launches) == 2 and second.by.startswith("the fallback rule fair")
    assert cluster.free_executors == 0
    counts = {k: metrics.value("idlegate_decisions_total", kind=k) for k in DECISION_KINDS}
    assert counts == {"launch": 2, "idle": 0, "wait": 0}
    assert metrics.value("idlegate_decision_duration_seconds_count") == 2
    assert Decider(load_scheduler("fair"), metrics).decide(cluster, 0.0).taken == []
    assert metrics.decision_count() == 2  # none free: not asked


def test_the_operator_modules_import_each_other_without_a_cycle():
    """Every import inside operator/ and its subpackages, type-only ones too, points one
    way (a package's ``__init__`` is left out: importing a submodule runs it)."""
    graph: dict[str, set[str]] = {}
    top = ROOT / "src" / "idlegate" / "operator"
    modules = {".".join(p.relative_to(top).with_suffix("").parts) for p in top.rglob("*.py")}
    for path in top.rglob("*.py"):
        if path.name == "__init__.py":
            continue
        name = ".".join(path.relative_to(top).with_suffix("").parts)
        deps = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                raise AssertionError(f"{path.name}: a relative import")
            names = []
            if isinstance(node, ast.ImportFrom):  # a module, or a submodule taken from a package
                names = [f"{node.module}.{a.name}" for a in node.names]
                names = [n for n in names if n.removeprefix("idlegate.operator.") in modules]
                names = names or [node.module or ""]
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            deps.update(
                n.removeprefix("idlegate.operator.")
                for n in names
                if n.startswith("idlegate.operator.")
            )
        deps.discard(name)
    assert {"edge.bridge", "edge.intake", "main", "core.tracking", "core.core"} <= graph.keys()
    assert (
        "edge.pools" in graph["edge.intake"] and "core.intents" in graph["core.core"]
    )  # (the walk sees imports)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"operator/ imports in a circle: {' -> '.join(exc.args[1])}") from None


# -- the process: no torch, and the CLI ---------------------------------------------------------------


def test_the_operator_process_never_imports_torch():
    code = textwrap.dedent(
        """
        import sys
        import idlegate.cli
        from idlegate.operator.runtime import Operator
        from idlegate.operator.main import build_registry
        from idlegate.api.settings import Settings, Clock
        operator = Operator(Settings(pool_size=2))
        build_registry(operator)
        import idlegate.operator.edge.bridge, idlegate.operator.edge.intake, idlegate.policy
        leaked = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
        print("LEAKED", leaked)
        sys.exit(1 if leaked else 0)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_cli_parses_the_flags_of_the_deployment_into_settings(monkeypatch):
    seen: dict[str, Any] = {}

    def fake_run(settings: Settings, *, verbose: bool = False) -> None:
        seen["settings"], seen["verbose"] = settings, verbose

    monkeypatch.setattr("idlegate.operator.main.run", fake_run)
    result = CliRunner().invoke(
        app,
        [
            "operator",
            "--standalone",
            "--pool-size=8",
            "--scheduler",
            "sjf-cp",
            "-n",
            "a",
            "--namespace",
            "b",
            "--metrics-port",
            "9191",
            "--health-port",
            "8181",
        ],
    )
    assert result.exit_code == 0, result.output
    s = seen["settings"]
    assert (s.pool_size, s.policy, s.namespaces, s.standalone) == (8, "sjf-cp", ("a", "b"), True)
    assert (s.metrics_port, s.health_port) == (9191, 8181)


def test_cli_reports_bad_flags_in_one_line():
    result = CliRunner().invoke(app, ["operator", "--pool-size=0"])
    assert result.exit_code == 1
    assert "--pool-size: Input should be greater than or equal to 1" in result.output
    result = CliRunner().invoke(app, ["operator", "--pool-size=2", "--scheduler", "nope"])
    assert result.exit_code == 1 and "unknown scheduler" in result.output
