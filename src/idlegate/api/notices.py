"""What idlegate's Events say (``kubectl describe``; deploy/README.md lists the reasons), one
function per occasion, each giving (type, reason, message) for the operator's
:meth:`idlegate.operator.core.intents.Outbox.event`.

A message names the stage, the policy and its choice, never a task or executor that varies
between repetitions, so that repeats aggregate into one Event. The texts are pure: they read
the simulator's stages and jobs, the policies' plans and the API's objects, never the
operator's (of a task's failure, its counts are given).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from idlegate.api.labels import GATE
from idlegate.api.pool_spec import LabelSelector
from idlegate.api.status import SlotState
from idlegate.sim.dag import Dag
from idlegate.sim.protocol import Decision, Stage
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import StageSpec
from idlegate.sim.timestamps import stamp, to_datetime

if TYPE_CHECKING:
    from idlegate.policy.lookahead import Plan
    from idlegate.policy.plans import Hold
    from idlegate.policy.portfolio import Choice
    from idlegate.sim.admission_result import Verdict
    from idlegate.sim.cluster import Cluster

Notice = tuple[str, str, str]
"""(type, reason, message) of an Event."""


class PoolSettings(Protocol):
    """What `pool_of` reads of a pool's settings (the operator's ``Settings``)."""

    @property
    def pool_size(self) -> int: ...
    @property
    def pool_nodes(self) -> LabelSelector | None: ...


def pool_of(pool: PoolSettings, room: ResourceVector | None = None) -> str:
    """The pool in its own terms: ``pool of 8 executors``; a pool that follows the nodes
    a selector picks, by them and what they hold for it now (`room`: its capacity), its
    executors there being only a cap on its task pods, no room."""
    if pool.pool_nodes is None:
        return f"pool of {pool.pool_size} executors"
    text = pool.pool_nodes.text()
    picked = f"the nodes nodeSelector {text!r} picks" if text else "every node"
    if room is not None:
        picked += f" ({room.restricted(n for n in room if n != 'pods').format()} now)"
    return f"pool of {picked}"


def accepted(dag: Dag, policy: str, pool: PoolSettings, room: ResourceVector) -> Notice:
    """A workflow admitted to the pool (`pool_of`'s words for it, `room` its capacity)."""
    message = (
        f"Accepted: {dag.num_stages} stages, {sum(dag.tasks)} tasks, critical path "
        f"{dag.critical_path:g} s, total work {dag.total_work:g} executor-seconds; "
        f"policy {policy}, {pool_of(pool, room)}."
    )
    return ("Normal", "Accepted", message)


def accepted_waiting(accepted: str, waiting: Notice) -> Notice:
    """A new workflow's Accepted Event (its message, `accepted`) when its stage must wait:
    it also says why (`waiting`'s words), so that a workflow admitted into a full pool gets
    one Event at its admission, not an Accepted and a Waiting."""
    return ("Normal", "Accepted", f"{accepted} {waiting[2]}")


def spec_change_ignored(generation: int, admitted: int) -> Notice:
    message = (
        f"The spec changed (generation {generation}) after the workflow was admitted with "
        f"generation {admitted}; a running workflow keeps its stages (only suspend, "
        "activeDeadlineSeconds, ttlSecondsAfterFinished and podGC may change). Delete and "
        "re-create it to run the new spec."
    )
    return ("Warning", "SpecChangeIgnored", message)


def invalid(problem: str) -> Notice:
    return ("Warning", "InvalidSpec", f"The workflow is invalid: {problem}")


def decided_by(policy: str, fallback: str | None = None, following: str | None = None) -> str:
    """Who made a decision: the policy (a planner: and the rule it `following`), or the
    fallback rule that answered for it."""
    if fallback is None:
        if following is not None and following != policy:
            return f"policy {policy} (following {following})"
        return f"policy {policy}"
    return f"the fallback rule {fallback} (policy {policy} failed)"


def chose_wait(by: str) -> str:
    """Why free executors stay free when a rule (`decided_by`) answered WAIT."""
    return f"{by} chose to wait for a better moment"


def all_rules_failed(policy: str, fallbacks: list[str]) -> str:
    """Why free executors stay free when the policy and every fallback rule failed."""
    rules = "has no fallback rule"
    if fallbacks:
        rules = f"so did its fallback rule(s) {', '.join(fallbacks)}"
    return f"policy {policy} failed to decide and {rules}, so nothing was decided"


def policy_error(
    policy: str, error: str, fallback: str | None, fallback_errors: tuple[str, ...]
) -> Notice:
    """A policy failed a question (raised, or answered illegally); who answered instead."""
    failed_too = "".join(f"; the fallback rule failed too ({e})" for e in fallback_errors)
    if fallback is not None:
        then = f"{failed_too}; the fallback rule {fallback} decided instead."
    else:
        then = f"{failed_too}; nothing was decided: free executors stay free until the next event."
    return ("Warning", "PolicyError", f"Policy {policy} failed to decide ({error}){then}")


def following(rule: str, since: float, plan: Plan | None, previous: str | None = None) -> str:
    """Which rule a lookahead planner follows, since when and why (its last `plan`)."""
    was = f" (was {previous})" if previous is not None and previous != rule else ""
    head = f"following {rule}{was} since {to_datetime(since):%H:%M:%S} UTC"
    if plan is None:
        return f"{head}: the planner's base, until its first plan"
    change = plan.expected_change("fair")
    expects = "it cheapest" if change is None else f"{change * 100:+.1f} % vs fair"
    return (
        f"{head}: the planner expects {expects} over the next {plan.horizon:.0f} s "
        f"(in job-seconds; a plan of {plan.seconds * 1000:.0f} ms over {plan.futures} "
        "sampled future(s))"
    )


def policy_followed(choice: Choice) -> Notice:
    """A portfolio follows another candidate: what the round did and why in words
    (`Choice.why`), then the replay's figures (on the pool's object)."""
    return ("Normal", "PolicyFollowed", f"The portfolio {choice.why}. It is now {choice.text}.")


def round_cut(why: str, following: str) -> Notice:
    """A portfolio's round stopped at its CPU budget (`policy.portfolio.RoundCut`'s `why`);
    it keeps following `following` (on the pool's object)."""
    message = (
        f"The portfolio's round was cut: {why}. It keeps following {following}; raise "
        "--round-budget, or give the operator more CPU, if rounds are cut often."
    )
    return ("Warning", "RoundCut", message)


def policy_switched(why: str) -> Notice:
    """A workflow's next tasks are released by another rule than its last; `why`: `following`."""
    return ("Normal", "PolicySwitched", f"The planner is now {why}.")


def released(tasks: int, decision: Decision, by: str) -> Notice:
    """`tasks` of the decision's stage released (of either kind of workflow); `by`: `decided_by`."""
    stage = decision.stage
    message = (
        f"Released {tasks} of {stage.tasks} task(s) of stage {stage.name!r} ({stage.launched} "
        f"of {stage.tasks} so far): {by} chose the stage with parallelism cap "
        f"{decision.parallelism_cap}."
    )
    return ("Normal", "Released", message)


def released_next(stage: str) -> Notice:
    message = (
        f"Released the next task of stage {stage!r} on the executor that finished one of its "
        "tasks (an executor continues with its stage)."
    )
    return ("Normal", "Released", message)


def released_by_others(pod: str, stage: str, pool: int, adopted: bool) -> Notice:
    where = (
        "it took a free executor"
        if adopted
        else "no executor was free, so it runs beyond the pool and takes the next executor "
        "that frees up"
    )
    message = (
        f"Task pod {pod} of stage {stage!r} lost its {GATE} scheduling gate without the "
        "operator releasing it (removed by hand or by another controller); it counts "
        f"against the pool of {pool} executors: {where}."
    )
    return ("Warning", "ReleasedByOthers", message)


def holding(hold: Hold) -> str:
    """The arrivals a planner holds a stage back for (short workflows: less work than the
    held workflow has left)."""
    n = f"{hold.expected:g} short workflow{'' if hold.expected == 1 else 's'}"
    within = f"within {round(hold.window, 1):g} s"
    return f"holding {hold.stage.name}: {n} expected {within} (p = {hold.p:.2g})"


def idle_reason(by: str, decision: Decision, hold: Hold | None = None) -> str:
    """Why a stage idles (in the Event and persisted with the slot): what a planner holds
    it for (`hold`), and who (`decided_by`) held it how long."""
    held = f"{by} held the stage back for {decision.idle_delay:g} s"
    why = f"{held}, parallelism cap {decision.parallelism_cap}"
    return why if hold is None else f"{holding(hold)}; {why}"


def held(hold: Hold, by: str) -> Notice:
    """A planner answered WAIT while `hold`'s stage could start (executors free), for the
    arrivals it expects; `by`: `decided_by`. Posted once per hold."""
    text = holding(hold)
    message = (
        f"{text[:1].upper()}{text[1:]}: {by} chose to wait with executors free rather than "
        "start the stage now."
    )
    return ("Normal", "Holding", message)


def idle_slot(slot: SlotState, busy: int, pool: int) -> Notice:
    message = (
        f"Stage {slot.stage!r} waits {slot.delay:g} s on purpose (deliberate idle slot) until "
        f"{stamp(slot.release)}: {slot.reason}; {busy}/{pool} executors busy."
    )
    return ("Normal", "IdleSlot", message)


def idle_slot_ended(slot: SlotState, *, while_away: bool) -> Notice:
    then = (
        "ended while the operator was not running; the stage is runnable again."
        if while_away
        else "is over; the stage is runnable again and waits for the policy's next decision."
    )
    message = f"Stage {slot.stage!r}: the idle slot of {slot.delay:g} s {then}"
    return ("Normal", "IdleSlotEnded", message)


def waiting(stage: Stage, pool: Cluster, verdict: Verdict) -> Notice:
    """Why a runnable stage of `pool` got no executor: the `verdict` that decided it, as it
    was written (the cap rule's, the admission's phase's, or the round's: `Core`'s
    `_note_waiting` names which), and the executors the pool leaves free meanwhile."""
    why, free, nodes = verdict.message, pool.free_executors, pool.follows_nodes
    if free:
        left = f"{free} executor(s) stay free"
        if nodes:
            left = f"{_free(pool).format()} stay free on its nodes"
        why = f"{why}; {left} until the next event"
    message = f"Stage {stage.name!r} is runnable and waits for an executor: {why}."
    return ("Normal", "Waiting", message)


def _free(pool: Cluster) -> ResourceVector:
    """What the pool has free of the resources it counts beyond pods (none below 0)."""
    free = pool.free_resources
    return ResourceVector({n: max(0, free[n]) for n in pool.resource_names})


OTHER_WORK = "the policy started other work in this round"
"""The round's verdict on a stage the admission let start when the round ended with
nothing more to start and no WAIT (`Decider`)."""


def no_node_fits(stage: str, why: str, pool: str) -> Notice:
    """A stage no node of its pool could hold even empty (`Cluster.fits_no_node`)."""
    message = (
        f"Stage {stage!r} {why}: it waits until pool {pool!r} has a node that can hold it "
        "(one added, or labelled for its nodeSelector), or its requests or template change; "
        "meanwhile it holds no room, past its queue's wait bound too, and nothing waits for it."
    )
    return ("Warning", "NoNodeFits", message)


def no_room(pool: str, selector: LabelSelector, nodes: int, left: bool) -> str | None:
    """Why pool `pool`, following the `nodes` Ready, schedulable nodes `selector` picks,
    can release nothing at all (`left`: some of their allocatable is); None if it can."""
    text = selector.text()
    picked = f"nodeSelector {text!r}" if text else "The empty nodeSelector"
    if not nodes:
        what = "selects no Ready, schedulable node: label a node or change the selector"
    elif not left:
        what = (
            f"selects {nodes} node(s) with nothing left of their allocatable beside the "
            "pods idlegate did not release: free or add a node, or change the selector"
        )
    else:
        return None
    return f"Pool {pool!r}: {picked} {what}; its workflows wait until then."


def no_room_released(why: str) -> Notice:
    """A Warning on a pod idlegate released for which the kube-scheduler finds no node
    (`why`, its PodScheduled condition's message)."""
    return (
        "Warning",
        "NoRoom",
        f"Released by idlegate, but the kube-scheduler finds no node with room for it "
        f"({why}); it pends until one has. A pool with a nodeSelector releases only what "
        "fits a node's free allocatable (deploy/README.md, Executor pools).",
    )


def pool_invalid(why: str, running: bool, ran: int | None = None) -> str:
    """What ExecutorPool whose spec cannot run (`why`) does, as its Warning, its log line and
    its Ready condition say it: one that runs an earlier spec (`running`, of generation
    `ran`) runs its workflows on under it, never stopping a running one for a bad edit,
    and takes no new one; else every workflow of it waits."""
    then = "Its workflows wait (PoolInvalid) until its spec is fixed."
    if running:
        spec = "the spec it ran last" + ("" if ran is None else f" (generation {ran})")
        then = (
            f"The workflows in it run on under {spec}; those that come after wait "
            "(PoolInvalid) until its spec is fixed."
        )
    return f"{why.rstrip('.')}. {then}"


def task_failure(
    spec: StageSpec, index: int, failures: int, executor: int | None, reason: str
) -> Notice:
    """Task `index`'s attempt failed (`failures` so far): it is retried on `executor`, or,
    beyond the stage's backoffLimit, fails its stage."""
    if failures > spec.backoff_limit:
        message = (
            f"Stage {spec.name!r} failed: task {index} failed {failures} time(s), "
            f"more than its backoffLimit of {spec.backoff_limit}; last: {reason}."
        )
        return ("Warning", "TaskFailed", message)
    retry = f"retry {failures} of {spec.backoff_limit} on the same executor {executor}"
    message = f"Task {index} of stage {spec.name!r} failed ({reason}); {retry}."
    return ("Warning", "TaskRetry", message)


def succeeded(dag: Dag, jct: float, idle: float) -> Notice:
    message = (
        f"All {dag.num_stages} stages ({sum(dag.tasks)} tasks) succeeded: job completion "
        f"time {jct:.1f} s, {idle:g} s of it deliberately idle."
    )
    return ("Normal", "Succeeded", message)


def stop_refused(pod: str, stage: str, queue: str, why: str) -> Notice:
    """The eviction of `pod`, asked to give quota back to `queue`, was refused (`why`: a
    PodDisruptionBudget's no, `idlegate.api.eviction.refused`): it runs on."""
    message = (
        f"Task pod {pod} of stage {stage!r} was not stopped for queue {queue!r}: {why}. It "
        "runs on; the queue's waiting workflows say so while nothing is stopped for them."
    )
    return ("Warning", "StopRefused", message)


def preempt_declined(queue: str, sentence: str, recheck: float) -> Notice:
    """A ``decide: Forecast`` queue's stops were declined by their verdict (`sentence`,
    `ReclaimVerdict.sentence`): its waiting workflow waits for borrowed tasks to end."""
    message = (
        f"No task was stopped for queue {queue!r}: {sentence}. It waits for the borrowed "
        f"tasks to end; stops for it are not judged again for {recheck:.0f} s."
    )
    return ("Normal", "PreemptionDeclined", message)


def preempted(
    stage: str, queue: str, reason: str, lost: float, decided: str | None = None
) -> Notice:
    """A task of `stage` was stopped (its pod evicted) to give quota back to `queue`: the
    work it lost (executor-seconds), none for a checkpointed stage; it runs again.
    `decided`: a ``decide: Forecast`` queue's verdict, which case held with both figures
    (`idlegate.sim.reclaim_verdict.ReclaimVerdict.sentence`)."""
    loss = f"{lost:.1f} executor-seconds of work lost" if lost else "no work lost (checkpointed)"
    message = (
        f"A task of stage {stage!r} was stopped, its pod evicted, to give quota back to queue "
        f"{queue!r} ({reason}): {loss}. It runs again when released, counted as no failure."
    )
    if decided:
        message += f" {decided[0].upper()}{decided[1:]}."
    return ("Normal", "Preempted", message)
