"""Calibration of the rigid-job schedulers against SchedInspector's published figures.

SchedInspector (Zhang et al., HPDC 2022) reports, on the Lublin-256 trace, 50 sequences of
256 jobs (seed 1), requested time = run time, the average bounded slowdown of SJF 333 / 59
and F1 291 / 51 (without / with backfilling), FCFS 2166 / 103, and that rejecting the
heuristic's pick whenever it cannot start cuts SJF's by about 67 % / 32 %.

This script runs idlegate's versions on the same protocol: 50 windows of 256 consecutive
jobs of the trace whose first jobs are drawn uniformly with numpy's Generator seeded 1
(SchedInspector draws them with gym's seeding of its own RandomState, so the windows are
not the same ones), every scheduler on the same windows. Rows:

* ``X`` / ``easy:X`` — strict order / EASY backfilling (FCFS backfill order, a job may
  backfill if it ends by the shadow time or fits the extra executors);
* ``easy:X (ends only)`` — SchedInspector's backfilling variant: only jobs that end
  before the shadow time backfill (``extra_nodes=False``);
* ``reject:X`` / ``reject:easy:X`` — the reject rule (72 rejections per job at most).

It prints the mean over windows of each run's average bounded slowdown next to the
published figure, and the reject rule's cut against its base. docs/rigid.md holds the
results.

    python benchmarks/rigid_calibration.py [--trace PATH] [--sequences 50] [--seed 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.policy.rigid import F1_SUBMIT_WEIGHT, ORDERS, job_size, log10_floor, requested_time
from idlegate.sim.engine import simulate
from idlegate.sim.metrics import mean_ci, run_metrics
from idlegate.sim.protocol import Job
from idlegate.sim.swf import read_swf
from idlegate.sim.workloads import build_workload

DEFAULT_TRACE = Path(__file__).resolve().parents[2] / "shared" / "data" / "swf" / "lublin_256.swf"
SEQUENCE = 256

PUBLISHED: dict[str, float] = {
    "fcfs": 2166,
    "easy:fcfs": 103,
    "strict:sjf": 333,
    "easy:sjf": 59,
    "f1": 291,
    "easy:f1": 51,
    "reject:sjf": 333 * (1 - 0.67),
    "reject:easy:sjf": 59 * (1 - 0.32),
}
"""SchedInspector's average bsld (the reject rows: its base's figure cut by 67 % / 32 %)."""

NO_CAP = 10**9

F1_ARRIVAL = "f1-arrival"
"""F1 on the run's own clock (submit = arrival, 0 at the window's first job) instead of the
trace's absolute submit times, to show how much the 870·log10(s) term matters. Registered
in `ORDERS` only while `run` builds its schedulers, so importing this script (as a test
does) leaves the library's orders as they are."""


def _f1_arrival(job: Job) -> tuple[float, ...]:
    return (
        log10_floor(requested_time(job)) * job_size(job)
        + F1_SUBMIT_WEIGHT * log10_floor(job.arrival),
        job.id,
    )


ROWS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("fcfs", "fcfs", {}),
    ("easy:fcfs", "easy:fcfs", {}),
    ("easy:fcfs (ends only)", "easy:fcfs", {"extra_nodes": False}),
    ("strict:sjf", "strict:sjf", {}),
    ("easy:sjf", "easy:sjf", {}),
    ("easy:sjf (ends only)", "easy:sjf", {"extra_nodes": False}),
    ("f1", "f1", {}),
    ("easy:f1", "easy:f1", {}),
    ("easy:f1 (ends only)", "easy:f1", {"extra_nodes": False}),
    ("reject:sjf", "reject:sjf", {}),
    ("reject:easy:sjf", "reject:easy:sjf", {}),
    ("reject:easy:sjf (ends only)", "reject:easy:sjf", {"extra_nodes": False}),
    ("reject:sjf (no cap)", "reject:sjf", {"max_rejections": NO_CAP}),
    ("reject:easy:sjf (no cap)", "reject:easy:sjf", {"max_rejections": NO_CAP}),
    ("f1 (s = arrival)", f"strict:{F1_ARRIVAL}", {}),
    ("easy:f1 (s = arrival)", f"easy:{F1_ARRIVAL}", {}),
)


def window_starts(num_jobs: int, sequences: int, seed: int) -> list[int]:
    """First-job indices of the windows, uniform over those that fit."""
    rng = np.random.default_rng(seed)
    return rng.integers(num_jobs - SEQUENCE + 1, size=sequences).tolist()


def run(trace: Path, sequences: int, seed: int) -> dict[str, list[float]]:
    """Average bsld per window for every row."""
    starts = window_starts(len(read_swf(trace).jobs), sequences, seed)
    workloads = [
        build_workload("swf", path=trace, num_jobs=SEQUENCE, start=s, requested_time="run")
        for s in starts
    ]
    out: dict[str, list[float]] = {}
    ORDERS[F1_ARRIVAL] = _f1_arrival
    try:
        for label, spec, params in ROWS:
            values = []
            for w in workloads:
                result = simulate(w, make_scheduler(spec, **params), seed)
                values.append(run_metrics(result).avg_bsld)
            out[label] = values
    finally:
        del ORDERS[F1_ARRIVAL]
    return out


def render(results: dict[str, list[float]]) -> str:
    lines = [
        f"{'scheduler':<30} {'avg bsld':>9} {'95% CI':>15} {'published':>9} {'ratio':>6}",
    ]
    for label, values in results.items():
        est = mean_ci(values)
        ref = PUBLISHED.get(label)
        pub = f"{ref:9.0f}" if ref is not None else f"{'':>9}"
        ratio = f"{est.mean / ref:6.2f}" if ref is not None else f"{'':>6}"
        ci = f"{est.low:.0f}-{est.high:.0f}"
        lines.append(f"{label:<30} {est.mean:9.1f} {ci:>15} {pub} {ratio}")
    for reject, base, cut in (
        ("reject:sjf", "strict:sjf", 0.67),
        ("reject:easy:sjf", "easy:sjf", 0.32),
    ):
        got = 1 - statistics.fmean(results[reject]) / statistics.fmean(results[base])
        lines.append(f"{reject} cuts {base}'s bsld by {got:.0%} (published: about {cut:.0%})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="The SWF trace.")
    parser.add_argument("--sequences", type=int, default=50, help="Windows of 256 jobs.")
    parser.add_argument("--seed", type=int, default=1, help="Seed of the window starts.")
    args = parser.parse_args(argv)
    try:
        start = time.perf_counter()
        results = run(args.trace, args.sequences, args.seed)
    except IdlegateError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    print(render(results))
    print(
        f"{args.sequences} windows x {len(ROWS)} schedulers in {time.perf_counter() - start:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
