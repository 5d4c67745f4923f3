"""Simulator speed on Alibaba's trace: what job sizes (up to 49,126 tasks) cost.

Three measurements, CPU seconds of this process (`time.process_time`, so a busy machine
does not inflate them):

1. reading the trace's folder (every job parsed into its DAG, once per process);
2. one job alone on 100 executors, for the jobs at the median, 90th, 99th percentile and
   maximum of tasks per job, under srpt: CPU per run and tasks simulated per CPU second;
3. the `alibaba` workload's default streams (100 executors, 200 jobs, load 0.85), seeds
   0 to SEEDS-1, under fifo, srpt, fair and learned:default: CPU per episode, with the
   tasks and decisions of each.

    python benchmarks/alibaba_speed.py [--alibaba-dir DIR] [--seeds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from idlegate.flags import add_seeds, description, run_script
from idlegate.policy import make_scheduler
from idlegate.sim.alibaba import AlibabaJob, AlibabaTrace, resolve_alibaba_dir
from idlegate.sim.engine import Fidelity, JobArrival, Workload, simulate
from idlegate.sim.workloads import DURATION_SPREAD, build_workload
from idlegate.sim.workloads.k8s_batch import K8sPodDurations

EXECUTORS = 100
STREAM_SCHEDULERS = ("fifo", "srpt", "fair", "learned:default")


def alone(job: AlibabaJob) -> Workload:
    """`job` by itself at t=0, its tasks spread as the workload spreads them."""
    model = K8sPodDurations(0.0, job.dag.durations, DURATION_SPREAD)
    arrival = JobArrival(0.0, job.name, job.dag, model)
    return Workload("alone", (arrival,), EXECUTORS, Fidelity(0.0, True))


def cpu(run) -> tuple[float, object]:
    start = time.process_time()
    out = run()
    return time.process_time() - start, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--alibaba-dir", default=None)
    add_seeds(parser, 5)
    return run_script(parser, report, argv)


def report(args: argparse.Namespace) -> int:
    """The trace's reading, then the streams' runs, timed."""
    directory = resolve_alibaba_dir(args.alibaba_dir)
    seconds, trace = cpu(lambda: AlibabaTrace(directory))
    print(f"read {len(trace.jobs)} jobs of {directory} in {seconds:.2f} s CPU")

    jobs = sorted(trace.jobs, key=lambda j: j.total_tasks)
    print(f"\none job alone on {EXECUTORS} executors, srpt")
    print(f"{'job':>14} {'stages':>6} {'tasks':>7} {'CPU s':>7} {'tasks/CPU s':>12}")
    for q in (0.5, 0.9, 0.99, 1.0):
        job = jobs[min(int(q * len(jobs)), len(jobs) - 1)]
        seconds, _ = cpu(lambda j=job: simulate(alone(j), make_scheduler("srpt"), 0))
        rate = job.total_tasks / seconds if seconds > 0 else float("inf")
        print(
            f"{job.name:>14} {job.dag.num_stages:>6} {job.total_tasks:>7} {seconds:>7.3f} "
            f"{rate:>12,.0f}"
        )

    print(f"\nstreams: {EXECUTORS} executors, 200 jobs, load 0.85, seeds 0-{args.seeds - 1}")
    print(
        f"{'scheduler':>16} {'CPU s (median)':>15} {'max':>6} {'tasks (median)':>15} "
        f"{'largest job':>12} {'decisions':>10}"
    )
    streams = [build_workload("alibaba", s, alibaba_dir=str(directory)) for s in range(args.seeds)]
    for name in STREAM_SCHEDULERS:
        times, decisions = [], []
        for seed, w in enumerate(streams):
            seconds, result = cpu(lambda w=w, s=seed, n=name: simulate(w, make_scheduler(n), s))
            times.append(seconds)
            decisions.append(result.decisions)
        tasks = [sum(sum(j.dag.tasks) for j in w.jobs) for w in streams]
        largest = max(max(sum(j.dag.tasks) for j in w.jobs) for w in streams)
        print(
            f"{name:>16} {statistics.median(times):>15.2f} {max(times):>6.2f} "
            f"{int(np.median(tasks)):>15,} {largest:>12,} {int(np.median(decisions)):>10,}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
