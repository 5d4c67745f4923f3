"""The map of the room: where idling pays on `follow`, and how much of it each scheduler captures.

One knob of the `follow` workload at a time is swept around a base point (K = 2
executors, load 0.7, the generator's defaults for the rest: size ratio 10, lag of mean
10 s, sessions of 3.5 short jobs); per point two measurements:

* **The room** (`optimum.py`'s CP-SAT machinery, its `run_instance`): the first
  `--instance-jobs` jobs of seeds 0..`--room-seeds`-1, solved exactly with idling and without (non-delay
  schedules), each within `--time-limit` seconds on one CP-SAT worker. Both are given in
  % of the best heuristic's (`analytic:sjf`'s) mean JCT on the same instance: `idling`
  = (non-delay optimum − optimum) / it, the cut only idling can give; `below best` =
  (it − optimum) / it, what any scheduler could still gain over it. The oracle planner
  runs on the same instances: its gain over `analytic:sjf` as a share of `below best`.
* **The capture**: 100-job runs on the held-out seeds (`--first-seed`, `--capture-seeds`
  of them), each scheduler paired per seed against `analytic:sjf`, the best heuristic:
  `learned:default` (the shipped policy), the learned-future planner (docs/research/idle.md (b):
  one expected future of the conditional arrival model) and the oracle planner
  (docs/research/idle.md (a): the true future, infinite horizon). A scheduler's share is its gain
  over `analytic:sjf` divided by the oracle planner's (none when the oracle gains less
  than `MIN_ORACLE_GAIN`: a share of noise).

It prints a markdown table per knob. Every task (one instance, or one seed's four runs)
is independent: `-j/--jobs N` spreads them over N local processes (`idlegate.parallel`),
as in `idlegate compare` and `default_targets.py`. It needs the `dev` extra (ortools, through
`optimum.py`): without it, it stops with one `Error:` line naming it.

    python benchmarks/idle_map.py [-j 2] [--instance-jobs 14] [--room-seeds 10] [--capture-seeds 10] \
        [--sweep size_ratio=3,5,10,20 ...] [--json map.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

from idlegate.errors import IdlegateError
from idlegate.flags import description, missing_extra, one_line, run_script
from idlegate.parallel import LocalPool
from idlegate.policy import make_scheduler
from idlegate.sim.engine import Workload, simulate
from idlegate.sim.metrics import change_text, paired_relative_change
from idlegate.sim.workloads import build_workload
from idlegate.sim.workloads.follow import FollowConfig


def _sibling(name: str) -> ModuleType:
    """benchmarks/<name>.py, which is no package (loaded once, as benchmarks_<name>)."""
    key = f"benchmarks_{name}"
    if key not in sys.modules:
        path = Path(__file__).with_name(f"{name}.py")
        spec = importlib.util.spec_from_file_location(key, path)
        if spec is None or spec.loader is None:
            raise IdlegateError(f"cannot load {path}; run from a checkout of idlegate")
        sys.modules[key] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[key])
    return sys.modules[key]


try:
    optimum = _sibling("optimum")  # the CP-SAT model and its run_instance
except ModuleNotFoundError as exc:  # ortools (the dev extra): one Error line, as the CLI's
    error = missing_extra(exc)
    if __name__ != "__main__" or error is None:
        raise
    sys.exit(f"Error: {one_line(error)}")

WORKLOAD = "follow"
BEST = "analytic:sjf"
"""The best heuristic on `follow` (docs/research/idle.md): every gain is measured against it."""
DEFAULT = "learned:default"
"""The shipped ONNX policy."""
LEARNED = (
    "lookahead?mode=decision&horizon=600&terminal_weight=0&candidates=sjf&wait=false"
    "&idle_levels=0&idle_at_arrivals=4&futures=expected:analytic:sjf"
)
"""The learned-future planner, docs/research/idle.md (b)."""
ORACLE = (
    "lookahead?mode=decision&horizon=100000&terminal_weight=0&idle_at_arrivals=4"
    "&futures=oracle:analytic:sjf"
)
"""The oracle planner, docs/research/idle.md (a): the true remaining arrivals as its one future."""
CAPTURED = {DEFAULT: DEFAULT, "learned-future planner": LEARNED, "oracle planner": ORACLE}
ROOM_SPECS = ("fifo", "sjf", BEST, ORACLE)
"""Simulated on the CP-SAT instances: fifo hints the non-delay solve, the rest the optimum."""

MIN_ORACLE_GAIN = 0.005
"""Below this gain of the oracle over `analytic:sjf`, shares are not given."""

_DEFAULTS = FollowConfig()
BASE: dict[str, float] = {
    "executors": 2,
    "load": 0.7,
    "size_ratio": _DEFAULTS.size_ratio,
    "lag": _DEFAULTS.lag,
    "session_size": _DEFAULTS.session_size,
}
"""The base point: K = 2, load 0.7 and `follow`'s defaults."""
SWEEPS: dict[str, tuple[float, ...]] = {
    "size_ratio": (3, 5, 10, 20),
    "lag": (2, 10, 30, 60),
    "session_size": (1, 2, 3.5, 6),
    "load": (0.5, 0.7, 0.85),
    "executors": (2, 3, 4),
}
"""Each knob's values, swept one at a time with the others at `BASE`."""

