"""How much room deliberate idling leaves on the synthetic two-type workload.

The evaluation suite's synthetic cases (one-stage, one-task jobs of 10 s or 50 s work,
half of each, 4 executors, 1 + 99 jobs, Poisson arrivals at offered load 0.6 and 0.8),
seeds 0-19 by default, the same arrival sequence per seed for every variant, each of
the bases SJF and fair with:

* ``+ idle r on last`` — before a long job's stage takes the *last* free executor while
  others are busy, an idle slot of r × the stage's length (r = 0.02, 0.05, 0.1): the
  situation of Theorem 1, where a short job arriving soon would find nothing free;
* ``+ analytic`` — `AnalyticIdleScheduler` (the online Theorem 1–2 rule) on the base;
* ``+ clairvoyant`` — an upper-bound probe that *knows the arrival sequence*: in the same
  situation it idles exactly until the next arrival when that job is shorter and
  arrives within (l1 − l2) / 2 (Theorem 1's condition), else it launches.

It prints the average JCT of each (mean over seeds) and its paired change against the
base without idling (mean and 95 % CI over seeds). The statement in docs/research/results.md §3 of
how much idling can buy on this workload comes from this script.

    python benchmarks/idle_room.py [--seeds 20] [--loads 0.6,0.8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence

from idlegate.errors import IdlegateError
from idlegate.flags import add_seeds, description, run_script
from idlegate.policy import make_scheduler
from idlegate.policy.analytic import AnalyticIdleScheduler
from idlegate.sim.engine import Workload, simulate
from idlegate.sim.metrics import paired_relative_change, run_metrics
from idlegate.sim.protocol import Action, ClusterView, Decision, Scheduler
from idlegate.sim.workloads import build_workload

LONG_WORK = 30.0
"""Jobs with more total work than this are "long" (the workload's are 10 s and 50 s)."""


def _idle_candidate(action: Action, view: ClusterView) -> Decision | None:
    """`action` if it launches a long job's fresh stage onto the last free executors."""
    if not isinstance(action, Decision) or action.idle_delay > 0:
        return None
    stage = action.stage
    if stage.delayed or stage.launched or stage.job.total_work <= LONG_WORK:
        return None
    busy = view.num_executors - view.free_executors
    if busy == 0 or stage.tasks < view.free_executors:
        return None
    return action


class _IdleProbe:
    """The base, with an idle slot of `slot(…)` seconds in Theorem 1's situation (0: none)."""

    name = "idle-probe"

    def __init__(self, base: Scheduler) -> None:
        self.base = base

    def reset(self, rng: object) -> None:
        self.base.reset(rng)

    def slot(self, view: ClusterView, launch: Decision) -> float:
        raise NotImplementedError

    def decide(self, view: ClusterView) -> Action:
        action = self.base.decide(view)
        launch = _idle_candidate(action, view)
        if launch is None:
            return action
        delay = self.slot(view, launch)
        if delay <= 0:
            return action
        return Decision(launch.stage, launch.parallelism_cap, delay)


class LastExecutorIdle(_IdleProbe):
    """The base, with an idle slot of `ratio` × the stage's length in Theorem 1's situation."""

    def __init__(self, base: Scheduler, ratio: float) -> None:
        super().__init__(base)
        self.ratio = ratio

    def slot(self, view: ClusterView, launch: Decision) -> float:
        return self.ratio * launch.stage.duration


class ClairvoyantIdle(_IdleProbe):
    """The base, idling until the next arrival when Theorem 1 says that pays (knows `arrivals`)."""

    def __init__(self, base: Scheduler, workload: Workload) -> None:
        super().__init__(base)
        self.arrivals = [(j.time, j.dag.total_work / max(j.dag.tasks)) for j in workload.jobs]

    def slot(self, view: ClusterView, launch: Decision) -> float:
        nxt = next(((t, size) for t, size in self.arrivals if t > view.now), None)
        if nxt is None:
            return 0.0
        delta, l2 = nxt[0] - view.now, nxt[1]
        l1 = launch.stage.duration
        return delta + 1e-6 if l2 < l1 and delta < (l1 - l2) / 2 else 0.0


Variant = Callable[[Scheduler, Workload], Scheduler]
VARIANTS: dict[str, Variant] = {
    "": lambda base, _: base,
    " + idle 0.02 on last": lambda base, _: LastExecutorIdle(base, 0.02),
    " + idle 0.05 on last": lambda base, _: LastExecutorIdle(base, 0.05),
    " + idle 0.1 on last": lambda base, _: LastExecutorIdle(base, 0.1),
    " + analytic": lambda base, _: AnalyticIdleScheduler(base),
    " + clairvoyant": lambda base, w: ClairvoyantIdle(base, w),
}


def average_jct(workload: Workload, scheduler: Scheduler, seed: int) -> float:
    """Average JCT of one run (every job must finish: a slot policy could strand some)."""
    metrics = run_metrics(simulate(workload, scheduler, seed=seed))
    if metrics.unfinished:
        raise IdlegateError(f"{scheduler!r} left {metrics.unfinished} jobs unfinished")
    return metrics.avg_jct


def compare_load(load: float, seeds: Sequence[int]) -> None:
    """Print every base × variant on the synthetic workload at offered `load`."""
    workloads = [
        build_workload("synthetic", seed=s, load=load, init=1, num_stream=99) for s in seeds
    ]
    for base_name in ("sjf", "fair"):
        plain: list[float] = []
        for suffix, variant in VARIANTS.items():
            jcts = [
                average_jct(w, variant(make_scheduler(base_name), w), s)
                for s, w in zip(seeds, workloads, strict=True)
            ]
            plain = plain or jcts
            change = paired_relative_change(jcts, plain)
            print(
                f"{load:<5g} {base_name + suffix:<24} {statistics.fmean(jcts):>9.2f} "
                f"{change.mean:>+8.1%} [{change.low:+.1%}, {change.high:+.1%}]",
                flush=True,
            )


def _loads(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"loads are numbers separated by commas, e.g. 0.6,0.8; got {text!r}"
        ) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    add_seeds(parser, 20)
    parser.add_argument("--loads", type=_loads, default=[0.6, 0.8], help="e.g. 0.6,0.8")
    return run_script(parser, report, argv)


def report(args: argparse.Namespace) -> int:
    """Every variant at each of `args`' loads."""
    print(f"synthetic two-type, 4 executors, 1 + 99 jobs, seeds 0-{args.seeds - 1}")
    print(f"{'load':<5} {'variant':<24} {'avg JCT s':>9} {'vs base':>8} 95% CI")
    for load in args.loads:
        compare_load(load, range(args.seeds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
