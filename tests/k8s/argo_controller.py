"""A small stand-in for Argo Workflows' controller, for tests on the emulated API server.

It lives in the test API server's event loop (as :class:`~tests.k8s.kubelet.SimKubelet`)
and writes through the emulator. Every change of a Workflow of its namespace, or of a pod
labelled ``workflows.argoproj.io/workflow``, reconciles that workflow the way Argo's
controller does, from ``status.nodes`` alone (so it is restart-safe by construction):

* a node is created once it is ready: the entrypoint at once; a DAG task once every task
  it depends on succeeded; a step once the group before it succeeded; a retry attempt
  once the previous attempt failed and the template's ``retryStrategy.limit`` allows it;
* a node that runs a pod gets one pod, named by the node's id (Argo's ``POD_NAMES=v1``),
  labelled ``workflows.argoproj.io/workflow: <workflow>``, annotated
  ``workflows.argoproj.io/node-name`` and ``workflows.argoproj.io/node-id``, owned by the
  Workflow (controller owner reference), gated by ``idlegate.io/release`` (what idlegate's
  admission webhook adds to Argo's pods; `gate=False` leaves it off), and running for the
  template's ``idlegate.io/task-duration-seconds`` (1 s without it) on the simulated kubelet;
  the node's ``startedAt`` is its creation, as Argo's, so its time counts the pod's wait at
  the gate (the pod's container times, the kubelet's, do not);
* the nodes are written as Argo's controller records them (compare controller-testdata):
  ids ``<workflow>-<fnv32a(name)>`` (`idlegate.sim.argo.node_id`), names ``<wf>.<task>``,
  ``<wf>[<group>].<step>``, ``<node>(<attempt>)`` and ``<task>(<i>:<item>)``, types
  ``DAG``/``Steps``/``StepGroup``/``TaskGroup``/``Retry``/``Pod``, ``boundaryID`` the
  enclosing DAG or Steps node, and ``children`` as Argo links them: a DAG node to its root
  tasks, a task to the tasks that depend on it (a retried task through its succeeded
  attempt), a Steps node to its first group, a group to its steps, a step to the next group;
* ``parallelism``: a node's pod is created only while fewer than that many of the
  workflow's pods have not ended (gated pods count, as they do for Argo); a node held back
  is recorded Pending without a pod (Argo postpones the node itself);
* phases: a pod node follows its pod, a Retry node is Succeeded with a succeeded attempt
  and Failed ("No more retries left") when the last allowed attempt failed, a DAG or Steps
  node ends when nothing more can run (Failed if any of its tasks failed), and the
  workflow's ``status.phase`` is its root node's.

Left out (a test that needs one of these needs a real Argo): ``when`` and ``depends``
expressions beyond the task names they list (every named task must succeed),
``withParam`` and ``withSequence``, outputs, parameters and artifacts, ``templateRef`` and
``workflowTemplateRef``, nested DAG or steps templates below the entrypoint, ``onExit`` and
hooks, suspend, resource, http and daemon templates, a template's ``parallelism``,
``failFast`` (tasks not depending on a failure always go on), retry back-off and
policies, pod GC, the workflow's labels and finalizers, ``outboundNodes``, timestamps beyond startedAt and
finishedAt, and the real pod spec (one ``main`` container with the template's image and
``resources``).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

import kmock

from idlegate.sim.argo import DURATION_ANNOTATION, node_id
from tests.k8s.apiserver import PODS, now
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import DURATION_ENV

WORKFLOWS = kmock.resource("argoproj.io", "v1alpha1", "workflows")
WORKFLOW_LABEL = "workflows.argoproj.io/workflow"
NODE_NAME = "workflows.argoproj.io/node-name"
NODE_ID = "workflows.argoproj.io/node-id"
GATE = "idlegate.io/release"
DONE = ("Succeeded", "Failed", "Error")
_node_id = functools.lru_cache(maxsize=1 << 16)(node_id)
"""`node_id`, remembered: a reconciliation names every node of the workflow again."""


class ArgoController:
    """Runs the Workflows of `namespace` (a context manager: from enter to exit)."""

    def __init__(
        self, api: ApiServer, namespace: str, *, gate: bool = True, settle: float | None = None
    ) -> None:
        self.api, self.emulator, self.namespace, self.gate = api, api.emulator, namespace, gate
        self.settle = settle
        """None: reconcile at each event; else at most once per `settle` wall seconds per
        workflow, the events between gathered (as Argo's rate-limited queue does): each
        reconciliation still passes over every task of the workflow, and each of its
        status writes costs the API server the whole object, too much at each pod write of
        a workflow of thousands (benchmarks/scale.py)."""
        self._due: set[str] = set()
        self._unsubscribe: Callable[[], None] | None = None

    def __enter__(self) -> ArgoController:
        self.api.call(self._start)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._unsubscribe is not None:
            self.api.call(self._unsubscribe)

    def _start(self) -> None:
        self._unsubscribe = self.emulator.subscribe(self._on_event)
        for wf in self.emulator.list(WORKFLOWS, self.namespace):
            self.reconcile(wf["metadata"]["name"])

    def _on_event(self, res: kmock.resource, etype: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("namespace") != self.namespace or etype == "DELETED":
            return
        if res == WORKFLOWS:
            self._soon(meta["name"])
        elif res == PODS and WORKFLOW_LABEL in (meta.get("labels") or {}):
            self._soon(meta["labels"][WORKFLOW_LABEL])

    def _soon(self, name: str) -> None:
        if self.settle is None:
            self.reconcile(name)
        elif name not in self._due:
            self._due.add(name)
            loop = asyncio.get_running_loop()
            loop.call_later(self.settle, self.emulator._safely, self._settled, name)

    def _settled(self, name: str) -> None:
        self._due.discard(name)
        self.reconcile(name)

    # -- one reconciliation ---------------------------------------------------------------

    def reconcile(self, name: str) -> None:
        """Bring the workflow's nodes and pods one step forward (idempotent).

        It reads the stored workflow without copying it, reads the pods of the nodes that
        have not ended only, and writes the nodes it changed only (a merge patch): at a
        pod's end in a workflow of thousands of nodes, a few nodes, not all."""
        wf = self.emulator.live(WORKFLOWS, self.namespace, name)
        if wf is None:
            return
        stored = wf.get("status") or {}
        if stored.get("phase") in DONE:
            return
        run = _Run(self, wf, dict(stored.get("nodes") or {}))
        spec = wf["spec"]
        templates = {t["name"]: t for t in spec["templates"]}
        phase = run.template(templates[spec["entrypoint"]], name, None, templates)
        phase = phase if phase in DONE else "Running"
        if not run.changed and phase == stored.get("phase") and "startedAt" in stored:
            return
        status = {"nodes": {i: run.nodes[i] for i in run.changed}, "phase": phase}
        if "startedAt" not in stored:
            status["startedAt"] = now()
        if phase in DONE:
            status["finishedAt"] = now()
        self.emulator.patch(WORKFLOWS, self.namespace, name, {"status": status})

    def create_pod(
        self, wf: Mapping[str, Any], node: Mapping[str, Any], template: Mapping[str, Any]
    ) -> None:
        meta = wf["metadata"]
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        container = template.get("container") or template.get("script") or {}
        duration = str(annotations.get(DURATION_ANNOTATION, "1"))
        pod = {
            "metadata": {
                "name": node["id"],
                "namespace": self.namespace,
                "labels": {WORKFLOW_LABEL: meta["name"]},
                "annotations": {NODE_NAME: node["name"], NODE_ID: node["id"]},
                "ownerReferences": [
                    {
                        "apiVersion": "argoproj.io/v1alpha1",
                        "kind": "Workflow",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": container.get("image", "busybox"),
                        "env": [{"name": DURATION_ENV, "value": duration}],
                    }
                ],
            },
        }
        if container.get("resources"):  # what the kube-scheduler places it by
            pod["spec"]["containers"][0]["resources"] = copy.deepcopy(container["resources"])
        if self.gate:
            pod["spec"]["schedulingGates"] = [{"name": GATE}]
        try:
            self.emulator.create(PODS, pod, self.namespace)
        except kmock.KubernetesError as exc:
            if exc.status != 409:  # already created by an earlier reconciliation
                raise


class _Run:
    """One reconciliation's walk over a workflow's templates and nodes."""

    def __init__(self, owner: ArgoController, wf: Mapping[str, Any], nodes: dict[str, Any]) -> None:
        self.owner, self.wf, self.nodes = owner, wf, nodes
        """The workflow's nodes by id: the stored ones (read-only) but for `changed`."""
        self.changed: set[str] = set()
        """Ids of the nodes this reconciliation created or changed (its own copies)."""
        self.workflow = wf["metadata"]["name"]
        self.exit: dict[str, Any] = {}
        """The node the last template run hands its dependents to."""
        self.entries: list[dict[str, Any]] = []
        """The nodes of the last DAG task that its parents link to."""
        limit = wf["spec"].get("parallelism")
        self.room = None if limit is None else int(limit) - self.live_pods()
        """Pods the workflow's ``parallelism`` lets this reconciliation create (None: any)."""

    def live_pods(self) -> int:
        """The workflow's pods that have not ended: only a pod node that has not ended may
        have one (a pod is named by its node's id)."""
        live = 0
        for node in self.nodes.values():
            if node["type"] == "Pod" and node["phase"] not in DONE:
                pod = self.owner.emulator.live(PODS, self.owner.namespace, node["id"])
                live += pod is not None and (pod.get("status") or {}).get("phase") not in DONE
        return live

    def node(
        self, name: str, kind: str, boundary: str | None, display: str, template: str | None = None
    ) -> dict[str, Any]:
        """The node called `name`, created (Pending) if it does not exist yet."""
        nid = self.workflow if name == self.workflow else _node_id(self.workflow, name)
        found = self.nodes.get(nid)
        if found is None:
            found = {
                "id": nid,
                "name": name,
                "displayName": display,
                "type": kind,
                "phase": "Pending",
                "startedAt": now(),
            }
            if boundary is not None:
                found["boundaryID"] = boundary
            if template is not None:
                found["templateName"] = template
            self.nodes[nid] = found
            self.changed.add(nid)
        return found

    def own(self, node: Mapping[str, Any]) -> dict[str, Any]:
        """The current version of `node` (looked up by id), made this reconciliation's copy
        to change: the stored one is the API server's."""
        nid = node["id"]
        if nid not in self.changed:
            mine = dict(self.nodes[nid])
            if "children" in mine:
                mine["children"] = list(mine["children"])
            self.nodes[nid] = mine
            self.changed.add(nid)
        return self.nodes[nid]

    def link(self, parent: Mapping[str, Any], child: Mapping[str, Any]) -> None:
        if child["id"] not in (self.nodes[parent["id"]].get("children") or ()):
            self.own(parent).setdefault("children", []).append(child["id"])

    def finish(self, node: Mapping[str, Any], phase: str, message: str | None = None) -> str:
        if self.nodes[node["id"]]["phase"] == phase:
            return phase
        mine = self.own(node)
        if mine["phase"] not in DONE and phase in DONE:
            mine["finishedAt"] = now()
            if message:
                mine["message"] = message
        mine["phase"] = phase
        return phase

    def template(
        self,
        template: Mapping[str, Any],
        name: str,
        boundary: str | None,
        templates: Mapping[str, Any],
        display: str | None = None,
    ) -> str:
        """Run `template` as the node `name`; return its phase (its exit node: `self.exit`)."""
        display = display or name
        if "dag" in template:
            return self.dag(template, name, boundary, templates, display)
        if "steps" in template:
            return self.steps(template, name, boundary, templates, display)
        return self.pod(template, name, boundary, display)

    def pod(
        self, template: Mapping[str, Any], name: str, boundary: str | None, display: str
    ) -> str:
        limit = (template.get("retryStrategy") or {}).get("limit")
        if limit is None:
            node = self.node(name, "Pod", boundary, display, template["name"])
            self.exit = node
            return self.pod_phase(node, template)
        retry = self.node(name, "Retry", boundary, display)
        attempt = 0
        while True:
            child = self.node(
                f"{name}({attempt})", "Pod", boundary, f"{display}({attempt})", template["name"]
            )
            self.link(retry, child)
            phase = self.pod_phase(child, template)
            self.exit = child if phase == "Succeeded" else retry
            if phase == "Succeeded":
                return self.finish(retry, "Succeeded")
            if phase not in DONE:
                return self.finish(retry, "Running")
            if attempt >= int(limit):
                return self.finish(retry, "Failed", "No more retries left")
            attempt += 1

    def pod_phase(self, node: dict[str, Any], template: Mapping[str, Any]) -> str:
        """Create the node's pod if it has none; the node's phase from its pod's."""
        if node["phase"] in DONE:
            return str(node["phase"])  # final: its pod is not read again
        pod = self.owner.emulator.live(PODS, self.owner.namespace, node["id"])
        if pod is None:
            if self.room is not None:
                if self.room <= 0:
                    return node["phase"]  # held back by the workflow's parallelism
                self.room -= 1
            self.owner.create_pod(self.wf, node, template)
            return node["phase"]
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if phase == "Failed":
            states = (pod.get("status") or {}).get("containerStatuses") or [{}]
            code = ((states[0].get("state") or {}).get("terminated") or {}).get("exitCode")
            return self.finish(node, "Failed", f"failed with exit code {code}")
        return self.finish(node, phase)

    def dag(
        self,
        template: Mapping[str, Any],
        name: str,
        boundary: str | None,
        templates: Mapping[str, Any],
        display: str,
    ) -> str:
        own = self.node(name, "DAG", boundary, display, template["name"])
        tasks = {t["name"]: t for t in template["dag"]["tasks"]}
        needs = {
            n: list(t.get("dependencies") or _names(t.get("depends"))) for n, t in tasks.items()
        }
        exits: dict[str, list[dict[str, Any]]] = {}
        phases: dict[str, str] = {}
        pending = True
        while pending:  # tasks in dependency order: a task runs once its needs succeeded
            pending = False
            for task, deps in needs.items():
                if task in phases or any(phases.get(d) not in DONE for d in deps):
                    continue  # ran already, or waits for a dependency
                if any(phases[d] != "Succeeded" for d in deps):
                    phases[task] = "Omitted"  # no node: Argo does not run it
                    continue
                phases[task], exits[task] = self.task(
                    tasks[task], f"{name}.{task}", own["id"], templates
                )
                parents = [e for d in deps for e in exits[d]] or [own]
                for parent in parents:
                    for entry in self.entries:
                        self.link(parent, entry)
                pending = True
        return self.settle(
            own, [p for p in phases.values() if p != "Omitted"], len(phases) == len(tasks)
        )

    def task(
        self, task: Mapping[str, Any], name: str, boundary: str, templates: Mapping[str, Any]
    ) -> tuple[str, list[dict[str, Any]]]:
        """Run a DAG task (a TaskGroup of items with `withItems`); its phase, the nodes its
        dependents hang off; `self.entries`: its own nodes that its parents link to."""
        template = templates[task["template"]]
        display = name.rsplit(".", 1)[-1]
        items = task.get("withItems")
        if items is None:
            phase = self.template(template, name, boundary, templates, display)
            entry = self.nodes[
                self.workflow if name == self.workflow else _node_id(self.workflow, name)
            ]
            self.entries = [entry]
            return phase, [self.exit]
        group = self.node(name, "TaskGroup", boundary, display, template["name"])
        phases, exits = [], []
        for i, item in enumerate(items):
            phases.append(
                self.template(
                    template, f"{name}({i}:{item})", boundary, templates, f"{display}({i}:{item})"
                )
            )
            self.link(group, self.nodes[_node_id(self.workflow, f"{name}({i}:{item})")])
            exits.append(self.exit)
        self.entries = [group]
        return self.settle(group, phases, True), exits

    def steps(
        self,
        template: Mapping[str, Any],
        name: str,
        boundary: str | None,
        templates: Mapping[str, Any],
        display: str,
    ) -> str:
        own = self.node(name, "Steps", boundary, display, template["name"])
        previous: list[dict[str, Any]] = [own]
        phases: list[str] = []
        for g, group in enumerate(template["steps"]):
            node = self.node(f"{name}[{g}]", "StepGroup", own["id"], f"[{g}]")
            for parent in previous:
                self.link(parent, node)
            results, previous = [], []
            for step in group:
                items = step.get("withItems")
                calls = (
                    [(step["name"], None)]
                    if items is None
                    else [(f"{step['name']}({i}:{it})", it) for i, it in enumerate(items)]
                )
                for label, _ in calls:
                    child_name = f"{name}[{g}].{label}"
                    results.append(
                        self.template(
                            templates[step["template"]], child_name, own["id"], templates, label
                        )
                    )
                    self.link(node, self.nodes[_node_id(self.workflow, child_name)])
                    previous.append(self.exit)
            phase = self.settle(node, results, True)
            phases.append(phase)
            if phase != "Succeeded":
                return self.settle(own, phases, phase in DONE)
        return self.settle(own, phases, True)

    def settle(self, node: dict[str, Any], phases: list[str], complete: bool) -> str:
        """A DAG, Steps, StepGroup or TaskGroup node's phase from its parts'."""
        self.exit = node
        if any(p not in DONE for p in phases) or not complete:
            return self.finish(node, "Running")
        return self.finish(node, "Failed" if any(p != "Succeeded" for p in phases) else "Succeeded")


def _names(depends: Any) -> list[str]:
    """The task names a `depends` expression lists."""
    if not isinstance(depends, str):
        return []
    return list(
        dict.fromkeys(
            t.split(".")[0]
            for t in re.findall(r"[A-Za-z0-9_][-A-Za-z0-9_]*(?:\.[A-Za-z]+)?", depends)
        )
    )
