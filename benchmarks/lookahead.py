"""The lookahead planner against its base and fair: quality (paired per seed) and planning time.

    python benchmarks/lookahead.py --workload tpch-like -k 10 --load 0.85 --jobs-count 61 \
        --base srpt --seeds 5 [-o mode=decision -o samples=4] [--also "race=0.05&samples=1"]

`-o KEY=VALUE` are the planner's options (`LookaheadConfig`); each `--also QUERY` adds a
planner with those options instead (``KEY=VALUE&KEY=VALUE``; "" for the defaults),
run on the same seeds, so option changes are compared side by side in one run: its row
says how its mean JCT differs from the first planner's, paired per seed. With `--oracle`
every planner is told the true remaining arrivals (one future, the real one) instead of
sampling them (``futures=oracle``, `policy.futures`): the ceiling of what its estimates
could give.

With `--queued N` it instead times plans with N workflows of the workload queued at
once on the cluster (after BASE's first round): the planners' request (on the owner's
thread) and plan, p50 and max over `--seeds` repetitions, side by side.

For each seed every scheduler runs on the same arrival sequence. The table gives mean,
p95 and maximum JCT (each averaged over seeds), the paired change of the mean against
the base and against fair, and the p95 against fair's; then, per planner, how many
decisions it simulated futures for (`planned`: switch mode's plans), how often it
overruled the base, and the wall time of a plan (p50 / p99), measured in one process,
with its thread's CPU time beside it (the same work without other processes' share).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.flags import add_seeds, description, seed_range
from idlegate.policy import SchedulerSpec, make_scheduler
from idlegate.policy.lookahead import LookaheadScheduler
from idlegate.sim.engine import simulate
from idlegate.sim.metrics import change_text, paired_relative_change


@dataclass
class Row:
    """One scheduler's per-seed results."""

    label: str
    spec: SchedulerSpec
    mean: list[float] = field(default_factory=list)
    p95: list[float] = field(default_factory=list)
    worst: list[float] = field(default_factory=list)
    plan_ms: list[float] = field(default_factory=list)
    plan_cpu_ms: list[float] = field(default_factory=list)
    planned: int = 0
    decisions: int = 0
    changed: int = 0

    def add(self, jcts: list[float]) -> None:
        self.mean.append(float(np.mean(jcts)))
        self.p95.append(float(np.percentile(jcts, 95)))
        self.worst.append(float(np.max(jcts)))


def rows_of(args: argparse.Namespace) -> list[Row]:
    base = SchedulerSpec.parse(args.base)
    rows = [Row(args.base, base), Row("fair", SchedulerSpec.parse("fair"))]
    queries = ["&".join(args.option), *args.also]
    if args.oracle:  # the planner's own oracle future source (policy.futures)
        queries = ["&".join(q for q in (query, "futures=oracle") if q) for query in queries]
    for i, query in enumerate(queries):
        spec = SchedulerSpec.parse(f"lookahead{'?' + query if query else ''}:{args.base}")
        rows.append(Row(f"lookahead {i + 1}" if len(queries) > 1 else "lookahead", spec))
    return rows


def run_seed(args: argparse.Namespace, rows: list[Row], workload_options: dict, seed: int) -> None:
    from idlegate.sim.workloads import build_workload

    w = build_workload(args.workload, seed, **workload_options)
    for row in rows:
        scheduler = make_scheduler(row.spec)
        result = simulate(w, scheduler, seed)
        row.add([r.jct for r in result.records])
        if isinstance(scheduler, LookaheadScheduler):
            s = scheduler.stats
            row.planned += s.planned
            row.decisions += s.decisions
            row.changed += s.changed
            row.plan_ms += [x * 1000.0 for x in s.plan_seconds]
            row.plan_cpu_ms += [x * 1000.0 for x in s.plan_cpu_seconds]
    print(
        f"seed {seed}: " + ", ".join(f"{r.label} {r.mean[-1]:.2f} s" for r in rows),
        file=sys.stderr,
        flush=True,
    )


def change(values: list[float], baseline: list[float]) -> str:
    c = paired_relative_change(values, baseline)
    return change_text(c.mean, c.half_width)


