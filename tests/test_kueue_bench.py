"""benchmarks/kueue_vs_idlegate.py's pure parts: its figures read from a written audit log
(benchmarks/kueue_figures.py), its scenario (benchmarks/kueue_scenario.py), and what
idlegate.controlplane.kueue makes of Kueue's module files (here a small stand-in of
them: the real ones come with ``make kueue``)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.kueue_figures import breakdown, figures, lives, sender
from benchmarks.kueue_scenario import (
    FLOOD,
    LARGE,
    STEADY,
    STEADY_EVERY,
    STEADY_FOR,
    arrivals,
    job,
    kueue_objects,
    plan,
    pool,
)
from benchmarks.kueue_vs_idlegate import jsonable
from idlegate.api.labels import GATE, LABEL_STAGE, LABEL_WORKFLOW
from idlegate.controlplane import kueue
from idlegate.controlplane.pki import Pki

SPEED = 2.0
TEAMS = {"team-a": "a", "team-b": "b"}


def audit(t: float, verb: str, resource: str, ns: str, name: str, **kw: Any) -> dict[str, Any]:
    """One audit line: a write answered at `t` seconds (after 2026-01-01T00:00:00Z)."""
    seconds = f"{t:09.6f}"
    return {
        "stage": "ResponseComplete",
        "verb": verb,
        "stageTimestamp": f"2026-01-01T00:00:{seconds}Z",
        "objectRef": {
            "resource": resource,
            "namespace": ns,
            "name": name,
            "subresource": kw.get("sub", ""),
        },
        "responseStatus": {"code": kw.get("code", 200)},
        "user": {"username": kw.get("user", "kwok")},
        "userAgent": kw.get("agent", "kwok/v0.8.0"),
        **({"responseObject": kw["obj"]} if "obj" in kw else {}),
    }


def pod(ns: str, name: str, wf: str, stage: str, phase: str = "", **kw: Any) -> dict[str, Any]:
    labels = {LABEL_WORKFLOW: wf, LABEL_STAGE: stage, **kw.get("labels", {})}
    container = {"name": "task", "resources": {"requests": {"cpu": kw.get("cpu", "2")}}}
    spec: dict[str, Any] = {"containers": [container]}
    if kw.get("gated"):
        spec["schedulingGates"] = [{"name": GATE}]
    return {
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": spec,
        "status": {"phase": phase} if phase else {},
    }


OPERATOR = {"user": "kubernetes-admin", "agent": "kopf/1.38"}
DRIVER = {"user": "kubernetes-admin", "agent": "Python-urllib/3.11"}


def idlegate_log() -> list[dict[str, Any]]:
    """A chain s0 -> s1 of one task each, run by idlegate's operator."""
    ns, wf = "team-b", "w"
    out = [audit(0, "create", "dagworkflows", ns, wf, obj={"metadata": {"name": wf}}, **DRIVER)]
    for stage, (made, free, bind, run, end) in {
        "s0": (1.0, 2.0, 2.5, 3.0, 7.0),
        "s1": (7.5, 8.0, 8.2, 8.5, 12.5),
    }.items():
        name = f"w-{stage}"
        out += [
            audit(
                made,
                "create",
                "pods",
                ns,
                name,
                obj=pod(ns, name, wf, stage, gated=True),
                **OPERATOR,
            ),
            audit(free, "patch", "pods", ns, name, obj=pod(ns, name, wf, stage), **OPERATOR),
            audit(bind, "create", "pods", ns, name, sub="binding", user="system:kube-scheduler"),
            audit(
                run,
                "patch",
                "pods",
                ns,
                name,
                sub="status",
                obj=pod(ns, name, wf, stage, "Running"),
            ),
            audit(
                end,
                "patch",
                "pods",
                ns,
                name,
                sub="status",
                obj=pod(ns, name, wf, stage, "Succeeded"),
            ),
        ]
    return out


def lines(events: list[dict[str, Any]], backwards: bool = False) -> list[str]:
    """The log's lines (`backwards`: the last first; each is read at its time)."""
    return [json.dumps(e) for e in (reversed(events) if backwards else events)]


def test_idlegates_figures_from_its_writes() -> None:
    chain = {("team-b", "w"): {"s0": (1, ()), "s1": (1, ("s0",))}}
    f = figures(lives(lines(idlegate_log(), backwards=True)), chain, TEAMS, SPEED)
    assert f.jct == {"b": [25.0]}  # (12.5 s of wall from the DagWorkflow's creation, x2)
    assert f.unfinished == 0
    assert f.admission == pytest.approx([2.0, 1.0])  # s0 from its submission, s1 from s0's end
    assert f.binds == pytest.approx([0.5, 0.2])
    assert f.worst_wait == pytest.approx(6.0)  # s0's task started 3 s after it was ready
    assert (f.stopped, f.lost, f.work) == (0, 0.0, pytest.approx(16.0))
    assert f.pods == 2 and f.per_pod("idlegate") == 2.0  # a creation and a release a pod
    assert f.per_pod("driver") == 0.5 and f.jain is None


