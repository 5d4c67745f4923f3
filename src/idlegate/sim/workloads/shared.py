"""The `shared` workload: three teams with different work on one pool (issue 71).

A shared cluster carries several kinds of work at once, and a rule that is best for one
kind can starve another. Three teams submit on one pool of `num_executors` (96), each
at a third of the offered `load` (0.7 in all), for `hours` (8):

* ``heavy``: heavy-tailed DAG jobs of Alibaba's 2018 trace (jobs of two stages or more,
  of at most `heavy_hours` hours of the team's share of the pool), Poisson arrivals.
  The trace is split by job number (`split`): even numbers are the training split
  (``train``, the default: what the brain is tuned on), odd ones the held-out split
  (``test``). Without the trace (no ``../shared/data/alibaba``, no
  ``$IDLEGATE_ALIBABA_DIR``), ``heavy_source=auto`` generates heavy-tailed DAGs instead
  (Pareto task counts), and the workload's name says so: ``shared (heavy: generated, no
  Alibaba trace)``; ``heavy_source=alibaba`` then raises.
* ``science``: generated scientific workflows of tens to hundreds of stages (a split,
  parallel pipelines, a merge and a tail, as Pegasus' Epigenomics and Montage are),
  Poisson arrivals.
* ``small``: small jobs (one stage of a few tasks), Poisson arrivals, and at `burst_at`
  seconds (an hour in) a burst, at once, of `burst` times the work the team offers in
  an hour.

`queues`: ``one`` (one queue, no quotas) or ``teams`` (a queue per team, ``heavy``,
``science``, ``small``, each an equal share of the pool's pods as its nominal quota).
Seeds: one stream per team, so a team's jobs do not depend on the others' options.
Task durations are each stage's figure times a log-normal factor of mean 1 (spread
0.35, as Alibaba's workload: `alibaba.DURATION_SPREAD`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Literal

import numpy as np
from pydantic import Field

from idlegate.errors import IdlegateError
from idlegate.sim.alibaba import default_alibaba_dir, open_alibaba_trace
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival, Workload
from idlegate.sim.queues import QueueSpec
from idlegate.sim.resources import MILLI, ResourceVector
from idlegate.sim.workloads.alibaba import DURATION_SPREAD
from idlegate.sim.workloads.base import SeedLike, _fidelity, _Options, as_rng
from idlegate.sim.workloads.k8s_batch import K8sPodDurations

TEAMS = ("heavy", "science", "small")
"""The teams, in the order their streams are drawn from the seed."""


class SharedConfig(_Options):
    """Three teams of different work on one pool (module docs)."""

    num_executors: int = Field(96, ge=3, le=100_000)
    """The pool's executors."""
    load: float = Field(0.7, gt=0, le=10)
    """Offered load of the three steady streams together (each a third)."""
    hours: float = Field(8.0, gt=0, le=1000)
    """Length of the arrival streams."""
    queues: Literal["one", "teams"] = "one"
    """One queue, or a queue per team of an equal share of the pool."""
    split: Literal["train", "test", "all"] = "train"
    """The heavy team's jobs: the trace's even job numbers, its odd ones, or all."""
    heavy_source: Literal["auto", "alibaba", "generated"] = "auto"
    """Where the heavy team's jobs come from (auto: the trace if found, else generated)."""
    heavy_hours: float = Field(2.0, gt=0)
    """The heavy team's largest job: this many hours of the team's share of the pool."""
    burst: float = Field(5.0, ge=0)
    """The small team's burst: this many times its hourly work, at once (0: none)."""
    burst_at: float = Field(3600.0, ge=0)
    """When the burst arrives, seconds."""
    alibaba_dir: str | None = None
    """The trace's directory (default: $IDLEGATE_ALIBABA_DIR or ../shared/data/alibaba)."""


def shared_workload(config: SharedConfig | None = None, seed: SeedLike = 0) -> Workload:
    """The three teams' streams merged on one pool (module docs)."""
    c = config or SharedConfig()
    rng = as_rng(seed)
    seeds = rng.integers(2**63, size=len(TEAMS))
    share = c.num_executors / len(TEAMS)
    rate = c.load / len(TEAMS) * c.num_executors  # executor-seconds offered a second, a team
    horizon = c.hours * 3600.0
    heavy, note = _heavy_jobs(c, share)
    jobs: list[JobArrival] = []
    sources: dict[str, Draw] = {"heavy": heavy, "science": _science_dag, "small": _small_dag}
    for team, s in zip(TEAMS, seeds, strict=True):
        team_rng = np.random.default_rng(int(s))
        draw = sources[team]
        jobs += _stream(team, draw, team_rng, rate, horizon)
        if team == "small" and c.burst > 0 and c.burst_at < horizon:
            jobs += _burst(draw, team_rng, c.burst * rate * 3600.0, c.burst_at)
    jobs.sort(key=lambda j: j.time)
    queues: tuple[QueueSpec, ...] = ()
    if c.queues == "teams":
        jobs = [replace(j, queue=j.name.split("/")[0]) for j in jobs]
        queues = _team_queues(c.num_executors)
    name = "shared" + (f" ({note})" if note else "")
    return Workload(name, tuple(jobs), c.num_executors, _fidelity(0.0, True), queues=queues)


# -- the teams' jobs ---------------------------------------------------------------------

Draw = Callable[[np.random.Generator], Dag]
"""Draws one job's DAG."""


def heavy_from_trace(c: SharedConfig) -> bool:
    """Whether the heavy team's jobs are the Alibaba trace's (else generated): what
    `heavy_source` asks, ``auto`` the trace if its directory is found."""
    found = c.alibaba_dir is not None or default_alibaba_dir() is not None
    return c.heavy_source == "alibaba" or (c.heavy_source == "auto" and found)


