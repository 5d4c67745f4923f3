"""One running workflow whose pods another controller creates (Argo's, Airflow's), in the
cluster state machine (`PodPairing`): its job, and its pods paired with the executors the
machine gives its stages. Each side may come first:

* a **launch** of one of its stages on an executor (a decision of the policy, or the
  executor going on with the stage's next task) takes the oldest gated pod of that stage
  waiting. A stage offers the cluster only the tasks that have a pod
  (`Cluster.tasks_available`): the controller creates a task's pod once the task is
  ready and its own limits (Argo's `parallelism`) allow, and an executor held for a pod
  it holds back could wait for ever (its gated pods hold those limits);
* a **gated pod** appearing waits for a launch, or takes an executor *owed* to its stage
  (a launch that found no pod waiting, which offering only the tasks with a pod rules
  out; kept so that such an executor is never lost).

Each pairing is a `Release` (remove the pod's gate, recording the executor on it). A
released pod that succeeds finishes its task on its executor (`Cluster.task_finished`);
one that fails frees its executor and its task waits for the retry the controller
creates, as a task not launched (`Cluster.task_failed`: the job counts a task, not its
attempts), unless its stage's retries are spent. A pod whose gate someone else removed
runs as a DagWorkflow's does then (`Cluster.started_unasked`).

What the controller decides as it runs (a fan-out's size, a skipped task) changes the
job: `remapped` puts the new job in place of the old with the progress carried over
(finished tasks, running pods on their executors, idle slots), as a restart would.
`admit` is that restart: everything it needs is on the pods (gate, phase,
``idlegate.io/executor``), so nothing is released twice and running pods keep their
executors. Each succeeded pod's own run time is kept (`ran`) for the history record: a
controller's own times (Argo's node times) count the wait at the gate too.

Pure: pods and mappings in, releases out; its holder says them to the API.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from idlegate.api.external_pods import ExternalPod
from idlegate.api.task_pods import Owner
from idlegate.errors import DemandTooLargeError
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.external import Mapped
from idlegate.sim.protocol import Job, Launch
from idlegate.sim.spec import WorkflowSpec


@dataclass(frozen=True)
class Release:
    """Remove the gate of pod `pod` (of stage `stage`), recording `executor` on it (None:
    released unscheduled, as a pod no job of the pool takes)."""

    pod: str
    stage: str
    executor: int | None


@dataclass
class _Running:
    stage: int
    executor: int | None
    """None: released by someone else while no executor was free (beyond the pool)."""
    ended: str | None = None
    """Succeeded or Failed once its pod ended while beyond the pool (counted on adoption)."""


@dataclass(eq=False)
class PodPairing:
    """One workflow's job in a cluster and its pods (see the module docstring); what it
    pairs is a list of `Release`s, for its holder to carry out (the operator's
    :class:`idlegate.operator.kinds.external.ExternalJob`)."""

    owner: Owner
    mapped: Mapped
    noted: set[str] = field(default_factory=set)
    unfit: dict[str, str] = field(default_factory=dict)
    active: bool = True
    queue: int = 0
    """The index of its pool's queue it joined (0 with no queues)."""
    priority: int = 0
    """Its priority within its queue (a PriorityClass's value), each new job's."""
    asked: Mapping[str, Any] = field(default_factory=dict)
    """What its placement read (`idlegate.api.routing.asked`): placed again by it when its
    pool changes."""
    job: Job = field(init=False)
    spec: WorkflowSpec = field(init=False)
    waiting: list[deque[ExternalPod]] = field(init=False)
    """Per stage: gated pods not released yet, oldest first."""
    owed: list[list[int]] = field(init=False)
    """Per stage: executors launched on it that wait for a pod."""
    running: dict[str, _Running] = field(default_factory=dict)
    """Released pods that have not ended (or ended beyond the pool, not yet counted)."""
    done: set[str] = field(default_factory=set)
    """Pods whose end is counted (or that no stage takes): never looked at again."""
    unplaced: dict[str, ExternalPod] = field(default_factory=dict)
    """Gated pods no stage of the job takes (yet): the next `remap` may place them."""
    failures: dict[str, int] = field(default_factory=dict)
    """Failed attempts per task path."""
    ran: dict[str, float] = field(default_factory=dict)
    """`ExternalPod.run_key` -> run time of its succeeded pod, as far as seen."""

    # -- the job ---------------------------------------------------------------------------

    def _index(self) -> dict[str, int]:
        keys = self.mapped.stage_keys
        return {keys[s.name]: i for i, s in enumerate(self.spec.stages)}

    def _add(self, cluster: Cluster, spec: WorkflowSpec, now: float, arrival: float) -> None:
        """Add the job of `spec` to the cluster, with no pod waiting and no executor owed
        (nothing changes if the cluster refuses it: a stage that could never fit)."""
        job = Dag.from_spec(spec), now, f"{self.owner.namespace}/{self.owner.name}", self
        self.job = cluster.add_job(*job, arrival=arrival)
        self.job.queue = self.queue  # (before its running pods count: its queue uses them)
        self.job.priority = self.priority
        self.spec = spec
        self.waiting = [deque() for _ in spec.stages]
        self.owed = [[] for _ in spec.stages]

    def admit(
        self, cluster: Cluster, now: float, arrival: float, pods: Iterable[ExternalPod]
    ) -> None:
        """Add the job at `now` (arrived at `arrival`) with the progress its `pods` show."""
        self._add(cluster, self.mapped.spec(), now, arrival)
        pods = list(pods)
        for pod in pods:
            self._timed(pod)
        index = self._index()
        finished = [0] * len(self.spec.stages)
        succeeded: set[str] = set()
        held: list[tuple[ExternalPod, int]] = []
        for pod in pods:
            stage = index.get(pod.stage_key or "")
            if stage is None:
                if pod.gated:
                    self.unplaced[pod.name] = pod
                else:
                    self.done.add(pod.name)
            elif pod.phase == "Succeeded" and (pod.task_key or pod.name) not in succeeded:
                succeeded.add(pod.task_key or pod.name)
                finished[stage] += 1
                self.done.add(pod.name)
            elif pod.terminal:
                self.done.add(pod.name)
                if pod.phase == "Failed":
                    self._failed(pod)
            elif pod.gated:
                self.waiting[stage].append(pod)
            else:
                held.append((pod, stage))
        tasks = [s.tasks for s in self.spec.stages]
        finished = [min(f, t) for f, t in zip(finished, tasks, strict=True)]
        room = [t - f for f, t in zip(finished, tasks, strict=True)]
        on_pool: list[tuple[ExternalPod, int]] = []
        beyond: list[tuple[ExternalPod, int]] = []
        for pod, stage in held:
            if room[stage] == 0:
                self.done.add(pod.name)  # more pods than tasks: not counted twice
                continue
            room[stage] -= 1
            fits = pod.executor is not None and len(on_pool) < cluster.free_executors
            (on_pool if fits else beyond).append((pod, stage))
        claimed = cluster.restore_progress(
            self.job, finished=finished, running=[(s, p.executor) for p, s in on_pool]
        )
        for (pod, stage), executor in zip(on_pool, claimed, strict=True):
            self.running[pod.name] = _Running(stage, executor)
        for pod, stage in beyond:
            self.running[pod.name] = _Running(stage, None)
            cluster.run_beyond(self.job.stages[stage], pod.name)
        self._offer(cluster, now)

    def remapped(self, cluster: Cluster, mapped: Mapped, now: float) -> list[Release]:
        """Put the job `mapped` (the workflow's status settled more of it) in place of the
        current one, progress carried over; nothing changes if the job is the same."""
        spec = mapped.spec()
        if spec == self.spec:
            self.mapped = mapped
            return self._place(cluster, now)
        return self._carry(cluster, spec, now, mapped)

    def moved(self, cluster: Cluster, now: float) -> list[Release]:
        """Enter `cluster`, another pool's (its old one took its job out: `Core.drop`), with
        its progress: its running pods on that pool's free executors (beyond it when it has
        none left), its gated pods waiting there."""
        self.active = True
        return self._carry(cluster, self.spec, now, None)

    def _carry(
        self, cluster: Cluster, spec: WorkflowSpec, now: float, mapped: Mapped | None
    ) -> list[Release]:
        """Put the job of `spec` in `cluster` in place of the current one, progress carried
        over by stage name: in it, remapped to `mapped`, or (None) moved from another
        pool's cluster, whose executors mean nothing here."""
        moved = mapped is None
        old_index = {s.name: i for i, s in enumerate(self.spec.stages)}
        old_job, old_waiting = self.job, self.waiting
        running = [(name, r) for name, r in self.running.items()]
        owed = [
            (s.name, e)
            for s, executors in zip(self.spec.stages, self.owed, strict=True)
            for e in executors
            if not moved  # (an executor owed was the old pool's)
        ]
        self._add(cluster, spec, now, old_job.arrival)  # (first: it may be refused)
        if mapped is not None:
            self.mapped = mapped
            cluster.remove_job(old_job, now)
        new_index = {s.name: i for i, s in enumerate(spec.stages)}
        to = {old_index[name]: new_index.get(name) for name in old_index}
        finished = [0] * len(spec.stages)
        delayed, idle = [], {}
        for old, new in to.items():
            if new is None:
                self.unplaced.update((p.name, p) for p in old_waiting[old])
                continue
            stage = old_job.stages[old]
            finished[new] = min(stage.finished, spec.stages[new].tasks)
            self.waiting[new] = old_waiting[old]
            if stage.delayed:
                delayed.append(new)
            if stage.idle_until is not None:
                idle[new] = stage.idle_until
        room = [s.tasks - f for s, f in zip(spec.stages, finished, strict=True)]
        keep: list[tuple[str | None, int, int | None]] = []  # (pod or None: owed, stage, exec.)
        self.running = {}
        for name, r in running:
            new = to.get(r.stage)
            if new is None or room[new] == 0:
                self.done.add(name)  # its stage left the job: it runs unscheduled
                continue
            room[new] -= 1
            # (moved: any free executor of its new pool, while it has one)
            if r.executor is None or (moved and len(keep) >= cluster.free_executors):
                self.running[name] = _Running(new, None, r.ended)
                cluster.run_beyond(self.job.stages[new], name)
            else:
                keep.append((name, new, None if moved else r.executor))
        for stage_name, executor in owed:
            new = new_index.get(stage_name)
            if new is not None and room[new] > 0:
                room[new] -= 1
                keep.append((None, new, executor))
        claimed = cluster.restore_progress(
            self.job,
            finished=finished,
            running=[(stage, executor) for _, stage, executor in keep],
            delayed=delayed,
            idle_until=idle,
            cap=old_job.cap,
            first_start=old_job.first_start,
            idle_inserted=old_job.idle_inserted,
        )
        for (pod, at, _), executor in zip(keep, claimed, strict=True):
            if pod is None:
                self.owed[at].append(executor)
            else:
                self.running[pod] = _Running(at, executor)
        out = self._pair_all() + self._place(cluster, now)
        self._offer(cluster, now)
        return out

    def _place(self, cluster: Cluster, now: float) -> list[Release]:
        """Gated pods that found no stage before: those that have one now join it."""
        out: list[Release] = []
        index = self._index()
        for name, pod in list(self.unplaced.items()):
            if (pod.stage_key or "") in index:
                del self.unplaced[name]
                out += self.seen(cluster, pod, now)
        return out

    def _offer(self, cluster: Cluster, now: float) -> None:
        """Tell the cluster which tasks of each stage have a pod: launched, gated and
        waiting, or running beyond the pool."""
        if self.job.finish is not None:
            return
        beyond = Counter(r.stage for r in self.running.values() if r.executor is None)
        for i, stage in enumerate(self.job.stages):
            cluster.tasks_available(stage, stage.launched + len(self.waiting[i]) + beyond[i], now)

    def _pair_all(self) -> list[Release]:
        out = []
        for stage in range(len(self.spec.stages)):
            while self.owed[stage] and self.waiting[stage]:
                pod = self.waiting[stage].popleft()
                out.append(self._release(stage, pod.name, self.owed[stage].pop(0)))
        return out

    def _release(self, stage: int, pod: str, executor: int) -> Release:
        self.running[pod] = _Running(stage, executor)
        return Release(pod, self.spec.stages[stage].name, executor)

    # -- what happens to it ----------------------------------------------------------------

    def paired(self, launches: Iterable[Launch]) -> list[Release]:
        """The machine launched tasks of its stages (a decision, an adoption of a gang)."""
        out = []
        for launch in launches:
            out += self._executor_for(launch.stage.index, launch.executor)
        return out

    def _executor_for(self, stage: int, executor: int) -> list[Release]:
        if self.waiting[stage]:
            return [self._release(stage, self.waiting[stage].popleft().name, executor)]
        self.owed[stage].append(executor)
        return []

    def seen(self, cluster: Cluster, pod: ExternalPod, now: float) -> list[Release]:
        """A pod of the workflow as it is now (level-triggered: the same state twice does
        nothing)."""
        self._timed(pod)
        out = self._see(cluster, pod, now)
        self._offer(cluster, now)
        return out

    def _see(self, cluster: Cluster, pod: ExternalPod, now: float) -> list[Release]:
        if pod.name in self.done:
            return []
        index = self._index()
        stage = index.get(pod.stage_key or "")
        known = self.running.get(pod.name)
        if known is None:
            if stage is None:
                if pod.gated:
                    self.unplaced[pod.name] = pod
                return []
            queued = next((p for p in self.waiting[stage] if p.name == pod.name), None)
            if queued is not None:
                if pod.gated:
                    return []
                self.waiting[stage].remove(queued)
            elif pod.gated:
                return self._executor_for_pod(stage, pod)
            return self._started_unasked(cluster, pod, stage, now)
        if not pod.terminal:
            return []
        return self._ended(cluster, pod, known, now)

    def _timed(self, pod: ExternalPod) -> None:
        if pod.ran is not None:
            self.ran[pod.run_key] = pod.ran

    def _executor_for_pod(self, stage: int, pod: ExternalPod) -> list[Release]:
        if self.owed[stage]:
            return [self._release(stage, pod.name, self.owed[stage].pop(0))]
        self.waiting[stage].append(pod)
        return []

    def _started_unasked(
        self, cluster: Cluster, pod: ExternalPod, stage: int, now: float
    ) -> list[Release]:
        """Its gate was removed by someone else: it runs, so it counts against the pool."""
        model = self.job.stages[stage]
        if model.launched >= model.tasks or self.job.finish is not None:
            self.done.add(pod.name)  # an attempt beyond the job's tasks: not counted twice
            return []
        self.running[pod.name] = _Running(stage, None)
        self._offer(cluster, now)  # (its task is available: it runs)
        adopted = cluster.started_unasked(model, now, pod.name)
        out = self.adopt(cluster, adopted, now)
        if pod.terminal:
            out += self._see(cluster, pod, now)
        return out

    def adopt(
        self, cluster: Cluster, adopted: Iterable[tuple[Launch, Any]], now: float
    ) -> list[Release]:
        """Tasks that ran beyond the pool have executors now (`Cluster.adopt_beyond`)."""
        out: list[Release] = []
        for launch, token in adopted:
            if launch.stage.job is not self.job:
                continue
            if token is None:  # a gang's task with no pod of its own
                out += self._executor_for(launch.stage.index, launch.executor)
                continue
            r = self.running[token]
            r.executor = launch.executor
            if r.ended is not None:
                out += self._count_end(cluster, token, r, r.ended, now)
        return out

    def _ended(self, cluster: Cluster, pod: ExternalPod, r: _Running, now: float) -> list[Release]:
        if r.executor is None:  # beyond the pool: counted once it has an executor
            if pod.phase == "Succeeded":
                r.ended = pod.phase
            else:
                cluster.drop_beyond(pod.name)
                del self.running[pod.name]
                self.done.add(pod.name)
                self._failed(pod)
            return []
        return self._count_end(cluster, pod.name, r, pod.phase, now, pod)

    def _count_end(
        self,
        cluster: Cluster,
        name: str,
        r: _Running,
        phase: str,
        now: float,
        pod: ExternalPod | None = None,
    ) -> list[Release]:
        del self.running[name]
        self.done.add(name)
        executor = r.executor
        assert executor is not None
        if phase != "Succeeded" and pod is not None and not self._spent(pod, r.stage):
            self._failed(pod)
            cluster.task_failed(executor, now)  # its retry waits for its pod, then a launch
            return []
        following = cluster.task_finished(executor, now)
        if following is not None and following.job is self.job:
            return self._executor_for(following.index, executor)
        return []

    def _failed(self, pod: ExternalPod) -> None:
        key = pod.task_key or pod.name
        self.failures[key] = self.failures.get(key, 0) + 1

    def _spent(self, pod: ExternalPod, stage: int) -> bool:
        """A failed attempt after which the controller retries no more: the task is over
        (its dependents are omitted, and leave the job at the next remap)."""
        key = pod.task_key or pod.name
        return self.failures.get(key, 0) + 1 > self.spec.stages[stage].backoff_limit

    def take_unplaced(self) -> list[ExternalPod]:
        """The gated pods no stage of the job takes (the caller releases them
        unscheduled, saying so); they are not looked at again."""
        pods = list(self.unplaced.values())
        self.unplaced.clear()
        self.done.update(p.name for p in pods)
        return pods


def too_large(exc: DemandTooLargeError, stages: Iterable[Any]) -> str:
    """Why a workflow whose stage could never fit the pool is not scheduled: the pool's
    sentence, and where the stage is in the workflow (its mapped stage's `where`)."""
    where = next((s.where for s in stages if s.name == exc.stage), None)
    return str(exc) if where is None else f"{exc} ({where})"
