"""The room there is: the clairvoyant offline optimum of the average JCT, by CP-SAT.

Every scheduler of idlegate decides online; this script solves the same small instances
*offline*, knowing every arrival and every task duration in advance, with OR-Tools
CP-SAT, and prints each scheduler's gap to that optimum. The optimum may leave executors
idle on purpose (nothing forbids it), so it bounds what any scheduler — idle-aware or
not, learned or planned — can reach on the instance. A second solve adds a *non-delay*
constraint (no task waits while an executor is free): the best any scheduler that never
idles can do. The difference of the two is all that deliberate idling can buy.

The scheduling problem (what the simulator runs with ``Fidelity.none()``)
-------------------------------------------------------------------------
K identical executors. Job j arrives at a_j with a DAG of stages; stage s has n_s tasks
of length p_s each (the synthetic workloads run every task for exactly its estimate).
A task occupies one executor without preemption; a stage's tasks start only after all
tasks of its parent stages have finished, and never before a_j; at most K tasks run at
once; a gang stage's n_s tasks start together. Minimise Σ_j (C_j − a_j), C_j the end
of j's last task: n × the average JCT.

The CP-SAT model (`build_model`)
--------------------------------
* Time is an integer grid of `scale` points per second (`instance_from_workload`).
  Lengths are on the grid (the workloads' lengths have at most 3 decimals); releases are
  *floored* onto it. Flooring every start of a feasible real schedule gives a feasible
  grid schedule (lengths are integers, so precedences and the capacity survive), so the
  grid optimum is a valid lower bound of the real one; shifting a grid schedule one step
  right makes it feasible for the real releases, so it is at most 1/scale s per job
  below the real optimum. The default grid is 0.01 s.
* Stage s of job j, not gang: n_s fixed-length intervals [S_si, S_si + p_s). Tasks of a
  stage are interchangeable, so S_s1 ≤ S_s2 ≤ … breaks the symmetry without losing
  an optimum, and the stage's finish is F_s = S_sn + p_s. Gang: one interval of
  demand n_s, F_s = S_s + p_s.
* Release: S_s1 ≥ a_j. Precedence: S_c1 ≥ F_p for every parent p of c (the ordering
  carries it to the other tasks of c).
* Capacity: one cumulative constraint of capacity K over all intervals. Executors are
  identical and there is no moving delay, so any profile within K can be given executors
  in start order (a unit task, or a gang, finds its executors free at its start); the
  executors' identities are not needed.
* C_j ≥ F_s for every exit stage s of j; minimise Σ C_j (Σ a_j is a constant).
* Non-delay (`non_delay=True`, one-stage jobs without gangs): a task u released at r_u
  that starts at S_u > r_u needs all K executors busy throughout [r_u, S_u). The number
  of busy executors drops only when a task ends, so it suffices to check it at r_u and
  at every end E_k ∈ [r_u, S_u): "busy at c" is a literal implying that at least K
  tasks i have S_i ≤ c < E_i, each through a literal implying those two inequalities.
  That is O(T²) literals for T tasks; it is the best schedule of any scheduler that
  never leaves an executor free while a task waits.

Two dominance rules, each keeping at least one optimum (proofs in `_add_semi_active`
and `_order_identical_jobs`), shrink the search: every task starts at its release, a
parent's finish or another task's end (semi-active schedules), and identical jobs start
in arrival order. CP-SAT then runs a depth-first "set times" search beside its default
LP search (`_solver`); the LP bound of Σ C_j alone hardly rises above the trivial
Σ (a_j + critical path), the depth-first search is what proves optimality.

The solve is hinted with the best schedule at hand (the best scheduler's, floored, or
the non-delay optimum's), so the incumbent is never worse than any scheduler. When
CP-SAT does not prove optimality within the time limit it still gives a lower bound;
the gap of a scheduler to that *bound* is then the honest ceiling of the room there is
(the gap to the true optimum lies between the gap to the incumbent and the gap to the
bound).

    python benchmarks/optimum.py [--executors 2,3,4] [--jobs 15,30] [--seeds 2]
        [--workloads synthetic@0.6,synthetic@0.8,bursty,tpch-like] [--time-limit 30]
        [--schedulers learned:default,...] [--json results.json]
"""

