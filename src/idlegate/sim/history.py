"""A user's own workflow history: past workflows, when they arrived, and how long tasks ran.

A history file is a workflow file (`sim.spec.load_workflow_file`: YAML, JSON or JSON
Lines, one workflow, a list, a multi-document stream, or `DagWorkflow` resources) whose
workflows may carry more keys, so the simulator can replay the past:

* `arrival` (or `submitTime`) at the top of a workflow (next to `stages`, or next to
  `spec` in a `DagWorkflow`): when it was submitted, in seconds. Only differences
  matter; the replay starts at the earliest one, so epoch seconds work as well.
* `name` at the top of a plain workflow: a label for its jobs (a `DagWorkflow` uses
  `metadata.name`).
* `measuredDurationSeconds` in a stage: the task durations seen in the past, a list of
  seconds. The simulator draws each task's *real* duration from this list (uniformly,
  with replacement), while schedulers keep seeing `taskDurationSeconds` as the estimate;
  without `taskDurationSeconds` the estimate is the mean of the measurements.
* what happened, beside `arrival` (all optional; the replay ignores them, reports
  compare with them): `jctSeconds` (arrival to finish), `outcome` (`Succeeded` or
  `Failed`), `policy` (the scheduler spec that ran it), `poolSize` (the executors
  of its pool then), `pool` (the ExecutorPool that ran it) and `template` (an Argo
  workflow's template key, `ArgoJob.template_key`: what later runs of it look their
  estimates up by).

Airflow DAG exports may stand in it too (`idlegate.sim.airflow.runs`): each finished DAG
run is a workflow (its arrival, measured task-instance durations, JCT and outcome from
Airflow's records; its estimates from the runs before it), an export without finished
runs the DAG itself. A DAG left to Airflow (every task a sensor or an EmptyOperator:
`AirflowRefusal.left_to_airflow`, which lint notes) is left out with a warning giving
lint's reason; only a file of which no DAG maps is an error.

Argo Workflows may stand in a history file too (`idlegate.sim.argo.runs`): each maps to
its job (`idlegate.sim.argo`), its arrival and measured pod run times come from its
metadata and `status.nodes` unless the keys above say them, and the WorkflowTemplates
beside them are what their references resolve to.

`history_record` and `write_history` write this format (what `idlegate history export`
and the operator's `--history-file` sink produce), and `load_history` reads it back.
`simulate_history` makes a history without a cluster: a workload run in the simulator,
recorded as the operator would have recorded it (`idlegate history simulate`).

A *time split* keeps a replay honest: `split_history` cuts a history at a fraction of
its recorded span into a train part (the workflows that arrived before the cut) and a
test part (the rest), so a policy trained on the first part is judged on the last.
`history_facts` names a history file (its hash, span and size, the pool and policy it
records) for reports and a trained model's metadata.

Drawing with replacement rather than handing measurement i to task i is deliberate: the
tasks of a stage are interchangeable and a different schedule runs them in a different
order anyway, and a stateless model stays correct when one workload is simulated many
times (every scheduler of a comparison) or forked. A stage with one measurement, or
with all measurements equal, therefore replays exactly.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from idlegate.errors import IdlegateError, SpecError
from idlegate.sim.airflow import AirflowRefusal, airflow_runs, is_airflow, map_dag
from idlegate.sim.argo import WORKFLOW_KINDS, ArgoRefusal, is_argo
from idlegate.sim.argo.runs import DurationHistory, argo_run, run_documents
from idlegate.sim.dag import Dag
from idlegate.sim.durations import Uniforms
from idlegate.sim.engine import Fidelity, JobArrival, Workload, simulate
from idlegate.sim.protocol import Scheduler
from idlegate.sim.spec import (
    MAX_TASK_SECONDS,
    WorkflowSpec,
    parse_workflow,
    read_workflow_items,
)

log = logging.getLogger(__name__)
ARRIVAL_KEYS = ("arrival", "submitTime")
"""Keys naming a workflow's submission time (seconds); give at most one."""
MEASURED_KEY = "measuredDurationSeconds"
"""Stage key: the measured task durations in seconds."""
OUTCOMES = ("Succeeded", "Failed")
"""The values of a record's `outcome`."""
RECORD_KEYS = ("jctSeconds", "outcome", "policy", "poolSize", "template", "pool")
"""Top-level keys of what happened to a workflow (beside `arrival`)."""
PARTS = ("all", "train", "test")
"""Parts of a history a replay may take: all of it, or one side of the time split."""


