"""What the reclaim's stops were, on issue 96's shared streams (`benchmarks/queues.py`'s
``shared`` scenario: `-w shared` with a queue per team, every queue ``reclaim: Any``):
why idlegate's victims lost more work than the Kueue-like victims there.

    python -m benchmarks.reclaim_stops --seeds 4 --first-seed 200

Per row (idlegate's victims, the Kueue-like ones), over the seeds: the tasks stopped and
the work lost (% of all executor-seconds run); how long a victim had run (median, p90);
of the stops, how many were made at an instant where their claimant's queue then started
fewer tasks than were stopped for it (the room went to another queue, served before it
in the admission's order); when the running tasks were expected to give the claimant a
pod anyway (the median, and how many within 5 s; each task ending at its declared
duration, one past it within 5 % of it, as the forecaster assumes: the same yardstick
for every checkout); how many were of a stage stopped before (the most of one stage);
how many were of a stopped task's re-run; and the mean JCT of the seeds' workflows.
`--between LO,HI` lets the reclaim stop only at instants in [LO, HI) s (to find the
stops that move the mean JCT), `--rows` runs only some rows. It hooks only what both the
code before issue 96 and after it have (`Reclaimer.plan`, `Reclaimer.stopped`,
`Admission.started`), so the same file measures an older checkout:
``PYTHONPATH=OLD/src:. python -m benchmarks.reclaim_stops`` (outside a checkout, with
``IDLEGATE_SHARED_DATA`` naming the data: else the heavy team's jobs are generated).
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from math import inf
from typing import Any

import numpy as np

from benchmarks.queues import BURST
from idlegate.flags import add_seeds, description, run_script, seed_range
from idlegate.policy import make_scheduler
from idlegate.sim.admission import Admission
from idlegate.sim.engine import Engine
from idlegate.sim.queues import Preemption
from idlegate.sim.reclaim_plan import Reclaimer
from idlegate.sim.workloads import build_workload

ROWS = {"idlegate's victims": "srpt", "Kueue-like victims": "admission?victims=kueue:srpt"}
KEYS = {"idlegate": "idlegate's victims", "kueue": "Kueue-like victims"}
"""`--rows`' names of the rows."""
SOON = 5.0
"""Seconds within which room expected anyway makes a stop one that saved little."""
OVERDUE = 0.05
"""A task past its declared duration is taken to end within this fraction of it."""


@dataclass
class Log:
    """What one run's hooks saw: each stop (claimant, instant, run time, stage, a re-run,
    when a pod was expected free anyway), and the tasks each queue started per instant."""

    stops: list[tuple[str, float, float, tuple[int, int], bool, float]] = field(
        default_factory=list
    )
    starts: Counter[tuple[str, float]] = field(default_factory=Counter)


def hooked(log: Log, between: tuple[float, float], most: float = inf) -> Callable[[], None]:
    """Record into `log` what the reclaim stops and the admission starts, the stops kept
    to instants in `between` and to the first `most` plans there; the undo."""
    planned, stopped, started = Reclaimer.plan, Reclaimer.stopped, Admission.started
    made = 0

    def on_plan(self: Reclaimer, pool: Any, now: float, *rest: Any) -> Any:
        nonlocal made
        got = planned(self, pool, now, *rest)
        if got is None or not between[0] <= now < between[1] or made >= most:
            return None
        made += 1
        return got

    def on_stop(self: Reclaimer, plan: Any, pool: Any, now: float, carried: bool) -> None:
        for executor, start in zip(plan.executors, plan.starts, strict=True):
            stage = pool.stage_on(executor)
            if stage is not None:
                rerun = pool.rerun_of(executor) is not None
                key = (stage.job.id, stage.index)
                soon = room_soon(pool, self, plan.queue, now)
                log.stops.append((plan.queue, now, now - start, key, rerun, soon))
        stopped(self, plan, pool, now, carried)

    def on_start(self: Admission, stage: Any, tasks: int, now: float) -> None:
        log.starts[(self.queues[stage.job.queue].name, now)] += tasks
        started(self, stage, tasks, now)

    Reclaimer.plan = on_plan  # type: ignore[method-assign]
    Reclaimer.stopped, Admission.started = on_stop, on_start  # type: ignore[method-assign]

    def undo() -> None:
        Reclaimer.plan = planned  # type: ignore[method-assign]
        Reclaimer.stopped, Admission.started = stopped, started  # type: ignore[method-assign]

    return undo


def room_soon(pool: Any, reclaimer: Reclaimer, queue: str, now: float) -> float:
    """Seconds until a pod comes free by the running tasks' declared durations (the
    module docstring's yardstick): of the claimant's queue or of a queue above its
    nominal quota, whose tasks it could take (inf: none runs)."""
    running = pool.running_tasks()
    pods = Counter(stage.job.queue for _e, stage, _s in running)
    nominal = [q.nominal.get("pods", float("inf")) for q in reclaimer.queues]
    mine = [q.name for q in reclaimer.queues].index(queue)
    wanted = {q for q, n in pods.items() if n * 1000 > nominal[q]} | {mine}
    soonest = float("inf")
    for _executor, stage, start in running:
        ran, d = now - start, stage.duration
        if stage.job.queue in wanted and start < now:
            soonest = min(soonest, d - ran if ran < d else OVERDUE * d)
    return soonest