# One self-contained script (~760 lines) on purpose: benchmarks are not part of the
# package, and its model, dominance rules, search and report are read and rerun together.

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from idlegate.errors import IdlegateError
from idlegate.flags import add_seeds, description, missing_extra, one_line, run_script

try:
    from ortools.sat.python import cp_model
except ModuleNotFoundError as exc:  # the dev extra: one Error line, as the CLI's
    error = missing_extra(exc)
    if __name__ != "__main__" or error is None:
        raise
    sys.exit(f"Error: {one_line(error)}")

from idlegate.policy import make_scheduler
from idlegate.sim.dag import Dag
from idlegate.sim.engine import Fidelity, SimResult, Workload, simulate
from idlegate.sim.metrics import run_metrics
from idlegate.sim.workloads import WORKLOADS, build_workload

BASE_SCHEDULERS = ("fifo", "sjf", "sjf-cp", "fair", "weighted-fair", "analytic", "analytic:fair")
"""Compared on every instance; `--schedulers` adds more."""

DAG_SHAPE: dict[str, object] = {
    "max_stages": 4,
    "max_tasks": 2,
    "min_task_seconds": 1.0,
    "max_task_seconds": 10.0,
}
"""tpch-like DAGs small enough to prove optimal: ≤ 4 stages of ≤ 2 tasks of 1–10 s."""

FINEST_SCALE = 1000
"""Grid points per second when the lengths need them (the workloads round to 1 ms)."""

# ---------------------------------------------------------------------------------------
# the instance


@dataclass(frozen=True)
class Instance:
    """A workload as the offline problem sees it: integer grid times, every job known."""

    name: str
    num_executors: int
    scale: int
    """Grid points per second."""
    names: tuple[str, ...]
    arrivals: tuple[float, ...]
    """True arrival times (s)."""
    releases: tuple[int, ...]
    """Arrivals floored onto the grid."""
    dags: tuple[Dag, ...]
    lengths: tuple[tuple[int, ...], ...]
    """Per job, per stage: one task's length on the grid."""

    @property
    def num_jobs(self) -> int:
        return len(self.names)

    @property
    def one_stage(self) -> bool:
        """Every job is one stage without a gang (the non-delay model's case)."""
        return all(d.num_stages == 1 and not any(d.gang) for d in self.dags)

    def horizon(self) -> int:
        """No optimal schedule ends later: after the last release it never idles all of K."""
        work = sum(
            n * p
            for d, ls in zip(self.dags, self.lengths, strict=True)
            for n, p in zip(d.tasks, ls, strict=True)
        )
        return max(self.releases) + work


def grid_scale(workload: Workload, resolution: float = 0.01) -> int:
    """Grid points per second: 1/resolution, finer (up to 1 ms) if a task length needs it."""
    scale = max(1, round(1 / resolution))
    lengths = {p for j in workload.jobs for p in j.dag.durations}
    while scale < FINEST_SCALE and any(abs(p * scale - round(p * scale)) > 1e-6 for p in lengths):
        scale *= 10
    return scale


def instance_from_workload(workload: Workload, resolution: float = 0.01) -> Instance:
    """The offline instance of `workload` (tasks take their estimate: `Fidelity.none()`).

    Lengths not on the grid (finer than 1 ms) are floored, which keeps the optimum a
    lower bound. Raises IdlegateError for a gang stage wider than the cluster.
    """
    k = workload.num_executors
    for job in workload.jobs:
        for name, n, gang in zip(job.dag.names, job.dag.tasks, job.dag.gang, strict=True):
            if gang and n > k:
                raise IdlegateError(
                    f"job {job.name!r}: gang stage {name!r} needs {n} executors at once but the "
                    f"cluster has {k}; give the workload at least {n} executors"
                )
    scale = grid_scale(workload, resolution)
    return Instance(
        name=workload.name,
        num_executors=k,
        scale=scale,
        names=tuple(j.name for j in workload.jobs),
        arrivals=tuple(float(j.time) for j in workload.jobs),
        releases=tuple(math.floor(j.time * scale + 1e-9) for j in workload.jobs),
        dags=tuple(j.dag for j in workload.jobs),
        lengths=tuple(
            tuple(math.floor(p * scale + 1e-6) for p in j.dag.durations) for j in workload.jobs
        ),
    )