def job_body(name: str, wf: str, stage: str, suspend: bool) -> dict[str, Any]:
    labels = {LABEL_WORKFLOW: wf, LABEL_STAGE: stage}
    return {
        "metadata": {"name": name},
        "spec": {"suspend": suspend, "template": {"metadata": {"labels": labels}}},
    }


def kueue_log() -> list[dict[str, Any]]:
    """One stage of one task in team-a: admitted, preempted (its Job suspended, its pod
    stopped) and admitted again."""
    ns, wf, stage, name = "team-a", "big", "l", "big-l"
    kueue_user = {"user": "kueue", "agent": "kueue/v0.17.0"}
    jobs = {"user": "system:serviceaccount:kube-system:job-controller", "agent": "kcm"}
    job_pod = {"labels": {"batch.kubernetes.io/job-name": name}}
    first, second = "big-l-1", "big-l-2"
    return [
        audit(0.0, "create", "jobs", ns, name, obj=job_body(name, wf, stage, True), **DRIVER),
        audit(1.0, "patch", "jobs", ns, name, obj=job_body(name, wf, stage, False), **kueue_user),
        audit(1.5, "create", "pods", ns, first, obj=pod(ns, first, wf, stage, **job_pod), **jobs),
        audit(1.7, "create", "pods", ns, first, sub="binding", user="system:kube-scheduler"),
        audit(
            2.0,
            "patch",
            "pods",
            ns,
            first,
            sub="status",
            obj=pod(ns, first, wf, stage, "Running", **job_pod),
        ),
        audit(3.0, "patch", "jobs", ns, name, obj=job_body(name, wf, stage, True), **kueue_user),
        audit(
            3.5,
            "patch",
            "pods",
            ns,
            first,
            sub="status",
            obj=pod(ns, first, wf, stage, "Failed", **job_pod),
        ),
        audit(5.0, "patch", "jobs", ns, name, obj=job_body(name, wf, stage, False), **kueue_user),
        audit(5.2, "create", "pods", ns, second, obj=pod(ns, second, wf, stage, **job_pod), **jobs),
        audit(5.3, "create", "pods", ns, second, sub="binding", user="system:kube-scheduler"),
        audit(
            5.5,
            "patch",
            "pods",
            ns,
            second,
            sub="status",
            obj=pod(ns, second, wf, stage, "Running", **job_pod),
        ),
        audit(
            9.5,
            "patch",
            "pods",
            ns,
            second,
            sub="status",
            obj=pod(ns, second, wf, stage, "Succeeded", **job_pod),
        ),
        audit(9.6, "patch", "jobs", ns, name, code=409, **kueue_user),  # (counted, not read)
    ]


def test_kueues_figures_from_its_writes_with_a_preemption() -> None:
    one = {("team-a", "big"): {"l": (1, ())}}
    f = figures(lives(lines(kueue_log())), one, TEAMS, SPEED)
    assert f.jct == {"a": [19.0]}  # from its Job's creation to its last pod's end, x2
    assert f.admission == [1.0]  # the Job's first unsuspension
    assert f.binds == pytest.approx([0.7, 0.3])  # each pod from the unsuspension before it
    assert (f.stopped, f.lost) == (1, pytest.approx(3.0))  # ran 1.5 s of wall, x2
    assert f.work == pytest.approx(11.0)
    assert f.worst_wait == pytest.approx(4.0)  # the rerun waited 2 s of wall from the stop
    assert f.per_pod("kueue") == 2.0 and f.per_pod("job-controller") == 1.0  # (a 409 too)


def test_jain_over_the_time_two_teams_wait() -> None:
    """a runs one of its 3 tasks, b two of its 3, for 10 s: both wait all along, their
    CPU 1 and 2: (1 + 2)^2 / (2 (1 + 4)) = 0.9."""
    events = []
    for ns, wf, running in (("team-a", "x", 1), ("team-b", "y", 2)):
        events.append(audit(0, "create", "dagworkflows", ns, wf, obj={"metadata": {"name": wf}}))
        for i in range(running):
            name = f"{wf}-{i}"
            body = pod(ns, name, wf, "s", cpu="1")
            events += [
                audit(0.0, "create", "pods", ns, name, obj=body),
                audit(
                    0.0, "patch", "pods", ns, name, obj=pod(ns, name, wf, "s", "Running", cpu="1")
                ),
                audit(
                    10.0,
                    "patch",
                    "pods",
                    ns,
                    name,
                    obj=pod(ns, name, wf, "s", "Succeeded", cpu="1"),
                ),
            ]
    three = {("team-a", "x"): {"s": (3, ())}, ("team-b", "y"): {"s": (3, ())}}
    f = figures(lives(lines(events)), three, TEAMS, SPEED)
    assert f.jain == pytest.approx(0.9)
    assert f.unfinished == 2 and f.jct == {}