@dataclass(frozen=True)
class MeasuredDurations:
    """A job's real task durations: drawn from each stage's measurements, else its estimate.

    `measured[i]` is stage i's list of measured durations (None: none were measured, the
    task takes exactly `estimates[i]`).
    """

    measured: tuple[tuple[float, ...] | None, ...]
    estimates: tuple[float, ...]

    def sample(
        self, stage: int, job_executors: int, first: bool, moved: bool, u: Uniforms
    ) -> float:
        row = self.measured[stage]
        if not row:
            return self.estimates[stage]
        return row[int(u.next() * len(row))]


@dataclass(frozen=True)
class HistoryWorkflow:
    """One past workflow: its DAG spec, when it arrived, and its measured task durations."""

    spec: WorkflowSpec
    name: str | None
    """The workflow's label (`name`, or a DagWorkflow's metadata.name), if it has one."""
    arrival: float | None
    """Submission time in seconds as written in the file (None: not recorded)."""
    measured: tuple[tuple[float, ...] | None, ...]
    """Per stage, in spec order: the measured task durations, or None."""
    source: str
    """Where it is in the file, for error messages."""
    jct: float | None = None
    """Its job completion time in seconds, arrival to finish (None: not recorded)."""
    outcome: str | None = None
    """`Succeeded` or `Failed` (None: not recorded)."""
    policy: str | None = None
    """The scheduler spec that ran it (None: not recorded)."""
    pool_size: int | None = None
    """The executors of its pool when it ran (None: not recorded)."""
    template: str | None = None
    """An Argo workflow's template key (`ArgoJob.template_key`), for the estimates of its
    later runs (None: not an Argo workflow, or not recorded)."""
    pool: str | None = None
    """The ExecutorPool that ran it (the operator's sink; None: not recorded)."""

    def durations(self) -> MeasuredDurations | None:
        """The simulator's duration model for this workflow's jobs (None if nothing measured)."""
        if all(m is None for m in self.measured):
            return None
        estimates = tuple(float(s.task_duration_seconds) for s in self.spec.stages)
        return MeasuredDurations(self.measured, estimates)


def check_history_file(path: str | Path) -> None:
    """IdlegateError, one sentence, unless `path` is a readable file with some content:
    checked before anything else about a command that reads a history, so that a wrong
    path is the first thing reported."""
    p = Path(path)
    hint = "give a history file written by `idlegate history export` or `idlegate history simulate`"
    if not p.exists():
        raise IdlegateError(f"the history file {p} does not exist; {hint}")
    if not p.is_file():
        raise IdlegateError(f"{p} is not a file; {hint}")
    try:
        with p.open("rb") as f:
            empty = not any(chunk.strip() for chunk in iter(lambda: f.read(1 << 16), b""))
    except OSError as exc:
        raise IdlegateError(
            f"cannot read the history file {p} ({exc.strerror or exc}); check its permissions"
        ) from None
    if empty:
        raise IdlegateError(f"the history file {p} is empty, so it records no workflow; {hint}")