Point = tuple[tuple[str, float], ...]
"""One setting of every knob, as sorted (knob, value) pairs (hashable, picklable)."""


def points(base: Mapping[str, float], sweeps: Mapping[str, Sequence[float]]) -> list[Point]:
    """Every distinct point of the one-knob-at-a-time sweeps (the base point once)."""
    out: dict[Point, None] = {}
    for knob, values in sweeps.items():
        if knob not in base:
            raise IdlegateError(f"unknown knob {knob!r}; sweep one of {', '.join(base)}")
        for value in values:
            values_at = {k: float(v) for k, v in {**base, knob: value}.items()}
            out[tuple(sorted(values_at.items()))] = None
    return list(out)


def share(gain: float, oracle_gain: float) -> float | None:
    """`gain` as a share of the oracle's (None when the oracle gains under `MIN_ORACLE_GAIN`)."""
    return gain / oracle_gain if oracle_gain >= MIN_ORACLE_GAIN else None


def workload_options(point: Point) -> dict[str, object]:
    """`build_workload` keyword arguments of a point (K is `num_executors`)."""
    opts: dict[str, object] = dict(point)
    opts["num_executors"] = int(opts.pop("executors"))
    return opts


@dataclass(frozen=True)
class KnobFamily(optimum.Family):
    """optimum.py's instance family with the point's workload options."""

    point: Point = ()

    def workload(self, seed: int, executors: int, jobs: int) -> Workload:
        opts = workload_options(self.point)
        return build_workload(self.name, seed, num_jobs=jobs, **opts)


# ---------------------------------------------------------------------------------------
# the tasks (top-level and picklable: they run in worker processes)


@dataclass(frozen=True)
class Task:
    """One unit of work: a CP-SAT instance ("room") or one seed's 100-job runs ("capture")."""

    kind: str
    point: Point
    seed: int
    jobs: int
    time_limit: float


@dataclass(frozen=True)
class RoomResult:
    """One instance: both optima (and whether proven) and the simulated mean JCTs."""

    optimum: float
    no_idle: float
    proven: bool
    jcts: dict[str, float]


