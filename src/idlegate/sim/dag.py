"""DAG algorithms over a workflow's stages, and the compiled form the state machine runs on.

A stage's *length* is one task duration: the time the stage takes with unlimited
executors. With that, the critical path is the least time a job can take, and
`average width = total work / critical path` is the idle-slot papers' measure of how
many executors a job can keep busy on average.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import WorkflowSpec

if TYPE_CHECKING:
    import networkx as nx


@dataclass(frozen=True, eq=False)
class Dag:
    """An immutable, index-based view of a workflow, built once and shared by every job using it.

    Stages are numbered in the spec's order; `parents[i]` and `children[i]` are index tuples.
    """

    names: tuple[str, ...]
    tasks: tuple[int, ...]
    durations: tuple[float, ...]
    parents: tuple[tuple[int, ...], ...]
    children: tuple[tuple[int, ...], ...]
    gang: tuple[bool, ...]
    spec: WorkflowSpec | None = None
    demands: tuple[ResourceVector, ...] = ()
    """Per stage, what one task requests beyond its pod (empty: no stage requests any)."""
    checkpointed: tuple[bool, ...] = ()
    """Per stage, a stopped task resumes where it was (its spec's ``checkpointed``: it loses
    no work, `idlegate.sim.reclaim_stop`); empty: no stage is."""

    @classmethod
    def from_spec(cls, spec: WorkflowSpec) -> Dag:
        index = {s.name: i for i, s in enumerate(spec.stages)}
        asked = any(s.resources is not None or s.template is not None for s in spec.stages)
        demands = tuple(s.demand for s in spec.stages) if asked else ()
        checkpointed = tuple(s.checkpointed for s in spec.stages)
        parents = tuple(tuple(index[d] for d in s.depends_on) for s in spec.stages)
        children: list[list[int]] = [[] for _ in spec.stages]
        for i, ps in enumerate(parents):
            for p in ps:
                children[p].append(i)
        return cls(
            names=tuple(s.name for s in spec.stages),
            tasks=tuple(s.tasks for s in spec.stages),
            durations=tuple(float(s.task_duration_seconds) for s in spec.stages),
            parents=parents,
            children=tuple(tuple(c) for c in children),
            gang=tuple(s.gang for s in spec.stages),
            spec=spec,
            demands=demands if any(demands) else (),
            checkpointed=checkpointed if any(checkpointed) else (),
        )

    def __getstate__(self) -> dict[str, object]:
        """Its fields only, without its cached properties (the graph, the levels): they are
        recomputed where it is unpickled, so that a fork shipped to the forecasts' replay
        process is a fifth smaller to pickle in the operator (`operator.forecasting.book`)."""
        return {name: self.__dict__[name] for name in self.__dataclass_fields__}

    @property
    def num_stages(self) -> int:
        return len(self.names)

    @cached_property
    def graph(self) -> nx.DiGraph:
        """The stage graph (edges parent -> child), nodes are stage indices."""
        import networkx as nx  # (here: `idlegate lint` reads pools without it)

        g = nx.DiGraph()
        g.add_nodes_from(range(self.num_stages))
        g.add_edges_from((p, i) for i, ps in enumerate(self.parents) for p in ps)
        return g

    @cached_property
    def topological_order(self) -> tuple[int, ...]:
        """Stage indices, parents before children (ties by index, so it is deterministic)."""
        import networkx as nx

        return tuple(nx.lexicographical_topological_sort(self.graph))

    @cached_property
    def bottom_levels(self) -> tuple[float, ...]:
        """Per stage: the longest path (sum of stage lengths) from it to an exit, itself included."""
        level = [0.0] * self.num_stages
        for i in reversed(self.topological_order):
            below = max((level[c] for c in self.children[i]), default=0.0)
            level[i] = self.durations[i] + below
        return tuple(level)

    @cached_property
    def by_bottom_level(self) -> tuple[int, ...]:
        """Stage indices, highest bottom level first (ties by index): the order in which
        `Job.remaining_cp` is looked up (`sim.cluster`)."""
        levels = self.bottom_levels
        return tuple(sorted(range(self.num_stages), key=lambda i: -levels[i]))

    @cached_property
    def critical_path(self) -> float:
        """Length of the longest chain of stages: the job's duration on unlimited executors."""
        return max(self.bottom_levels)

    @cached_property
    def total_work(self) -> float:
        """Executor-seconds over all stages."""
        return sum(n * d for n, d in zip(self.tasks, self.durations, strict=True))

    @cached_property
    def average_width(self) -> float:
        """Total work / critical path: the executors the job keeps busy on average."""
        return self.total_work / self.critical_path

    @cached_property
    def depth(self) -> int:
        """Number of stages on the longest chain (by count): message-passing steps needed."""
        d = [1] * self.num_stages
        for i in reversed(self.topological_order):
            d[i] = 1 + max((d[c] for c in self.children[i]), default=0)
        return max(d)

    def lower_bound_jct(self, num_executors: int) -> float:
        """No schedule finishes the job faster than max(critical path, work / executors)."""
        return max(self.critical_path, self.total_work / num_executors)


def summarised(dag: Dag, limit: int) -> Dag:
    """`dag` if it has at most `limit` stages, else a chain of at most `limit` stages that
    stands for it where its exact shape costs more than it tells (a replay of a workflow of
    thousands of stages: `policy.portfolio.replay`). Stages are grouped by their depth (the
    most stages on a path from a root to them, itself included) into runs of consecutive
    depths. A group's stage lasts what the group adds to the longest path from a root (its
    stages' top levels), at least its shortest task, so the chain is about the critical
    path; it has as many tasks as keep the group's work (at least one), each requesting
    what the group's stage of most work requests."""
    if dag.num_stages <= limit:
        return dag
    n = dag.num_stages
    depth, top = [0] * n, [0.0] * n
    for i in dag.topological_order:
        depth[i] = 1 + max((depth[p] for p in dag.parents[i]), default=0)
        top[i] = dag.durations[i] + max((top[p] for p in dag.parents[i]), default=0.0)
    per = -(-max(depth) // limit)  # depths per group, so that at most `limit` groups
    groups = -(-max(depth) // per)
    reach, shortest = [0.0] * groups, [math.inf] * groups
    work, heaviest = [0.0] * groups, [0] * groups
    for i in range(n):
        g = (depth[i] - 1) // per
        reach[g] = max(reach[g], top[i])
        shortest[g] = min(shortest[g], dag.durations[i])
        work[g] += dag.tasks[i] * dag.durations[i]
        if dag.tasks[i] * dag.durations[i] >= dag.tasks[heaviest[g]] * dag.durations[heaviest[g]]:
            heaviest[g] = i
    durations, before = [], 0.0
    for g in range(groups):
        durations.append(max(reach[g] - before, shortest[g]))
        before = max(before, reach[g])
    return Dag(
        names=tuple(f"group-{g}" for g in range(groups)),
        tasks=tuple(max(1, round(w / d)) for w, d in zip(work, durations, strict=True)),
        durations=tuple(durations),
        parents=((), *((g - 1,) for g in range(1, groups))),
        children=(*((g + 1,) for g in range(groups - 1)), ()),
        gang=(False,) * groups,
        demands=tuple(dag.demands[i] for i in heaviest) if dag.demands else (),
    )
