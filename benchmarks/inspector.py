"""Evaluate a learned inspector against its base heuristic and the reject rule (paired).

SchedInspector's protocol (`docs/inspector.md`): windows of 256 consecutive jobs of an
SWF trace drawn (numpy ``default_rng(seed)``) from its *test part*, the jobs after the
first 20 % the inspector trained on; requested time = run time. Every scheduler runs on
the same windows:

* ``BASE`` — the heuristic alone (e.g. ``easy:sjf``);
* ``reject:BASE`` — the reject rule (reject the pick whenever it cannot start, 72 times
  per job at most);
* ``inspect:MODEL:BASE`` — the learned inspector;
* with ``--delay-rule S``: a hand-set inspector on the same mechanics that accepts a
  blocked pick when it could start within S seconds (its ``start_delay`` feature) and
  rejects it otherwise — a yardstick for what a learned inspector could gain.

It prints per scheduler the mean over windows of the average bounded slowdown with its
95 % interval; against the base and against the reject rule, the paired difference of
that mean (``- base``: mean of per-window differences, with its interval) and the
paired relative change (``/ base - 1``: mean of per-window ratios − 1, with its
interval; heavy-tailed windows make the two disagree); the mean utilisation and average
wait; and on how many windows it beats the base.

    python benchmarks/inspector.py --model out/insp.onnx --base easy:sjf [--sequences 50]
        [--delay-rule 300]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.policy import SchedulerSpec, make_scheduler
from idlegate.policy.inspector import FEATURE_NAMES, WAIT_SCALE, InspectorScheduler, log_scaled
from idlegate.policy.rigid import make_base
from idlegate.sim.engine import simulate
from idlegate.sim.metrics import RunMetrics, mean_ci, paired_relative_change, run_metrics
from idlegate.sim.protocol import Scheduler
from idlegate.sim.swf import read_swf, trace_part
from idlegate.sim.workloads import build_workload

DEFAULT_TRACE = Path(__file__).resolve().parents[2] / "shared" / "data" / "swf" / "lublin_256.swf"
SEQUENCE = 256
TRAIN_FRACTION = 0.2


def window_starts(trace: Path, sequences: int, seed: int) -> list[int]:
    """Window starts in the trace's test part, uniform over the windows that fit."""
    jobs = trace_part(read_swf(trace), "test", TRAIN_FRACTION)
    rng = np.random.default_rng(seed)
    return rng.integers(len(jobs) - SEQUENCE + 1, size=sequences).tolist()


def delay_rule(base: SchedulerSpec, seconds: float) -> Scheduler:
    """Accept a blocked pick iff it could start within `seconds` (else reject)."""
    index = FEATURE_NAMES.index("start_delay")
    threshold = log_scaled(seconds, WAIT_SCALE)
    scheduler = InspectorScheduler(make_base(base), lambda x: bool(x[index] < threshold))
    scheduler.name = f"delay<{seconds:g}s"
    return scheduler


def run(
    trace: Path,
    model: Path | None,
    base: SchedulerSpec,
    sequences: int,
    seed: int,
    delay_seconds: float | None = None,
) -> dict[str, list[RunMetrics]]:
    """Per scheduler label, the metrics of every test window (same windows for all)."""
    reject = SchedulerSpec("reject", base=base)
    makers: dict[str, Callable[[], Scheduler]] = {
        str(base): lambda: make_scheduler(base),
        str(reject): lambda: make_scheduler(reject),
    }
    if model is not None:
        inspect = SchedulerSpec("inspect", str(model), base)
        makers["inspector"] = lambda: make_scheduler(inspect)
    if delay_seconds is not None:
        makers[f"delay<{delay_seconds:g}s"] = lambda: delay_rule(base, delay_seconds)
    workloads = [
        build_workload(
            "swf",
            path=trace,
            num_jobs=SEQUENCE,
            start=s,
            part="test",
            train_fraction=TRAIN_FRACTION,
            requested_time="run",
        )
        for s in window_starts(trace, sequences, seed)
    ]
    return {
        label: [run_metrics(simulate(w, make(), 0)) for w in workloads]
        for label, make in makers.items()
    }


def _change(values: list[float], reference: list[float]) -> str:
    est = paired_relative_change(values, reference)
    return f"{est.mean:+.0%} [{est.low:+.0%}, {est.high:+.0%}]"


def _difference(values: list[float], reference: list[float]) -> str:
    if values == reference:
        return "0"
    est = mean_ci([x - r for x, r in zip(values, reference, strict=True)])
    return f"{est.mean:+.1f} [{est.low:+.1f}, {est.high:+.1f}]"


def render(results: dict[str, list[RunMetrics]], base: SchedulerSpec) -> str:
    reject, base_text = str(SchedulerSpec("reject", base=base)), str(base)
    bsld = {k: [m.avg_bsld for m in v] for k, v in results.items()}
    lines = [
        f"{'scheduler':<18} {'avg bsld':>9} {'95% CI':>13} {'- base':>21} {'- reject':>21} "
        f"{'/ base - 1':>18} {'/ reject - 1':>18} {'util':>6} {'avg wait':>9} {'beats base':>10}"
    ]
    for label, metrics in results.items():
        est = mean_ci(bsld[label])
        wins = sum(x < b for x, b in zip(bsld[label], bsld[base_text], strict=True))
        lines.append(
            f"{label:<18} {est.mean:9.1f} {est.low:6.1f}-{est.high:<6.1f} "
            f"{_difference(bsld[label], bsld[base_text]):>21} "
            f"{_difference(bsld[label], bsld[reject]):>21} "
            f"{_change(bsld[label], bsld[base_text]):>18} "
            f"{_change(bsld[label], bsld[reject]):>18} "
            f"{statistics.fmean(m.utilisation for m in metrics):6.3f} "
            f"{statistics.fmean(m.avg_wait for m in metrics):9.0f} "
            f"{wins:>4}/{len(metrics)}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="The ONNX inspector (optional).")
    parser.add_argument("--base", default="easy:sjf", help="Its base (as it was trained).")
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="The SWF trace.")
    parser.add_argument("--sequences", type=int, default=50, help="Test windows of 256 jobs.")
    parser.add_argument("--seed", type=int, default=1, help="Seed of the window starts.")
    parser.add_argument(
        "--delay-rule", type=float, help="Add the hand-set rule: accept if it starts within S s."
    )
    args = parser.parse_args(argv)
    try:
        start = time.perf_counter()
        base = SchedulerSpec.parse(args.base)
        results = run(args.trace, args.model, base, args.sequences, args.seed, args.delay_rule)
    except IdlegateError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    print(render(results, base))
    print(
        f"{args.sequences} test windows x {len(results)} schedulers in "
        f"{time.perf_counter() - start:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