def run_task(task: Task) -> RoomResult | dict[str, float]:
    """A room task's `RoomResult`, or a capture task's mean JCT per scheduler."""
    if task.kind == "room":
        knobs = tuple((k, v) for k, v in task.point if k != "executors")  # K: its own
        family = KnobFamily(text=label(knobs), name=WORKLOAD, point=task.point)
        limits = argparse.Namespace(time_limit=task.time_limit, workers=1, no_idle=True)
        k = int(dict(task.point)["executors"])
        row = optimum.run_instance(family, task.seed, k, task.jobs, ROOM_SPECS, limits)
        no_idle = row.no_idle
        if no_idle is None:
            raise IdlegateError(f"{WORKLOAD} gave jobs of more than one stage; set job_shape")
        proven = row.optimum.proven and no_idle.proven
        return RoomResult(row.optimum.avg_jct, no_idle.avg_jct, proven, row.schedulers)
    w = build_workload(WORKLOAD, task.seed, num_jobs=task.jobs, **workload_options(task.point))
    out: dict[str, float] = {}
    for spec in (BEST, *CAPTURED.values()):
        result = simulate(w, make_scheduler(spec), task.seed)
        if result.unfinished:
            raise IdlegateError(f"{spec} left {result.unfinished} jobs unfinished")
        out[spec] = statistics.fmean(r.jct for r in result.records)
    return out


def label(point: Point) -> str:
    """A point as `K=2 load=0.7 size_ratio=10 ...`."""
    return " ".join(f"{'K' if k == 'executors' else k}={v:g}" for k, v in point)


# ---------------------------------------------------------------------------------------
# the report


@dataclass
class PointSummary:
    """One point's figures, every relative one against `analytic:sjf` (gain > 0: better)."""

    point: Point
    idling: float
    """Mean over the instances of (non-delay optimum − optimum) / analytic:sjf."""
    below_best: float
    """Mean over the instances of (analytic:sjf − optimum) / analytic:sjf."""
    oracle_of_room: float | None
    """The oracle planner's gain on the same instances / `below_best` (None if no room)."""
    proven: int
    instances: int
    best_jct: float
    """analytic:sjf's mean JCT on the 100-job runs."""
    gains: dict[str, tuple[float, float]]
    """Per captured scheduler: mean gain over analytic:sjf and its 95 % CI half-width."""


def summarize(
    point: Point, rooms: Sequence[RoomResult], runs: Sequence[dict[str, float]]
) -> PointSummary:
    """The figures of one point from its instances and its capture runs."""
    best = [r.jcts[BEST] for r in rooms]
    idling = statistics.fmean((r.no_idle - r.optimum) / b for r, b in zip(rooms, best, strict=True))
    below = statistics.fmean((b - r.optimum) / b for r, b in zip(rooms, best, strict=True))
    oracle = statistics.fmean((b - r.jcts[ORACLE]) / b for r, b in zip(rooms, best, strict=True))
    gains = {}
    for name, spec in CAPTURED.items():
        change = paired_relative_change([r[spec] for r in runs], [r[BEST] for r in runs])
        gains[name] = (-change.mean, change.half_width)
    return PointSummary(
        point=point,
        idling=idling,
        below_best=below,
        oracle_of_room=oracle / below if below >= MIN_ORACLE_GAIN else None,
        proven=sum(r.proven for r in rooms),
        instances=len(rooms),
        best_jct=statistics.fmean(r[BEST] for r in runs),
        gains=gains,
    )


