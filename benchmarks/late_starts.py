"""Why the steady teams' tasks start past their wait bound on the `teams` workload's
``large`` scenario with every queue ``reclaim: Any`` (issue 82): each such start, and
whether its queue lent quota at its due time (another queue then used more than its
nominal and the team less than its own), or held all of its quota with its own tasks
(no rule of ``reclaim`` then applies: it stops borrowed tasks only).

    python benchmarks/late_starts.py --seeds 10 --first-seed 1000 --bound 120

``--decide Forecast``: the queues' stops are judged on forecasts (``decide: Forecast``).
"""

from __future__ import annotations

import argparse
import functools
import time
from collections import Counter

from idlegate.flags import add_seeds, description, run_script, seed_range
from idlegate.policy import make_scheduler
from idlegate.sim.engine import Engine
from idlegate.sim.reclaim_forecast import forecast_judge
from idlegate.sim.resources import MILLI
from idlegate.sim.workloads import build_workload


def late_starts(
    seed: int, bound: float, jobs: int, decide: str = "Rules"
) -> list[tuple[str, float, bool]]:
    """Each start of a steady team's task past its bound on `seed`: the team, seconds past
    the bound, and whether the team lent quota at its due time."""
    workload = build_workload(
        "teams",
        seed,
        wait_bound=bound,
        num_jobs=jobs,
        reclaim="Any",
        decide=decide,
        scenario="large",
    )
    engine = Engine.for_workload(
        workload,
        make_scheduler("srpt"),
        seed,
        record_tasks=True,
        trace=True,
        judge=functools.partial(forecast_judge, clock=time.thread_time),
    )
    engine.run()
    result = engine.result(workload.name, "srpt", seed)
    if result.tasks is None or result.queues is None or engine.trace is None:
        raise RuntimeError("The run recorded no tasks, queues or trace.")
    names = {q.name: i for i, q in enumerate(workload.queues)}
    queue_of = {e[2]: names[e[4].split("/")[0]] for e in engine.trace if e[1] == "arrive"}
    nominal = [q.nominal["pods"] / MILLI for q in workload.queues]  # (a task: a pod)
    out = []
    for q, due, start in result.queues.overdue:
        if q == 0 or start - due <= 1e-6:
            continue
        used = Counter(queue_of[t.job] for t in result.tasks if t.start <= due < t.end)
        out.append((workload.queues[q].name, start - due, used[q] < nominal[q]))
    return out


def parser() -> argparse.ArgumentParser:
    """The command line's options, each with its default in its help."""
    p = argparse.ArgumentParser(description=description(__doc__))
    add_seeds(p, 10, 1000)
    p.add_argument(
        "--bound",
        type=float,
        default=120.0,
        help="every queue's wait bound, s (default %(default)g)",
    )
    p.add_argument(
        "--jobs", type=int, default=30, help="workflows a steady team sends (default %(default)s)"
    )
    p.add_argument(
        "--decide",
        choices=("Rules", "Forecast"),
        default="Rules",
        help="every queue's preemption.decide (default %(default)s)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Print the late starts `argv` asks for; a user's mistake is one line ``Error: ...``,
    exit 1."""
    options = parser()
    return run_script(options, run, argv)


def run(args: argparse.Namespace) -> int:
    """Count the starts past the bound of `args`' seeds, by whether the team lent quota."""
    rows = [
        row
        for seed in seed_range(args)
        for row in late_starts(seed, args.bound, args.jobs, args.decide)
    ]
    for lent in (True, False):
        late = [s for _team, s, was in rows if was == lent]
        what = "lending quota" if lent else "holding all of its quota"
        print(
            f"starts past the bound, team {what}: {len(late)}, latest {max(late, default=0):.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
