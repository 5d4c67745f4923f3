"""benchmarks/kueue_vs_idlegate.py's figures, the same for both controllers, from the plane's
audit log (idlegate.controlplane.launcher's ``AUDIT_POLICY``: the object after every write
of a pod, a Job and a DagWorkflow, and who sent each write).

Both controllers' task pods carry the labels ``idlegate.io/workflow`` and
``idlegate.io/stage`` (idlegate's operator sets them; the benchmark's Jobs put them in
their pod template), so one reading serves both (:func:`lives`):

* a workflow is *submitted* when its first object is created (a DagWorkflow; the Job of
  its first stage) and *ends* at its last task pod's end (KWOK's ``Succeeded``): its JCT;
* a stage is *ready* at its workflow's submission (a first stage) or at the end of its
  parents' last pod; it is *submitted* to the controller then (idlegate) or when the
  driver creates its Job (Kueue), and *admitted* at its first pod's release (idlegate
  removes the gate) or its Job's first unsuspension (Kueue's write);
* a pod is *released* when its gate is removed (idlegate) or when its Job was last
  unsuspended before the pod's creation (Kueue, whose Job controller then creates it),
  *bound* at kube-scheduler's binding, *started* at KWOK's ``Running`` and *ends* at
  KWOK's ``Succeeded`` or, stopped (an eviction, a suspended Job's pods deleted),
  ``Failed``: the time it ran then is *work lost*.

Times in the log are the wall's; JCTs, waits and work lost are scaled by the run's
`speed` into the scenario's clock, the latencies (submission→admission, release→bind)
are left in wall seconds: they are the controllers' own. All pure, tested on a written log
in tests/test_kueue_bench.py.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from benchmarks.live_audit import stamp
from benchmarks.live_figures import ENDED, quantile
from idlegate.api.labels import GATE, LABEL_STAGE, LABEL_WORKFLOW
from idlegate.sim.admission_ledger import jain_index
from idlegate.sim.resources import MILLI, parse_quantity

Key = tuple[str, str]
"""(namespace, name)"""
Plan = Mapping[Key, Mapping[str, tuple[int, tuple[str, ...]]]]
"""Per workflow (namespace, name), each stage's tasks and parents."""
StageKey = tuple[str, str, str]
"""(namespace, workflow, stage)"""
WRITES = ("create", "update", "patch", "delete", "deletecollection")
JOB_CONTROLLER = "system:serviceaccount:kube-system:job-controller"


@dataclasses.dataclass
class Pod:
    """One task pod's life (wall seconds, epoch; None: it did not happen)."""

    namespace: str
    workflow: str
    stage: str
    cpu: float
    created: float
    job: str = ""
    released: float | None = None
    bound: float | None = None
    started: float | None = None
    ended: float | None = None
    phase: str = ""

    @property
    def stopped(self) -> bool:
        """It ran and was stopped (its end a failure: the scenario's tasks never fail)."""
        return self.started is not None and self.phase == "Failed"


@dataclasses.dataclass
class Life:
    """What a run's audit log says of its workflows: its pods, the Jobs' unsuspensions,
    each workflow's and each Job's creation, and the write requests by sender."""

    pods: dict[Key, Pod] = dataclasses.field(default_factory=dict)
    created: dict[Key, float] = dataclasses.field(default_factory=dict)
    """Each workflow's submission: its DagWorkflow's or its first Job's creation."""
    jobs: dict[Key, tuple[str, str, float]] = dataclasses.field(default_factory=dict)
    """Job (namespace, name) -> (workflow, stage, created)."""
    unsuspended: dict[Key, list[float]] = dataclasses.field(default_factory=dict)
    """Job -> when it was unsuspended (admitted), in order."""
    suspended: dict[Key, bool] = dataclasses.field(default_factory=dict)
    """Job -> whether it is suspended, as last written."""
    writes: Counter[str] = dataclasses.field(default_factory=Counter)
    """Write requests by sender (`sender`)."""


def sender(event: Mapping[str, Any]) -> str:
    """Who sent an audited request: ``idlegate`` (its operator's clients' User-Agents),
    ``kueue`` (its manager's user), ``job-controller``, ``driver`` (the benchmark's own
    client: its DagWorkflows, Jobs and setup), else the user's name."""
    agent = str(event.get("userAgent") or "")
    user = str((event.get("user") or {}).get("username") or "")
    if agent.startswith(("kopf/", "idlegate/")):
        return "idlegate"
    if user == JOB_CONTROLLER:
        return "job-controller"
    if agent.startswith("Python-urllib"):
        return "driver"
    return user


