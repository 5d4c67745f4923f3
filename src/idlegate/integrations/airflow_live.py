"""The job of a live Airflow DAG run, read from Airflow's REST API and cached per DAG.

When a worker pod of a DAG run idlegate has not seen appears, `LiveDags.run` gives that
run's job (`LiveRun`): the DAG's structure (``GET /dags/{dag_id}/details`` and
``/tasks``) mapped by `idlegate.sim.airflow.map_dag` with the run's task instances (its
mapped tasks' sizes so far, what it skipped), each stage's estimate the mean run time of
the same task in the DAG's earlier finished runs (their task instances' ``duration``). A
stage whose task instances all succeeded is no longer waited for by the stages after it
(`settled`): Airflow has started them, whatever its pods' teardown.

Per DAG, the structure and the earlier runs are asked once and kept (`DagEntry`) for
`max_age` seconds; each run asks only for itself and its task instances. A DAG that
changed between runs is noticed:

* Airflow 3 names the DAG version each run runs (``dag_versions``) and the DAG's latest
  (``latest_dag_version``): a run of a version other than the one kept asks for the DAG
  again (`LiveRun.notes` says so);
* a run whose task instances are not the DAG's tasks (Airflow 2, or a run of an older
  version than the API now describes) asks again once, then is refused (`LiveRefusal`,
  ``DagChanged``): its pods are left to Airflow.

Every failure is a `LiveRefusal` with an Event reason and a sentence: the API unreachable
(``AirflowUnreachable``), the credentials refused (``AirflowUnauthorized``), a pod's run
that Airflow does not have (``NoDagRun``), a DAG that changed under the run
(``DagChanged``), a DAG that does not map (``NotScheduled``: the mapping's reason).
The caller (the operator) releases the run's pods to Airflow, saying why.

`place` says what to do with each of a run's pods: its stage takes it, the run is to be
asked for again (a mapped task Airflow expanded since, a task the job does not know), or
it is left to Airflow with a reason (a sensor's or deferrable task's pod, a pod that names
no run, a task of a DAG that changed under its run).

Blocking HTTP (the client's transport); the operator calls it off its event loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from idlegate.errors import IdlegateError
from idlegate.integrations.airflow import (
    DEFAULT_RUNS,
    AirflowClient,
    AirflowError,
    AirflowNotFound,
)
from idlegate.integrations.airflow_pods import AirflowPod
from idlegate.sim.airflow import (
    AirflowJob,
    AirflowRefusal,
    AirflowRefusalReason,
    AirflowStage,
    LeftTask,
    airflow_runs,
    map_dag,
    run_arrival,
)
from idlegate.sim.external import DEFAULT_PRIOR, DurationHistory
from idlegate.sim.timestamps import parse_time

MAX_AGE = 600.0
"""Seconds a DAG's structure and history are kept before a new run asks for them again."""
NO_RUN = "NoDagRun"
CHANGED = "DagChanged"
NOT_SCHEDULED = "NotScheduled"
LEFT = "LeftToAirflow"


