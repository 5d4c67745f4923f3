"""What the core is told (:data:`Event`, one :meth:`Core.handle` each) and what it tells the
features besides its intents (:data:`Fact`).

An event carries what happened as the API showed it; the time comes beside it
(``Core.handle(event, now)``). A write's end (:data:`~.intents.Outcome`) is an event too.
A fact is the core's (a task ended, a workflow finished, a status landed) that
the features over it (:mod:`idlegate.operator.features`) answer with intents of their own:
the core never calls them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from idlegate.api.podsecurity import NamespacePolicy
from idlegate.api.task_pods import Owner
from idlegate.operator.core.judging import Judged, JudgeStops

if TYPE_CHECKING:
    from idlegate.api.external_pods import ExternalPod
    from idlegate.operator.core.tracking import StageTrack, Task, Workflow, WorkflowKey
    from idlegate.operator.kinds.external import ExternalJob
    from idlegate.operator.nodes.ledger import Placing
    from idlegate.sim.external import Mapped
    from idlegate.sim.pool import Allows
    from idlegate.sim.resources import ResourceVector
    from idlegate.sim.spec import WorkflowSpec


@dataclass(frozen=True, slots=True)
class Admit:
    """A DagWorkflow as the API holds it, with its pods and its namespace's Pod Security
    `policy`. `gang_waits`: a gang wider than the pool raises GangTooWideError (the pool may
    grow) instead of making it Invalid; `fail`: admitted only to fail with this message (a
    suspended workflow's deadline passed)."""

    body: Mapping[str, Any]
    pods: Sequence[Mapping[str, Any]] = ()
    policy: NamespacePolicy | None = None
    schedule: bool = True
    gang_waits: bool = False
    fail: str | None = None
    pool: str | None = None
    """The ExecutorPool it is admitted into: said by its PoolFound condition if it `waited`
    for the pool (or carries that condition already)."""
    waited: bool = False
    queue: int = 0
    """The index of the pool's queue it joins (`Pools.place`; 0 with no queues)."""
    priority: int = 0
    """Its priority in its queue (its PriorityClass's value)."""


@dataclass(frozen=True, slots=True)
class PodSeen:
    """A task pod as it is now (a watch event, a list, a write's answer)."""

    body: Mapping[str, Any]
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class Forget:
    """The workflow is being deleted (or left the pool): its job goes."""

    namespace: str
    name: str
    uid: str | None
    schedule: bool = True


@dataclass(frozen=True, slots=True)
class IdleEnded:
    """An idle slot's timer fired (of the workflow `owner`, of any kind)."""

    owner: Owner
    stage: int


@dataclass(frozen=True, slots=True)
class Join:
    """The workflow `owner`, whose pods another controller creates, is the job `mapped`
    (:class:`~idlegate.operator.kinds.external.ExternalJob`): it enters the pool, arrived at `arrival`, with
    the `pods` listed and then those `seen` since; in the pool, its job is `mapped` now
    (its controller settled more of it)."""

    owner: Owner
    mapped: Mapped
    arrival: float = 0.0
    pods: Sequence[ExternalPod] = ()
    seen: Sequence[ExternalPod] = ()
    asked: Mapping[str, Any] | None = None
    """What its placement read of it (`idlegate.api.routing.asked`): it is placed again
    from this when its pool changes."""
    queue: int = 0
    """The index of the pool's queue it joins (`Pools.place`; 0 with no queues)."""
    priority: int = 0
    """Its priority in its queue (its PriorityClass's value)."""


@dataclass(frozen=True, slots=True)
class Moved:
    """A workflow whose pods another controller creates left a pool that changed or went
    (`Leave`), and enters this one, in memory, with its progress and its pods (no pod is
    touched), into queue `queue` at `priority`."""

    job: ExternalJob
    queue: int = 0
    priority: int = 0


@dataclass(frozen=True, slots=True)
class Observed:
    """A pod of a workflow of kind `kind` whose pods another controller creates, as it is
    now (one deleted before it ended comes as Failed)."""

    kind: str
    key: WorkflowKey
    pod: ExternalPod


@dataclass(frozen=True, slots=True)
class Ended:
    """The workflow `owner` (not a DagWorkflow) finished or went: never admitted again, and
    out of the pool if it was in."""

    owner: Owner


@dataclass(frozen=True, slots=True)
class DeadlinePassed:
    """A workflow's ``activeDeadlineSeconds`` ran out (its timer fired)."""

    owner: Owner
    seconds: int
    started: float


@dataclass(frozen=True, slots=True)
class SpecChanged:
    """An admitted workflow's spec changed (`spec` None: it does not parse)."""

    key: WorkflowKey
    uid: str
    spec: WorkflowSpec | None
    generation: int


@dataclass(frozen=True, slots=True)
class Recorded:
    """The finished workflow's record is in the history sink."""

    workflow: Workflow


@dataclass(frozen=True, slots=True)
class Unpooled:
    """A DagWorkflow held out of every pool (its ExecutorPool does not exist, or is too
    small): its status and a Warning say why (`reason`, `message`)."""

    body: Mapping[str, Any]
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Leave:
    """The workflow leaves the pool without ending (its pool changed or went: it is
    admitted again where it belongs); nothing of it is written."""

    owner: Owner


@dataclass(frozen=True, slots=True)
class Schedule:
    """Ask the policy if anything made it necessary, or with `force` anyway (a plan
    adopted, a policy swapped)."""

    force: bool = False


@dataclass(frozen=True, slots=True)
class StopTasks:
    """Stop `needed` of the running tasks on the executors `victims`, tried in that order,
    to give quota back to `queue` (`reason`): `Core.stop_tasks`, what a plan's stops call."""

    victims: tuple[int, ...]
    needed: int
    reason: str
    queue: str


@dataclass(frozen=True, slots=True)
class Capacity:
    """The pool's nodes have this room now (a pool that follows the cluster's nodes):
    its capacity beyond pods, each node's free amounts, allocatable and host name
    (`PoolResources.set_capacity`)."""

    capacity: ResourceVector
    nodes: tuple[ResourceVector, ...]
    allocatable: tuple[ResourceVector, ...] = ()
    hosts: tuple[str, ...] = ()
    read: bool = True
    """The nodes were read (kopf's index of them filled): none then means none. Before,
    no node is no sign of a problem, so nothing is said of it."""
    allows: Allows | None = None
    """Which of them each stage's task may use (`idlegate.operator.nodes.rules.NodeRules`); None: any."""
    placing: Placing | None = None
    """Where the pool's pods run on them (a reclaim's victims on one node); None: not said."""


Event = (
    Admit
    | PodSeen
    | Forget
    | IdleEnded
    | DeadlinePassed
    | SpecChanged
    | Recorded
    | Leave
    | Unpooled
    | Schedule
    | Join
    | Moved
    | Observed
    | Ended
    | Capacity
    | StopTasks
    | Judged
)
"""What :meth:`Core.handle` takes, besides a write's :data:`~.intents.Outcome`."""


# -- facts, for the features ----------------------------------------------


@dataclass(frozen=True, slots=True)
class FoundFinished:
    """A workflow met finished at its admission (a restart): its record, its pods' GC."""

    body: Mapping[str, Any]
    pods: Sequence[Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class WorkflowAdmitted:
    """A workflow entered the pool with the pods it had (a restart, a resume)."""

    workflow: Workflow
    pods: Sequence[Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class TaskEnded:
    """The state machine has the outcome of a task's current attempt."""

    workflow: Workflow
    track: StageTrack
    task: Task
    succeeded: bool


@dataclass(frozen=True, slots=True)
class StatusLanded:
    """A status write of the workflow landed; it counted the first `counted` ended pods."""

    workflow: Workflow
    counted: int


@dataclass(frozen=True, slots=True)
class Finished:
    """The workflow has just finished (its final status is queued)."""

    workflow: Workflow


@dataclass(frozen=True, slots=True)
class RuleSwitched:
    """Another rule than before (`previous`) released the workflow's tasks."""

    workflow: Workflow
    previous: str
    rule: str


@dataclass(frozen=True, slots=True)
class ReadAgain:
    """Read the suspended workflow `owner` from the API and admit it to fail it (`fail`):
    its deadline passed while it was out of the pool."""

    owner: Owner
    fail: str
    retry: DeadlinePassed


@dataclass(frozen=True, slots=True)
class RoundEnded:
    """A scheduling round ended (a planner's worker may start)."""


Fact = (
    FoundFinished
    | WorkflowAdmitted
    | TaskEnded
    | StatusLanded
    | Finished
    | RuleSwitched
    | ReadAgain
    | RoundEnded
    | JudgeStops
)
"""What the core tells the features (and the edge, `ReadAgain`, `JudgeStops`) besides its intents."""
