"""What the stream benchmarks share (`switch_at`, `twins`, `hindsight`): the workload flags
of `idlegate compare` and a stream's mean JCT under a scheduler.

The flags: ``-w`` (default ``alibaba``), ``-k`` (100), ``--load`` (0.85),
``--jobs-count``, ``--alibaba-dir`` (else ``IDLEGATE_ALIBABA_DIR``) and ``--tpch-dir``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from idlegate.evaluation.comparison import WorkloadOptions
from idlegate.sim.engine import simulate


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


def mean_jct(workload: Any, scheduler: Any, seed: int) -> float:
    """`workload`'s mean JCT under `scheduler`, durations drawn with `seed`."""
    result = simulate(workload, scheduler, seed=seed)
    return float(np.mean([r.jct for r in result.records]))