# ---------------------------------------------------------------------------------------
# the model


@dataclass
class StageVars:
    """One stage's variables: its task starts (one for a gang), demand, length and finish."""

    starts: list[cp_model.IntVar]
    demand: int
    length: int
    finish: cp_model.IntVar


@dataclass
class Model:
    """A CP-SAT model of an instance and the variables the solution is read from."""

    model: cp_model.CpModel
    stages: dict[tuple[int, int], StageVars]
    completions: list[cp_model.IntVar]


def build_model(instance: Instance, *, non_delay: bool = False, semi_active: bool = True) -> Model:
    """The CP-SAT model of the module docstring (with the non-delay constraint if asked)."""
    m = cp_model.CpModel()
    horizon = instance.horizon()
    stages: dict[tuple[int, int], StageVars] = {}
    intervals: list[cp_model.IntervalVar] = []
    demands: list[int] = []
    completions: list[cp_model.IntVar] = []
    for j, dag in enumerate(instance.dags):
        r = instance.releases[j]
        for s in dag.topological_order:
            sv = _stage_vars(m, instance, j, s, horizon)
            stages[j, s] = sv
            for x in sv.starts:
                intervals.append(m.new_fixed_size_interval_var(x, sv.length, f"i{j}_{s}"))
                demands.append(sv.demand)
            m.add(sv.starts[0] >= r)
            for p in dag.parents[s]:
                m.add(sv.starts[0] >= stages[j, p].finish)
        c = m.new_int_var(r, horizon, f"C{j}")
        for s in range(dag.num_stages):
            if not dag.children[s]:
                m.add(c >= stages[j, s].finish)
        completions.append(c)
    m.add_cumulative(intervals, demands, instance.num_executors)
    _order_identical_jobs(m, instance, stages)
    if semi_active:
        _add_semi_active(m, instance, stages)
    if non_delay:
        _add_non_delay(m, instance, stages)
    m.minimize(sum(completions))
    return Model(m, stages, completions)


def _stage_vars(m: cp_model.CpModel, instance: Instance, j: int, s: int, horizon: int) -> StageVars:
    """Starts (ordered: tasks of a stage are interchangeable) and the finish of stage s of j."""
    dag = instance.dags[j]
    length = instance.lengths[j][s]
    count, demand = (1, dag.tasks[s]) if dag.gang[s] else (dag.tasks[s], 1)
    lo = instance.releases[j]
    starts = [m.new_int_var(lo, horizon - length, f"S{j}_{s}_{i}") for i in range(count)]
    for a, b in itertools.pairwise(starts):
        m.add(a <= b)
    finish = m.new_int_var(lo + length, horizon, f"F{j}_{s}")
    m.add(finish == starts[-1] + length)
    return StageVars(starts, demand, length, finish)