def test_who_sent_a_write() -> None:
    assert (
        sender({"userAgent": "kopf/1.38", "user": {"username": "kubernetes-admin"}}) == "idlegate"
    )
    assert sender({"userAgent": "kueue/v0.17.0", "user": {"username": "kueue"}}) == "kueue"
    assert sender({"userAgent": "Python-urllib/3.11", "user": {"username": "x"}}) == "driver"
    job_controller = "system:serviceaccount:kube-system:job-controller"
    assert sender({"userAgent": "kcm", "user": {"username": job_controller}}) == "job-controller"


def test_the_scenario_is_the_same_arrivals_for_both() -> None:
    flood = arrivals("flood", 5)
    steady = round(STEADY_FOR / STEADY_EVERY)
    assert len(flood) == 5 + 2 * steady
    assert [a.at for a in flood] == sorted(a.at for a in flood)
    assert {a.shape for a in flood if a.team == "a"} == {FLOOD}
    assert {a.team for a in arrivals("alone", 5)} == {"b", "c"}
    large = arrivals("large", 5)
    assert large[0].shape == LARGE and large[0].at == 0.0
    assert min(a.at for a in large if a.shape == STEADY) > 0  # (the large one first)
    assert len(large) == 1 + 3 * steady
    planned = plan(flood)
    assert planned["team-a", "f000"]["d"] == (1, ("b", "c"))


def test_kueue_and_idlegate_get_the_same_queues() -> None:
    spec = pool("fair", reclaim=True)["spec"]
    cqs = {
        b["metadata"]["name"]: b["spec"]
        for _, _, b in kueue_objects(True)
        if b["kind"] == "ClusterQueue"
    }
    assert set(cqs) == {q["name"] for q in spec["queues"]} == {"a", "b", "c"}
    for queue in spec["queues"]:
        (quota,) = cqs[queue["name"]]["resourceGroups"][0]["flavors"][0]["resources"]
        assert quota["nominalQuota"] == queue["nominal"]["cpu"]
        assert quota["borrowingLimit"] == queue["borrowingLimit"]["cpu"]
        assert cqs[queue["name"]]["preemption"]["reclaimWithinCohort"] == "Any"
        assert queue["preemption"]["reclaim"] == "Any"
    assert {s["cohortName"] for s in cqs.values()} == {"teams"}
    off = [b for _, _, b in kueue_objects(False) if b["kind"] == "ClusterQueue"]
    assert {b["spec"]["preemption"]["reclaimWithinCohort"] for b in off} == {"Never"}


def test_a_stage_as_a_suspended_job_in_its_local_queue() -> None:
    diamond = arrivals("flood", 1)[0]
    body = job(diamond, "b")
    assert body["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "a"}
    spec = body["spec"]
    assert spec["suspend"] is True and spec["parallelism"] == spec["completions"] == 3
    (container,) = spec["template"]["spec"]["containers"]
    assert container["env"] == [{"name": "TASK_DURATION_SECONDS", "value": "4"}]
    assert spec["template"]["metadata"]["labels"] == {LABEL_WORKFLOW: "f000", LABEL_STAGE: "b"}


# -- what idlegate.controlplane.kueue makes of the module's files ----------------------------


def module_config(root: Path) -> Path:
    """A small stand-in of the module's config/components (the shapes of v0.17.0's)."""
    crd = root / "crd"
    (crd / "bases").mkdir(parents=True)
    (crd / "patches").mkdir()
    for plural in ("workloads", "resourceflavors"):
        body = {
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.kueue.x-k8s.io"},
            "spec": {},
        }
        (crd / "bases" / f"{plural}.yaml").write_text(yaml.safe_dump(body))
    service = {"namespace": "system", "name": "webhook-service", "path": "/convert"}
    patch = {
        "metadata": {"name": "workloads.kueue.x-k8s.io"},
        "spec": {
            "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"service": service}}}
        },
    }
    (crd / "patches" / "webhook_in_workloads.yaml").write_text(yaml.safe_dump(patch))
    kustomization = {
        "resources": ["bases/workloads.yaml", "bases/resourceflavors.yaml"],
        "patches": [{"path": "patches/webhook_in_workloads.yaml"}],
    }
    (crd / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))

    def hook(name: str, group: str, resource: str) -> dict[str, Any]:
        path = f"/mutate-{resource}"
        rules = [{"apiGroups": [group], "resources": [resource]}]
        return {"name": name, "clientConfig": {"service": {"path": path}}, "rules": rules}

    mutating = {
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mutating-webhook-configuration"},
        "webhooks": [
            hook("mjob.kb.io", "batch", "jobs"),
            hook("mpod.kb.io", "", "pods"),
            hook("mworkload.kb.io", "kueue.x-k8s.io", "workloads"),
        ],
    }
    (root / "webhook").mkdir()
    (root / "webhook" / "manifests.yaml").write_text(yaml.safe_dump_all([mutating]))
    (root / "rbac").mkdir()
    role = {"kind": "ClusterRole", "metadata": {"name": "manager-role"}, "rules": []}
    (root / "rbac" / "role.yaml").write_text(yaml.safe_dump_all([role]))
    secrets = {"kind": "Role", "metadata": {"name": "manager-secrets-role", "namespace": "system"}}
    (root / "rbac" / "manager_secrets_role.yaml").write_text(yaml.safe_dump(secrets))
    return root


