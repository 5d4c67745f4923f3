"""Airflow DAG -> job: the mapping rules (the package docstring states them for users).

`map_dag` reads a DAG *export*: the answers of Airflow's stable REST API about one DAG,
side by side in one mapping (`is_airflow` recognises it):

* ``dag``: ``GET /dags/{dag_id}/details`` (its ``dag_id`` and ``max_active_tasks``);
* ``tasks``: the ``tasks`` of ``GET /dags/{dag_id}/tasks`` (``task_id``,
  ``downstream_task_ids``, ``is_mapped``, ``class_ref``, ``operator_name``,
  ``trigger_rule``, ``retries``, ``priority_weight``, ``weight_rule``);
* optionally ``dag_runs`` (``GET /dags/{dag_id}/dagRuns``) and ``task_instances`` (each
  run's ``GET .../dagRuns/{run_id}/taskInstances``, every one naming its ``dag_run_id``):
  a run's task instances settle its mapped tasks' sizes and what it skipped, and every
  run's are the durations of the history (`idlegate.sim.airflow.runs`).

The same fields come from Airflow 3's ``/api/v2`` and Airflow 2's ``/api/v1``. Pure: dicts
in, jobs out; nothing here reads a file or the network (`idlegate.integrations.airflow`
asks the API).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from idlegate.errors import IdlegateError
from idlegate.sim.airflow.model import (
    AirflowCondition,
    AirflowJob,
    AirflowRefusal,
    AirflowRefusalReason,
    AirflowStage,
    LeftReason,
    LeftTask,
)
from idlegate.sim.airflow.requests import UnreadableConfig, instance_demand
from idlegate.sim.external import DEFAULT_PRIOR, MAX_RETRIES, DurationLookup, DurationSource
from idlegate.sim.graphs import cycle_path
from idlegate.sim.resources import EMPTY, ResourceVector
from idlegate.sim.spec import MAX_STAGES, MAX_TASK_SECONDS, MAX_TASKS_PER_STAGE, stage_label

if TYPE_CHECKING:
    import networkx as nx

NO_POD_CLASSES = frozenset({"EmptyOperator", "ExternalTaskMarker"})
"""Operators Airflow marks done without running them (EmptyOperator and its subclasses
in Airflow's own set)."""
DEFERRING_MODULES = (".operators.hitl",)
"""Modules whose operators defer as a rule: human-in-the-loop operators wait for a person
in Airflow's triggerer."""
BRANCHING = ("Branch", "ShortCircuit", "LatestOnly")
"""Operator class names with one of these in them may skip their downstream tasks."""
ALWAYS_RUN_RULES = frozenset({"all_success", "all_done", "always", "all_done_setup_success"})
"""Trigger rules under which a task runs whenever its upstream tasks end as usual (the
others may skip it: one_success, none_failed_min_one_success, ...)."""
NOT_RUN_STATES = frozenset({"skipped", "removed", "upstream_failed"})
"""Task-instance states of one that did not run in its DAG run."""
WEIGHT_RULES = ("downstream", "upstream", "absolute")
"""Airflow's own weight rules (the default is downstream)."""


def is_airflow(obj: Any) -> bool:
    """True for an Airflow DAG export: a mapping with ``dag`` (a mapping naming its
    ``dag_id``) and a ``tasks`` list (see the module docstring)."""
    if not isinstance(obj, Mapping):
        return False
    dag = obj.get("dag")
    return isinstance(dag, Mapping) and "dag_id" in dag and isinstance(obj.get("tasks"), list)


def dag_id(obj: Mapping[str, Any]) -> str:
    """The DAG id of an export; AirflowRefusal (not-a-dag) for anything else."""
    if not is_airflow(obj):
        raise AirflowRefusal(
            AirflowRefusalReason.NOT_A_DAG,
            "not an Airflow DAG export: expected a mapping with 'dag' (GET /dags/{dag_id}/"
            "details, naming its dag_id) and 'tasks' (GET /dags/{dag_id}/tasks' tasks); "
            "`idlegate history airflow --raw` writes one",
        )
    value = obj["dag"]["dag_id"]
    if not isinstance(value, str) or not value:
        raise AirflowRefusal(
            AirflowRefusalReason.INVALID,
            f"the DAG export's dag.dag_id must be a text, got {value!r}",
        )
    return value


def run_instances(obj: Mapping[str, Any], run_id: str) -> list[Mapping[str, Any]]:
    """The task instances of the export's run `run_id`."""
    return [
        ti
        for ti in obj.get("task_instances") or []
        if isinstance(ti, Mapping) and ti.get("dag_run_id") == run_id
    ]


def map_dag(
    obj: Mapping[str, Any],
    *,
    run: Mapping[str, Any] | None = None,
    durations: DurationLookup | None = None,
    prior: float = DEFAULT_PRIOR,
) -> AirflowJob:
    """The job the DAG export `obj` maps to; with `run` (one of its ``dag_runs``), the job
    of that run: its task instances settle mapped sizes and skipped tasks.

    `durations`: a history lookup by (``airflow:<dag_id>``, stage name); `prior`: the
    estimate without one. AirflowRefusal (with a `reason`) for a DAG that does not map.
    """
    name = dag_id(obj)
    where = f"DAG {name}"
    tasks = _tasks(obj.get("tasks"), where)
    graph = _graph(tasks, where)
    instances = None
    run_id = None
    if run is not None:
        run_id = str(run.get("dag_run_id"))
        instances = run_instances(obj, run_id)
        _check_fits(tasks, instances, run, f"{where}, run {run_id}")
    seen = _seen_by_task(obj.get("task_instances") or [])
    left = {t: _left(task, seen.get(t, ())) for t, task in tasks.items()}
    if len(tasks) - sum(v is not None for v in left.values()) > MAX_STAGES:
        raise AirflowRefusal(
            AirflowRefusalReason.TOO_MANY_STAGES,
            f"{where} has more than {MAX_STAGES:,} tasks to schedule, more than idlegate "
            "holds in memory for one workflow",
        )
    walker = _Walker(
        where, name, tasks, graph, left, instances, durations, prior, _priorities(tasks, graph)
    )
    walker.seen = seen
    stages = walker.stages()
    if not stages:
        raise AirflowRefusal(
            AirflowRefusalReason.NO_TASKS,
            f"{where} has no task idlegate schedules (every one is left to Airflow: "
            f"{_left_summary(left)}), so there is nothing to schedule",
        )
    details = obj["dag"]
    cap = details.get("max_active_tasks")
    return AirflowJob(
        dag_id=name,
        stages=tuple(stages),
        left=tuple(
            LeftTask(t, reason, message)
            for t, found in left.items()
            if found is not None
            for reason, message in [found]
        ),
        max_active_tasks=int(cap) if _whole(cap) and cap >= 1 else None,
        run_id=run_id,
        notes=tuple(dict.fromkeys(walker.notes)),
    )


# -- reading the answers -------------------------------------------------------------------


def _tasks(raw: Any, where: str) -> dict[str, Mapping[str, Any]]:
    """The tasks by id, in the API's order; INVALID unless each has the shape it gives."""
    if not isinstance(raw, list):
        raise AirflowRefusal(
            AirflowRefusalReason.INVALID,
            f"{where}: tasks must be the list GET /dags/{{id}}/tasks gives",
        )
    out: dict[str, Mapping[str, Any]] = {}
    for i, task in enumerate(raw):
        tid = task.get("task_id") if isinstance(task, Mapping) else None
        down = task.get("downstream_task_ids", []) if isinstance(task, Mapping) else None
        if not isinstance(tid, str) or not tid:
            raise AirflowRefusal(
                AirflowRefusalReason.INVALID, f"{where}: tasks[{i}] has no task_id (a text)"
            )
        if not isinstance(down, list) or not all(isinstance(d, str) for d in down):
            raise AirflowRefusal(
                AirflowRefusalReason.INVALID,
                f"{where}: task {tid!r}: downstream_task_ids must be a list of task ids",
            )
        if tid in out:
            raise AirflowRefusal(
                AirflowRefusalReason.INVALID, f"{where}: task {tid!r} is listed twice"
            )
        out[tid] = task
    return out


def _graph(tasks: Mapping[str, Mapping[str, Any]], where: str) -> nx.DiGraph:
    import networkx as nx  # (here: `idlegate lint` starts without it)

    graph = nx.DiGraph()
    graph.add_nodes_from(tasks)
    for tid, task in tasks.items():
        for down in task.get("downstream_task_ids") or []:
            if down not in tasks:
                raise AirflowRefusal(
                    AirflowRefusalReason.BAD_DAG,
                    f"{where}: task {tid!r} has downstream task {down!r}, which is no task "
                    "of the DAG; export its tasks again (GET /dags/{dag_id}/tasks)",
                )
            graph.add_edge(tid, down)
    cycle = cycle_path(graph)
    if cycle is not None:
        raise AirflowRefusal(
            AirflowRefusalReason.BAD_DAG,
            f"{where}: its tasks depend on each other in a cycle: {cycle}",
        )
    return graph


def _check_fits(
    tasks: Mapping[str, Any],
    instances: Sequence[Mapping[str, Any]],
    run: Mapping[str, Any],
    where: str,
) -> None:
    """CHANGED unless the run's task instances are the DAG's tasks: an instance of a task
    the DAG no longer has, or (a finished run) a task with no instance. An instance Airflow
    marked ``removed`` (its task left the DAG during the run) leaves the job; it is no
    change."""
    ids = {str(ti.get("task_id")) for ti in instances if ti.get("state") != "removed"}
    unknown = sorted(ids - set(tasks))
    missing = sorted(set(tasks) - ids) if run.get("state") in ("success", "failed") else []
    if not unknown and not missing:
        return
    said = []
    if unknown:
        said.append(f"ran {', '.join(map(repr, unknown[:5]))}, which the DAG no longer has")
    if missing:
        said.append(f"has no instance of {', '.join(map(repr, missing[:5]))}")
    raise AirflowRefusal(
        AirflowRefusalReason.CHANGED,
        f"{where} {' and '.join(said)}: the DAG changed since this run, so it does not "
        "replay on the DAG's tasks as they are now",
    )


def _seen_by_task(instances: Sequence[Any]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for ti in instances:
        if isinstance(ti, Mapping):
            out.setdefault(str(ti.get("task_id")), []).append(ti)
    return out


def operator_of(task: Mapping[str, Any]) -> str:
    """The task's operator class: ``class_ref.class_name``, else ``operator_name``."""
    ref = task.get("class_ref")
    name = ref.get("class_name") if isinstance(ref, Mapping) else None
    return str(name or task.get("operator_name") or "unknown")


def _module(task: Mapping[str, Any]) -> str:
    ref = task.get("class_ref")
    return str(ref.get("module_path") or "") if isinstance(ref, Mapping) else ""


def _left(
    task: Mapping[str, Any], instances: Sequence[Mapping[str, Any]]
) -> tuple[LeftReason, str] | None:
    """Why the task is left to Airflow, if it is (sensors, deferrable tasks, no pod)."""
    cls, tid = operator_of(task), task["task_id"]
    if cls in NO_POD_CLASSES:
        return LeftReason.NO_POD, f"task {tid!r} ({cls}) is marked done by Airflow without a pod"
    if "Sensor" in cls or ".sensors." in _module(task):
        return LeftReason.SENSOR, (
            f"task {tid!r} is a sensor ({cls}): it waits for something outside the DAG for "
            "as long as it takes, so it is left to Airflow and its downstream tasks wait "
            "for it as they would without idlegate"
        )
    deferred = any(ti.get("state") == "deferred" or ti.get("trigger") for ti in instances)
    if deferred or cls.endswith("Async") or _module(task).endswith(DEFERRING_MODULES):
        how = "a run of it deferred to the triggerer" if deferred else f"{cls} defers"
        return LeftReason.DEFERRABLE, (
            f"task {tid!r} is deferrable ({how}): its wait is the triggerer's and it comes "
            "back as a new pod, so it is left to Airflow"
        )
    return None


def _left_summary(left: Mapping[str, tuple[LeftReason, str] | None]) -> str:
    found = [f"{t} ({v[0]})" for t, v in left.items() if v is not None]
    return ", ".join(found[:6]) + (", ..." if len(found) > 6 else "") if found else "no task"


def _whole(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and float(value) == int(value)
    )


def _number(value: Any, default: float) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else default


def _priorities(tasks: Mapping[str, Mapping[str, Any]], graph: nx.DiGraph) -> dict[str, float]:
    """Each task's priority as Airflow computes it: its `priority_weight` (default 1) plus,
    under the `downstream` rule, every downstream task's; `upstream`, every upstream
    task's; `absolute`, its own. A custom rule (a class path) counts as `downstream` here;
    a run's task instances carry Airflow's own figure, which `_Walker.stage` prefers."""
    import networkx as nx  # (here: `idlegate lint` starts without it)

    own = {t: _number(task.get("priority_weight"), 1.0) for t, task in tasks.items()}
    out = {}
    for tid, task in tasks.items():
        rule = str(task.get("weight_rule") or "downstream")
        if rule == "absolute":
            out[tid] = own[tid]
        elif rule == "upstream":
            out[tid] = own[tid] + sum(own[a] for a in nx.ancestors(graph, tid))
        else:
            out[tid] = own[tid] + sum(own[d] for d in nx.descendants(graph, tid))
    return out


@dataclass
class _Walker:
    where: str
    dag_id: str
    tasks: Mapping[str, Mapping[str, Any]]
    graph: nx.DiGraph
    left: Mapping[str, tuple[LeftReason, str] | None]
    instances: Sequence[Mapping[str, Any]] | None
    durations: DurationLookup | None
    prior: float
    priority: Mapping[str, float]

    def __post_init__(self) -> None:
        self.notes: list[str] = []
        self._names: set[str] = set()
        self._by_task = _seen_by_task(self.instances or [])
        self.seen: Mapping[str, list[Mapping[str, Any]]] = {}
        """Every task instance of the export, by task (the run's are `_by_task`)."""

    def stages(self) -> list[AirflowStage]:
        import networkx as nx  # (here: `idlegate lint` starts without it)

        order = list(self.tasks)
        names: dict[str, str] = {}
        waits: dict[str, tuple[str, ...]] = {}  # what a task's dependents wait for
        branched = self._branched()
        out = []
        for tid in nx.lexicographical_topological_sort(self.graph, key=order.index):
            deps = tuple(dict.fromkeys(d for up in self.graph.predecessors(tid) for d in waits[up]))
            if self.left[tid] is not None:
                waits[tid] = deps  # left to Airflow: its dependents wait for its own upstream
                continue
            stage = self.stage(tid, deps, branched)
            names[tid] = stage.name
            waits[tid] = (stage.name,)
            out.append(stage)
            if stage.tasks > MAX_TASKS_PER_STAGE:
                raise AirflowRefusal(
                    AirflowRefusalReason.TOO_MANY_STAGES,
                    f"{self.where}: mapped task {tid!r} has {stage.tasks} instances, more than "
                    f"a stage may have ({MAX_TASKS_PER_STAGE})",
                )
        return out

    def _branched(self) -> set[str]:
        """The tasks downstream of a branching task."""
        import networkx as nx  # (here: `idlegate lint` starts without it)

        out: set[str] = set()
        for tid, task in self.tasks.items():
            if any(word in operator_of(task) for word in BRANCHING):
                out |= nx.descendants(self.graph, tid)
        return out

    def stage(self, tid: str, deps: tuple[str, ...], branched: set[str]) -> AirflowStage:
        task = self.tasks[tid]
        name = stage_label(tid, self._names)
        count, known = self.size(tid, task)
        duration, source = self.estimate(name)
        seen = self._by_task.get(tid, [])
        rule = str(task.get("trigger_rule") or "all_success")
        condition = None
        if rule not in ALWAYS_RUN_RULES:
            condition = AirflowCondition.TRIGGER_RULE
        elif tid in branched:
            condition = AirflowCondition.BRANCH
        ran = [_number(ti.get("priority_weight"), math.nan) for ti in seen]
        priority = max((p for p in ran if math.isfinite(p)), default=self.priority[tid])
        custom = str(task.get("weight_rule") or "downstream") not in WEIGHT_RULES
        if custom and not any(math.isfinite(p) for p in ran):
            self.notes.append(
                f"task {tid!r} has the custom weight rule {task.get('weight_rule')!r}: its "
                "priority is counted as under the downstream rule"
            )
        return AirflowStage(
            name=name,
            task_id=tid,
            operator=operator_of(task),
            tasks=count,
            tasks_known=known,
            duration=duration,
            duration_source=source,
            depends_on=deps,
            priority=priority,
            retries=max(0, min(MAX_RETRIES, int(_number(task.get("retries"), 0.0)))),
            demand=self.demand(tid, seen or self.seen.get(tid, [])),
            condition=condition,
            skipped=bool(seen) and all(ti.get("state") in NOT_RUN_STATES for ti in seen),
        )

    def demand(self, tid: str, instances: Sequence[Mapping[str, Any]]) -> ResourceVector:
        """What the task's worker pods request: the pod override of its instances'
        `executor_config` (`idlegate.sim.airflow.requests`; the run's, else the export's
        latest that has one), else nothing."""
        where = f"{self.where}: task {tid!r}"
        for ti in reversed(instances):
            try:
                found = instance_demand(ti.get("executor_config"), where)
            except UnreadableConfig:
                self.notes.append(
                    f"task {tid!r}: its executor_config is not a literal Airflow's API can "
                    "give in full, so its pods' requests are not read"
                )
                continue
            except IdlegateError as exc:
                raise AirflowRefusal(AirflowRefusalReason.INVALID, str(exc)) from None
            if found:
                return found
        return EMPTY

    def size(self, tid: str, task: Mapping[str, Any]) -> tuple[int, bool]:
        """(task instances, known) of a task: a mapped one's map indexes in the run."""
        if not task.get("is_mapped"):
            return 1, True
        indexes = {
            ti.get("map_index")
            for ti in self._by_task.get(tid, [])
            if _whole(ti.get("map_index")) and ti["map_index"] >= 0 and ti.get("state") != "removed"
        }
        if self.instances is None or not indexes:
            self.notes.append(
                f"mapped task {tid!r}: its size is known only as a run expands it, so it "
                "counts as 1 task instance until then"
            )
            return 1, False
        return len(indexes), True

    def estimate(self, stage: str) -> tuple[float, DurationSource]:
        """History, else the prior."""
        if self.durations is not None:
            found = self.durations(f"airflow:{self.dag_id}", stage)
            if found is not None and 0 < found <= MAX_TASK_SECONDS:
                return float(found), DurationSource.HISTORY
        return self.prior, DurationSource.PRIOR