def _add_semi_active(
    m: cp_model.CpModel, instance: Instance, stages: dict[tuple[int, int], StageVars]
) -> None:
    """Every task starts at its release, a parent's finish or another task's end.

    A dominance rule, not a restriction of the optimum: a task starting later than its
    ready time with no task ending at its start had room one grid step earlier (the
    executors busy just before its start are a subset of those busy at it, minus
    itself), and moving it left worsens no completion. Among the optimal schedules the
    one with the least sum of starts can thus move nothing left, and it may be taken
    ordered as in `_order_identical_jobs` (permuting identical jobs' schedules keeps
    both sums). It gives CP-SAT a discrete set of candidate starts instead of every
    grid point, which is what lets it prove optimality on the DAG instances.
    """
    ends = [(key, i, x + sv.length) for key, sv in stages.items() for i, x in enumerate(sv.starts)]
    for (j, s), sv in stages.items():
        dag = instance.dags[j]
        for i, x in enumerate(sv.starts):
            ready: list[cp_model.LinearExprT] = [stages[j, p].finish for p in dag.parents[s]]
            if not dag.parents[s]:
                ready.append(instance.releases[j])
            if i:
                ready.append(sv.starts[i - 1])
            ready += [end for key, k, end in ends if (key, k) != ((j, s), i)]
            lits = []
            for value in ready:
                lit = m.new_bool_var("why")
                m.add(x == value).only_enforce_if(lit)
                lits.append(lit)
            m.add_bool_or(lits)


def _order_identical_jobs(
    m: cp_model.CpModel, instance: Instance, stages: dict[tuple[int, int], StageVars]
) -> None:
    """Identical jobs start in arrival order (symmetry breaking that keeps an optimum).

    Take any schedule and give the k-th earliest-starting of a group of identical jobs'
    schedules to the k-th earliest arrival: a job's schedule never starts before that
    job's release, so the k-th earliest start is >= the k-th earliest release, every
    moved schedule stays feasible and the sum of completion times (a permutation of the
    same values) is unchanged. With the non-delay constraint it keeps an optimum too: if
    an executor were free at some t in [r_(k), S_(k)), the jobs holding the m − k + 1
    latest starts would all have arrived after t in the original, so r_(k) > t.
    A job's start is the earliest first-task start of its source stages.
    """
    groups: dict[tuple[object, ...], list[int]] = {}
    for j, dag in enumerate(instance.dags):
        key = (dag.tasks, instance.lengths[j], dag.parents, dag.gang)
        groups.setdefault(key, []).append(j)
    for jobs in groups.values():
        if len(jobs) < 2:
            continue
        firsts = [_job_start(m, instance.dags[j], j, stages) for j in jobs]
        for a, b in itertools.pairwise(firsts):  # jobs are in arrival order
            m.add(a <= b)


def _job_start(
    m: cp_model.CpModel, dag: Dag, j: int, stages: dict[tuple[int, int], StageVars]
) -> cp_model.IntVar:
    """The earliest start of job j's tasks (its source stages' first starts)."""
    sources = [stages[j, s].starts[0] for s in range(dag.num_stages) if not dag.parents[s]]
    if len(sources) == 1:
        return sources[0]
    first = m.new_int_var(0, max(x.proto.domain[-1] for x in sources), f"B{j}")
    m.add_min_equality(first, sources)
    return first


def _add_non_delay(
    m: cp_model.CpModel, instance: Instance, stages: dict[tuple[int, int], StageVars]
) -> None:
    """No task waits while an executor is free (one-stage jobs without gangs only).

    Task u waits on [r_u, S_u); the busy count drops only at ends, so it is checked at r_u
    and at every end E_k in the window (see the module docstring).
    """
    if not instance.one_stage:
        raise IdlegateError(
            "the non-delay optimum is modelled for one-stage jobs without gangs only; "
            "drop --no-idle for DAG workloads"
        )
    k = instance.num_executors
    tasks = [
        (instance.releases[j], x, sv.length) for (j, _), sv in stages.items() for x in sv.starts
    ]

    def busy_at(c: cp_model.LinearExprT, skip: int | None) -> cp_model.IntVar:
        """A literal that implies at least K tasks (other than `skip`) run at time c."""
        busy = m.new_bool_var("busy")
        runs = []
        for i, (_, si, pi) in enumerate(tasks):
            if i == skip:
                continue
            lit = m.new_bool_var("runs")
            m.add(si <= c).only_enforce_if(lit)
            m.add(si + pi >= c + 1).only_enforce_if(lit)
            runs.append(lit)
        m.add(sum(runs) >= k).only_enforce_if(busy)
        return busy

    at_release = {r: busy_at(r, None) for r in sorted({r for r, _, _ in tasks})}
    at_end = [busy_at(s + p, i) for i, (_, s, p) in enumerate(tasks)]
    for u, (ru, su, _) in enumerate(tasks):
        # S_u > r_u  =>  busy at r_u
        m.add_bool_or([at_release[ru], _le(m, su, ru)])
        for kk, (_, sk, pk) in enumerate(tasks):
            if kk == u:
                continue
            end = sk + pk
            # r_u <= E_k < S_u  =>  busy at E_k
            before = m.new_bool_var("before")
            m.add(end <= ru - 1).only_enforce_if(before)
            m.add_bool_or([at_end[kk], before, _le(m, su, end)])


