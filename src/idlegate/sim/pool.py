"""The pool's resources in the cluster state machine: capacity, free amounts, demands.

The part of `idlegate.sim.cluster.Cluster` that keeps the resource rule of its header
(a task starts only where its demand fits the free capacity): `Cluster` derives from
`PoolResources`, which holds the pool's capacity, its free amounts of each resource it
counts beyond pods (pods are the cluster's executors) and each stage's `Need`.

A pool may also have *nodes* (the simulator's, ``--nodes``: `FixedNodes`; or the
operator's pool that follows the cluster's nodes: `set_capacity`): then a task starts only
where it also fits one node's free amounts and pods, as the kube-scheduler's
NodeResourcesFit filter would find it room, and a task started takes its room on the node
`packed` picks, on both: the fitting node left with the least of its CPU and memory free
(the kube-scheduler's MostAllocated scoring, bin packing; answered from an index of the
nodes' shapes, moved on each task placed or ended, `idlegate.sim.nodeset`: its cost
grows with the shapes, not with the nodes). Packing, not spreading: the large tasks are
the ones that wait, and they need a node's room in one piece; spread small tasks leave
every node a little free and none enough for them. The operator pins
each released pod to that node (a ``kubernetes.io/hostname`` nodeSelector), so the
kube-scheduler's own scoring (LeastAllocated by default) does not undo it. The driver
tells the operator's nodes' free amounts again before its next round (what ran there);
until then a task that ends gives its room back to the totals only, so the per-node rule
errs on the side of what surely fits, and an executor goes on with its stage's next task
only where a node has room for it now.

A fork of a pool on told nodes (`Cluster.fork`: a forecast's replay, a planner's rollout)
has no driver to tell its nodes again, so it does the telling itself: it knows the node
each running task was placed on (the host its pod was pinned to) and gives that task's
room back there the moment the task ends, after an executor going on with its stage has
placed its next task, as the driver's next telling would. Without it a fork kept each
node's room as last told, and a replay stalled once the nodes filled.

A driver's nodes may also bar a stage's task from some of them (`Allows`: its pod's
nodeSelector, required node affinity and tolerations of the nodes' taints, or a resource
it asks that the pool does not count and a node lacks): the stage's `Need.allowed`. Its
task is then placed, counted and judged (`fits_no_node`) among those nodes alone. The
simulator's nodes bar nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from typing import NamedTuple

from idlegate.errors import DemandTooLargeError, IdlegateError
from idlegate.sim.dag import Dag
from idlegate.sim.nodeset import NodeSet
from idlegate.sim.protocol import ClusterView, Job, Need, Stage
from idlegate.sim.resources import (
    MILLI,
    ResourceVector,
    binary_units,
    format_quantity,
    free_after,
)
from idlegate.sim.shares import NONE_FITS

SCORED = ("cpu", "memory")
"""The resources whose free share places a task on a node (MostAllocated's)."""

Allows = Callable[[Stage], "tuple[tuple[int, ...], str] | None"]
"""Which of the told nodes (their indices, in the order told) `stage`'s task may use, and
why none (a clause for `fits_no_node`, when none); None: any of them. A driver's rule."""


def packed(
    need: Sequence[int],
    free: Sequence[Sequence[int]],
    allocatable: Sequence[Sequence[int]],
    scored: Sequence[int],
) -> int | None:
    """The node a task asking `need` goes to, on the simulator's nodes and on the
    operator's alike (the module header's packing, the kube-scheduler's MostAllocated
    scoring): the index in `free` (each node's free amounts, in `need`'s order) of the
    fitting node with the smallest mean share of its `allocatable` left free after it over
    the positions `scored` (cpu, memory), the first of equals; None if it fits none."""
    best = min(free_after(need, free, allocatable, scored), key=itemgetter(1), default=None)
    return None if best is None else best[0]


class TasksOnNodes(NamedTuple):
    """Where a driver's running tasks are on its told nodes, for a reclaim that stops
    tasks on one node (`idlegate.sim.reclaim_plan`): the told node (its index) that the
    task running on an executor is bound to (None: not known, not bound yet), and each
    node's room held by pods being stopped (in the order of the nodes told), which comes
    back once they are gone."""

    runs_on: Callable[[int], int | None]
    stopping: Sequence[ResourceVector] = ()


NodeRoom = tuple[Sequence[list[int]], Callable[[int], int | None], list[list[int]]]
"""A pool's nodes as a reclaim reads them (`PoolResources.reclaim_nodes`)."""


class FixedNodes:
    """The simulator's nodes (``--nodes``): their capacities (as `PoolResources._nodes`
    lists), their text for messages, and the node each busy executor's task runs on,
    which gets its room back when the task ends."""

    __slots__ = ("capacity", "scored", "shapes", "text", "where")

    def __init__(
        self,
        capacity: list[list[int]],
        text: str,
        scored: tuple[int, ...],
        where: dict[int, int] | None = None,
    ) -> None:
        self.capacity = capacity
        self.text = text
        self.scored = scored
        """The positions of cpu and memory in the capacities (`packed`'s `scored`)."""
        self.where: dict[int, int] = dict(where or {})
        self.shapes = Counter(tuple(c) for c in capacity)
        """How many nodes have each capacity (what `_check_nodes` reads: few kinds)."""


class PoolResources:
    """Capacity and free amounts of a pool's resources (see the module docstring)."""

    num_executors: int
    free_executors: int
    jobs: list[Job]
    touch: Callable[[Job], None]
    """The cluster's: a job's runnable stages changed (here, their nodes)."""

    def _init_resources(
        self, resources: ResourceVector | None, nodes: Sequence[ResourceVector] = ()
    ) -> None:
        num_executors = self.num_executors
        if nodes:  # (the simulator's nodes: its capacity is theirs)
            resources = nodes_total(nodes)
        resources = resources or ResourceVector()
        if "pods" in resources and resources["pods"] != num_executors * MILLI:
            raise IdlegateError(
                f"the pool's resources say pods={resources.units('pods')}, but it has "
                f"{num_executors} executors; give the pods once (the executors are its pods)"
            )
        self.capacity = ResourceVector({**resources, "pods": num_executors * MILLI})
        """The pool's capacity: its executors as `pods`, and its other resources."""
        self.resource_names: tuple[str, ...] = tuple(n for n in resources if n != "pods")
        """The resources beyond pods the pool counts (empty: a pods-only pool)."""
        self._free_r = [self.capacity[n] for n in self.resource_names]
        """Free milli-units of each of `resource_names`, in order (below 0 after a restore
        of more than the pool holds)."""
        self._held = [0.0] * len(self.resource_names)
        """Milli-unit-seconds of each of `resource_names` held by tasks that ended."""
        self._nodes = NodeSet()
        """Each node's free milli-units of `resource_names`, then of pods (`set_capacity`;
        empty: no nodes), the index the stages' `Need` read and placement asks."""
        self._told: _Told | None = None
        """Nodes a driver tells (`set_capacity`; None: none), one attribute: a Cluster's
        instance keys stay few, for speed."""
        self._fixed: FixedNodes | None = None
        """The simulator's nodes (`nodes`; None: none)."""
        if nodes:
            names = self.resource_names
            capacity = [[n[r] for r in names] + [n["pods"]] for n in nodes]
            scored = tuple(i for i, n in enumerate(names) if n in SCORED)
            self._nodes.reset(capacity, capacity, scored)
            self._fixed = FixedNodes(capacity, nodes_text(nodes), scored)

    @property
    def follows_nodes(self) -> bool:
        """The capacity is the nodes' (`set_capacity`): it comes and goes, so a stage
        larger than it now is not refused on arrival."""
        return self._told is not None

    def set_capacity(
        self,
        capacity: ResourceVector,
        nodes: Sequence[ResourceVector] | None = None,
        allocatable: Sequence[ResourceVector] = (),
        hosts: Sequence[str] = (),
        allows: Allows | None = None,
        placed: TasksOnNodes | None = None,
    ) -> bool:
        """The pool's capacity of its resources beyond pods is now `capacity` (the free
        amounts move by the change; the executors stay), and, with `nodes`, each node's
        free amounts (pods included) are these, in the same order of nodes each time, of
        its `allocatable` (where a task goes: `packed`), named `hosts` (`host_of`), each
        stage's task using those `allows` lets it (None: any), its running tasks where
        `placed` says (None: not told; a reclaim then stops none).
        True if anything has more room than before."""
        names = self.resource_names
        grew = any(capacity[n] > self.capacity[n] for n in names)
        for i, name in enumerate(names):
            self._free_r[i] += capacity[name] - self.capacity[name]
        self.capacity = ResourceVector(
            {**capacity.restricted(names), "pods": self.capacity["pods"]}
        )
        if nodes is not None:
            # (a fork told its nodes follows them as the live pool does: `_Told.at` is None)
            new = [[node[n] for n in names] + [node["pods"]] for node in nodes]
            alloc = [[a[n] for n in names] + [a["pods"]] for a in allocatable]
            alloc += [[1] * (len(names) + 1)] * (len(new) - len(alloc))
            scored = tuple(i for i, n in enumerate(names) if n in SCORED)
            # (in place, in the order told each time: the stages' needs read this index)
            grew = self._nodes.reset(new, alloc, scored) or grew
            told = self._told
            where, barred = ({}, False) if told is None else (told.where, told.allows is not None)
            self._told = _Told(alloc, scored, list(hosts), where, allows, placed=placed)
            # (the nodes, and so their indices, may change; equal rules on the same nodes in
            # the same order give each stage the same nodes: most readings change only room)
            same = told is not None and allows is not None and allows == told.allows
            if (allows is not None or barred) and not same:
                for job in self.jobs:
                    for stage in job.stages:
                        grew = self._restrict(stage) or grew
                    self.touch(job)  # (its stages' nodes: their shapes of need)
        self.capacity_changed()
        return grew

    def capacity_changed(self) -> None:
        """The capacity changed (`set_capacity`), for a subclass that keeps what depends
        on it (the cluster's queues)."""

    def _restrict(self, stage: Stage) -> bool:
        """Give `stage`'s need the told nodes its task may use (`Allows`; a stage that asks
        nothing the pool counts gets a need of nothing, to be placed among them). True if
        its nodes changed (it may have more room)."""
        told, need = self._told, stage.need
        found = None if told is None or told.allows is None else told.allows(stage)
        before = None if need is None else need.allowed
        if found is None:
            if need is not None:
                need.allowed = None
            return before is not None
        if need is None:
            amounts = (0,) * len(self.resource_names)
            need = stage.need = Need(amounts, self._free_r, self._nodes)
        need.allowed = found[0]
        return before is not None and found[0] != before

    def fit_bound(self) -> tuple[int, ...] | None:
        """The most of each resource beyond pods (the pool's order) a task may ask and
        still fit now, as `Need.fits` tests a stage's one task: on nodes, the most free on
        a node with a pod free (`NodeSet.may_hold`), else the pool's free amounts; every
        one `NONE_FITS` where no task asking the resources fits. `fair` skips the jobs
        whose stages all ask more (`sim.shares`). None for a pods-only pool."""
        names = self.resource_names
        if not names:
            return None
        if self._nodes:
            most = self._nodes.most_free()
            return most[: len(names)] if most else (NONE_FITS,) * len(names)
        free = self._free_r
        return tuple(free) if min(free) >= 0 else (NONE_FITS,) * len(names)

    @property
    def free_resources(self) -> ResourceVector:
        """The free capacity: free executors as `pods`, and the pool's other resources."""
        free = zip(self.resource_names, self._free_r, strict=True)
        return ResourceVector({"pods": self.free_executors * MILLI, **dict(free)})

    @property
    def used_resources(self) -> ResourceVector:
        """What the running tasks request of the pool's resources beyond pods."""
        used = zip(self.resource_names, self._free_r, strict=True)
        return ResourceVector({n: self.capacity[n] - free for n, free in used})

    def placed_nodes(self) -> tuple[Sequence[list[int]], Mapping[int, int]] | None:
        """The simulator's nodes: each one's free amounts (the pool's order, then pods)
        and the node each busy executor's task runs on; None for a pool without them (or
        the operator's, whose nodes the driver tells)."""
        return None if self._fixed is None else (self._nodes, self._fixed.where)

    def reclaim_nodes(self) -> NodeRoom | None:
        """The nodes a reclaim chooses its victims on, all on one: each one's free amounts
        (the pool's order, then pods), the node a busy executor's task runs on (None: not
        known), and each one's room being given back (`TasksOnNodes.stopping`, told nodes').
        None without nodes, or on told ones whose driver does not say where tasks run."""
        fixed, told = self._fixed, self._told
        if fixed is not None:
            return self._nodes, fixed.where.get, []
        if told is not None and told.at is not None:  # (a fork: where each holds room)
            return self._nodes, told.at.get, []
        if told is None or told.placed is None:
            return None
        names, back = self.resource_names, told.placed.stopping
        stopping = [[v[n] for n in names] + [v["pods"]] for v in back]
        return self._nodes, told.placed.runs_on, stopping

    def _set_needs(self, job: Job) -> None:
        """Give each stage its demand on the pool's resources (`Stage.need`), after
        checking that it can ever fit."""
        names, capacity = self.resource_names, self.capacity
        for stage in job.stages:
            demand = stage.demand.restricted(names)
            if not demand:
                if self._told is not None and self._told.allows is not None:
                    self._restrict(stage)
                continue
            need = demand * stage.tasks if stage.gang else demand
            amounts = tuple(demand[n] for n in names)
            self._check_nodes(job, stage, need, Need(amounts, [], []))
            if not self.follows_nodes and not need.fits(capacity):
                over = need.too_large(capacity)
                each = f" ({stage.tasks} tasks of {demand.format()})" if stage.gang else ""
                raise DemandTooLargeError(
                    f"stage {stage.name!r} of {job.name} needs {need.format()} at once{each}, "
                    f"more {' and '.join(over)} than the pool has (its resources: "
                    f"{capacity.restricted(names).format()}), so it could never start; lower "
                    "the stage's requests or give the pool more",
                    need,
                    stage.name,
                )
            stage.need = Need(amounts, self._free_r, self._nodes)
            if self._told is not None and self._told.allows is not None:
                self._restrict(stage)

    def _check_nodes(self, job: Job, stage: Stage, need: ResourceVector, each: Need) -> None:
        """DemandTooLargeError if the simulator's nodes, empty, could never hold the
        stage's next task (a gang's: all its tasks) although their sum might."""
        fixed = self._fixed
        if fixed is None:
            return
        room = sum(k * each.on(shape) for shape, k in fixed.shapes.items())
        if room < (stage.tasks if stage.gang else 1):
            raise DemandTooLargeError(
                f"stage {stage.name!r} of {job.name} needs {need.format()} at once, more than "
                f"the nodes have room for (each node's resources: {fixed.text}), so it "
                "could never start; lower the stage's requests or give the nodes more",
                need,
                stage.name,
            )

    def why_unfit(self, stage: Stage) -> str | None:
        """Why `stage`'s next task (a gang's: all its tasks left) does not fit now, in the
        pool's own terms: on nodes, that no node has its room (and the most any one has
        free) or that they have too little free in all, never in executors, which are no
        room there; None if it fits (a stage asking nothing the pool counts: always)."""
        need, names = stage.need, self.resource_names
        tasks = stage.tasks - stage.launched if stage.gang else 1
        if need is None or need.fits(tasks):
            return None

        def said(values: Sequence[int]) -> str:
            amounts = {n: max(0, v) for n, v in zip(names, values, strict=False)}
            return ResourceVector(amounts).format()

        what = f"its task of {said(need.amounts)}"
        if stage.gang:
            what = f"its gang of {tasks} tasks of {said(need.amounts)}"
        short = [
            f"{n}={format_quantity(max(0, f), binary=binary_units(n))}"
            for n, f, a in zip(names, need.free, need.amounts, strict=False)
            if f < a * tasks
        ]
        if short:  # (the resources short, named even at 0 free: issue 93's "memory=72Gi")
            where = "its nodes have" if self._told is not None else "the pool has"
            return f"{what} needs more than {where} free in all ({', '.join(short)} free)"
        most = self._nodes.most_free()
        nodes = "no node it may use" if need.allowed is not None else "no node"
        if not most:
            return f"{nodes} has a pod free for {what}"
        return (
            f"{nodes} has room for {what} now (at most {said(most)} free on any one node, "
            f"{said(need.free)} on its nodes in all)"
        )

    def never_fits(self, stage: Stage) -> bool:
        """`fits_no_node(stage)` is not None, without its sentence: what the queues'
        admission asks of each task past its wait bound (such a task reserves nothing)."""
        told, need = self._told, stage.need
        if told is None or need is None or not told.alloc:
            return False
        if need.allowed is not None and not need.allowed:
            return True
        held = self._nodes.empty_room(need.amounts, need.allowed)  # (kept per demand)
        return held < (stage.tasks if stage.gang else 1)

    def fits_no_node(self, stage: Stage) -> str | None:
        """Why `stage` could not start on the told nodes even were they empty (no node's
        allocatable holds its task; a gang's tasks, all of them at once), None if it could
        or no nodes are told. What it asks goes first: ``asks cpu=12 a task, ...``."""
        told, need = self._told, stage.need
        if told is None or need is None or not self.never_fits(stage):
            return None
        alloc = told.alloc
        if need.allowed is not None:
            if not need.allowed:
                found = None if told.allows is None else told.allows(stage)
                return "may use no node of the pool" if found is None else found[1]
            alloc = [alloc[i] for i in need.allowed]
        names = self.resource_names
        sizes = sorted({ResourceVector(dict(zip(names, a, strict=False))).format() for a in alloc})
        more = f" and {len(sizes) - 3} more" if len(sizes) > 3 else ""
        nodes = f"{', '.join(sizes[:3])}{more}"
        demand = stage.demand.restricted(names).format()
        if stage.gang:
            return (
                f"is a gang of {stage.tasks} tasks of {demand}, more than the pool's nodes hold "
                f"at once even empty (their allocatable: {nodes})"
            )
        return f"asks {demand} a task, more than any node of the pool has allocatable ({nodes})"

    def _held_for(self, need: Need, seconds: float) -> None:
        """Count a task of demand `need` that held it for `seconds`."""
        held = self._held
        for i, n in enumerate(need.amounts):
            held[i] += n * seconds

    def _give_back(self, need: Need, tasks: int, executors: Sequence[int] = ()) -> None:
        """Return the resources of `tasks` tasks of demand `need` (negative: take them, on
        the nodes too, each task on the first node it fits), run by `executors` (the
        simulator's nodes remember where each runs, and get its room back)."""
        free = self._free_r
        for i, n in enumerate(need.amounts):
            free[i] += n * tasks
        nodes, node_of = self._nodes, None if self._fixed is None else self._fixed.where
        for k in range(-tasks if nodes else 0):
            at = self._placed(need)
            if at is None:  # (a restored task: it runs somewhere the nodes told)
                continue
            if node_of is not None and k < len(executors):
                node_of[executors[k]] = at
            elif self._told is not None and k < len(executors):
                self._told.went(executors[k], at)
        if node_of is not None and tasks > 0:
            for executor in executors:
                at = node_of.pop(executor, None)
                if at is not None:
                    nodes.move(at, need.amounts, 1)
        elif self._told is not None and tasks > 0:  # (its host is no longer its task's)
            told = self._told
            for executor in executors:
                told.where.pop(executor, None)
                # (a fork: its room comes back as the driver's next telling would give it)
                at = None if told.at is None else told.at.pop(executor, None)
                if at is not None:
                    nodes.move(at, need.amounts, 1)

    def _placed(self, need: Need) -> int | None:
        """Take a task's room on the node it goes to (the module header), and say which;
        None if it fits none."""
        nodes = self._nodes
        at = self.node_for(need.amounts, nodes, need.allowed)
        if at is not None:
            nodes.move(at, need.amounts, -1)
        return at

    def node_for(
        self,
        amounts: Sequence[int],
        nodes: Sequence[Sequence[int]],
        allowed: Sequence[int] | None = None,
    ) -> int | None:
        """The node of `nodes` (free amounts as `_nodes`: the pool's, or a planner's copy)
        a task of `amounts` (the pool's order) goes to (`packed`), among those `allowed`
        (indices; None: any); None if it fits none or the pool has no nodes."""
        told, fixed = self._told, self._fixed
        if nodes is self._nodes and (told is not None or fixed is not None):
            only = None if allowed is None else tuple(allowed)
            return self._nodes.place((*amounts, MILLI), only)  # (the index: packed's answer)
        if told is not None:
            if allowed is not None:
                alloc, some = told.alloc, [nodes[i] for i in allowed]
                at = packed((*amounts, MILLI), some, [alloc[i] for i in allowed], told.scored)
                return None if at is None else allowed[at]
            return packed((*amounts, MILLI), nodes, told.alloc, told.scored)
        if fixed is None:
            return None
        return packed((*amounts, MILLI), nodes, fixed.capacity, fixed.scored)

    def _goes_on(self, need: Need, executor: int) -> bool:
        """A task of `need` may follow one that ended on `executor`: always without nodes,
        or on the simulator's (it takes the room the ended one held there), on told nodes
        where it fits one now (the ended one's room comes back when they are told)."""
        if not self._nodes or self._fixed is not None:
            return True
        at = self._placed(need)
        told = self._told
        if at is not None and told is not None:
            # (a fork: the ended task's room comes back once the next one is placed, as the
            # driver tells the nodes after the pod went on)
            ended = None if told.at is None else told.at.get(executor)
            told.went(executor, at)
            if ended is not None:
                self._nodes.move(ended, need.amounts, 1)
        return at is not None

    def host_of(self, executor: int) -> str | None:
        """The told node (its host name) the task `executor` started last was placed on,
        if any: where the driver may pin its pod."""
        return None if self._told is None else self._told.where.get(executor)

    def _fork_resources(self, twin: PoolResources) -> None:
        """Give `twin` (a fork) a copy of the pool's resources, its stages' needs reading them."""
        twin.capacity, twin.resource_names = self.capacity, self.resource_names
        twin._free_r, twin._held = list(self._free_r), list(self._held)
        twin._nodes, told = self._nodes.copy(), self._told
        twin._told = None
        if told is not None:
            if told.at is not None:  # (a fork's fork)
                at = dict(told.at)
            else:  # (the node each running task was pinned to, of the nodes told last)
                index = {host: i for i, host in enumerate(told.hosts)}
                at = {e: index[h] for e, h in told.where.items() if h in index}
            twin._told = _Told(told.alloc, told.scored, told.hosts, {}, told.allows, at)
        fixed = self._fixed
        twin._fixed = (
            None
            if fixed is None
            else FixedNodes(fixed.capacity, fixed.text, fixed.scored, fixed.where)
        )


class _Told:
    """Nodes a driver tells: each one's allocatable (as `PoolResources._nodes`), where cpu
    and memory are in the pool's resources, each one's host name, the host the task each
    executor started last went to, which of them each stage may use (`Allows`), and, in a
    fork (`at`), the node each running task holds room on; where the driver says its
    running tasks are (`placed`)."""

    __slots__ = ("alloc", "allows", "at", "hosts", "placed", "scored", "where")

    def __init__(
        self,
        alloc: list[list[int]],
        scored: tuple[int, ...],
        hosts: list[str],
        where: dict[int, str],
        allows: Allows | None = None,
        at: dict[int, int] | None = None,
        placed: TasksOnNodes | None = None,
    ) -> None:
        self.alloc, self.scored, self.hosts, self.where = alloc, scored, hosts, where
        self.allows, self.placed = allows, placed
        self.at = at
        """A fork's: executor -> the index of the node its running task holds room on,
        given back there when the task ends (the module header); None: the live pool's,
        whose room comes back when the driver tells the nodes again. A task running where
        no told node is known (restored before the nodes were read, its node gone) gives
        its room back to the totals only, as on the live pool until the next telling."""

    def went(self, executor: int, at: int) -> None:
        if at < len(self.hosts):
            self.where[executor] = self.hosts[at]
        if self.at is not None:
            self.at[executor] = at


def nodes_text(nodes: Iterable[ResourceVector]) -> str:
    """The nodes' resources for a message, each shape once with its count and ``; `` between
    shapes (their own amounts are comma-separated): ``cpu=8,pods=4 (1 node); cpu=8,pods=3
    (2 nodes)``."""
    counts: Counter[str] = Counter()
    for vector, k in Counter(nodes).items():  # (each kind formatted once: nodes are many)
        counts[vector.format()] += k
    return "; ".join(
        f"{text} ({k} node{'s' if k > 1 else ''})" for text, k in sorted(counts.items())
    )


def nodes_total(nodes: Iterable[ResourceVector]) -> ResourceVector:
    """The sum of `nodes`' resources, each kind of node added once times its count (nodes
    are many, kinds few)."""
    return sum((v * k for v, k in Counter(nodes).items()), ResourceVector())


def identical_nodes(node: ResourceVector, count: int, pods: int) -> tuple[ResourceVector, ...]:
    """`count` nodes of `node`'s resources sharing `pods` pods (the first ones one more
    when they do not divide evenly): the simulator's ``--nodes``."""
    share, extra = divmod(pods, count)
    own = node.restricted(n for n in node if n != "pods")
    more, less = (own + ResourceVector({"pods": MILLI * (share + k)}) for k in (1, 0))
    return (more,) * extra + (less,) * (count - extra)


def tasks_at_once(
    capacity: Mapping[str, int], names: Iterable[str], num_executors: int, dags: Iterable[Dag]
) -> int:
    """A pool's size in tasks: the tasks of the mean demand of `dags`' tasks (task-weighted,
    on the resources `names`) that `capacity` holds at once, at most `num_executors` and at
    least 1 (a pods-only pool, no `names`: its executors). What a policy reads as the pool's
    size where a pods-only pool has K: 330 pods of 24 CPUs are not 330 executors when a
    task asks 1.4 CPUs."""
    names = tuple(names)
    if not names:
        return num_executors
    tasks, asked = 0, dict.fromkeys(names, 0)
    for dag in dags:
        tasks += sum(dag.tasks)
        for n, demand in zip(dag.tasks, dag.demands, strict=False):
            for name in names:
                asked[name] += n * demand[name]
    held = [capacity[r] * tasks // a for r, a in asked.items() if a > 0]
    return max(1, min([num_executors, *held]))


def effective_executors(view: ClusterView, dags: Iterable[Dag]) -> int:
    """The pool's size in tasks (`tasks_at_once`) for `dags`' mean demand; a pods-only
    pool's executors. What the portfolio's prior and training range, the analytic rule's
    prior, the planner's horizon and a forecast's invented arrivals read as the pool's
    size (`policy.drf` gives it to the policies)."""
    names: tuple[str, ...] = getattr(view, "resource_names", ())
    if not names:
        return view.num_executors
    capacity = view.capacity  # type: ignore[attr-defined]
    return tasks_at_once(capacity, names, view.num_executors, dags)