def run(
    seed: int,
    spec: str,
    burst: float,
    hours: float,
    between: tuple[float, float],
    most: float = inf,
) -> tuple[Log, float, float, list[float]]:
    """One row on one seed, stopping only in `between` and there at most `most` times:
    its log, the work lost, the executor-seconds run and each workflow's JCT."""
    workload = build_workload(
        "shared", seed, queues="teams", split="test", burst=burst, hours=hours
    )
    settings = Preemption(reclaim="Any")
    workload = replace(
        workload, queues=tuple(replace(q, preemption=settings) for q in workload.queues)
    )
    log = Log()
    undo = hooked(log, between, most)
    try:
        engine = Engine.for_workload(workload, make_scheduler(spec), seed)
        engine.run()
    finally:
        undo()
    result = engine.result(workload.name, spec, seed)
    jcts = [record.jct for record in result.records]
    return log, result.preempted_seconds, result.busy_seconds, jcts


def figures(logs: list[Log], lost: float, busy: float) -> dict[str, Any]:
    """The module docstring's figures over a row's logs."""
    ran = np.array([s[2] for log in logs for s in log.stops] or [float("nan")])
    elsewhere = 0
    for log in logs:
        per: defaultdict[tuple[str, float], int] = defaultdict(int)
        for queue, now, *_rest in log.stops:
            per[(queue, now)] += 1
        elsewhere += sum(max(0, n - log.starts[key]) for key, n in per.items())
    stages = [Counter(s[3] for s in log.stops) for log in logs]
    return {
        "stops": sum(len(log.stops) for log in logs),
        "lost": lost / busy,
        "ran": (float(np.median(ran)), float(np.percentile(ran, 90))),
        "elsewhere": elsewhere,
        "soon": sum(s[5] <= SOON for log in logs for s in log.stops),
        "wait": float(np.median([s[5] for log in logs for s in log.stops] or [float("nan")])),
        "again": sum(n - 1 for c in stages for n in c.values()),
        "most": max((n for c in stages for n in c.values()), default=0),
        "reruns": sum(s[4] for log in logs for s in log.stops),
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description(__doc__))
    add_seeds(p, 4, 200)
    p.add_argument(
        "--burst", type=float, default=BURST, help="the small team's burst (default %(default)g)"
    )
    p.add_argument(
        "--hours", type=float, default=8.0, help="the streams' hours (default %(default)g)"
    )
    p.add_argument(
        "--between",
        type=window,
        default=(0.0, inf),
        help="LO,HI: stop only at instants in [LO, HI) s (default: any)",
    )
    p.add_argument(
        "--most",
        type=positive_int,
        default=inf,
        help="carry out at most this many of the reclaim's plans, the first in --between "
        "(default: all); --most 1 measures what a single stop moves",
    )
    p.add_argument(
        "--rows",
        type=rows_of,
        default=list(ROWS),
        help=f"comma-separated, of {', '.join(KEYS)} (default: both)",
    )
    return p


def window(text: str) -> tuple[float, float]:
    """`--between`'s LO,HI."""
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--between takes two numbers of seconds, LO,HI (e.g. 0,3600), not {text!r}"
        ) from None
    return lo, hi


def positive_int(text: str) -> int:
    """`--most`'s count."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"--most takes a whole number of 1 or more, not {text!r}")
    return n


def rows_of(text: str) -> list[str]:
    """`--rows`' labels."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in KEYS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"--rows takes some of {', '.join(KEYS)}, comma-separated; not {text!r}"
        )
    return [KEYS[n] for n in names]


def main(argv: list[str] | None = None) -> int:
    return run_script(parser(), report, argv)


def report(args: argparse.Namespace) -> int:
    """The table over `args`' seeds, a row each."""
    print(
        "| row | tasks stopped | work lost | victim's run, median / p90 (s) | room to another "
        f"queue | a pod expected free anyway, median (s); within {SOON:g} s | of a stage stopped "
        "before (most of one) "
        "| re-runs stopped | mean JCT (s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label in args.rows:
        logs, lost, busy, jcts = [], 0.0, 0.0, []
        for seed in seed_range(args):
            log, seed_lost, seed_busy, seed_jcts = run(
                seed,
                ROWS[label],
                args.burst,
                args.hours,
                args.between,
                args.most,
            )
            logs.append(log)
            lost, busy = lost + seed_lost, busy + seed_busy
            jcts.extend(seed_jcts)
        f = figures(logs, lost, busy)
        n = max(1, f["stops"])
        print(
            f"| {label} | {f['stops']} | {f['lost']:.2%} | {f['ran'][0]:.0f} / {f['ran'][1]:.0f} "
            f"| {f['elsewhere']} ({f['elsewhere'] / n:.0%}) | {f['wait']:.1f}; {f['soon']} "
            f"({f['soon'] / n:.0%}) "
            f"| {f['again']} ({f['most']}) | {f['reruns']} | {np.mean(jcts):.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