def test_kueues_module_files_on_loopback(tmp_path: Path) -> None:
    config = module_config(tmp_path / "config")
    ca = Pki(tmp_path / "pki")
    ca.directory.mkdir()
    ca.ca.write_bytes(b"CA")
    bundle = base64.b64encode(b"CA").decode()
    crds = {c["metadata"]["name"]: c for c in kueue.crds(config, ca, 9443)}
    conversion = crds["workloads.kueue.x-k8s.io"]["spec"]["conversion"]
    assert conversion["webhook"]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/convert",
        "caBundle": bundle,
    }
    assert "conversion" not in crds["resourceflavors.kueue.x-k8s.io"]["spec"]
    (mutating,) = kueue.webhook_configurations(config, ca, 9443)
    assert mutating["metadata"]["name"] == "kueue-mutating-webhook-configuration"
    kept = {h["name"]: h["clientConfig"]["url"] for h in mutating["webhooks"]}
    assert kept == {  # (the pod integration is not enabled: its webhook is not installed)
        "mjob.kb.io": "https://127.0.0.1:9443/mutate-jobs",
        "mworkload.kb.io": "https://127.0.0.1:9443/mutate-workloads",
    }
    roles = kueue.roles(config)
    assert [(r["kind"], r["metadata"]["name"]) for r in roles] == [
        ("ClusterRole", "kueue-manager-role"),
        ("ClusterRoleBinding", "kueue-manager-role"),
        ("Role", "kueue-manager-secrets-role"),
        ("RoleBinding", "kueue-manager-secrets-role"),
    ]
    assert roles[3]["metadata"]["namespace"] == kueue.NAMESPACE
    assert roles[1]["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": kueue.USER}
    ]


def test_kueues_default_configuration_made_local(tmp_path: Path) -> None:
    defaults = {"leaderElection": {"leaderElect": True}, "webhook": {"port": 9443}, "x": 1}
    settings = kueue.configuration(defaults, 8081, 9444, tmp_path)
    assert settings["x"] == 1 and settings["leaderElection"] == {"leaderElect": False}
    assert settings["webhook"] == {
        "port": 9444,
        "host": "127.0.0.1",
        "certDir": str(tmp_path / "certs"),
    }
    assert settings["integrations"] == {"frameworks": ["batch/job"]}
    assert settings["internalCertManagement"]["enable"] is True
    assert defaults["leaderElection"] == {"leaderElect": True}  # (a copy)


def test_kueue_not_built_says_how(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="make kueue"):
        kueue.binary(tmp_path)


def test_where_a_stages_time_went() -> None:
    one = {("team-a", "big"): {"l": (1, ())}}
    steps = breakdown(lives(lines(kueue_log())), one, {("team-a", "big", "l"): 2.0})
    assert steps == {
        "ready > submitted": [0.0],
        "submitted > admitted": [1.0],
        "admitted > pod created": [0.5],
        "pod created and admitted > bound": [pytest.approx(0.2)],
        "bound > running": [pytest.approx(0.3)],
        "ran beyond its time": [2.0],  # (the pod that succeeded: 4 s run, 2 s declared)
    }


def test_a_runs_figures_as_json() -> None:
    f = figures(lives(lines(kueue_log())), {("team-a", "big"): {"l": (1, ())}}, TEAMS, SPEED)
    written = json.loads(json.dumps(jsonable({"system": "kueue", "figures": f})))
    assert written["writes"]["kueue"] == 4 and written["jct"] == {"a": [19.0]}
    assert written["system"] == "kueue" and written["stopped"] == 1
