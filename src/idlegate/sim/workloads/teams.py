"""The `teams` workload: teams sharing one pool, each with a queue of an equal quota.

Each of `teams` teams (queues ``team-a``, ``team-b``, …) owns an equal share of the pool
as its nominal quota (its pods; `idlegate.sim.queues`) and submits a stream of `base`
workflows (a generated workload, ``tpch-like`` by default) at `load` / `teams` of the
pool, `num_jobs` of them. The `scenario` changes the first team:

* ``steady``: every team submits its stream (what the quotas alone do);
* ``flood``: the first team submits `flood` times the others' count at once, at t = 0
  (a team that takes the whole pool without queues);
* ``large``: the first team's stream carries one large workflow, `large` times its mean
  work, arriving at a tenth of the stream (the workflow an SRPT-like order holds back).

The queues' wait bound is `wait_bound` seconds (none by default), but for a flooding
team's: a backlog of five times its share drains on its quota only after hours, so no
bound shorter than that could hold for it (docs/queues.md). `reclaim` is every queue's
``preemption.reclaim`` (none by default). Seeds: one stream per
team (`base.split_streams`), so a team's jobs do not depend on the others' options.
"""

from __future__ import annotations

from dataclasses import replace
from math import inf
from typing import ClassVar, Literal

from pydantic import Field

from idlegate.errors import IdlegateError
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival, Workload
from idlegate.sim.queues import Preemption, QueueSpec
from idlegate.sim.resources import MILLI, ResourceVector
from idlegate.sim.workloads.base import SeedLike, _Options, as_rng
from idlegate.sim.workloads.kinds import build_workload

TEAM_WORKLOADS = ("synthetic", "tpch-like", "k8s-batch", "bursty", "follow", "push")
"""The generated workloads a team's stream may be."""


class TeamsConfig(_Options):
    """Teams of equal quota on one pool (module docs). Default: three teams of TPC-H-like
    DAGs at offered load 0.85 in all, 60 workflows each, on 30 executors, one flooding."""

    QUEUE_OPTIONS: ClassVar[tuple[str, ...]] = ("wait_bound", "reclaim", "decide")
    """The options that set the teams' own queues: a queues file (``--queues``) replaces
    those queues, so they are refused beside one, not ignored."""

    scenario: Literal["steady", "flood", "large"] = "flood"
    """What the first team does: submit steadily, flood, or carry one large workflow."""
    base: str = "tpch-like"
    """Each team's generated workload."""
    teams: int = Field(3, ge=1, le=26)
    """Teams, each a queue of an equal share of the pool."""
    num_executors: int = Field(30, ge=1)
    """The pool's executors (each team's quota is an equal share of them)."""
    load: float = Field(0.85, gt=0, le=10)
    """Offered load of the steady streams together."""
    num_jobs: int = Field(60, ge=1, le=100_000)
    """Workflows each steady team submits."""
    flood: float = Field(5.0, gt=0)
    """``flood``: the flooding team submits this many times the others' count at once."""
    large: float = Field(30.0, gt=0)
    """``large``: the large workflow's work, in the team's mean workflow work."""
    wait_bound: float | None = Field(None, gt=0)
    """Seconds a ready task may wait (every queue but a flooding team's); none: no bound."""
    reclaim: Literal["Never", "LowerPriority", "Any"] = "Never"
    """Every queue's ``preemption.reclaim`` (`idlegate.sim.queues.Preemption`): whether a
    team under its quota stops the tasks of teams above theirs."""
    decide: Literal["Rules", "Forecast"] = "Rules"
    """Every queue's ``preemption.decide``: the reclaim's stops as the rules choose them, or
    only those a replay says pay (`idlegate.sim.reclaim_forecast`)."""


def team_name(i: int) -> str:
    return f"team-{chr(ord('a') + i)}"


def teams_workload(config: TeamsConfig, seed: SeedLike = 0) -> Workload:
    """The teams' streams merged on one pool, with a queue per team (module docs)."""
    if config.base not in TEAM_WORKLOADS:
        raise IdlegateError(
            f"teams: base {config.base!r} is not a team's stream; use one of "
            f"{', '.join(TEAM_WORKLOADS)}"
        )
    k, n = config.num_executors, config.teams
    if k < n:
        raise IdlegateError(f"teams: {n} teams need at least {n} executors, got {k}")
    rng = as_rng(seed)
    seeds = rng.integers(2**31, size=n)
    arrivals: list[JobArrival] = []
    fidelity = None
    for i in range(n):
        name = team_name(i)
        count = config.num_jobs
        if i == 0 and config.scenario == "flood":
            count = max(1, round(config.flood * config.num_jobs))
        stream = build_workload(
            config.base,
            int(seeds[i]),
            num_executors=k,
            load=config.load / n,
            num_jobs=count,
        )
        fidelity = fidelity or stream.fidelity
        jobs = [replace(j, name=f"{name}/{j.name}", queue=name) for j in stream.jobs]
        if i == 0 and config.scenario == "flood":
            jobs = [replace(j, time=0.0) for j in jobs]
        if i == 0 and config.scenario == "large":
            jobs.append(_large(jobs, config, name, k // n))
        arrivals += jobs
    arrivals.sort(key=lambda j: j.time)
    share = k // n
    queues = tuple(
        QueueSpec(
            team_name(i),
            ResourceVector({"pods": (share + (1 if i < k - share * n else 0)) * MILLI}),
            wait_bound=inf
            if config.wait_bound is None or (i == 0 and config.scenario == "flood")
            else config.wait_bound,
            preemption=Preemption(reclaim=config.reclaim, decide=config.decide),
        )
        for i in range(n)
    )
    assert fidelity is not None  # (n >= 1)
    return Workload(
        f"teams-{config.scenario}", tuple(arrivals), k, fidelity=fidelity, queues=queues
    )


def _large(jobs: list[JobArrival], config: TeamsConfig, name: str, share: int) -> JobArrival:
    """One wide workflow of `large` times the team's mean work: one stage of four waves
    of the team's quota."""
    mean = sum(j.dag.total_work for j in jobs) / len(jobs)
    tasks = 4 * share
    duration = config.large * mean / tasks
    dag = Dag(("large",), (tasks,), (duration,), ((),), ((),), (False,))
    at = jobs[len(jobs) // 10].time
    return JobArrival(at, f"{name}/large", dag, queue=name)
