"""Calibration of the rigid-job schedulers against SchedInspector's own simulator.

The reference file (``lublin_256.si-reference.json`` beside the trace) holds what
SchedInspector's simulator (HPCSimSkip of Zhang et al., HPDC 2022) gives on its 50
windows of 256 jobs of ``lublin_256.swf`` drawn its way with seed 1, requested time = run
time: the windows' first job ids, and per window the average bounded slowdown, average
wait and utilisation of FCFS, SJF and F1 without and with its backfilling, and of its
reject rule on SJF (bsld and wait only).

This script runs idlegate's versions on the very same windows (found by their first job
ids) and prints, per row, idlegate's mean beside SchedInspector's, their difference and
how many windows agree to 0.1 %. Rows (idlegate's spec in brackets):

* ``FCFS`` / ``SJF`` / ``F1`` [``fcfs``, ``strict:sjf``, ``f1``]: strict order, the pick
  locked in (the default);
* ``X+bf`` [``easy:X?extra_nodes=false``]: SchedInspector's EASY variant (a job backfills
  only if it ends before the shadow time);
* ``reject:SJF`` / ``reject:SJF+bf`` [``reject:sjf``, ``reject:easy:sjf?extra_nodes=false``]:
  the reject rule, 72 rejections per job at most;
* ``greedy …`` [``?lock_in=false``]: the greedier pick, for comparison (no reference).

docs/rigid.md holds the results.

    python benchmarks/rigid_calibration.py [--trace PATH] [--reference PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from idlegate.errors import IdlegateError
from idlegate.flags import description, run_script
from idlegate.policy import make_scheduler
from idlegate.sim.datadirs import shared_data_dir
from idlegate.sim.engine import Workload, simulate
from idlegate.sim.metrics import run_metrics
from idlegate.sim.swf import read_swf
from idlegate.sim.workloads import build_workload

# ../shared/data/swf beside the checkout, or under $IDLEGATE_SHARED_DATA (CI hides it so);
# (outside a checkout, as seen from where it runs)
DATA = shared_data_dir("swf") or Path("../shared/data/swf")
DEFAULT_TRACE = DATA / "lublin_256.swf"
DEFAULT_REFERENCE = DATA / "lublin_256.si-reference.json"
AGREE = 1e-3
"""Relative difference under which a window's figure counts as the same."""

SI_BACKFILL = {"extra_nodes": False}
ROWS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("FCFS", "fcfs", {}),
    ("SJF", "strict:sjf", {}),
    ("F1", "f1", {}),
    ("FCFS+bf", "easy:fcfs", SI_BACKFILL),
    ("SJF+bf", "easy:sjf", SI_BACKFILL),
    ("F1+bf", "easy:f1", SI_BACKFILL),
    ("reject:SJF", "reject:sjf", {}),
    ("reject:SJF+bf", "reject:easy:sjf", SI_BACKFILL),
    ("greedy SJF", "strict:sjf", {"lock_in": False}),
    ("greedy F1", "strict:f1", {"lock_in": False}),
)
"""(row, idlegate spec, its parameters); a row named as in the reference is compared."""
METRICS = ("bsld", "wait", "util")


@dataclass(frozen=True)
class Row:
    """One scheduler on every window: idlegate's figures and the reference's (if any)."""

    label: str
    spec: str
    ours: dict[str, list[float]]
    theirs: dict[str, list[float]]

    def agreeing(self, metric: str) -> int:
        """Windows whose `metric` agrees with the reference to `AGREE` (relative)."""
        pairs = zip(self.ours[metric], self.theirs[metric], strict=True)
        return sum(abs(a - b) <= AGREE * max(abs(b), 1e-9) for a, b in pairs)

    def gap(self, metric: str) -> float:
        """(our mean − their mean) / their mean."""
        theirs = statistics.fmean(self.theirs[metric])
        return statistics.fmean(self.ours[metric]) / theirs - 1


def load_reference(path: Path) -> dict[str, Any]:
    """The reference file, or an IdlegateError naming what is missing."""
    if not path.is_file():
        raise IdlegateError(f"no reference file at {path}; pass --reference PATH")
    reference = json.loads(path.read_text())
    for key in ("window_first_job_ids", "window_length", "per_window"):
        if key not in reference:
            raise IdlegateError(f"{path} has no {key!r}; is it SchedInspector's reference?")
    return reference


def reference_windows(trace: Path, reference: dict[str, Any]) -> list[Workload]:
    """The reference's windows of `trace`, requested time = run time."""
    index = {job.id: i for i, job in enumerate(read_swf(trace).jobs)}
    missing = [j for j in reference["window_first_job_ids"] if j not in index]
    if missing:
        raise IdlegateError(
            f"job {missing[0]} (a window's first job) is not among {trace}'s usable jobs; "
            "is this the trace the reference was made on?"
        )
    return [
        build_workload(
            "swf",
            path=trace,
            num_jobs=reference["window_length"],
            start=index[j],
            requested_time="run",
        )
        for j in reference["window_first_job_ids"]
    ]


def run(trace: Path, reference: dict[str, Any]) -> list[Row]:
    """Every row of `ROWS` on the reference's windows."""
    workloads = reference_windows(trace, reference)
    rows = []
    for label, spec, params in ROWS:
        ours: dict[str, list[float]] = {m: [] for m in METRICS}
        for w in workloads:
            m = run_metrics(simulate(w, make_scheduler(spec, **params), 1))
            ours["bsld"].append(m.avg_bsld)
            ours["wait"].append(m.avg_wait)
            ours["util"].append(m.utilisation)
        theirs = reference["per_window"].get(label, {})
        shown = "&".join(f"{k}={str(v).lower()}" for k, v in params.items())
        rows.append(Row(label, f"{spec}?{shown}" if shown else spec, ours, theirs))
    return rows


def render(rows: list[Row]) -> str:
    """The table: per metric idlegate's mean / SchedInspector's, gap, agreeing windows."""
    head = f"{'row':<18} {'idlegate spec':<36}"
    lines = [head + "".join(f" {m + ' (ours / SI, gap, same)':>36}" for m in METRICS)]
    for row in rows:
        line = f"{row.label:<18} {row.spec:<36}"
        for metric in METRICS:
            ours = statistics.fmean(row.ours[metric])
            digits = 3 if metric == "util" else 1
            if metric not in row.theirs:
                line += f" {ours:>16.{digits}f}{'':>20}"
                continue
            theirs = statistics.fmean(row.theirs[metric])
            same = f"{row.agreeing(metric)}/{len(row.ours[metric])}"
            line += (
                f" {ours:>10.{digits}f} / {theirs:<10.{digits}f} {row.gap(metric):+6.1%} {same:>5}"
            )
        lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="The SWF trace.")
    parser.add_argument(
        "--reference", type=Path, default=DEFAULT_REFERENCE, help="SchedInspector's figures."
    )
    return run_script(parser, report, argv)


def report(args: argparse.Namespace) -> int:
    """Our figures beside SchedInspector's, row by row."""
    start = time.perf_counter()
    rows = run(args.trace, load_reference(args.reference))
    print(render(rows))
    print(
        f"{len(rows[0].ours['bsld'])} windows x {len(rows)} rows in {time.perf_counter() - start:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