class LiveRefusal(IdlegateError):
    """A DAG run idlegate does not schedule: `reason` is the Event's reason, the message
    says why and that its pods are left to Airflow."""

    def __init__(self, reason: str, message: str, problem: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.problem = problem or message
        """What is wrong alone, as the client says it (no word of the pods)."""

    @property
    def transient(self) -> bool:
        """An error of the API (unreachable, credentials refused, an answer not Airflow's),
        which asking again may not meet; not a fact about the run."""
        return self.reason not in (NO_RUN, CHANGED, NOT_SCHEDULED)


def _version(found: Any) -> str | None:
    """The id of a DAG version (Airflow 3's ``dag_version``), None if none is given."""
    if isinstance(found, Mapping) and found.get("id") is not None:
        return str(found["id"])
    return None


def _index(ti: Mapping[str, Any]) -> int:
    """A task instance's map index (-1: not mapped)."""
    index = ti.get("map_index")
    return index if isinstance(index, int) and not isinstance(index, bool) else -1


def run_version(run: Mapping[str, Any]) -> str | None:
    """The DAG version a run runs: the last of its ``dag_versions`` (Airflow 3)."""
    versions = run.get("dag_versions")
    return _version(versions[-1]) if isinstance(versions, list) and versions else None


@dataclass
class DagEntry:
    """What is kept of one DAG: its structure, its earlier finished runs' task instances,
    and the estimates they give."""

    details: Mapping[str, Any]
    tasks: list[Any]
    instances: list[Any]
    """The task instances of its earlier finished runs (what marks a task deferrable)."""
    durations: DurationHistory
    fetched: float
    """When it was asked for (the caller's clock)."""

    @property
    def version(self) -> str | None:
        """The DAG version its structure is of (Airflow 3), None if not said."""
        return _version(self.details.get("latest_dag_version"))


@dataclass(frozen=True)
class LiveRun:
    """One DAG run's job, as mapped when asked."""

    dag_id: str
    run_id: str
    job: AirflowJob
    arrival: float | None
    """Epoch seconds it was queued (`run_arrival`), None if Airflow does not say."""
    version: str | None
    """The DAG version it runs (Airflow 3)."""
    state: str | None = None
    """The run's state when asked (``running``, ``success``, ``failed``, ...)."""
    notes: tuple[str, ...] = field(default=())
    """What changed since the DAG was last asked for, one sentence each."""
    succeeded: frozenset[tuple[str, str, int, int]] = frozenset()
    """(task key, task id, map index, try number) of each task instance that had succeeded
    when the run was asked for (the key in `AirflowPod.task_key`'s form)."""
    queued: Mapping[tuple[str, int, int], float] = field(default_factory=dict)
    """(task id, map index, try number) -> epoch seconds Airflow queued that task try
    (its ``queued_when``), for the task instances queued when the run was asked for: when
    Airflow's pending timeout started counting (`QueuedTimeout.deadline`)."""

    @property
    def over(self) -> bool:
        """Airflow says the run ended (its pods may still tear down)."""
        return self.state in ("success", "failed")

    def done_pods(self, namespace: str, pods: Iterable[AirflowPod]) -> list[AirflowPod]:
        """A Succeeded stand-in for each task instance Airflow says succeeded and that has
        no pod among `pods` (Airflow deletes a worker pod once it ended): what a restart
        restores of the run's progress beside its pods, so a stage whose pods are gone
        is not waited for again."""
        have = {p.task_key for p in pods}
        return [
            AirflowPod(
                namespace,
                f"airflow-ti:{key}",
                "",
                self.dag_id,
                self.run_id,
                task,
                index,
                tried,
                gated=False,
                phase="Succeeded",
                created=None,
            )
            for key, task, index, tried in sorted(self.succeeded)
            if key not in have
        ]

    def stage_of(self, task_id: str) -> AirflowStage | LeftTask | None:
        """The stage a task's pods belong to, the `LeftTask` saying why it is left to
        Airflow, or None for a task the job does not know (the DAG changed)."""
        for stage in self.job.stages:
            if stage.task_id == task_id:
                return stage
        return next((t for t in self.job.left if t.task_id == task_id), None)


def settled(job: AirflowJob, instances: Iterable[Any]) -> AirflowJob:
    """`job` with no edge from a stage whose task instances Airflow reports all succeeded
    (the run's `instances`): Airflow starts the tasks after it then, while its pods may
    still tear down (holding their executors), so those tasks' pods are ready at once."""
    won: dict[str, set[int]] = {}
    for ti in instances:
        if isinstance(ti, Mapping) and ti.get("state") == "success":
            won.setdefault(str(ti.get("task_id")), set()).add(_index(ti))
    done = {s.name for s in job.stages if s.tasks_known and len(won.get(s.task_id, ())) >= s.tasks}
    if not done:
        return job
    stages = tuple(
        replace(s, depends_on=tuple(d for d in s.depends_on if d not in done)) for s in job.stages
    )
    return replace(job, stages=stages)


@dataclass(frozen=True)
class PodAction:
    """What to do with one worker pod of a run (`LiveRun.place`)."""

    action: Literal["schedule", "remap", "release"]
    """schedule: its stage takes it; remap: ask for the run again first (Airflow expanded
    a mapped task, or the pod's task is new); release: leave it to Airflow."""
    reason: str = ""
    """The Event's reason of a release."""
    message: str = ""
    """Why, in a sentence (a release's Event)."""


def place(run: LiveRun, pod: AirflowPod, *, remapped: bool = False) -> PodAction:
    """What to do with `pod`, a worker pod of `run` (`remapped`: the run was just asked for
    again on its account, so a task still unknown is the DAG's change, not Airflow's
    news)."""
    if pod.problem is not None:
        return PodAction("release", NO_RUN, pod.problem)
    found = run.stage_of(pod.task_id or "")
    if isinstance(found, LeftTask):
        return PodAction("release", LEFT, f"{found.message}.")
    if found is None:
        if not remapped:
            return PodAction("remap")
        return PodAction(
            "release",
            CHANGED,
            f"DAG {run.dag_id}, run {run.run_id}: task {pod.task_id!r} is no task of the DAG "
            "as Airflow's API describes it: the DAG changed under the run; the pod is left "
            "to Airflow",
        )
    beyond = pod.map_index >= found.tasks or (pod.map_index >= 0 and not found.tasks_known)
    if beyond and not remapped:
        return PodAction("remap")  # (Airflow expanded the mapped task since)
    if beyond:
        return PodAction(
            "release",
            CHANGED,
            f"DAG {run.dag_id}, run {run.run_id}: mapped task {pod.task_id!r} has no index "
            f"{pod.map_index} among the run's task instances; the pod is left to Airflow",
        )
    return PodAction("schedule")


class LiveDags:
    """The DAG runs of one Airflow, asked through `client` (module docstring)."""

    def __init__(
        self,
        client: AirflowClient,
        *,
        runs: int = DEFAULT_RUNS,
        max_age: float = MAX_AGE,
        prior: float = DEFAULT_PRIOR,
    ) -> None:
        self.client = client
        self.runs = runs
        self.max_age = max_age
        self.prior = prior
        self.dags: dict[str, DagEntry] = {}

    def run(self, dag_id: str, run_id: str, now: float) -> LiveRun:
        """The job of the run `run_id` of `dag_id` as it is now; LiveRefusal if it has none."""
        try:
            return self._run(dag_id, run_id, now)
        except AirflowNotFound as exc:
            raise LiveRefusal(NO_RUN, f"{exc}; its pods are left to Airflow") from None
        except AirflowError as exc:
            raise LiveRefusal(
                exc.reason, f"{exc}; its pods are left to Airflow", str(exc)
            ) from None

    def _run(self, dag_id: str, run_id: str, now: float) -> LiveRun:
        entry = self.dags.get(dag_id)
        fresh = entry is None or now - entry.fetched > self.max_age
        if entry is None or fresh:
            entry = self._entry(dag_id, now)
        run = self.client.dag_run(dag_id, run_id)
        notes: list[str] = []
        version = run_version(run)
        if version is not None and version != entry.version and not fresh:
            entry = self._entry(dag_id, now)
            fresh = True
            notes.append(
                f"DAG {dag_id} changed since its last run idlegate saw (version "
                f"{version}): its tasks were read again; estimates of tasks it renamed or "
                "added start from the prior"
            )
        instances = self.client.task_instances(dag_id, run_id)
        try:
            job = self._map(entry, run, instances)
        except AirflowRefusal as exc:
            if exc.reason is not AirflowRefusalReason.CHANGED:
                raise LiveRefusal(NOT_SCHEDULED, f"{exc}; its pods are left to Airflow") from None
            if fresh:
                raise LiveRefusal(CHANGED, f"{exc}. Its pods are left to Airflow") from None
            entry = self._entry(dag_id, now)  # (Airflow 2 names no versions: ask again)
            try:
                job = self._map(entry, run, instances)
            except AirflowRefusal as again:
                raise LiveRefusal(CHANGED, f"{again}. Its pods are left to Airflow") from None
        job = settled(job, instances)
        queued = {
            (str(ti.get("task_id")), _index(ti), int(ti["try_number"])): when
            for ti in instances
            if isinstance(ti, Mapping)
            and isinstance(ti.get("try_number"), int)
            and (when := parse_time(ti.get("queued_when"))) is not None
        }
        succeeded = frozenset(
            (f"{task}[{index}]" if index >= 0 else task, task, index, ti["try_number"])
            for ti in instances
            if isinstance(ti, Mapping)
            and ti.get("state") == "success"
            and isinstance(ti.get("try_number"), int)
            for task, index in [(str(ti.get("task_id")), _index(ti))]
        )
        state = str(run.get("state"))
        return LiveRun(
            dag_id, run_id, job, run_arrival(run), version, state, tuple(notes), succeeded, queued
        )

    def _map(self, entry: DagEntry, run: Mapping[str, Any], instances: list[Any]) -> AirflowJob:
        export = {
            "dag": entry.details,
            "tasks": entry.tasks,
            "dag_runs": [run],
            "task_instances": [*entry.instances, *instances],
        }
        return map_dag(export, run=run, durations=entry.durations, prior=self.prior)

    def _entry(self, dag_id: str, now: float) -> DagEntry:
        """Ask for the DAG's structure and its earlier runs, and keep them."""
        export = self.client.dag_export(dag_id, runs=self.runs)
        try:
            history = airflow_runs(export, prior=self.prior).history
        except AirflowRefusal:
            history = DurationHistory()  # (the DAG does not map: its run says why)
        entry = DagEntry(
            details=export["dag"],
            tasks=export["tasks"],
            instances=export["task_instances"],
            durations=history,
            fetched=now,
        )
        self.dags[dag_id] = entry
        return entry
