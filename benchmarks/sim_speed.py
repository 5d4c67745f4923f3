"""Simulator speed at Decima's TPC-H setting.

50 executors, 1 job at t=0 plus 200 Poisson-streamed jobs, query and size drawn per job
from the traces in ../shared/data/tpch (all sizes found), moving delay and measured task
waves on. For each mean interarrival (25 s and 15 s) and seed 0-4: the wall time per
episode and events per second under the fair scheduler, and the average JCT of fair and
FIFO on the same arrival sequences.

    python benchmarks/sim_speed.py [--tpch-dir DIR] [--seeds 5]

The script measures idlegate alone and quotes no figure measured elsewhere: a speed
ratio against another simulator means something only when both run side by side on the
same machine, traces and seeds. How idlegate's simulator differs from Decima's (and so
why their JCTs differ) is in docs/research/simulator-vs-decima.md. To compare this tree's speed
with another commit's on these episodes, side by side, run
`python benchmarks/sim_regression.py --against REF`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.sim.engine import SimResult, simulate
from idlegate.sim.metrics import run_metrics
from idlegate.sim.tpch import resolve_tpch_dir
from idlegate.sim.workloads import build_workload


def episode(
    interarrival: float,
    seed: int,
    scheduler: str,
    tpch_dir: str,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, SimResult]:
    """One episode: the seconds `simulate` took on `clock` (the workload is built before)."""
    workload = build_workload(
        "tpch",
        seed=seed,
        tpch_dir=tpch_dir,
        num_executors=50,
        init=1,
        num_stream=200,
        interarrival=interarrival,
    )
    start = clock()
    result = simulate(workload, make_scheduler(scheduler), seed=seed)
    return clock() - start, result


def main() -> int:
    # (the first paragraph, inline: this file runs against other checkouts' idlegate,
    # which may lack `idlegate.flags.description`)
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--tpch-dir", default=None)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    try:
        tpch_dir = str(resolve_tpch_dir(args.tpch_dir))
    except IdlegateError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    episode(25.0, 0, "fair", tpch_dir)  # warm caches (trace parsing) outside the timing

    print(f"TPC-H traces: {tpch_dir}; 50 executors, 1 + 200 jobs, fidelity on")
    header = (
        f"{'interarrival':>12} {'episode s (median)':>19} {'min':>6} {'max':>6} "
        f"{'events/s':>9} {'fair JCT':>9} {'FIFO JCT':>9} {'FIFO/fair':>9}"
    )
    print(header)
    for interarrival in (25.0, 15.0):
        times, rates, fair, fifo = [], [], [], []
        for seed in range(args.seeds):
            t, r = episode(interarrival, seed, "fair", tpch_dir)
            times.append(t)
            rates.append(r.events / t)
            fair.append(run_metrics(r).avg_jct)
            fifo.append(run_metrics(episode(interarrival, seed, "fifo", tpch_dir)[1]).avg_jct)
        ratio = statistics.fmean(b / a for a, b in zip(fair, fifo, strict=True))
        print(
            f"{interarrival:>11.0f}s {statistics.median(times):>19.3f} {min(times):>6.3f} "
            f"{max(times):>6.3f} {statistics.median(rates):>9.0f} "
            f"{statistics.fmean(fair):>8.1f}s {statistics.fmean(fifo):>8.1f}s {ratio:>9.2f}"
        )
        print(
            f"{'':>12} per-seed fair JCT: {', '.join(f'{x:.1f}' for x in fair)}; "
            f"FIFO: {', '.join(f'{x:.1f}' for x in fifo)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
