"""What idlegate gains over Argo's own order on Argo-shaped workloads: mean JCT per scheduler.

    nice -n 10 python benchmarks/argo_gain.py --seeds 10 --jobs-count 500 -j 2

Every scheduler runs the same arrival sequences of the `argo-shapes` workload (Argo's
example shapes, minute-scale pods; seeds from --first-seed, one sequence per seed and
load): `argo` is what Argo users have today (FIFO by node readiness), `learned:default`
the shipped ONNX policy (`--schedulers ... default` adds the portfolio the operator runs).
Per load, the table gives each scheduler's mean JCT over the seeds, its paired change
against `argo` (mean over seeds of JCT / argo's JCT, minus 1, with a 95 % interval) and
the ratio of the means, and the lower bound no scheduler can beat (each workflow's
critical path, or its work over the pool, from the estimates); the last line says
whether the shipped policy is at least 20 % below `argo` (the target of issue 31).

`measure` is the measurement itself, for any workload and baseline (`Gain`):
benchmarks/airflow_gain.py runs it on `airflow-shapes` against `airflow`.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from idlegate.flags import add_seeds, description, seed_range
from idlegate.policy import make_scheduler
from idlegate.sim.engine import simulate
from idlegate.sim.metrics import change_text, paired_relative_change
from idlegate.sim.workloads import build_workload


@dataclass(frozen=True)
class Gain:
    """What is measured: a workload, the baseline it is measured against, the scheduler
    held to the target, and the target (its paired change against the baseline)."""

    workload: str
    baseline: str
    schedulers: tuple[str, ...]
    target: float
    judged: tuple[str, ...] = ("default",)
    target_loads: tuple[float, ...] | None = None
    """The loads the target is set at (None: every load); at the others the change is
    printed without it."""

    def verdict(self, name: str, load: float, change: float) -> str:
        """The line saying how `name` (judged) compares with the baseline at `load`."""
        line = f"{name} vs {self.baseline}: {change:+.1%}"
        if self.target_loads is not None and load not in self.target_loads:
            return line
        met = "met" if change <= self.target else "not met"
        return f"{line} (target {self.target:+.0%}: {met})"


ARGO = Gain(
    "argo-shapes",
    "argo",
    ("argo", "fifo", "fair", "sjf-cp", "srpt", "learned:default"),
    -0.20,
    judged=("learned:default",),
)
"""The shipped policy's mean JCT at least 20 % below `argo`'s on `argo-shapes`."""


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
    """One simulation: `scheduler` on the workload's sequence of (`load`, `seed`)."""
    workload = build_workload(
        args["workload"],
        seed,
        num_jobs=args["jobs_count"],
        num_executors=args["executors"],
        load=load,
    )
    result = simulate(workload, make_scheduler(scheduler), seed)
    jct = float(np.mean([r.jct for r in result.records]))
    bound = float(np.mean([j.dag.lower_bound_jct(workload.num_executors) for j in workload.jobs]))
    return Run(scheduler, load, seed, jct, result.unfinished, bound)


def run_all(args: argparse.Namespace, gain: Gain) -> list[Run]:
    """Every (scheduler, load, seed), on at most --jobs worker processes."""
    options = {
        "jobs_count": args.jobs_count,
        "executors": args.executors,
        "workload": gain.workload,
    }
    seeds = seed_range(args)
    cases = [(s, load, seed) for load in args.loads for seed in seeds for s in args.schedulers]
    if args.jobs <= 1:
        return [run_one(s, load, seed, options) for s, load, seed in cases]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_one, s, load, seed, options) for s, load, seed in cases]
        return [f.result() for f in futures]


def table(
    runs: list[Run], load: float, schedulers: list[str], gain: Gain = ARGO
) -> tuple[list[str], dict[str, float]]:
    """The markdown rows for one load, and the judged schedulers' paired changes against
    the baseline."""
    baseline = gain.baseline
    by = {(r.scheduler, r.seed): r.mean_jct for r in runs if r.load == load}
    seeds = sorted({seed for (_, seed) in by})
    base = [by[(baseline, s)] for s in seeds]
    rows = [
        f"| scheduler | mean JCT (s) | vs {baseline}, paired | mean / {baseline}'s mean |",
        "|---|---:|---:|---:|",
    ]
    found: dict[str, float] = {}
    bound = float(
        np.mean([r.lower_bound for r in runs if r.load == load and r.scheduler == baseline])
    )
    for name in schedulers:
        values = [by[(name, s)] for s in seeds]
        est = paired_relative_change(values, base)
        if name in gain.judged:
            found[name] = est.mean
        rows.append(
            f"| {name} | {np.mean(values):.1f} | {change_text(est.mean, est.half_width)} | "
            f"{np.mean(values) / np.mean(base):.3f} |"
        )
    rows.append(
        f"| (lower bound) | {bound:.1f} | {bound / np.mean(base) - 1:+.1%} | "
        f"{bound / np.mean(base):.3f} |"
    )
    return rows, found


def measure(gain: Gain, argv: list[str] | None = None, doc: str = __doc__) -> None:
    """Run the measurement of `gain` with the command line `argv` and print the tables."""
    parser = argparse.ArgumentParser(description=description(doc))
    parser.add_argument("--schedulers", nargs="+", default=list(gain.schedulers))
    parser.add_argument("--loads", nargs="+", type=float, default=[0.7])
    add_seeds(parser, 10, 1000)
    parser.add_argument("--jobs-count", type=int, default=500)
    parser.add_argument("-k", "--executors", type=int, default=20)
    parser.add_argument("-j", "--jobs", type=int, default=2, help="worker processes (at most 2)")
    args = parser.parse_args(argv)
    if gain.baseline not in args.schedulers:
        args.schedulers.insert(0, gain.baseline)
    args.jobs = max(1, min(args.jobs, 2))
    runs = run_all(args, gain)
    unfinished = sum(r.unfinished for r in runs)
    print(
        f"{gain.workload}, {args.jobs_count} workflows per sequence, {args.executors} executors, "
        f"seeds {args.first_seed}..{args.first_seed + args.seeds - 1}"
        + (f"; {unfinished} workflows unfinished" if unfinished else "")
    )
    for load in args.loads:
        rows, found = table(runs, load, args.schedulers, gain)
        print(f"\nload {load:g}\n")
        print("\n".join(rows))
        for name, change in found.items():
            print(f"\n{gain.verdict(name, load, change)}")


def main(argv: list[str] | None = None) -> None:
    measure(ARGO, argv)


if __name__ == "__main__":
    main()