def load_history(path: str | Path) -> list[HistoryWorkflow]:
    """The workflows of a history file, in file order (see the module docstring)."""
    out = []
    items = read_workflow_items(path)
    objects = [item.raw for item in items]
    left: list[AirflowRefusal] = []
    for item, run in zip(items, run_documents(objects), strict=True):
        raw, spec = item.raw, item.spec
        if is_argo(raw):  # an Argo Workflow's run, or a template its references use
            if run:
                out.append(_argo_workflow(raw, objects, item.source))
            continue
        if is_airflow(raw):  # an Airflow DAG export: its finished runs, else the DAG
            try:
                out.extend(airflow_workflows(raw, item.source))
            except AirflowRefusal as exc:
                # an export of a whole Airflow holds DAGs of sensors or EmptyOperators
                # only: valid for Airflow, so the others replay (lint notes them too)
                if not exc.left_to_airflow:
                    raise
                log.warning("Left out of the history: %s", exc.note())
                left.append(exc)
            continue
        if item.name is None:
            _check_kind(raw, item.source)
        if not isinstance(raw, dict) or not isinstance(spec, dict):
            out.append(_plain(parse_workflow(spec, item.source), item.source))
        else:
            out.append(_recorded(raw, spec, item.name, item.source))
    if left and not out:
        if len(left) == 1:
            raise left[0]
        raise AirflowRefusal(
            left[0].reason,
            f"{path}: none of its {len(left)} Airflow DAGs has a task idlegate schedules (each "
            "is left to Airflow, as the warnings above say); give a file with at least one DAG "
            "idlegate schedules (idlegate lint shows which do)",
        )
    return out


ACCEPTED = (
    "bare workflows (a mapping with a 'stages' list), DagWorkflows (apiVersion: "
    f"idlegate.io/v1alpha1) and Argo's {', '.join(WORKFLOW_KINDS)} (apiVersion: "
    "argoproj.io/v1alpha1) and Airflow DAG exports (a mapping of 'dag' and 'tasks' as "
    "Airflow's REST API gives them: idlegate history airflow --raw)"
)
"""What a workflow file may hold, for the message about a document it may not."""


def _check_kind(raw: Any, source: str) -> None:
    """SpecError for a Kubernetes-style object that is no workflow a file may hold: one of
    another kind, or one with no kind (metadata and spec but no apiVersion and kind), which
    would otherwise be validated as a bare workflow and blamed for lacking `stages`. A
    mapping without `kind`, `apiVersion`, `metadata` or `spec` is left to be validated as a
    bare workflow, whose message says what it lacks."""
    if not isinstance(raw, Mapping) or "stages" in raw:
        return
    kind, api = raw.get("kind"), raw.get("apiVersion")
    if isinstance(kind, str) and kind:
        what = f"is a {kind} of apiVersion {api!r}, which is no workflow this file may hold"
    elif any(key in raw for key in ("kind", "apiVersion", "metadata", "spec")):
        what = "has no kind (it looks like a Kubernetes object: metadata or spec, no kind)"
    else:
        return
    raise SpecError(
        f"{source} {what}; a workflow file holds {ACCEPTED}: give the document its "
        "apiVersion and kind, or leave it out"
    )


@dataclass(frozen=True)
class Tail:
    """The last workflows of JSON Lines history files (`tail_history`)."""

    workflows: list[HistoryWorkflow]
    """Oldest first, each with its arrival."""
    skipped: Counter[str]
    """What was left out by reason: ``malformed`` lines, records with ``no arrival``,
    ``unreadable`` files."""


def tail_history(
    files: Sequence[Path], count: int, keep: Callable[[HistoryWorkflow], bool]
) -> Tail:
    """The last `count` workflows that `keep` keeps in the JSON Lines history files
    `files` (oldest first: an operator's sink and its rotated files), read from the end.

    Tolerant, for a reader of files others write (a restarted operator's): a line that is
    not a plain workflow record, a record without an arrival and a file that cannot be
    read are left out, counted by reason and logged, never raised.
    """
    found: list[HistoryWorkflow] = []
    skipped: Counter[str] = Counter()
    for path in reversed(files):
        if len(found) == count:
            break
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("Cannot read the history file %s (%s); left out.", path, exc)
            skipped["unreadable"] += 1
            continue
        for n in range(len(lines) - 1, -1, -1):
            if len(found) == count:
                break
            if not lines[n].strip():
                continue
            try:
                workflow = _line_record(lines[n], f"{path} (line {n + 1})")
            except (ValueError, IdlegateError) as exc:
                if not skipped["malformed"]:
                    log.warning("Left out of the history: %s", exc)
                skipped["malformed"] += 1
                continue
            if not keep(workflow):
                continue
            if workflow.arrival is None:
                skipped["no arrival"] += 1
            else:
                found.append(workflow)
    if skipped:
        log.warning("Left out of the history %s: %s.", files[-1], dict(skipped))
    return Tail(found[::-1], skipped)