def _heavy_jobs(c: SharedConfig, share: float) -> tuple[Draw, str]:
    """The heavy team's job drawer, and a note when it is not the trace's."""
    cap = c.heavy_hours * 3600.0 * share
    found = c.alibaba_dir is not None or default_alibaba_dir() is not None
    if not heavy_from_trace(c):
        note = "" if c.heavy_source == "generated" else "heavy: generated, no Alibaba trace"
        return (lambda rng: _generated_heavy_dag(rng, cap)), note
    if not found:
        raise IdlegateError(
            "shared: heavy_source=alibaba, but Alibaba's trace is not found; pass "
            "alibaba_dir or set IDLEGATE_ALIBABA_DIR (heavy_source=auto generates the "
            "heavy team's jobs instead)"
        )
    trace = open_alibaba_trace(c.alibaba_dir)
    keep = {"train": (0,), "test": (1,), "all": (0, 1)}[c.split]
    dags = [
        j.dag
        for j in trace.jobs
        if j.number % 2 in keep and j.dag.num_stages >= 2 and j.dag.total_work <= cap
    ]
    if not dags:
        raise IdlegateError(
            f"shared: no job of the trace's {c.split} split fits {c.heavy_hours} h of a "
            "team's share; raise heavy_hours"
        )
    return (lambda rng: dags[int(rng.integers(len(dags)))]), ""


def _generated_heavy_dag(rng: np.random.Generator, cap: float) -> Dag:
    """A heavy-tailed DAG job: a chain-like DAG of 2-8 stages whose task counts are Pareto
    (a few jobs of thousands of tasks, most of a few), stages of 5-120 s, work capped."""
    stages = int(rng.integers(2, 9))
    tasks = np.minimum(np.ceil(rng.pareto(1.1, stages) * 3 + 1), 5000).astype(int)
    durations = np.exp(rng.uniform(np.log(5), np.log(120), stages))
    work = float(np.sum(tasks * durations))
    if work > cap:  # (scale the counts down, never below one task)
        tasks = np.maximum(1, (tasks * cap / work).astype(int))
    parents = [()] + [(int(rng.integers(i)),) for i in range(1, stages)]
    return _dag("heavy", tasks.tolist(), durations.tolist(), parents)


def _science_dag(rng: np.random.Generator) -> Dag:
    """A scientific workflow: a split stage, `width` parallel pipelines of `depth` stages,
    a merge and a tail of 1-3 stages (tens to hundreds of stages in all); a stage holds
    1-4 tasks of 10-60 s."""
    width = int(rng.integers(4, 41))
    depth = int(rng.integers(2, 7))
    tail = int(rng.integers(1, 4))
    parents: list[tuple[int, ...]] = [()]
    ends = []
    for _ in range(width):
        prev = 0
        for _ in range(depth):
            parents.append((prev,))
            prev = len(parents) - 1
        ends.append(prev)
    parents.append(tuple(ends))
    for _ in range(tail):
        parents.append((len(parents) - 1,))
    n = len(parents)
    tasks = rng.integers(1, 5, size=n).tolist()
    durations = np.exp(rng.uniform(np.log(10), np.log(60), size=n)).tolist()
    return _dag("science", tasks, durations, parents)


def _small_dag(rng: np.random.Generator) -> Dag:
    """A small job: one stage of 2-16 tasks of 20-90 s."""
    tasks = int(rng.integers(2, 17))
    duration = float(np.exp(rng.uniform(np.log(20), np.log(90))))
    return _dag("small", [tasks], [duration], [()])


def _dag(
    label: str, tasks: Sequence[int], durations: Sequence[float], parents: Sequence[tuple[int, ...]]
) -> Dag:
    children: list[list[int]] = [[] for _ in parents]
    for i, ps in enumerate(parents):
        for p in ps:
            children[p].append(i)
    return Dag(
        tuple(f"{label}-{i}" for i in range(len(parents))),
        tuple(int(t) for t in tasks),
        tuple(float(d) for d in durations),
        tuple(tuple(p) for p in parents),
        tuple(tuple(c) for c in children),
        tuple(False for _ in parents),
    )


def _arrival(team: str, i: int, t: float, dag: Dag) -> JobArrival:
    model = K8sPodDurations(0.0, dag.durations, DURATION_SPREAD)
    return JobArrival(t, f"{team}/{team}-{i}", dag, model)


def _stream(
    team: str, draw: Draw, rng: np.random.Generator, rate: float, horizon: float
) -> list[JobArrival]:
    """Poisson arrivals of `draw`'s jobs offering `rate` executor-seconds a second until
    `horizon`: the mean gap is measured on 1,000 draws of a separate stream."""
    probe = np.random.default_rng(int(rng.integers(2**63)))
    mean_work = float(np.mean([draw(probe).total_work for _ in range(1000)]))
    gap = mean_work / rate
    out: list[JobArrival] = []
    t = float(rng.exponential(gap))
    while t < horizon:
        out.append(_arrival(team, len(out), t, draw(rng)))
        t += float(rng.exponential(gap))
    return out


def _burst(draw: Draw, rng: np.random.Generator, work: float, at: float) -> list[JobArrival]:
    """Jobs of `draw` arriving at once at `at` until their work reaches `work`."""
    out: list[JobArrival] = []
    total = 0.0
    while total < work:
        dag = draw(rng)
        out.append(_arrival("small", 100_000 + len(out), at, dag))
        total += dag.total_work
    return out


def _team_queues(k: int) -> tuple[QueueSpec, ...]:
    share, extra = divmod(k, len(TEAMS))
    return tuple(
        QueueSpec(team, ResourceVector({"pods": (share + (1 if i < extra else 0)) * MILLI}))
        for i, team in enumerate(TEAMS)
    )
