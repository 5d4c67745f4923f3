"""The README's picture: an idle slot that lowers the average JCT, as two Gantt charts.

Job A (one task of 20 s) arrives at t = 0, job B (one task of 4 s) at t = 2, and there
is one executor (DESIGN.md's motivating example). Launching A at once gives JCTs 20 and
22 s (average 21); a 2 s idle slot before A lets B run first: 26 and 4 s (average 15).
Both schedules are runs of the simulator (`simulate(..., record_tasks=True, trace=True)`)
with a heuristic, or the same heuristic told to idle A once; nothing is drawn by hand::

    .venv/bin/python benchmarks/gantt.py                # writes out/idle-slot.png
    make docs-images                                    # redraws the README's docs/img copy

A command a user copies from the README writes under out/ only (tests/test_readme.py); the
tracked picture is redrawn on purpose, by its maintainer, with the Makefile's target.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from idlegate.errors import IdlegateError
from idlegate.flags import description
from idlegate.policy import make_scheduler
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival, SimResult, Workload, simulate
from idlegate.sim.protocol import Action, ClusterView, Decision, Scheduler
from idlegate.sim.spec import parse_workflow
from idlegate.textfiles import check_out_file

DEFAULT_OUT = Path("out") / "idle-slot.png"
"""Under the ignored out/ of where it runs: the README's tracked copy changes only on purpose."""
COLOURS = {"A": "#4c72b0", "B": "#dd8452"}

if TYPE_CHECKING:
    from matplotlib.axes import Axes


class IdleFirst:
    """`base`, except that the first time job `job` may start it idles for `delay` seconds."""

    def __init__(self, base: Scheduler, job: str, delay: float) -> None:
        self.base, self.job, self.delay = base, job, delay
        self.name = f"{getattr(base, 'name', 'base')} + {delay:g} s idle slot before {job}"

    def reset(self, rng: Any) -> None:
        self.base.reset(rng)

    def decide(self, view: ClusterView) -> Action:
        for stage in view.runnable_stages():
            if stage.job.name == self.job and not stage.delayed and stage.launched == 0:
                return Decision(stage, view.num_executors, self.delay)
        return self.base.decide(view)


def one_task_job(seconds: float) -> Dag:
    return Dag.from_spec(
        parse_workflow({"stages": [{"name": "run", "tasks": 1, "taskDurationSeconds": seconds}]})
    )


def example() -> Workload:
    """A (20 s) at t = 0 and B (4 s) at t = 2 on one executor."""
    jobs = (JobArrival(0.0, "A", one_task_job(20.0)), JobArrival(2.0, "B", one_task_job(4.0)))
    return Workload("idle-slot example", jobs, num_executors=1)


def run(scheduler: Scheduler) -> SimResult:
    return simulate(example(), scheduler, seed=0, record_tasks=True, trace=True)


def draw(ax: Axes, result: SimResult, title: str) -> None:
    """One executor row: tasks as bars, the idle slot hatched, arrivals as ticks."""
    names = {r.id: r.name for r in result.records}
    for t in result.tasks or []:
        name = names[t.job]
        ax.barh(0, t.end - t.start, left=t.start, color=COLOURS[name], edgecolor="black")
        ax.text((t.start + t.end) / 2, 0, f"{name} runs", ha="center", va="center", color="w")
    arrivals = 0
    for time, kind, job, _, info in result.trace or []:
        if kind == "idle":
            ax.barh(0, info, left=time, color="white", edgecolor="grey", hatch="///")
            ax.text(time + info / 2, 0.55, f"{names[job]} idles", ha="center", fontsize=8)
        elif kind == "arrive":  # labels staggered so that close arrivals stay readable
            y = -1.05 + 0.35 * (arrivals % 2)
            ax.plot([time, time], [-0.42, y], color="grey", lw=0.8)
            ax.text(time + 0.15, y, f"{info} arrives (t = {time:g} s)", fontsize=8, va="center")
            arrivals += 1
    jcts = ", ".join(f"{r.name} {r.jct:g} s" for r in result.records)
    avg = sum(r.jct for r in result.records) / len(result.records)
    ax.set_title(f"{title}: JCT {jcts}, average {avg:g} s", fontsize=10, loc="left")
    ax.set_yticks([0], ["executor"])
    ax.set_ylim(-1.3, 0.9)
    ax.set_xlim(0, 27)
    ax.grid(axis="x", alpha=0.3)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="PNG to write")
    args = parser.parse_args(argv)
    try:
        check_out_file(args.out, "the Gantt chart", (".png",))
    except IdlegateError as exc:
        parser.exit(1, f"Error: {exc}\n")
    at_once = run(make_scheduler("sjf-cp"))
    idled = run(IdleFirst(make_scheduler("sjf-cp"), "A", 2.0))
    try:  # only drawing needs it: the runs above are what the tests check
        import matplotlib
    except ImportError:
        sys.exit("benchmarks/gantt.py draws with matplotlib: pip install 'idlegate[plots]'")
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(7.5, 3.8), sharex=True)
    draw(axes[0], at_once, "sjf-cp launches A at once")
    draw(axes[1], idled, "a 2 s idle slot before A")
    axes[1].set_xlabel("time (s)")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
