"""How much room fair leaves on the TPC-H traces: fair against simple variants of itself.

Decima's TPC-H setting (50 executors, 1 + 200 jobs, moving delay and measured task waves
on), seeds 0-4 by default, the same arrival sequence per seed for every variant:

* ``fair`` — `FairScheduler`, each job capped at its share ceil(K / n);
* ``fair, no WAIT`` — fair that must launch whenever it would wait with an executor free
  (the job with work that is first in arrival order, its best stage, cap one above what
  it holds or its share): what a policy without a WAIT action is forced into;
* ``fair capped at C`` — shares min(ceil(K / n), C) for C = 30, 20, 10;
* ``fair, shares ×f`` — shares ceil(f · K / n) for f = 1.5, 0.75;
* ``fair, smallest first`` — jobs tried in order of remaining work (SRPT order) instead
  of "the executor's own job first, then arrival order", each at its share;
* ``fair, smallest uncapped`` — the same, and the job with the least remaining work may
  take every executor (an SRPT-like priority inside fair).

It prints the average JCT of each (mean over seeds and per seed) and its ratio to fair.
The figures of docs/research/results.md §2 ("How much room fair leaves") come from this script.

    python benchmarks/fair_variants.py [--tpch-dir DIR] [--seeds 5] [--interarrival 25]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from math import ceil

from idlegate.flags import add_seeds, description, run_script
from idlegate.policy.heuristics import (
    FairScheduler,
    best_stage,
    has_unlaunched_tasks,
    launch_decision,
)
from idlegate.sim.engine import simulate
from idlegate.sim.metrics import run_metrics
from idlegate.sim.protocol import WAIT, Action, ClusterView, Job, Scheduler
from idlegate.sim.workloads import build_workload


class ScaledFair(FairScheduler):
    """Fair with shares ceil(factor · K / n), at most `limit` executors per job."""

    def __init__(self, factor: float = 1.0, limit: int | None = None) -> None:
        super().__init__()
        self.factor = factor
        self.limit = limit

    def shares(self, num_executors: int, jobs: list[Job]) -> list[int]:
        share = ceil(self.factor * num_executors / len(jobs))
        return [min(share, self.limit or share)] * len(jobs)


class NoWaitFair(FairScheduler):
    """Fair, except that a WAIT with a free executor becomes a launch."""

    def decide(self, view: ClusterView) -> Action:
        action = super().decide(view)
        if action is not WAIT or view.free_executors == 0:
            return action
        active = [j for j in view.jobs if has_unlaunched_tasks(j)]
        share = self.shares(view.num_executors, active)[0] if active else 0
        for job in active:
            stage = best_stage(view.runnable(job), view.free_executors)
            if stage is not None:
                return launch_decision(stage, max(job.held + 1, share))
        return WAIT


class SmallestFirstFair(FairScheduler):
    """Fair with jobs tried smallest remaining work first; the smallest may hold `first_share`."""

    def __init__(self, first_share: float = 0.0) -> None:
        super().__init__()
        self.first_share = first_share

    def decide(self, view: ClusterView) -> Action:
        free = view.free_executors
        active = sorted(
            (j for j in view.jobs if has_unlaunched_tasks(j)), key=lambda j: j.remaining_work
        )
        if free <= 0 or not active:
            return WAIT
        share = self.shares(view.num_executors, active)[0]
        for rank, job in enumerate(active):
            limit = max(share, ceil(self.first_share * view.num_executors)) if rank == 0 else share
            stage = best_stage(view.runnable(job), free) if job.held < limit else None
            if stage is not None:
                return launch_decision(stage, limit)
        return WAIT


VARIANTS: dict[str, Callable[[], Scheduler]] = {
    "fair": FairScheduler,
    "fair, no WAIT": NoWaitFair,
    "fair capped at 30": lambda: ScaledFair(limit=30),
    "fair capped at 20": lambda: ScaledFair(limit=20),
    "fair capped at 10": lambda: ScaledFair(limit=10),
    "fair, shares x1.5": lambda: ScaledFair(factor=1.5),
    "fair, shares x0.75": lambda: ScaledFair(factor=0.75),
    "fair, smallest first": SmallestFirstFair,
    "fair, smallest uncapped": lambda: SmallestFirstFair(first_share=1.0),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--tpch-dir", default=None)
    add_seeds(parser, 5)
    parser.add_argument("--interarrival", type=float, default=25.0)
    return run_script(parser, report, argv)


def report(args: argparse.Namespace) -> int:
    """Every variant on `args`' TPC-H streams, against fair."""
    seeds = range(args.seeds)
    # (TpchConfig's defaults are Decima's setting: 50 executors, 1 + 200 jobs)
    workloads = [
        build_workload("tpch", seed=s, tpch_dir=args.tpch_dir, interarrival=args.interarrival)
        for s in seeds
    ]
    print(
        f"TPC-H, 50 executors, 1 + 200 jobs, mean interarrival {args.interarrival:g} s, "
        f"seeds 0-{args.seeds - 1}"
    )
    print(f"{'variant':<24} {'avg JCT s':>9} {'vs fair':>8}  per seed")
    fair = 0.0
    for name, make in VARIANTS.items():
        per_seed = [
            run_metrics(simulate(w, make(), seed=s)).avg_jct
            for s, w in zip(seeds, workloads, strict=True)
        ]
        mean = statistics.fmean(per_seed)
        fair = fair or mean
        cells = " ".join(f"{x:.1f}" for x in per_seed)
        print(f"{name:<24} {mean:>9.2f} {mean / fair:>7.2f}x  {cells}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