def _le(m: cp_model.CpModel, a: cp_model.LinearExprT, b: cp_model.LinearExprT) -> cp_model.IntVar:
    """A literal that implies a <= b."""
    lit = m.new_bool_var("le")
    m.add(a <= b).only_enforce_if(lit)
    return lit


# ---------------------------------------------------------------------------------------
# solving


@dataclass(frozen=True)
class Solution:
    """What CP-SAT found: the best schedule (incumbent), a lower bound, and the proof status."""

    status: str
    """"optimal" (proven), "feasible" (time limit: incumbent and bound differ) or "unknown"."""
    avg_jct: float
    """Average JCT of the incumbent (s); nan without one."""
    avg_bound: float
    """Lower bound on the average JCT of every schedule (s); equals avg_jct when optimal."""
    completions: tuple[float, ...]
    """Per job: the incumbent's completion time (s)."""
    starts: dict[tuple[int, int], tuple[float, ...]] = field(repr=False)
    """Per (job, stage): the incumbent's task starts (s), ascending; one start for a gang."""
    seconds: float
    """Wall time of the solve."""

    @property
    def proven(self) -> bool:
        return self.status == "optimal"

    def summary(self) -> dict[str, object]:
        """The JSON-able figures (no schedule)."""
        return {
            "status": self.status,
            "avg_jct": self.avg_jct,
            "avg_bound": self.avg_bound,
            "seconds": round(self.seconds, 2),
        }


Starts = Mapping[tuple[int, int], Sequence[float]]
"""Task starts (s) per (job, stage): a schedule, as a hint or a solution gives it."""


def simulated_starts(result: SimResult) -> Starts | None:
    """The task starts of a run (`simulate(..., record_tasks=True)`); None if it is unfinished."""
    if result.tasks is None:
        raise IdlegateError("a hint needs the task log: simulate(..., record_tasks=True)")
    if result.unfinished:
        return None
    starts: dict[tuple[int, int], list[float]] = {}
    for t in result.tasks:
        starts.setdefault((t.job, t.stage), []).append(t.start)
    return starts


def add_hint(model: Model, instance: Instance, starts: Starts) -> None:
    """Hint CP-SAT with a schedule's starts, floored onto the grid (feasible there)."""
    finish: dict[int, int] = {}
    for (j, s), sv in model.stages.items():
        # a gang's tasks all start at once: its one start is the first of them
        grid = sorted(math.floor(x * instance.scale + 1e-6) for x in starts[j, s])
        for var, value in zip(sv.starts, grid, strict=False):
            model.model.add_hint(var, value)
        end = grid[len(sv.starts) - 1] + sv.length
        model.model.add_hint(sv.finish, end)
        finish[j] = max(finish.get(j, end), end)
    for j, c in enumerate(model.completions):
        model.model.add_hint(c, finish[j])