def lives(lines: Iterable[str]) -> Life:
    """The :class:`Life` of a run from its audit log's `lines` (the module docstring)."""
    events = []
    for line in lines:
        if line.strip():
            event = json.loads(line)
            if event.get("stage") == "ResponseComplete" and event.get("verb") in WRITES:
                events.append((stamp(event["stageTimestamp"]), event))
    events.sort(key=lambda te: te[0])
    life = Life()
    for t, event in events:
        life.writes[sender(event)] += 1
        ref = event.get("objectRef") or {}
        if int((event.get("responseStatus") or {}).get("code", 0)) >= 400:
            continue
        kind, sub = ref.get("resource", ""), ref.get("subresource", "")
        key = (ref.get("namespace", ""), ref.get("name", ""))
        obj = event.get("responseObject")
        if kind == "pods" and sub == "binding":
            if (pod := life.pods.get(key)) is not None and pod.bound is None:
                pod.bound = t
        elif kind == "pods" and isinstance(obj, dict) and "metadata" in obj:
            _pod(life, t, event["verb"], obj)
        elif kind == "jobs" and isinstance(obj, dict) and "spec" in obj:
            _job(life, t, key, obj)
        elif kind == "dagworkflows" and event["verb"] == "create" and isinstance(obj, dict):
            life.created.setdefault((key[0], obj["metadata"]["name"]), t)
    return life


def _pod(life: Life, t: float, verb: str, obj: dict[str, Any]) -> None:
    meta, spec = obj["metadata"], obj.get("spec") or {}
    labels = meta.get("labels") or {}
    if LABEL_WORKFLOW not in labels or LABEL_STAGE not in labels:
        return
    key = (meta.get("namespace", ""), meta["name"])
    gated = any(g.get("name") == GATE for g in spec.get("schedulingGates") or [])
    pod = life.pods.get(key)
    if pod is None:
        if verb != "create":
            return
        requests = ((spec.get("containers") or [{}])[0].get("resources") or {}).get("requests")
        pod = life.pods[key] = Pod(
            namespace=key[0],
            workflow=labels[LABEL_WORKFLOW],
            stage=labels[LABEL_STAGE],
            cpu=parse_quantity((requests or {}).get("cpu", "0")) / MILLI,
            created=t,
            job=labels.get("batch.kubernetes.io/job-name") or labels.get("job-name") or "",
        )
    if not gated and pod.released is None and not pod.job:
        pod.released = t
    phase = (obj.get("status") or {}).get("phase") or ""
    if phase == "Running" and pod.started is None:
        pod.started = t
    if phase in ENDED and pod.ended is None:
        pod.ended, pod.phase = t, phase


