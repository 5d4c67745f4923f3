"""What the stream benchmarks share (`switch_at`, `twins`, `hindsight`): the workload flags
of `idlegate compare`, and its paired runs of spec texts on every seed.

The flags: ``-w`` (default ``alibaba``), ``-k`` (100), ``--load`` (0.85),
``--jobs-count``, ``--alibaba-dir`` (else ``IDLEGATE_ALIBABA_DIR``) and ``--tpch-dir``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from idlegate.evaluation.comparison import (
    CompareConfig,
    SchedulerResult,
    WorkloadOptions,
    run_comparison,
)


def add_workload_flags(parser: argparse.ArgumentParser, *, jobs_count: int) -> None:
    """`parser` takes the workload flags (module docstring)."""
    parser.add_argument("-w", "--workload", default="alibaba")
    parser.add_argument("-k", "--executors", type=int, default=100)
    parser.add_argument("--load", type=float, default=0.85)
    parser.add_argument("--jobs-count", type=int, default=jobs_count)
    parser.add_argument("--alibaba-dir", type=Path, default=None)
    parser.add_argument("--tpch-dir", type=Path, default=None)


def workload_options(args: argparse.Namespace) -> WorkloadOptions:
    """The workload options of parsed workload flags."""
    return WorkloadOptions(
        num_executors=args.executors,
        load=args.load,
        num_jobs=args.jobs_count,
        alibaba_dir=args.alibaba_dir,
        tpch_dir=args.tpch_dir,
    )


def run_specs(
    workload: str, specs: Sequence[str], seeds: int, first_seed: int, options: WorkloadOptions
) -> dict[str, SchedulerResult]:
    """Spec text → its runs on seeds first_seed, … (`idlegate compare`'s pairing: each
    seed's arrivals and duration seed the same for every spec), progress on stderr."""
    texts = list(dict.fromkeys(specs))
    config = CompareConfig(
        workload=workload, schedulers=texts, seeds=seeds, first_seed=first_seed, options=options
    )
    started = time.perf_counter()

    def progress(done: int, total: int, name: str, seed: int) -> None:
        elapsed = time.perf_counter() - started
        print(f"[{done}/{total}] {name} seed {seed} ({elapsed:.0f} s)", file=sys.stderr)

    results = run_comparison(config, progress).results
    return dict(zip(texts, results, strict=True))