def _solver(built: Model, time_limit: float, workers: int) -> cp_model.CpSolver:
    """CP-SAT set up to *prove*: a depth-first "set times" search plus the default LP search.

    The fixed search takes the task with the earliest possible start and starts it there
    or postpones it; with the semi-active dominance this is the classic complete
    scheduling search, and it is what closes the instances (the LP bound of Σ C_j alone
    barely moves above the trivial bound). A second worker runs CP-SAT's default search
    with the LP for incumbents and bounds when the first cannot finish in time.
    """
    starts = [x for sv in built.stages.values() for x in sv.starts]
    built.model.add_decision_strategy(starts, cp_model.CHOOSE_LOWEST_MIN, cp_model.SELECT_MIN_VALUE)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = workers
    if workers == 1:
        solver.parameters.search_branching = cp_model.FIXED_SEARCH
    else:
        solver.parameters.subsolvers.extend(["fixed", "default_lp"])
    return solver


def solve(
    instance: Instance,
    *,
    time_limit: float = 30.0,
    workers: int = 2,
    hint: Starts | None = None,
    non_delay: bool = False,
) -> Solution:
    """Minimise the average JCT of `instance` with CP-SAT within `time_limit` seconds."""
    built = build_model(instance, non_delay=non_delay)
    if hint:
        add_hint(built, instance, hint)
    solver = _solver(built, time_limit, workers)
    started = time.perf_counter()
    code = solver.solve(built.model)
    seconds = time.perf_counter() - started
    n, scale = instance.num_jobs, instance.scale
    offset = sum(instance.arrivals)
    bound = (solver.best_objective_bound / scale - offset) / n
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        status = "infeasible" if code == cp_model.INFEASIBLE else "unknown"
        return Solution(status, math.nan, bound, (), {}, seconds)
    completions = tuple(solver.value(c) / scale for c in built.completions)
    starts = {
        key: tuple(solver.value(x) / scale for x in sv.starts) for key, sv in built.stages.items()
    }
    avg = (sum(completions) - offset) / n
    status = "optimal" if code == cp_model.OPTIMAL else "feasible"
    return Solution(
        status, avg, avg if status == "optimal" else bound, completions, starts, seconds
    )


# ---------------------------------------------------------------------------------------
# the schedulers on the same instance


def run_scheduler(workload: Workload, spec: str, seed: int) -> SimResult:
    """`spec` on `workload` as the optimum sees it: tasks take their estimate, no moving delay."""
    return simulate(
        workload, make_scheduler(spec), seed=seed, fidelity=Fidelity.none(), record_tasks=True
    )


def average_jct(result: SimResult) -> float:
    """Average JCT of a run (nan if a job was left unfinished)."""
    metrics = run_metrics(result)
    return math.nan if metrics.unfinished else metrics.avg_jct


# ---------------------------------------------------------------------------------------
# instance families


@dataclass(frozen=True)
class Family:
    """A `--workloads` entry: a workload name and optional load (`synthetic@0.8`) or file."""

    text: str
    name: str
    load: float | None = None
    path: str | None = None

    @classmethod
    def parse(cls, text: str) -> Family:
        name, _, rest = text.strip().partition("@")
        if name.startswith("file:"):
            return cls(text, "file", path=name.removeprefix("file:"))
        if name not in WORKLOADS:
            raise argparse.ArgumentTypeError(
                f"unknown workload {name!r} in {text!r}; use synthetic@LOAD, bursty[@LOAD], "
                "tpch-like[@LOAD] or file:PATH"
            )
        try:
            load = float(rest) if rest else None
        except ValueError:
            raise argparse.ArgumentTypeError(f"the load in {text!r} is not a number") from None
        return cls(text, name, load=load)

    @property
    def dag(self) -> bool:
        """Jobs are DAGs: fewer of them (`--dag-jobs`)."""
        return self.name in ("tpch-like", "file")

    def workload(self, seed: int, executors: int, jobs: int) -> Workload:
        """The family's workload for one (seed, K, n); small DAGs for tpch-like."""
        opts: dict[str, object] = {"num_executors": executors, "load": self.load}
        if self.name == "file":
            return build_workload("file", seed, path=self.path, num_jobs=jobs, **opts)
        opts["num_jobs"] = jobs
        if self.name == "tpch-like":
            opts |= DAG_SHAPE | {"load": self.load or 1.0}
        return build_workload(self.name, seed, **opts)


