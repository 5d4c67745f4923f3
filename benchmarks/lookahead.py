"""The lookahead planner against its base: quality (paired per seed) and decision time.

    python benchmarks/lookahead.py --workload tpch-like -k 10 --load 0.85 --jobs-count 61 \
        --base srpt --seeds 5 [-o mode=decision -o samples=4]

With `--oracle` the planner is told the true remaining arrivals (one future, the real
one) instead of sampling them: the ceiling of what its estimates could give.

For each seed both schedulers run on the same arrival sequence; the table gives their
average JCTs, the paired change of the planner against its base, how many decisions the
planner simulated futures for (`planned`), how often it overruled the base, and the wall
time of a planned decision (p50 / p99), measured side by side in one process.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.policy import SchedulerSpec, make_scheduler
from idlegate.policy.lookahead import LookaheadScheduler
from idlegate.sim.engine import simulate
from idlegate.sim.metrics import paired_relative_change
from idlegate.sim.rollout import Future
from idlegate.sim.workloads import build_workload


class OraclePlanner(LookaheadScheduler):
    """A planner whose one future is the workload's true remaining arrivals."""

    arrivals: tuple = ()

    def sample_futures(self, view, horizon):
        return [Future(tuple(a for a in self.arrivals if a.time > view.now), 0)]


def run(args: argparse.Namespace) -> None:
    workload_options = {"num_executors": args.executors, "load": args.load}
    if args.jobs_count:
        workload_options["num_stream"] = args.jobs_count - 1
    workload_options = {k: v for k, v in workload_options.items() if v is not None}
    # -o KEY=VALUE are the planner's spec parameters: lookahead?KEY=VALUE&…:BASE
    query = "?" + "&".join(args.option) if args.option else ""
    spec = SchedulerSpec.parse(f"lookahead{query}:{args.base}")
    planner_options = spec.keywords()
    base_jct, plan_jct, plan_times = [], [], []
    planned = decisions = changed = 0
    started = time.perf_counter()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        w = build_workload(args.workload, seed, **workload_options)
        base = simulate(w, make_scheduler(spec.base or args.base), seed)
        planner = make_scheduler(spec)
        if not isinstance(planner, LookaheadScheduler):  # make_scheduler's contract
            raise IdlegateError(f"{spec} did not build a planner")
        if args.oracle:
            planner.__class__ = OraclePlanner
            planner.arrivals = w.jobs
        result = simulate(w, planner, seed)
        base_jct.append(float(np.mean([r.jct for r in base.records])))
        plan_jct.append(float(np.mean([r.jct for r in result.records])))
        s = planner.stats
        planned += s.planned
        decisions += s.decisions
        changed += s.changed
        plan_times += s.plan_seconds
        print(
            f"seed {seed}: {args.base} {base_jct[-1]:.2f} s, lookahead {plan_jct[-1]:.2f} s",
            file=sys.stderr,
            flush=True,
        )
    change = paired_relative_change(plan_jct, base_jct)
    ms = np.array(plan_times) * 1000.0 if plan_times else np.zeros(1)
    oracle = ", true future (oracle)" if args.oracle else ""
    print(
        f"workload {args.workload} {workload_options}, seeds {args.seeds}, "
        f"options {planner_options}{oracle}"
    )
    print("| base | base avg JCT | lookahead avg JCT | change (paired, 95 % CI) |")
    print("|---|---:|---:|---:|")
    print(
        f"| {args.base} | {np.mean(base_jct):.2f} | {np.mean(plan_jct):.2f} | "
        f"{change.mean:+.1%} ± {change.half_width:.1%} |"
    )
    print(
        f"planned {planned} of {decisions} decisions, overruled the base {changed} times; "
        f"planning time p50 {np.percentile(ms, 50):.1f} ms, p99 {np.percentile(ms, 99):.1f} ms; "
        f"{time.perf_counter() - started:.0f} s in all"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="tpch-like")
    parser.add_argument("-k", "--executors", type=int, default=None)
    parser.add_argument("--load", type=float, default=None)
    parser.add_argument("--jobs-count", type=int, default=None)
    parser.add_argument("--base", default="srpt")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--oracle", action="store_true", help="plan with the true future")
    parser.add_argument("-o", "--option", action="append", default=[], help="planner KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        run(args)
    except IdlegateError as exc:
        parser.exit(1, f"Error: {exc}\n")


if __name__ == "__main__":
    main()
