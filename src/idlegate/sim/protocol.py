"""What schedulers and the cluster state machine share: jobs, stages, decisions, the protocol.

`Job` and `Stage` are the state a scheduler reads at a decision (only
`idlegate.sim.cluster.Cluster` writes them); `Decision` and `WAIT` are its answers;
`ClusterView` and `Scheduler` are the protocol every policy implements; `Launch` and
`JobRecord` are what the cluster reports back to its driver. The semantics they follow
are stated once, in `idlegate.sim.cluster`'s docstring.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol

from idlegate.sim.dag import Dag
from idlegate.sim.nodeset import NodeSet, tasks_on
from idlegate.sim.resources import EMPTY

# ---------------------------------------------------------------------------------------
# State objects (read by schedulers; only the Cluster mutates them)


_ANY = 1 << 62
"""As many tasks as may be: the room in resources of a need of none."""


class Need:
    """A stage's per-task demand on the resources its pool counts beyond pods, beside the
    pool's free amounts (`idlegate.sim.cluster`'s resource rule) and, in a pool of nodes,
    each node's. Set by the cluster on arrival; None on a stage that asks nothing the pool
    counts (a pods-only pool's)."""

    __slots__ = ("allowed", "amounts", "free", "nodes")

    def __init__(
        self,
        amounts: tuple[int, ...],
        free: list[int],
        nodes: Sequence[list[int]] | None = None,
        allowed: tuple[int, ...] | None = None,
    ) -> None:
        self.amounts = amounts
        """Milli-units of each resource the pool counts, in the pool's order."""
        self.free = free
        """The pool's free milli-units, the same list the cluster updates."""
        self.nodes: Sequence[list[int]] = nodes if nodes is not None else []
        """Each node's free milli-units (the pool's order, then its free pods), the same
        index the cluster updates (`NodeSet`); empty: the pool has no nodes, only its
        totals."""
        self.allowed = allowed
        """The indices in `nodes` of the nodes its task may use (its pod's nodeSelector,
        node affinity and tolerations: `idlegate.sim.pool.Allows`); None: any."""

    def fits(self, tasks: int = 1) -> bool:
        """`tasks` more tasks of the stage fit the free resources (and nodes)."""
        nodes = self.nodes
        if not nodes:
            return all(f >= n * tasks for f, n in zip(self.free, self.amounts, strict=True))
        if isinstance(nodes, NodeSet):  # (the pool's index: read only as far as it takes)
            if tasks > 0 and not nodes.may_hold(self.amounts):
                return False  # (nearly every test on a full pool: none of its nodes could)
            return self._total() >= tasks and nodes.holds(self.amounts, tasks, self.allowed)
        return self.room() >= tasks

    def room(self) -> int:
        """How many more tasks of the stage the free resources (and nodes) hold."""
        total = self._total()
        nodes = self.nodes
        if not nodes:
            return total
        if isinstance(nodes, NodeSet):  # (the pool's: its index counts by shape)
            return min(total, nodes.room(self.amounts, self.allowed))
        if self.allowed is not None:
            return min(total, sum(self.on(nodes[i]) for i in self.allowed))
        return min(total, sum(self.on(node) for node in nodes))

    def _total(self) -> int:
        """How many more tasks of the stage the pool's free totals hold."""
        return min(
            (f // n if f > 0 else 0 for f, n in zip(self.free, self.amounts, strict=True) if n),
            default=_ANY,  # (a need of nothing counted, kept for the nodes it may use)
        )

    def on(self, node: Sequence[int]) -> int:
        """How many tasks of the stage `node`'s free amounts (and pods) hold."""
        return tasks_on(node, self.amounts)


def launchable(stage: Stage, free: int) -> bool:
    """The stage's next task (a gang's: all its tasks) fits the `free` executors and the
    pool's free resources, if it is runnable: `view.runnable_stages()`'s rule, for a
    policy that filters `job.runnable` itself."""
    if stage.gang:
        if stage.tasks > free:
            return False
        return stage.need is None or stage.need.fits(stage.tasks - stage.launched)
    return stage.need is None or stage.need.fits()


class Stage:
    """One stage of a job in the system. Schedulers read these fields; they never write them."""

    __slots__ = (
        "available",
        "bottom_level",
        "children",
        "delayed",
        "demand",
        "duration",
        "executors",
        "finished",
        "gang",
        "idle_until",
        "index",
        "job",
        "launched",
        "name",
        "need",
        "parents_left",
        "tasks",
    )

    def __init__(self, job: Job, index: int) -> None:
        dag = job.dag
        self.job = job
        self.index = index
        self.name = dag.names[index]
        self.tasks = dag.tasks[index]
        self.duration = dag.durations[index]
        """Estimated seconds per task (the spec's taskDurationSeconds)."""
        self.bottom_level = dag.bottom_levels[index]
        self.gang = dag.gang[index]
        self.demand = dag.demands[index] if dag.demands else EMPTY
        """What one task requests (its pod's effective request), beyond its one pod."""
        self.need: Need | None = None
        """The demand on the pool's resources beyond the pod (None: none the pool
        counts; set by the cluster on arrival)."""
        self.children: tuple[int, ...] = dag.children[index]
        self.parents_left = len(dag.parents[index])
        self.launched = 0
        """Tasks started so far (running or finished)."""
        self.available = self.tasks
        """Tasks the driver can start so far (`Cluster.tasks_available`); all of them but
        for a driver whose tasks appear as the job runs (Argo's pods)."""
        self.finished = 0
        self.executors = 0
        """Executors working on this stage now."""
        self.delayed = False
        """True once the stage has had its (single) idle slot."""
        self.idle_until: float | None = None
        """End of the idle slot the stage is in now, or None."""

    @property
    def remaining(self) -> int:
        """Tasks not launched yet."""
        return self.tasks - self.launched

    @property
    def running(self) -> int:
        return self.launched - self.finished

    @property
    def waits(self) -> bool:
        """A task of it waits to start: released (`available`), not launched, its job
        unfinished (the admission's queues keep a stage until it no longer waits)."""
        return self.job.finish is None and self.launched < self.available

    @property
    def complete(self) -> bool:
        return self.finished == self.tasks

    @property
    def remaining_work(self) -> float:
        """Estimated executor-seconds of the tasks not finished yet."""
        return (self.tasks - self.finished) * self.duration

    @property
    def key(self) -> tuple[int, int]:
        """(job id, stage index): a stable identity across processes."""
        return (self.job.id, self.index)

    def __repr__(self) -> str:
        return f"<Stage {self.job.name}/{self.name} {self.finished}/{self.tasks}>"


class Job:
    """A workflow in the system: its DAG, its stages' progress and its executors."""

    __slots__ = (
        "arrival",
        "cap",
        "cp_rank",
        "dag",
        "finish",
        "first_start",
        "held",
        "holding",
        "id",
        "idle_inserted",
        "name",
        "payload",
        "priority",
        "queue",
        "remaining_cp",
        "remaining_work",
        "runnable",
        "stages",
        "stages_left",
        "unlaunched",
    )

    def __init__(self, job_id: int, name: str, dag: Dag, arrival: float, payload: Any) -> None:
        self.id = job_id
        self.name = name
        self.dag = dag
        self.arrival = arrival
        self.payload = payload
        """Driver data (the simulator keeps the job's duration model here)."""
        self.stages = [Stage(self, i) for i in range(dag.num_stages)]
        self.stages_left = dag.num_stages
        self.unlaunched = sum(dag.tasks)
        """Tasks of this job not launched yet, over all stages."""
        self.held = 0
        """Executors working on this job's tasks now."""
        self.holding: list[int] = []
        """Milli-units of each resource the pool counts beyond pods (`Cluster.resource_names`,
        in order; empty for a pods-only pool) that its running tasks hold: Σ over its stages
        of ``need.amounts × executors``, kept by the cluster as tasks start and end."""
        self.cap = 0
        """Parallelism cap set by the latest decision on this job (0: none yet)."""
        self.remaining_work = dag.total_work
        """Estimated executor-seconds of unfinished tasks."""
        self.remaining_cp = dag.critical_path
        """Longest bottom level over incomplete stages."""
        self.cp_rank = 0
        """Stages before this position of `dag.by_bottom_level` are complete."""
        self.runnable: list[Stage] = []
        """Runnable stages of this job (gang stages regardless of free executors)."""
        self.first_start: float | None = None
        self.finish: float | None = None
        self.idle_inserted = 0.0
        """Seconds of deliberate idle slots inserted before this job's stages."""
        self.queue = 0
        """Its queue's position in the pool's admission (`idlegate.sim.admission`)."""
        self.priority = 0
        """Its priority within its queue (a PriorityClass's value): higher goes first."""

    @property
    def total_work(self) -> float:
        return self.dag.total_work

    @property
    def critical_path(self) -> float:
        return self.dag.critical_path

    @property
    def average_width(self) -> float:
        return self.dag.average_width

    def __repr__(self) -> str:
        return f"<Job {self.id} {self.name} held={self.held}>"


# ---------------------------------------------------------------------------------------
# The scheduler protocol


@dataclass(frozen=True, slots=True)
class Decision:
    """Launch `stage` with the job capped at `parallelism_cap` executors, or idle it first.

    With `idle_delay > 0` the stage waits that many seconds (a deliberate idle slot) and
    no executor is assigned now; when the slot ends the scheduler is asked again.
    """

    stage: Stage
    parallelism_cap: int
    idle_delay: float = 0.0


class _Wait:
    __slots__ = ()

    def __repr__(self) -> str:
        return "WAIT"


WAIT: Final = _Wait()
"""The decision to assign nothing more at this event."""

Action = Decision | _Wait


class ClusterView(Protocol):
    """What a scheduler may read at a decision (the Cluster satisfies it; with queues, a
    view of the admission's plan does: `idlegate.sim.admission_view`).

    A policy reads a job's stages through `runnable(job)`, never `job.runnable`: a view
    shows only the stages its question lets start."""

    now: float
    num_executors: int
    free_executors: int
    jobs: list[Job]
    arrival_log: list[tuple[float, float]]

    def runnable(self, job: Job) -> list[Stage]: ...
    def runnable_stages(self) -> list[Stage]: ...
    def free_executors_from(self, job: Job | None) -> int: ...
    def check(self, decision: Decision) -> None: ...


class Scheduler(Protocol):
    """Every policy — heuristics, learned, ONNX, inspector — answers this one call."""

    name: str

    def reset(self, rng: Any) -> None:
        """Start of a run; `rng` is a numpy Generator owned by the run (for random choices)."""

    def decide(self, view: ClusterView) -> Action:
        """Return a Decision on one of `view.runnable_stages()`, or WAIT."""


class PodsGate:
    """`scheduler` behind a pods-only gate of `pods` executors on a cluster of resources:
    idlegate as it runs with ``--pool-size N`` and no pool resources, the kube-scheduler
    placing what it releases (`idlegate.sim.gate`). The simulator runs `scheduler` on
    the gate and the cluster below it; `pods` None sizes the gate as a user would, the
    cluster's CPUs over the workload's mean CPU request (`idlegate.sim.gate.gate_size`).

    Elsewhere (a driver that places pods itself) it is `scheduler`: `decide` is its."""

    def __init__(self, scheduler: Scheduler, pods: int | None = None) -> None:
        self.scheduler = scheduler
        self.pods = pods
        self.name = f"pods-gate:{getattr(scheduler, 'name', type(scheduler).__name__)}"

    def reset(self, rng: Any) -> None:
        self.scheduler.reset(rng)

    def decide(self, view: ClusterView) -> Action:
        return self.scheduler.decide(view)


# ---------------------------------------------------------------------------------------
# Launches and per-job results


class Launch(NamedTuple):
    """A task start the driver must carry out: run one task of `stage` on `executor`.

    `first`: the executor's first task on this stage (Decima's first wave);
    `moved`: the executor comes from another job or none (moving delay, warm-up).
    """

    executor: int
    stage: Stage
    first: bool
    moved: bool


@dataclass(frozen=True, slots=True)
class JobRecord:
    """What happened to one job: the per-job metrics."""

    id: int
    name: str
    arrival: float
    first_start: float
    finish: float
    total_work: float
    critical_path: float
    idle_inserted: float

    @property
    def jct(self) -> float:
        return self.finish - self.arrival


def followed(policy: Scheduler) -> str:
    """The rule `policy` follows now: a planner's or a portfolio's (`following`), else itself."""
    following = getattr(policy, "following", None)
    return following if isinstance(following, str) else policy.name