def _share_text(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def print_knob(knob: str, summaries: Sequence[PointSummary]) -> None:
    """One markdown table: a row per value of `knob`."""
    print(
        f"\n| {knob} | idling | below best | proven | oracle of it | `{BEST}` JCT | "
        "`learned:default` | learned-future | oracle planner | share learned:default | share learned |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in summaries:
        gains = s.gains
        oracle = gains["oracle planner"][0]
        cells = [
            f"{dict(s.point)[knob]:g}",
            f"{s.idling:.1%}",
            f"{s.below_best:.1%}",
            f"{s.proven}/{s.instances}",
            _share_text(s.oracle_of_room),
            f"{s.best_jct:.1f}",
            *(change_text(-g, hw) for g, hw in gains.values()),
            _share_text(share(gains[DEFAULT][0], oracle)),
            _share_text(share(gains["learned-future planner"][0], oracle)),
        ]
        print("| " + " | ".join(cells) + " |")


# ---------------------------------------------------------------------------------------
# the command


def tasks_of(args: argparse.Namespace, grid: Sequence[Point]) -> list[Task]:
    """Every point's room tasks, then every point's capture tasks."""
    rooms = [
        Task("room", p, s, args.instance_jobs, args.time_limit)
        for p in grid
        for s in range(args.room_seeds)
    ]
    capture = range(args.first_seed, args.first_seed + args.capture_seeds)
    return rooms + [Task("capture", p, s, 100, args.time_limit) for p in grid for s in capture]


def _sweep(text: str) -> tuple[str, tuple[float, ...]]:
    knob, _, values = text.partition("=")
    try:
        return knob, tuple(float(v) for v in values.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a sweep is KNOB=V1,V2,... with numbers, e.g. lag=2,10,30; got {text!r}"
        ) from None


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    return parser().parse_args(argv)


def parser() -> argparse.ArgumentParser:
    """The command line's options."""
    p = argparse.ArgumentParser(description=description(__doc__))
    p.add_argument(
        "-j", "--jobs", type=int, default=1, help="worker processes (default %(default)s)"
    )
    p.add_argument("--room-seeds", type=int, default=10, help="CP-SAT instances per point")
    p.add_argument(
        "--instance-jobs", type=int, default=14, help="jobs of a CP-SAT instance (default 14)"
    )
    p.add_argument("--time-limit", type=float, default=10.0, help="s per CP-SAT solve")
    p.add_argument("--capture-seeds", type=int, default=10, help="100-job runs per point")
    p.add_argument("--first-seed", type=int, default=1000, help="first held-out seed")
    p.add_argument(
        "--sweep",
        type=_sweep,
        action="append",
        help=f"KNOB=V1,V2,..., KNOB one of {', '.join(SWEEPS)} (repeatable; default: each "
        "knob over its SWEEPS values)",
    )
    p.add_argument("--json", metavar="PATH", help="write every point's figures here")
    return p


def run(args: argparse.Namespace) -> None:
    sweeps = dict(args.sweep) if args.sweep else SWEEPS
    grid = points(BASE, sweeps)
    tasks = tasks_of(args, grid)
    started = time.perf_counter()

    def progress(done: int, total: int, index: int) -> None:
        t = tasks[index]
        print(
            f"[{done}/{total}] {t.kind} {label(t.point)} seed {t.seed} "
            f"({time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
            flush=True,
        )

    with LocalPool(args.jobs, preload=("idlegate.policy",)) as pool:
        results = pool.map(run_task, tasks, progress=progress)
    by_point: dict[Point, tuple[list, list]] = {p: ([], []) for p in grid}
    for t, r in zip(tasks, results, strict=True):
        by_point[t.point][t.kind == "capture"].append(r)
    summaries = {p: summarize(p, *by_point[p]) for p in grid}
    print(
        f"{WORKLOAD}, base {label(tuple(sorted(BASE.items())))}; room: {args.instance_jobs} "
        f"jobs, seeds 0-{args.room_seeds - 1}, CP-SAT {args.time_limit:g} s x 1 worker; capture: 100 jobs, "
        f"seeds {args.first_seed}-{args.first_seed + args.capture_seeds - 1}"
    )
    for knob, values in sweeps.items():
        rows = [summaries[p] for p in grid if dict(p)[knob] in values and _on_axis(p, knob)]
        print_knob(knob, rows)
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([asdict(s) for s in summaries.values()], fh, indent=1)


def _on_axis(point: Point, knob: str) -> bool:
    """Every knob but `knob` is at its base value."""
    return all(math.isclose(v, BASE[k]) for k, v in point if k != knob)


def main(argv: list[str] | None = None) -> int:
    run_script(parser(), run, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
