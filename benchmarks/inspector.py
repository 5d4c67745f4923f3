"""Evaluate a learned inspector against its base heuristic and the reject rule (paired).

SchedInspector's protocol (`docs/inspector.md`): windows of 256 consecutive jobs of an
SWF trace drawn (numpy ``default_rng(seed)``) from its *test part*, the jobs after the
first 20 % the inspector trained on; requested time = run time. With ``--lublin N``, N
Lublin-model windows of the test seeds (`training.inspector.lublin_window`: machine
sizes 64–512, inter-arrival scales 0.5–1.5, never the training's seeds) join them. Every
scheduler runs on the same windows:

* ``BASE`` — the heuristic alone (e.g. ``easy:sjf``);
* ``reject:BASE`` — the reject rule (reject the pick whenever it cannot start, 72 times
  per job at most);
* ``inspector`` (``--model``), and more with ``--model`` repeated (``inspector-2``, …);
* with ``--delay-rule S``: a hand-set inspector on the same mechanics that accepts a
  blocked pick when it could start within S seconds (its ``start_delay`` feature) and
  rejects it otherwise — a yardstick for what a learned inspector could gain.

It prints, for the trace's windows, the Lublin windows and all of them, per scheduler
and per metric (average bounded slowdown, average wait, utilisation) the mean over
windows with its 95 % interval, and the paired differences of that mean against the
base and against the reject rule (mean of per-window differences, with its interval).

    python benchmarks/inspector.py --model out/insp.onnx --base easy:sjf [--sequences 50]
        [--lublin 50] [--delay-rule 300]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from idlegate.flags import description, run_script
from idlegate.policy import SchedulerSpec, make_scheduler
from idlegate.policy.inspector import FEATURE_NAMES, WAIT_SCALE, InspectorScheduler, log_scaled
from idlegate.policy.rigid import make_base
from idlegate.sim.datadirs import shared_data_dir
from idlegate.sim.engine import simulate
from idlegate.sim.metrics import RunMetrics, mean_ci, run_metrics
from idlegate.sim.protocol import Scheduler
from idlegate.sim.swf import read_swf, trace_part
from idlegate.sim.workloads import build_workload
from idlegate.training.inspector import lublin_window

# ../shared/data/swf beside the checkout, or under $IDLEGATE_SHARED_DATA (CI hides it so);
# (outside a checkout, as seen from where it runs)
DEFAULT_TRACE = (shared_data_dir("swf") or Path("../shared/data/swf")) / "lublin_256.swf"
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
    models: list[Path],
    base: SchedulerSpec,
    sequences: int,
    seed: int,
    delay_seconds: float | None = None,
    lublin: int = 0,
) -> dict[str, dict[str, list[RunMetrics]]]:
    """Per window group (``trace``, ``lublin``) and scheduler label, the metrics of every
    window (the same windows for all)."""
    reject = SchedulerSpec("reject", base=base)
    makers: dict[str, Callable[[], Scheduler]] = {
        str(base): lambda: make_scheduler(base),
        str(reject): lambda: make_scheduler(reject),
    }
    for i, model in enumerate(models):
        inspect = SchedulerSpec("inspect", str(model), base)
        makers["inspector" if i == 0 else f"inspector-{i + 1}"] = partial(make_scheduler, inspect)
    if delay_seconds is not None:
        makers[f"delay<{delay_seconds:g}s"] = lambda: delay_rule(base, delay_seconds)
    groups = {
        "trace": [
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
        ],
        "lublin": [lublin_window(i, "test") for i in range(lublin)],
    }
    return {
        group: {
            label: [run_metrics(simulate(w, make(), 0)) for w in workloads]
            for label, make in makers.items()
        }
        for group, workloads in groups.items()
        if workloads
    }


METRICS: dict[str, tuple[str, str]] = {
    "avg_bsld": ("avg bsld", ".1f"),
    "avg_wait": ("avg wait (s)", ".0f"),
    "utilisation": ("utilisation", ".3f"),
}


def _difference(values: list[float], reference: list[float], form: str) -> str:
    if values == reference:
        return "0"
    est = mean_ci([x - r for x, r in zip(values, reference, strict=True)])
    return f"{est.mean:+{form}} [{est.low:+{form}}, {est.high:+{form}}]"


def render(results: dict[str, list[RunMetrics]], base: SchedulerSpec) -> str:
    """One group's table: per scheduler and metric, mean [95 % CI], − base, − reject."""
    reject, base_text = str(SchedulerSpec("reject", base=base)), str(base)
    lines = [
        f"{'scheduler':<18} {'metric':<13} {'mean':>9} {'95% CI':>17} {'- base':>27} "
        f"{'- reject':>27}"
    ]
    for label in results:
        for field, (name, form) in METRICS.items():
            values = {k: [getattr(m, field) for m in v] for k, v in results.items()}
            est = mean_ci(values[label])
            lines.append(
                f"{label if field == 'avg_bsld' else '':<18} {name:<13} {est.mean:9{form}} "
                f"{f'{est.low:{form}}-{est.high:{form}}':>17} "
                f"{_difference(values[label], values[base_text], form):>27} "
                f"{_difference(values[label], values[reject], form):>27}"
            )
    return "\n".join(lines)


def render_all(groups: dict[str, dict[str, list[RunMetrics]]], base: SchedulerSpec) -> str:
    """A table per window group, and one for all windows together when there are two."""
    tables = dict(groups)
    if len(groups) > 1:
        labels = next(iter(groups.values()))
        tables["all"] = {k: [m for g in groups.values() for m in g[k]] for k in labels}
    return "\n\n".join(
        f"{name} ({len(next(iter(t.values())))} windows)\n{render(t, base)}"
        for name, t in tables.items()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument(
        "--model", type=Path, action="append", default=[], help="An ONNX inspector (repeatable)."
    )
    parser.add_argument("--base", default="easy:sjf", help="Its base (as it was trained).")
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="The SWF trace.")
    parser.add_argument("--sequences", type=int, default=50, help="Test windows of 256 jobs.")
    parser.add_argument("--seed", type=int, default=1, help="Seed of the window starts.")
    parser.add_argument("--lublin", type=int, default=0, help="Lublin-model test windows.")
    parser.add_argument(
        "--delay-rule", type=float, help="Add the hand-set rule: accept if it starts within S s."
    )
    return run_script(parser, report, argv)


def report(args: argparse.Namespace) -> int:
    """Every inspector of `args` on the test windows: the tables."""
    start = time.perf_counter()
    base = SchedulerSpec.parse(args.base)
    results = run(
        args.trace, args.model, base, args.sequences, args.seed, args.delay_rule, args.lublin
    )
    print(render_all(results, base))
    print(f"in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
