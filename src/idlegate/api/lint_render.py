"""How ``idlegate lint`` prints a mapped job, shared by its Argo and Airflow parts.

Both print a head line naming where the job came from and its counts, then one line per
live stage (its tasks, estimate, dependencies and whether it may be skipped); the
differences (Argo's parallelism, Airflow's priorities and tasks left to it) are added by
each part around these lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

from idlegate.errors import IdlegateError
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import StageSpec, WorkflowSpec

if TYPE_CHECKING:  # (imported where a pool is linted: `idlegate lint` starts without it)
    from idlegate.sim.cluster import Cluster


class LintStage(Protocol):
    """The fields of a mapped stage that a stage line shows."""

    @property
    def name(self) -> str: ...
    @property
    def tasks(self) -> int: ...
    @property
    def tasks_known(self) -> bool: ...
    @property
    def duration(self) -> float: ...
    @property
    def duration_source(self) -> object: ...
    @property
    def depends_on(self) -> tuple[str, ...]: ...
    @property
    def condition(self) -> object | None: ...
    @property
    def demand(self) -> ResourceVector: ...
    @property
    def where(self) -> str: ...


S = TypeVar("S", bound=LintStage)

PoolFactory = Callable[[], "Cluster"]
"""A fresh pool of the linted capacity (``--pool-size``, ``--pool-resources``)."""


MAX_POOL = 100_000
"""Executors of a pool given by its resources alone, without pods or --pool-size: as
many as the simulator's pools may have, so that only the resources bound it."""


def linted_pool(pool_size: int | None, resources: ResourceVector | None) -> Cluster:
    """The pool of `pool_size` executors (else the pods of `resources`, else as many as
    a pool may have) and `resources`."""
    pods = (resources or ResourceVector()).units("pods")
    from idlegate.sim.cluster import Cluster

    return Cluster(pool_size or int(pods) or MAX_POOL, resources=resources)


def misfits(stages: Iterable[S], pool: PoolFactory, job: str) -> str:
    """What says which of `stages` (of the job named `job`) can never fit the pool, each
    with where it is in the manifest (its `where`), joined by ``"; "``; empty if every one fits. Each
    stage is admitted on its own as the pool admits a job (`Cluster.add_job`), so every
    stage that never fits is said, not only the first."""
    from idlegate.sim.dag import Dag  # (with the pool's simulator: only when one is linted)

    found = []
    for stage in stages:
        if not stage.demand:
            continue
        one = StageSpec(
            name=stage.name,
            tasks=stage.tasks,
            task_duration_seconds=stage.duration,
            resources=stage.demand.to_list(),
        )
        try:
            pool().add_job(Dag.from_spec(WorkflowSpec(stages=(one,))), 0.0, job)
        except IdlegateError as exc:
            found.append(f"{exc} ({stage.where})")
    return "; ".join(found)


def head_line(
    file: str, document: int, item: int | None, what: str, counts: Mapping[str, int]
) -> str:
    """``file[document](.items[item]): <what> maps to N stages, M edges, K tasks``."""
    where = f"{file}[{document}]" + (f".items[{item}]" if item is not None else "")
    return (
        f"{where}: {what} maps to {counts['stages']} stages, "
        f"{counts['edges']} edges, {counts['tasks']} tasks"
    )


def stage_lines(
    stages: Iterable[LintStage], unknown: str, detail: Mapping[str, str] | None = None
) -> list[str]:
    """One line per stage; `unknown` stands for the count of a stage whose fan-out is not
    known yet, and `detail` (by stage name) is appended to its estimate, then what each
    task requests (if anything)."""
    out = []
    for stage in stages:
        count = f"{stage.tasks} task{'s' if stage.tasks != 1 else ''}"
        if not stage.tasks_known:
            count = unknown
        line = f"  {stage.name}: {count} x {stage.duration:g} s ({stage.duration_source})"
        line += (detail or {}).get(stage.name, "")
        if stage.demand:
            line += f", each {stage.demand.format()}"
        if stage.depends_on:
            line += f" after {', '.join(stage.depends_on)}"
        if stage.condition is not None:
            line += f"; may be skipped ({stage.condition})"
        out.append(line)
    return out