def _line_record(line: str, source: str) -> HistoryWorkflow:
    """A plain workflow record on one line of JSON."""
    try:
        doc = json.loads(line)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{source} is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise SpecError(f"{source} is not a workflow record (a JSON object)")
    return _recorded(doc, doc, None, source)


def _recorded(
    raw: dict[str, Any], spec: dict[str, Any], name: str | None, source: str
) -> HistoryWorkflow:
    """A workflow with its record keys: a plain one (`spec` is `raw`), or a DagWorkflow
    (`raw` the object, `name` its metadata.name)."""
    body = dict(spec)
    if name is not None:  # a DagWorkflow: its source already names it
        where = source
    else:
        name = _name(body, source)
        where = source if name is None else f"{source[:-1]} {name!r})"
    arrival = _arrival(raw, where)
    record = _record_keys(raw, where)
    if spec is raw:  # a plain workflow: history keys sit beside `stages`
        for key in (*ARRIVAL_KEYS, *RECORD_KEYS):
            body.pop(key, None)
    stages, measured = _strip_measurements(body.get("stages"), where)
    if stages is not None:
        body["stages"] = stages
    parsed = parse_workflow(body, where)
    return HistoryWorkflow(parsed, name, arrival, measured, where, **record)


def history_record(workflow: HistoryWorkflow) -> dict[str, Any]:
    """One workflow as a plain history document (`load_history` reads it back equal).

    Pod templates are left out: a replay does not need them, and they may hold what a
    history file should not (images, environment).
    """
    out: dict[str, Any] = {}
    if workflow.name is not None:
        out["name"] = workflow.name
    if workflow.arrival is not None:
        out["arrival"] = workflow.arrival
    stages = []
    for stage, measured in zip(workflow.spec.stages, workflow.measured, strict=True):
        doc = stage.model_dump(by_alias=True, exclude={"template"}, exclude_defaults=True)
        doc["taskDurationSeconds"] = stage.task_duration_seconds
        if doc.get("dependsOn") is not None:
            doc["dependsOn"] = list(doc["dependsOn"])
        if measured:
            doc[MEASURED_KEY] = list(measured)
        stages.append(doc)
    out["stages"] = stages
    extra = zip(
        RECORD_KEYS,
        (
            workflow.jct,
            workflow.outcome,
            workflow.policy,
            workflow.pool_size,
            workflow.template,
            workflow.pool,
        ),
        strict=True,
    )
    out.update({key: value for key, value in extra if value is not None})
    return out


def history_text(workflows: Sequence[HistoryWorkflow], suffix: str = ".yaml") -> str:
    """`workflows` as the text of a history file: JSON Lines for `.jsonl`, JSON for `.json`,
    else YAML."""
    docs = [history_record(w) for w in workflows]
    if suffix == ".jsonl":
        return "".join(json.dumps(d, separators=(",", ":")) + "\n" for d in docs)
    if suffix == ".json":
        return json.dumps(docs, indent=1) + "\n"
    return yaml.safe_dump(docs, sort_keys=False)


def write_history(path: str | Path, workflows: Sequence[HistoryWorkflow]) -> Path:
    """Write `workflows` as a history file (`history_text`, by the file's suffix), its
    folder made if missing (as `compare --out` makes its own)."""
    p = Path(path)
    text = history_text(workflows, p.suffix)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    except OSError as exc:
        raise SpecError(f"cannot write history file {p}: {exc.strerror}") from None
    return p