def report(args: argparse.Namespace, rows: list[Row], workload_options: dict) -> None:
    base, fair = rows[0], rows[1]
    oracle = ", true future (oracle)" if args.oracle else ""
    print(f"workload {args.workload} {workload_options}, seeds {args.seeds}{oracle}")
    print(
        "| scheduler | mean JCT | p95 | max | mean vs base | mean vs fair | p95 vs fair |"
        " vs lookahead 1 |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    first = rows[2]
    for row in rows:
        versus_first = change(row.mean, first.mean) if row is not first and row.planned else ""
        print(
            f"| {row.spec.format()} | {np.mean(row.mean):.2f} | {np.mean(row.p95):.2f} | "
            f"{np.mean(row.worst):.2f} | {change(row.mean, base.mean)} | "
            f"{change(row.mean, fair.mean)} | {change(row.p95, fair.p95)} | {versus_first} |"
        )
    for row in rows[2:]:
        wall, cpu = (np.array(x) if x else np.zeros(1) for x in (row.plan_ms, row.plan_cpu_ms))
        print(
            f"{row.spec.format()}: planned {row.planned} of {row.decisions} decisions, "
            f"overruled the base {row.changed} times; planning time p50 "
            f"{np.percentile(wall, 50):.1f} ms, p99 {np.percentile(wall, 99):.1f} ms "
            f"(CPU p50 {np.percentile(cpu, 50):.1f} ms, p99 {np.percentile(cpu, 99):.1f} ms)"
        )


def _ms(seconds: list[float]) -> str:
    return f"p50 {np.median(seconds) * 1e3:.1f} ms, max {np.max(seconds) * 1e3:.1f} ms"


def queued(args: argparse.Namespace, rows: list[Row], workload_options: dict) -> None:
    """Plan times with `args.queued` workflows in the system at once."""
    from idlegate.sim.cluster import Cluster
    from idlegate.sim.protocol import WAIT
    from idlegate.sim.workloads import build_workload

    options = {**workload_options, "num_stream": args.queued}
    w = build_workload(args.workload, args.first_seed, **options)
    print(f"{args.queued} workflows of {args.workload} {options} queued at once")
    for row in rows[2:]:
        planner = make_scheduler(row.spec)
        if not isinstance(planner, LookaheadScheduler):
            raise IdlegateError(f"{row.spec.format()} is no planner")
        planner.reset(np.random.default_rng(args.first_seed))
        cluster = Cluster(w.num_executors)
        for a in w.jobs[: args.queued]:
            cluster.add_job(a.dag, 0.0, a.name, a.durations)
        cluster.needs_schedule = False
        while (step := cluster.decide_once(planner, 0.0)) is not None and step[0] is not WAIT:
            pass
        requests, plans = [], []
        for _ in range(args.seeds):
            started = time.perf_counter()
            request = planner.request(cluster)
            requests.append(time.perf_counter() - started)
            plans.append(planner.plan(request).cpu_seconds)
        print(
            f"{row.spec.format()}: {len(cluster.jobs)} jobs; request {_ms(requests)}; "
            f"plan (CPU) {_ms(plans)}"
        )


def run(args: argparse.Namespace) -> None:
    workload_options = {"num_executors": args.executors, "load": args.load}
    if args.jobs_count:
        workload_options["num_stream"] = args.jobs_count - 1
    workload_options = {k: v for k, v in workload_options.items() if v is not None}
    for item in args.workload_option:
        key, _, value = item.partition("=")
        workload_options[key] = float(value) if value.replace(".", "", 1).isdigit() else value
    rows = rows_of(args)
    if args.queued:
        queued(args, rows, workload_options)
        return
    started = time.perf_counter()
    for seed in seed_range(args):
        run_seed(args, rows, workload_options, seed)
    report(args, rows, workload_options)
    print(f"{time.perf_counter() - started:.0f} s in all")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--workload", default="tpch-like")
    parser.add_argument("-k", "--executors", type=int, default=None)
    parser.add_argument("--load", type=float, default=None)
    parser.add_argument("--jobs-count", type=int, default=None)
    parser.add_argument(
        "-w", "--workload-option", action="append", default=[], help="workload KEY=VALUE"
    )
    parser.add_argument("--base", default="srpt")
    add_seeds(parser, 3, 1000)
    parser.add_argument("--oracle", action="store_true", help="plan with the true future")
    parser.add_argument("-o", "--option", action="append", default=[], help="planner KEY=VALUE")
    parser.add_argument(
        "--also", action="append", default=[], help="another planner's options, KEY=V&KEY=V"
    )
    parser.add_argument("--queued", type=int, default=0, help="time plans with N queued")
    args = parser.parse_args(argv)
    try:
        run(args)
    except IdlegateError as exc:
        parser.exit(1, f"Error: {exc}\n")


if __name__ == "__main__":
    main()
