"""How idlegate's simulator differs from Decima's, each difference with a number measured here.

Only idlegate runs on this machine; Decima's code does not. So every number below is
idlegate's side of a difference, or what switching one of idlegate's own choices costs;
docs/research/simulator-vs-decima.md puts them next to what Decima's simulator does.

    python benchmarks/decima_differences.py [--tpch-dir DIR] [--seeds 3]

1. Fresh (warm-up) draws. idlegate draws a task's duration from the trace's
   fresh_durations only for an executor new to the job (it also pays the moving delay,
   so fresh draws = moving-delay seconds / moving delay). Jobs run alone (interarrival
   100,000 s, fair, 50 executors): tasks per job, fresh draws per job, and the mean
   fresh duration over the mean first/rest-wave duration of the same stages.
2. Executors free inside a job. With each job alone, the executor-time left free while
   it runs (1 − busy / (K × JCT)) is the time Decima's fair keeps committed to the job or
   idle inside it rather than returning it to the pool.
3. Fair's accounting: idlegate's fair skips a job at its share; `keep_source=True` gives a
   job back the executors it just freed even above its share, as Decima's code does.
4. Moving delay: the cost of the 2 s delay at all (moving_delay 0 against 2).
5. Stage order inside a job: idlegate's heuristics run the stage with the largest bottom
   level (critical path) first; the lowest stage index first is measured against it.

3-5 run Decima's streaming setting (50 executors, 1 + 200 jobs, interarrival 25 s and
15 s) and report the paired average-JCT change against plain fair.
"""

from __future__ import annotations

import argparse
import statistics

from idlegate.flags import add_seeds, description, run_script
from idlegate.policy.heuristics import FairScheduler, launch_decision
from idlegate.sim.engine import simulate
from idlegate.sim.metrics import paired_relative_change, run_metrics
from idlegate.sim.protocol import Action, ClusterView, Decision
from idlegate.sim.tpch import open_tpch_library, resolve_tpch_dir
from idlegate.sim.workloads import build_workload

K = 50
MOVING_DELAY = 2.0


class FairLowestIndex(FairScheduler):
    """Fair, but inside the chosen job the launchable stage with the lowest index runs."""

    name = "fair-lowest-index"

    def decide(self, view: ClusterView) -> Action:
        action = super().decide(view)
        if not isinstance(action, Decision):
            return action
        free = view.free_executors
        stages = [s for s in action.stage.job.runnable if not (s.gang and s.tasks > free)]
        return launch_decision(min(stages, key=lambda s: s.index), action.parallelism_cap)


def fresh_ratio(tpch_dir: str) -> tuple[float, int]:
    """Mean over stages of mean(fresh) / mean(first and rest waves); stages counted."""
    lib = open_tpch_library(tpch_dir)
    ratios = []
    for size in lib.sizes():
        for q in lib.queries(size):
            for st in lib.load(size, q).durations.stages:
                fresh = [d for row in st.fresh for d in row]
                waves = [d for rows in (st.first_wave, st.rest_wave) for row in rows for d in row]
                if fresh and waves:
                    ratios.append(statistics.fmean(fresh) / statistics.fmean(waves))
    return statistics.fmean(ratios), len(ratios)


def alone(tpch_dir: str, jobs: int) -> None:
    wl = build_workload(
        "tpch",
        0,
        tpch_dir=tpch_dir,
        num_executors=K,
        init=1,
        num_stream=jobs - 1,
        interarrival=100_000.0,
    )
    result = simulate(wl, FairScheduler(), seed=0)
    tasks = sum(sum(a.dag.tasks) for a in wl.jobs) / len(wl.jobs)
    fresh = result.overhead_seconds / MOVING_DELAY / len(wl.jobs)
    jct = sum(r.jct for r in result.records)
    free = 1 - result.busy_seconds / (K * jct)
    ratio, n = fresh_ratio(tpch_dir)
    print(
        f"1. jobs alone (fair, {K} executors, {len(wl.jobs)} jobs, seed 0): "
        f"{tasks:.0f} tasks per job, {fresh:.1f} fresh draws per job ({fresh / tasks:.1%})"
    )
    print(f"   fresh duration / first-and-rest-wave duration, mean over {n} stages: {ratio:.2f}")
    print(f"   average JCT {jct / len(wl.jobs):.1f} s")
    print(f"2. executor-time free while a job runs alone: {free:.1%}")


def streamed(tpch_dir: str, seeds: int) -> None:
    variants = {
        "3. fair keep_source=True": (lambda: FairScheduler(keep_source=True), {}),
        "4. moving delay 0 s": (FairScheduler, {"moving_delay": 0.0}),
        "5. lowest stage index first": (FairLowestIndex, {}),
    }
    for gap in (25.0, 15.0):
        base, runs = [], {k: [] for k in variants}
        for seed in range(seeds):
            opts = {
                "tpch_dir": tpch_dir,
                "num_executors": K,
                "init": 1,
                "num_stream": 200,
                "interarrival": gap,
            }
            wl = build_workload("tpch", seed, **opts)
            base.append(run_metrics(simulate(wl, FairScheduler(), seed=seed)).avg_jct)
            for name, (make, extra) in variants.items():
                w = build_workload("tpch", seed, **opts, **extra) if extra else wl
                runs[name].append(run_metrics(simulate(w, make(), seed=seed)).avg_jct)
        print(f"interarrival {gap:.0f} s, seeds 0-{seeds - 1}: fair {statistics.fmean(base):.1f} s")
        for name, values in runs.items():
            est = paired_relative_change(values, base)
            print(
                f"   {name}: {statistics.fmean(values):.1f} s, {est.mean:+.1%} "
                f"± {est.half_width:.1%} vs fair"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--tpch-dir", default=None)
    add_seeds(parser, 3)
    parser.add_argument("--alone-jobs", type=int, default=44)
    return run_script(parser, report, argv)


def report(args: argparse.Namespace) -> int:
    """The jobs alone, then the streams, on `args`' TPC-H traces."""
    tpch_dir = str(resolve_tpch_dir(args.tpch_dir))
    alone(tpch_dir, args.alone_jobs)
    streamed(tpch_dir, args.seeds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
