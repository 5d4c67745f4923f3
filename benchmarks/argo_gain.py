"""What idlegate gains over Argo's own order on Argo-shaped workloads: mean JCT per scheduler.

    nice -n 10 python benchmarks/argo_gain.py --seeds 10 --jobs-count 500 -j 2

Every scheduler runs the same arrival sequences of the `argo-shapes` workload (Argo's
example shapes, minute-scale pods; seeds from --first-seed, one sequence per seed and
load): `argo` is what Argo users have today (FIFO by node readiness), `default` what the
operator runs. Per load, the table gives each scheduler's mean JCT over the seeds, its
paired change against `argo` (mean over seeds of JCT / argo's JCT, minus 1, with a 95 %
interval) and the ratio of the means, and the lower bound no scheduler can beat (each
workflow's critical path, or its work over the pool, from the estimates); the last line
says whether `default` is at least 20 % below `argo` (the target of issue 31).
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from idlegate.policy import make_scheduler
from idlegate.sim.engine import simulate
from idlegate.sim.metrics import change_text, paired_relative_change
from idlegate.sim.workloads import build_workload

SCHEDULERS = ("argo", "fifo", "fair", "sjf-cp", "srpt", "default")
BASELINE = "argo"
TARGET = -0.20
"""`default`'s mean JCT at least 20 % below the baseline's."""


@dataclass(frozen=True)
class Run:
    scheduler: str
    load: float
    seed: int
    mean_jct: float
    unfinished: int
    lower_bound: float
    """Mean over the workflows of the least JCT each could have (its critical path, or its
    work over the pool): what no scheduler can remove."""


def run_one(scheduler: str, load: float, seed: int, args: dict) -> Run:
    """One simulation: `scheduler` on the `argo-shapes` sequence of (`load`, `seed`)."""
    workload = build_workload(
        "argo-shapes",
        seed,
        num_jobs=args["jobs_count"],
        num_executors=args["executors"],
        load=load,
    )
    result = simulate(workload, make_scheduler(scheduler), seed)
    jct = float(np.mean([r.jct for r in result.records]))
    bound = float(np.mean([j.dag.lower_bound_jct(workload.num_executors) for j in workload.jobs]))
    return Run(scheduler, load, seed, jct, result.unfinished, bound)


def run_all(args: argparse.Namespace) -> list[Run]:
    """Every (scheduler, load, seed), on at most --jobs worker processes."""
    options = {"jobs_count": args.jobs_count, "executors": args.executors}
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    cases = [(s, load, seed) for load in args.loads for seed in seeds for s in args.schedulers]
    if args.jobs <= 1:
        return [run_one(s, load, seed, options) for s, load, seed in cases]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_one, s, load, seed, options) for s, load, seed in cases]
        return [f.result() for f in futures]


def table(runs: list[Run], load: float, schedulers: list[str]) -> tuple[list[str], float]:
    """The markdown rows for one load, and `default`'s paired change against the baseline."""
    by = {(r.scheduler, r.seed): r.mean_jct for r in runs if r.load == load}
    seeds = sorted({seed for (_, seed) in by})
    base = [by[(BASELINE, s)] for s in seeds]
    rows = [
        f"| scheduler | mean JCT (s) | vs {BASELINE}, paired | mean / {BASELINE}'s mean |",
        "|---|---:|---:|---:|",
    ]
    found = float("nan")
    bound = float(
        np.mean([r.lower_bound for r in runs if r.load == load and r.scheduler == BASELINE])
    )
    for name in schedulers:
        values = [by[(name, s)] for s in seeds]
        est = paired_relative_change(values, base)
        if name == "default":
            found = est.mean
        rows.append(
            f"| {name} | {np.mean(values):.1f} | {change_text(est.mean, est.half_width)} | "
            f"{np.mean(values) / np.mean(base):.3f} |"
        )
    rows.append(
        f"| (lower bound) | {bound:.1f} | {bound / np.mean(base) - 1:+.1%} | "
        f"{bound / np.mean(base):.3f} |"
    )
    return rows, found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedulers", nargs="+", default=list(SCHEDULERS))
    parser.add_argument("--loads", nargs="+", type=float, default=[0.7])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--jobs-count", type=int, default=500)
    parser.add_argument("-k", "--executors", type=int, default=20)
    parser.add_argument("-j", "--jobs", type=int, default=2, help="worker processes (at most 2)")
    args = parser.parse_args(argv)
    if BASELINE not in args.schedulers:
        args.schedulers.insert(0, BASELINE)
    args.jobs = max(1, min(args.jobs, 2))
    runs = run_all(args)
    unfinished = sum(r.unfinished for r in runs)
    print(
        f"argo-shapes, {args.jobs_count} workflows per sequence, {args.executors} executors, "
        f"seeds {args.first_seed}..{args.first_seed + args.seeds - 1}"
        + (f"; {unfinished} workflows unfinished" if unfinished else "")
    )
    for load in args.loads:
        rows, found = table(runs, load, args.schedulers)
        print(f"\nload {load:g}\n")
        print("\n".join(rows))
        if "default" in args.schedulers:
            met = "met" if found <= TARGET else "not met"
            print(f"\ndefault vs {BASELINE}: {found:+.1%} (target {TARGET:+.0%}: {met})")


if __name__ == "__main__":
    main()