@dataclass(frozen=True)
class HistoryFacts:
    """What names a history file: its content's hash and size, and what it records."""

    sha256: str
    """SHA-256 of the file's bytes (hex): the same history, byte for byte."""
    workflows: int
    """How many workflows it holds."""
    span_seconds: float
    """Seconds from the first recorded arrival to the last (0 without arrivals)."""
    pool_size: int | None
    """The pool size its workflows record most often (None: none recorded)."""
    policy: str | None
    """The scheduler spec its workflows record most often (None: none recorded)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "sha256": self.sha256,
            "workflows": self.workflows,
            "span_seconds": self.span_seconds,
            "pool_size": self.pool_size,
            "policy": self.policy,
        }


def history_facts(path: str | Path) -> HistoryFacts:
    """The `HistoryFacts` of the history file at `path` (read and checked by `load_history`)."""
    workflows = load_history(path)
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    times = [w.arrival for w in workflows if w.arrival is not None]
    span = max(times) - min(times) if times else 0.0
    return HistoryFacts(
        digest,
        len(workflows),
        span,
        most_recorded([w.pool_size for w in workflows]),
        most_recorded([w.policy for w in workflows]),
    )


def most_recorded(values: Sequence[Any]) -> Any:
    """The value recorded most often (ties: the one recorded first); None if none is."""
    counts = Counter(v for v in values if v is not None)
    return counts.most_common(1)[0][0] if counts else None


def split_history(
    workflows: Sequence[HistoryWorkflow], train_fraction: float
) -> tuple[list[HistoryWorkflow], list[HistoryWorkflow]]:
    """(train part, test part) of a history cut at `train_fraction` of its recorded span.

    The train part holds the workflows that arrived before first arrival +
    train_fraction × span, the test part the rest, each in file order. IdlegateError if a
    workflow records no arrival or if either part is empty.
    """
    if not 0 < train_fraction < 1:
        raise IdlegateError(
            f"the train fraction must be between 0 and 1 (e.g. 0.7), got {train_fraction}"
        )
    require_arrivals(workflows)
    times = [w.arrival or 0.0 for w in workflows]
    cut = min(times) + train_fraction * (max(times) - min(times))
    train = [w for w, t in zip(workflows, times, strict=True) if t < cut]
    test = [w for w, t in zip(workflows, times, strict=True) if t >= cut]
    for name, part in (("train", train), ("test", test)):
        if not part:
            raise IdlegateError(
                f"the {name} part of the history is empty: {len(workflows)} workflow(s) "
                f"recorded, cut at {train_fraction:g} of their arrival span; record more "
                "workflows or choose another train fraction"
            )
    return train, test


def history_part(
    workflows: Sequence[HistoryWorkflow], part: str, train_fraction: float
) -> list[HistoryWorkflow]:
    """The workflows of `part` (`PARTS`): all of them, or one side of `split_history`."""
    if part == "all":
        return list(workflows)
    if part not in PARTS:
        raise IdlegateError(f"unknown history part {part!r}; choose one of: {', '.join(PARTS)}")
    train, test = split_history(workflows, train_fraction)
    return train if part == "train" else test


def require_arrivals(workflows: Sequence[HistoryWorkflow]) -> None:
    """IdlegateError unless there are workflows and every one records its arrival."""
    if not workflows:
        raise IdlegateError("the history holds no workflow; record or export some first")
    missing = [w for w in workflows if w.arrival is None]
    if missing:
        raise IdlegateError(
            f"{missing[0].source} has no arrival (or submitTime), and {len(missing)} of "
            f"{len(workflows)} workflow(s) lack one; a replay of the history needs each "
            "workflow's arrival in seconds"
        )


def recorded_order(workflows: Sequence[HistoryWorkflow]) -> tuple[list[int], list[float]]:
    """The workflows' indices in the order they arrived (ties: file order), and each one's
    arrival in seconds after the first: the one rule of a replay's clock. IdlegateError
    if a workflow records no arrival."""
    require_arrivals(workflows)
    times = [w.arrival or 0.0 for w in workflows]
    order = sorted(range(len(workflows)), key=times.__getitem__)
    start = times[order[0]]
    return order, [times[i] - start for i in order]


def history_arrivals(workflows: Sequence[HistoryWorkflow]) -> list[JobArrival]:
    """Recorded workflows as the simulator's arrivals, in arrival order from t = 0
    (`recorded_order`): each with its DAG and its measured durations (`durations`).

    What a replay of finished workflows takes, whether they come from a history file
    (`idlegate advise`, the `file` workload) or from an operator's records (the
    `portfolio` scheduler's window, `policy.portfolio`).
    """
    order, times = recorded_order(workflows)
    out = []
    for i, t in zip(order, times, strict=True):
        w = workflows[i]
        label = w.name or f"workflow-{i}"
        out.append(JobArrival(t, label, Dag.from_spec(w.spec), w.durations()))
    return out


def replay_workload(
    arrivals: Sequence[JobArrival], num_executors: int, *, moving_delay: float = 0.0
) -> Workload:
    """`arrivals` (finished workflows, any order, any clock) as a workload on a pool of
    `num_executors`, shifted to start at t = 0, each job keeping its duration model.

    A job with a duration model runs for its draws (`Fidelity.wave_durations`), one
    without for its estimates; `moving_delay` is the live cluster's.
    """
    if not arrivals:
        raise IdlegateError("a replay needs at least one finished workflow")
    ordered = sorted(arrivals, key=lambda a: a.time)
    start = ordered[0].time
    jobs = tuple(
        JobArrival(a.time - start, a.name, a.dag, a.durations, a.scheduled) for a in ordered
    )
    return Workload("replay", jobs, num_executors, Fidelity(moving_delay, wave_durations=True))


def simulate_history(
    workload: Workload, scheduler: Scheduler, seed: int = 0, policy: str | None = None
) -> list[HistoryWorkflow]:
    """A history of `workload` run in the simulator under `scheduler` (seed `seed`).

    Each job becomes what the operator records of a finished workflow: its name, arrival,
    DAG and estimates, each stage's measured task durations as the simulator ran them
    (a moved executor's delay included, as a pod's start is), its JCT, outcome Succeeded,
    `policy` (the scheduler's spec text, if given) and the workload's pool size. Every
    job of the workload must have a workflow spec (the DAG's), as generated ones do.
    """
    result = simulate(workload, scheduler, seed=seed, record_tasks=True)
    ran: dict[tuple[int, int], list[float]] = {}
    for task in result.tasks or ():
        ran.setdefault((task.job, task.stage), []).append(task.end - task.start)
    out = []
    for record in result.records:
        job = workload.jobs[record.id]
        spec = job.dag.spec
        if spec is None:
            raise IdlegateError(
                f"job {job.name!r} of workload {workload.name!r} has no workflow spec, so it "
                "cannot be written as a history; use a workload whose jobs are workflows"
            )
        measured = tuple(
            tuple(ran.get((record.id, i), ())) or None for i in range(len(spec.stages))
        )
        out.append(
            HistoryWorkflow(
                spec,
                job.name,
                record.arrival,
                measured,
                f"simulated job {job.name!r}",
                jct=record.jct,
                outcome="Succeeded",
                policy=policy,
                pool_size=workload.num_executors,
            )
        )
    return out


def _record_keys(top: dict[str, Any], where: str) -> dict[str, Any]:
    """The optional record keys of a workflow (`RECORD_KEYS`), checked."""
    out: dict[str, Any] = {}
    jct = top.get("jctSeconds")
    if jct is not None:
        ok = isinstance(jct, int | float) and not isinstance(jct, bool) and math.isfinite(jct)
        if not ok or jct < 0:
            raise SpecError(f"{where}: jctSeconds must be a number of seconds >= 0, got {jct!r}")
        out["jct"] = float(jct)
    outcome = top.get("outcome")
    if outcome is not None:
        if outcome not in OUTCOMES:
            raise SpecError(
                f"{where}: outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}"
            )
        out["outcome"] = outcome
    for key, what in (
        ("policy", "a scheduler spec such as 'fair'"),
        ("template", "the name of an Argo workflow template"),
        ("pool", "the name of an ExecutorPool"),
    ):
        text = top.get(key)
        if text is not None:
            if not isinstance(text, str) or not text:
                raise SpecError(f"{where}: {key} must be {what}, got {text!r}")
            out[key] = text
    pool = top.get("poolSize")
    if pool is not None:
        if isinstance(pool, bool) or not isinstance(pool, int) or pool < 1:
            raise SpecError(
                f"{where}: poolSize must be a whole number of executors >= 1, got {pool!r}"
            )
        out["pool_size"] = pool
    return out


def _argo_workflow(raw: dict[str, Any], objects: list[Any], source: str) -> HistoryWorkflow:
    """An Argo workflow of a history file (`idlegate.sim.argo.runs`): its job, and its
    arrival, measurements and outcome from its status unless the file's keys say them."""
    try:
        run = argo_run(raw, objects)
        spec = run.job.spec()
    except ArgoRefusal as exc:
        raise ArgoRefusal(exc.reason, f"{source}: {exc}") from None
    except SpecError as exc:
        raise SpecError(f"{source}: {exc}") from None
    where = f"{source[:-1]} {run.name!r})"
    arrival = _arrival(raw, where)
    record = {
        "jct": run.jct,
        "outcome": run.outcome,
        "template": run.job.template_key,
        **_record_keys(raw, where),
    }
    return HistoryWorkflow(
        spec,
        run.name,
        arrival if arrival is not None else run.arrival,
        run.measured,
        where,
        **record,
    )


def airflow_workflows(raw: Mapping[str, Any], source: str) -> list[HistoryWorkflow]:
    """The workflows of an Airflow DAG export (`idlegate.sim.airflow.runs`): one per
    finished DAG run, else the DAG itself (no arrival, estimates from no history). A run
    that does not fit the DAG any more is left out with a warning."""
    try:
        found = airflow_runs(raw)
        dag = f"DAG {found.dag_id!r}"
        where = f"{source[:-1]} {dag})" if source.endswith(")") else f"{source} ({dag})"
        for text in found.left_out:
            log.warning("Left out of the history: %s: %s", where, text)
        if not found.runs:
            job = map_dag(raw, durations=found.history)
            spec = job.spec()
            measured = (None,) * len(spec.stages)
            return [
                HistoryWorkflow(spec, job.dag_id, None, measured, where, template=job.template_key)
            ]
        return [
            HistoryWorkflow(
                run.job.spec(),
                f"{found.dag_id}/{run.run_id}",
                run.arrival,
                run.measured,
                f"{where[:-1]}, run {run.run_id})",
                jct=run.jct,
                outcome=run.outcome,
                template=run.job.template_key,
            )
            for run in found.runs
        ]
    except AirflowRefusal as exc:
        raise AirflowRefusal(exc.reason, str(exc), where=source) from None


def argo_history(
    obj: Mapping[str, Any],
    objects: Sequence[Any] = (),
    *,
    name: str | None = None,
    policy: str | None = None,
    pool_size: int | None = None,
    ran: Mapping[str, float] | None = None,
) -> HistoryWorkflow | None:
    """The history record of a finished Argo Workflow `obj` as the API returns it (the
    WorkflowTemplates its references use among `objects`), labelled `name` (default: its
    own); None while it has not finished. ArgoRefusal or SpecError if it does not map.

    Its measured run times are its pods' own, `ran` (node name -> seconds: `argo_run`),
    when given; else its `status.nodes`' times, which count a wait at the gate too."""
    run = argo_run(obj, [obj, *objects], ran=ran)
    if run.outcome is None or run.jct is None:
        return None
    return HistoryWorkflow(
        run.job.spec(),
        name or run.name,
        run.arrival,
        run.measured,
        name or run.name,
        jct=run.jct,
        outcome=run.outcome,
        policy=policy,
        pool_size=pool_size,
        template=run.job.template_key,
    )


class ArgoLearning:
    """What finished Argo workflows teach the estimates of their templates' next runs
    (the operator's, which starts from its history sink's records)."""

    def __init__(self, keep: int = 50) -> None:
        self.durations = DurationHistory(keep)
        """The estimates' history lookup (`map_workflow(durations=...)`)."""
        self.learned: set[str] = set()
        """The uids of the finished workflows looked at, each once: learned from, or not
        mapped (which a later look would not change)."""

    def load(self, path: Path) -> None:
        """Learn from the Argo records of the history file `path` (if it exists)."""
        if path.exists():
            self.durations = argo_durations(load_history(path), self.durations.keep)

    def learn(
        self, obj: Mapping[str, Any], objects: Sequence[Any] = (), **record: Any
    ) -> HistoryWorkflow | None:
        """The record of the finished Workflow `obj` (`argo_history` with `objects` and
        `record`'s keywords, `ran` among them) if it was not learned from yet, its run
        times learned now; None for one looked at before, not finished, or that does not
        map."""
        uid = str((obj.get("metadata") or {}).get("uid", ""))
        try:
            found = argo_history(obj, objects, **record)
        except SpecError:
            self.learned.add(uid)
            return None
        if found is None or uid in self.learned:
            return None
        self.learned.add(uid)
        stages = (s.name for s in found.spec.stages)
        self.durations.add(found.template or "", stages, found.measured)
        return found


def argo_durations(workflows: Sequence[HistoryWorkflow], keep: int = 50) -> DurationHistory:
    """The Argo estimates' history lookup (`DurationHistory`) from the records of
    `workflows` that name a template; the others are not Argo's."""
    history = DurationHistory(keep)
    for w in workflows:
        if w.template is not None:
            history.add(w.template, (s.name for s in w.spec.stages), w.measured)
    return history


def _plain(spec: WorkflowSpec, source: str) -> HistoryWorkflow:
    return HistoryWorkflow(spec, None, None, (None,) * len(spec.stages), source)


def _arrival(top: dict[str, Any], source: str) -> float | None:
    given = [k for k in ARRIVAL_KEYS if k in top]
    if len(given) > 1:
        raise SpecError(f"{source}: give either arrival or submitTime, not both")
    if not given:
        return None
    key = given[0]
    value = top[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecError(
            f"{source}: {key} must be a number of seconds (e.g. 12.5 or epoch seconds), "
            f"got {value!r}"
        )
    if value < 0:
        raise SpecError(f"{source}: {key} must be >= 0 seconds, got {value}")
    return float(value)


def _name(body: dict[str, Any], source: str) -> str | None:
    if "name" not in body:
        return None
    value = body.pop("name")
    if not isinstance(value, str | int) or isinstance(value, bool) or str(value) == "":
        raise SpecError(f"{source}: name must be a non-empty text, got {value!r}")
    return str(value)


def _strip_measurements(
    stages: Any, where: str
) -> tuple[list[Any] | None, tuple[tuple[float, ...] | None, ...]]:
    """The stages without their measurements (estimates filled in), and the measurements."""
    if not isinstance(stages, list):
        return None, ()  # parse_workflow reports the missing or malformed stage list
    clean: list[Any] = []
    measured: list[tuple[float, ...] | None] = []
    for i, stage in enumerate(stages):
        if not isinstance(stage, dict) or MEASURED_KEY not in stage:
            clean.append(stage)
            measured.append(None)
            continue
        stage = dict(stage)
        label = f"stage {stage.get('name', f'#{i}')!r}"
        values = _measurements(stage.pop(MEASURED_KEY), f"{where}: {label}")
        stage.setdefault("taskDurationSeconds", float(np.mean(values)))
        clean.append(stage)
        measured.append(values)
    return clean, tuple(measured)


def _measurements(value: Any, where: str) -> tuple[float, ...]:
    hint = f"{MEASURED_KEY} must be a non-empty list of task durations in seconds, e.g. [4.2, 5.0]"
    if not isinstance(value, list) or not value:
        raise SpecError(f"{where}: {hint}; got {value!r}")
    out = []
    for v in value:
        ok = isinstance(v, int | float) and not isinstance(v, bool)
        if not ok or not (0 < v <= MAX_TASK_SECONDS):
            raise SpecError(
                f"{where}: {MEASURED_KEY} holds {v!r}; every duration must be a number of "
                f"seconds > 0 and <= {MAX_TASK_SECONDS}"
            )
        out.append(float(v))
    return tuple(out)