def _job(life: Life, t: float, key: Key, obj: dict[str, Any]) -> None:
    labels = ((obj.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels")
    labels = labels or {}
    if LABEL_WORKFLOW not in labels:
        return
    workflow = labels[LABEL_WORKFLOW]
    if key not in life.jobs:
        life.jobs[key] = (workflow, labels.get(LABEL_STAGE, ""), t)
        life.created.setdefault((key[0], workflow), t)
    times = life.unsuspended.setdefault(key, [])
    suspended = bool(obj["spec"].get("suspend"))
    if life.suspended.get(key, True) and not suspended:
        times.append(t)
    life.suspended[key] = suspended


@dataclasses.dataclass
class Figures:
    """A run's figures (the module docstring): clock seconds but for the latencies."""

    jct: dict[str, list[float]]
    """Per team, its finished workflows' JCTs."""
    unfinished: int
    """Workflows of the plan with no end in the log."""
    jain: float | None
    """Jain's index of the waiting teams' CPU shares, averaged over the time two or more
    teams had tasks waiting; None: never."""
    worst_wait: float
    """The longest a task waited to start: from its stage's readiness (a stopped task's
    rerun: from the stop)."""
    stopped: int
    lost: float
    """Task-seconds run by the stopped pods."""
    work: float
    """Task-seconds run by every pod."""
    admission: list[float]
    """Per stage, wall seconds from its submission to the controller to its admission."""
    binds: list[float]
    """Per pod bound, wall seconds from its release to its binding."""
    pods: int
    writes: Counter[str]

    def mean_jct(self, team: str) -> float | None:
        jcts = self.jct.get(team) or []
        return sum(jcts) / len(jcts) if jcts else None

    def per_pod(self, who: str) -> float:
        return self.writes[who] / max(self.pods, 1)


def figures(life: Life, plan: Plan, teams: Mapping[str, str], speed: float) -> Figures:
    """The :class:`Figures` of `life` for the workflows of `plan`, each namespace's team
    `teams`, on a clock `speed` times the wall's."""
    by_stage: defaultdict[StageKey, list[Pod]] = defaultdict(list)
    for pod in life.pods.values():
        by_stage[pod.namespace, pod.workflow, pod.stage].append(pod)
    done = _stage_ends(plan, by_stage)
    ready = _readiness(life, plan, done)
    jobs = {(ns, wf, st): (created, life.unsuspended.get((ns, name)) or [])
            for (ns, name), (wf, st, created) in life.jobs.items()}  # fmt: skip
    jct: defaultdict[str, list[float]] = defaultdict(list)
    unfinished = 0
    for (ns, wf), stages in plan.items():
        ends = [done.get((ns, wf, st)) for st in stages]
        if (ns, wf) in life.created and all(e is not None for e in ends):
            jct[teams[ns]].append((max(e for e in ends if e) - life.created[ns, wf]) * speed)
        else:
            unfinished += 1
    admission, binds, waits = [], [], [0.0]
    for key, pods in by_stage.items():
        created, opened = jobs.get(key, (None, []))
        for pod in pods:
            if pod.job:  # (Kueue: released by its Job's last unsuspension before it)
                pod.released = max((u for u in opened if u <= pod.created), default=None)
            if pod.bound is not None and pod.released is not None:
                binds.append(pod.bound - pod.released)
        releases = [p.released for p in pods if p.released is not None]
        submitted = created if created is not None else ready.get(key)
        if releases and submitted is not None:
            admission.append(min(opened or releases) - submitted)
        if key in ready:
            waits += _waits(pods, ready[key], speed)
    stopped = [p for p in life.pods.values() if p.stopped]
    ran = [p for p in life.pods.values() if p.started is not None and p.ended is not None]
    return Figures(
        jct=dict(jct),
        unfinished=unfinished,
        jain=_jain(plan, by_stage, ready, teams),
        worst_wait=max(waits),
        stopped=len(stopped),
        lost=sum(_ran(p) for p in stopped) * speed,
        work=sum(_ran(p) for p in ran) * speed,
        admission=admission,
        binds=binds,
        pods=len(life.pods),
        writes=life.writes,
    )


def _ran(pod: Pod) -> float:
    return (pod.ended or 0.0) - (pod.started or 0.0)


def _stage_ends(plan: Plan, by_stage: Mapping[StageKey, Sequence[Pod]]) -> dict[StageKey, float]:
    """Each stage whose tasks all succeeded: its last pod's end."""
    out = {}
    for (ns, wf), stages in plan.items():
        for st, (tasks, _) in stages.items():
            ends = [p.ended for p in by_stage.get((ns, wf, st), ()) if p.phase == "Succeeded"]
            if len(ends) >= tasks:
                out[ns, wf, st] = max(e for e in ends if e is not None)
    return out


def _readiness(life: Life, plan: Plan, done: Mapping[StageKey, float]) -> dict[StageKey, float]:
    """Each stage's readiness: its workflow's submission (a first stage), else its
    parents' last end (left out while a parent has not ended)."""
    out = {}
    for (ns, wf), stages in plan.items():
        if (ns, wf) not in life.created:
            continue
        for st, (_, parents) in stages.items():
            ends = [done.get((ns, wf, p)) for p in parents]
            if not parents:
                out[ns, wf, st] = life.created[ns, wf]
            elif all(e is not None for e in ends):
                out[ns, wf, st] = max(e for e in ends if e is not None)
    return out


def _waits(pods: Sequence[Pod], ready: float, speed: float) -> list[float]:
    """Each started pod's wait: from `ready`, or from the last stop of a pod of its stage
    before its creation (a rerun)."""
    stops = sorted(p.ended for p in pods if p.stopped and p.ended is not None)
    out = []
    for pod in pods:
        if pod.started is not None:
            origin = max([ready, *(s for s in stops if s <= pod.created)])
            out.append(max(0.0, pod.started - origin) * speed)
    return out


def _jain(
    plan: Plan,
    by_stage: Mapping[StageKey, Sequence[Pod]],
    ready: Mapping[StageKey, float],
    teams: Mapping[str, str],
) -> float | None:
    """Jain's index of the waiting teams' CPU in use, averaged over the time two or more
    teams had a task waiting (a ready stage with tasks neither running nor done)."""
    changes: list[tuple[float, int, StageKey, float, int]] = []
    for key, t in ready.items():  # (time, order, stage, CPU, +1 running / -1 / 0 ready)
        changes.append((t, 0, key, 0.0, 0))
    for key, pods in by_stage.items():
        for p in pods:
            if p.started is not None:
                changes.append((p.started, 1, key, p.cpu, 1))
            if p.started is not None and p.ended is not None:
                changes.append((p.ended, 2 if p.phase == "Succeeded" else 1, key, -p.cpu, -1))
    changes.sort(key=lambda c: (c[0], c[1]))
    usage: defaultdict[str, float] = defaultdict(float)
    running: Counter[StageKey] = Counter()
    finished: Counter[StageKey] = Counter()
    pending: defaultdict[str, set[StageKey]] = defaultdict(set)
    is_ready: set[StageKey] = set()
    area = contended = 0.0
    last = changes[0][0] if changes else 0.0
    for t, order, key, cpu, step in changes:
        waiting = [team for team, stages in pending.items() if stages]
        if len(waiting) >= 2 and t > last:
            area += jain_index([usage[w] for w in waiting]) * (t - last)
            contended += t - last
        last = t
        team = teams[key[0]]
        usage[team] += cpu
        running[key] += step
        finished[key] += order == 2
        if order == 0:
            is_ready.add(key)
        tasks = plan[key[0], key[1]][key[2]][0]
        if key in is_ready and tasks - running[key] - finished[key] > 0:
            pending[team].add(key)
        else:
            pending[team].discard(key)
    return area / contended if contended > 0 else None


def latency(values: Sequence[float]) -> str:
    """p50/p99 of wall seconds, for the table."""
    p50, p99 = quantile(values, 0.5), quantile(values, 0.99)
    return "-" if p50 is None or p99 is None else f"{p50:.2f}/{p99:.2f}"


STEPS = (
    "ready > submitted",
    "submitted > admitted",
    "admitted > pod created",
    "pod created and admitted > bound",
    "bound > running",
    "ran beyond its time",
)
"""The steps of a stage's way, in :func:`breakdown`'s order."""


def breakdown(life: Life, plan: Plan, seconds: Mapping[StageKey, float]) -> dict[str, list[float]]:
    """Where a stage's time goes, wall seconds per step (`STEPS`): from its readiness to
    its submission to the controller (Kueue: the driver's Job; idlegate: none), to its
    admission, to its first pod's creation (idlegate creates it before, gated), from both
    to its binding, to its start; and each pod's run beyond
    its declared `seconds` (over the plane's speed: given as wall seconds) until KWOK's end
    is written."""
    by_stage: defaultdict[StageKey, list[Pod]] = defaultdict(list)
    for pod in life.pods.values():
        by_stage[pod.namespace, pod.workflow, pod.stage].append(pod)
    ready = _readiness(life, plan, _stage_ends(plan, by_stage))
    jobs = {(ns, wf, st): (created, life.unsuspended.get((ns, name)) or [])
            for (ns, name), (wf, st, created) in life.jobs.items()}  # fmt: skip
    out: dict[str, list[float]] = {step: [] for step in STEPS}
    for key, pods in by_stage.items():
        if key not in ready:
            continue
        created, opened = jobs.get(key, (ready[key], []))
        releases = [p.released for p in pods if p.released is not None]
        admitted = min(opened or releases, default=None)
        first = min(pods, key=lambda p: p.created)
        steps = [created - ready[key], None if admitted is None else admitted - created]
        if admitted is not None:
            steps.append(first.created - admitted if first.job else 0.0)
        since = first.created if admitted is None else max(first.created, admitted)
        steps += [
            None if first.bound is None else first.bound - since,
            None if first.started is None or first.bound is None else first.started - first.bound,
        ]
        for step, value in zip(STEPS, steps, strict=False):
            if value is not None:
                out[step].append(max(0.0, value))
        for p in pods:
            if p.phase == "Succeeded" and p.started is not None and p.ended is not None:
                out[STEPS[-1]].append(p.ended - p.started - seconds.get(key, 0.0))
    return out