# ---------------------------------------------------------------------------------------
# the benchmark


@dataclass
class Row:
    """One instance: the optimum, the non-delay optimum and every scheduler's average JCT."""

    family: str
    executors: int
    jobs: int
    seed: int
    optimum: Solution
    no_idle: Solution | None
    schedulers: dict[str, float]

    @property
    def label(self) -> str:
        return f"{self.family} K={self.executors} n={self.jobs} s={self.seed}"

    def gap(self, avg: float) -> float:
        """Relative gap of `avg` to the optimum's lower bound (= the optimum when proven)."""
        return avg / self.optimum.avg_bound - 1

    def to_json(self) -> dict[str, object]:
        out = {k: v for k, v in asdict(self).items() if k not in ("optimum", "no_idle")}
        out["optimum"] = self.optimum.summary()
        out["no_idle"] = None if self.no_idle is None else self.no_idle.summary()
        out["gap_to_bound"] = {k: self.gap(v) for k, v in self.schedulers.items()}
        return out


def run_instance(
    family: Family,
    seed: int,
    executors: int,
    jobs: int,
    specs: Sequence[str],
    args: argparse.Namespace,
) -> Row:
    """Simulate every scheduler, solve the non-delay optimum, then the optimum, with hints.

    The best scheduler's schedule hints the optimum, or the non-delay optimum when that
    is better (it is feasible for the optimum too); fifo's hints the non-delay solve
    (fifo never waits on one-stage jobs).
    """
    workload = family.workload(seed, executors, jobs)
    runs = {spec: run_scheduler(workload, spec, seed) for spec in specs}
    jcts = {spec: average_jct(r) for spec, r in runs.items()}
    hints = [(jcts[s], simulated_starts(r)) for s, r in runs.items() if not math.isnan(jcts[s])]
    instance = instance_from_workload(workload)
    limits = {"time_limit": args.time_limit, "workers": args.workers}
    no_idle = None
    if args.no_idle and instance.one_stage:
        fifo = runs.get("fifo")
        no_idle = solve(instance, hint=fifo and simulated_starts(fifo), non_delay=True, **limits)
        if no_idle.starts:
            hints.append((no_idle.avg_jct, no_idle.starts))
    best = min(hints, key=lambda h: h[0])[1] if hints else None
    optimum = solve(instance, hint=best, **limits)
    row = Row(family.text, executors, jobs, seed, optimum, no_idle, jcts)
    _progress(row)
    return row


def _progress(row: Row) -> None:
    o = row.optimum
    extra = ""
    if row.no_idle is not None:
        extra = f"; no idling {row.no_idle.avg_jct:.2f} ({row.no_idle.status}, {row.no_idle.seconds:.1f} s)"
    print(
        f"solved {row.label}: {o.status} {o.avg_jct:.2f} bound {o.avg_bound:.2f} "
        f"({o.seconds:.1f} s){extra}",
        file=sys.stderr,
        flush=True,
    )


def print_table(rows: Sequence[Row], specs: Sequence[str]) -> None:
    """One line per instance: optimum, bound, non-delay optimum, each scheduler and its gap."""
    width = max(len(r.label) for r in rows)
    head = f"{'instance':<{width}} {'optimum':>8} {'bound':>8} {'no-idle':>8}"
    print(head + "".join(f" {s[:15]:>15}" for s in specs))
    for r in rows:
        star = "" if r.optimum.proven else "*"
        no_idle = (
            "-"
            if r.no_idle is None
            else f"{r.no_idle.avg_jct:.2f}" + ("" if r.no_idle.proven else "*")
        )
        line = (
            f"{r.label:<{width}} {r.optimum.avg_jct:>8.2f} {r.optimum.avg_bound:>7.2f}{star or ' '}"
        )
        line += f" {no_idle:>8}"
        for s in specs:
            line += f" {r.schedulers[s]:>7.2f} {r.gap(r.schedulers[s]):>+6.1%}"
        print(line)


