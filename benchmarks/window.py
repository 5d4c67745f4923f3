"""Head-only vs split windows for the split-window agent (issue 11 §4), on held-out Lublin seeds.

Runs every scheduler on the same `--seeds` Lublin sequences of `--jobs` jobs (workload
seeds `--first-seed` …, never the training seeds of `idlegate.training.window`) and
prints, per scheduler, the mean over sequences of the average wait, the average queue
length (time-averaged waiting jobs), the average bounded slowdown and the utilisation,
then for each window size M the paired change of the split window's average wait and
queue length against head-only (mean of per-seed ratios − 1, 95 % interval).

Schedulers are scheduler specs (`idlegate.policy.spec`), the models as
``LABEL=window:PATH.onnx``; labels ``head-M`` and ``split-M`` pair up (e.g. ``head-8`` with
``split-8``). ``fcfs`` and ``easy:fcfs`` always run, as references.

    python benchmarks/window.py --scheduler head-8=window:h8.onnx \\
        --scheduler split-8=window:s8.onnx --scheduler sjf [--seeds 30] [--first-seed 1000]
        [--jobs 256]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Sequence

from idlegate.flags import add_seeds, description, run_script, seed_range
from idlegate.policy import SchedulerSpec, make_scheduler
from idlegate.sim.engine import simulate
from idlegate.sim.metrics import RunMetrics, mean_ci, paired_relative_change, run_metrics
from idlegate.sim.workloads import build_workload

REFERENCES: tuple[str, ...] = ("fcfs", "easy:fcfs")
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("avg wait (s)", "avg_wait", "{:.0f}"),
    ("avg queue", "avg_queue_length", "{:.2f}"),
    ("avg bsld", "avg_bsld", "{:.1f}"),
    ("util", "utilisation", "{:.3f}"),
)


def run_all(
    specs: Sequence[SchedulerSpec], seeds: Sequence[int], jobs: int
) -> dict[str, list[RunMetrics]]:
    """Metrics of every spec (by title) on every seed's Lublin sequence (same sequences)."""
    runs: dict[str, list[RunMetrics]] = {spec.title: [] for spec in specs}
    for seed in seeds:
        workload = build_workload("lublin", seed, num_jobs=jobs)
        for spec in specs:
            runs[spec.title].append(run_metrics(simulate(workload, make_scheduler(spec), seed)))
    return runs


def table(runs: dict[str, list[RunMetrics]]) -> list[str]:
    """Markdown rows: label, then each column's mean ± 95 % half-width over seeds."""
    head = "| scheduler | " + " | ".join(c[0] for c in COLUMNS) + " |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 1)]
    for label, metrics in runs.items():
        cells = []
        for _, field, fmt in COLUMNS:
            est = mean_ci([getattr(m, field) for m in metrics])
            cells.append(f"{fmt.format(est.mean)} ± {fmt.format(est.half_width)}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def pairs(runs: dict[str, list[RunMetrics]]) -> list[str]:
    """For each M with both head-M and split-M: the split's paired change in wait and queue."""
    lines = []
    for label in runs:
        match = re.fullmatch(r"split-(\d+)", label)
        head = f"head-{match.group(1)}" if match else None
        if head is None or head not in runs:
            continue
        parts = []
        for name, field in (("avg wait", "avg_wait"), ("avg queue", "avg_queue_length")):
            base = [getattr(m, field) for m in runs[head]]
            if min(base) <= 0:  # nobody waited on some sequence: no ratio
                parts.append(f"{name} undefined (head-only is 0 on some sequence)")
                continue
            est = paired_relative_change([getattr(m, field) for m in runs[label]], base)
            parts.append(f"{name} {est.mean:+.1%} [{est.low:+.1%}, {est.high:+.1%}]")
        wins = sum(a.avg_wait < b.avg_wait for a, b in zip(runs[label], runs[head], strict=True))
        lines.append(
            f"{label} vs {head}: " + ", ".join(parts) + f"; lower wait on {wins}/{len(runs[label])}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument(
        "--scheduler", action="append", default=[], help="a spec, e.g. head-8=window:h8.onnx"
    )
    add_seeds(parser, 30, 1000)
    parser.add_argument("--jobs", type=int, default=256)
    return run_script(parser, report, argv)


def report(args: argparse.Namespace) -> int:
    """The references and `args`' schedulers on the Lublin sequences: the tables."""
    started = time.monotonic()
    specs = [SchedulerSpec.parse(s) for s in (*REFERENCES, *args.scheduler)]
    runs = run_all(specs, seed_range(args), args.jobs)
    print(
        f"Lublin, {args.jobs} jobs per sequence, seeds {args.first_seed}.."
        f"{args.first_seed + args.seeds - 1} (mean ± 95 % half-width over sequences)"
    )
    print("\n".join(table(runs)))
    print()
    print("\n".join(pairs(runs)))
    print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