def print_summary(rows: Sequence[Row], specs: Sequence[str]) -> None:
    """Per family, over the instances proven optimal: each scheduler's mean gap to the
    optimum, the best scheduler's, and how much idling buys (1 − optimum / non-delay
    optimum: the cut in average JCT that no scheduler can get without idling)."""
    print("\nmean over the instances proven optimal (gap of the avg JCT to the optimum)")
    families = list(dict.fromkeys(r.family for r in rows))
    width = max(map(len, families))
    cols = ["best", *specs]
    print(
        f"{'family':<{width}} {'proven':>7} {'idling buys':>15}"
        + "".join(f" {s[:12]:>12}" for s in cols)
    )
    for fam in families:
        rs = [r for r in rows if r.family == fam and r.optimum.proven]
        total = sum(r.family == fam for r in rows)
        buys = [
            1 - r.optimum.avg_jct / r.no_idle.avg_jct for r in rs if r.no_idle and r.no_idle.proven
        ]
        buys_text = f"{statistics.fmean(buys):.1%} (≤{max(buys):.0%})" if buys else "-"
        line = f"{fam:<{width}} {len(rs):>3}/{total:<3} {buys_text:>15}"
        if rs:
            gaps = {s: [r.gap(r.schedulers[s]) for r in rs] for s in specs}
            gaps["best"] = [min(r.gap(v) for v in r.schedulers.values()) for r in rs]
            line += "".join(f" {statistics.fmean(gaps[s]):>+12.1%}" for s in cols)
        print(line)


def _csv(kind: Callable[[str], object]) -> Callable[[str], list]:
    """An argparse type: comma-separated values, each parsed by `kind`."""

    def parse(text: str) -> list:
        try:
            return [kind(x) for x in text.split(",") if x.strip()]
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None

    return parse


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--executors", type=_csv(int), default=[2, 4], help="e.g. 2,3,4")
    parser.add_argument(
        "--jobs", type=_csv(int), default=[15, 30], help="one-stage jobs, e.g. 15,30"
    )
    parser.add_argument("--dag-jobs", type=_csv(int), default=[5], help="jobs of DAG workloads")
    add_seeds(parser, 2, help="seeds 0..N-1 per instance shape (default %(default)s)")
    parser.add_argument("--time-limit", type=float, default=30.0, help="seconds per CP-SAT solve")
    parser.add_argument("--workers", type=int, default=2, help="CP-SAT search workers")
    parser.add_argument(
        "--workloads",
        type=_csv(Family.parse),
        default=[
            Family.parse(x) for x in ("synthetic@0.6", "synthetic@0.8", "bursty", "tpch-like")
        ],
        help="synthetic@LOAD, bursty[@LOAD], tpch-like[@LOAD], file:PATH (comma-separated)",
    )
    parser.add_argument(
        "--schedulers", type=_csv(str), default=[], help="specs added to the base set"
    )
    parser.add_argument(
        "--no-idle",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also solve the non-delay optimum (one-stage workloads)",
    )
    parser.add_argument("--json", metavar="PATH", help="write every instance's figures here")
    return run_script(parser, report, None if argv is None else list(argv))


def report(args: argparse.Namespace) -> int:
    """Every instance of `args` solved, with the schedulers beside: the tables."""
    specs = list(dict.fromkeys([*BASE_SCHEDULERS, *args.schedulers]))
    rows: list[Row] = []
    for fam in args.workloads:
        for k in args.executors:
            for n in args.dag_jobs if fam.dag else args.jobs:
                for seed in range(args.seeds):
                    rows.append(run_instance(fam, seed, k, n, specs, args))
    if not rows:
        print("no instance was solved", file=sys.stderr)
        return 1
    print(
        f"CP-SAT {args.time_limit:g} s x {args.workers} workers per solve; * = not proven (bound shown)"
    )
    print_table(rows, specs)
    print_summary(rows, specs)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([r.to_json() for r in rows], fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
