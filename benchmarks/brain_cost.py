"""What the portfolio scheduler costs: a replay round's CPU, and its decisions' latency.

    .venv/bin/python benchmarks/brain_cost.py [--rounds 5] [--pool 40] [--hours 2]
        [--stream WORKLOAD [--window 200] [--tpch-dir DIR]]

* **A round.** Windows of `--hours` of `k8s-batch` (1,000 workflows, pool `--pool`,
  seed 0; the windows end at 6, 10, 14, ... hours) are replayed under the whole default
  portfolio (`policy.portfolio.DEFAULT_CANDIDATES`: the rules, the tuned grids, the
  analytic rule over the round's best rule, the shipped ONNX policy), as one round of
  ``portfolio`` does. Printed: the round's CPU seconds (thread time) and the modelled
  seconds the simulator charges for it (`modelled_seconds`), per round and their maximum;
  then the same for the planner candidate alone (left out of the round's figure, as its
  cost is its own).
* **Other streams** (``--stream WORKLOAD [--window 200] [--each]``): windows of that many
  consecutive workflows of the workload's 1,000-workflow stream (seed 2000) replayed the
  same way; printed: each round's workflows, tasks, candidates and CPU seconds; with
  ``--each``, then every candidate the round replayed, replayed alone on its window:
  its CPU seconds, most first (where a round's CPU goes).
* **A decision.** The portfolio following srpt (``replayer=worker``: rounds happen
  elsewhere) decides on the whole 1,000-workflow stream; printed: p50, p99 and max of
  one `decide` call in wall microseconds, beside srpt's own.
* **The model's constants.** Per simulated event (a rule's decisions included) and per
  decision of the ONNX policy beyond that, fitted on replays of the last window: what
  `EVENT_SECONDS` and `DECISION_SECONDS` should read.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from idlegate.flags import description
from idlegate.policy import make_scheduler
from idlegate.policy.portfolio import (
    PLANNER,
    PortfolioScheduler,
    ReplayRequest,
    replay_portfolio,
)
from idlegate.sim.engine import JobArrival, simulate
from idlegate.sim.protocol import Action, ClusterView
from idlegate.sim.workloads import build_workload

HOUR = 3600.0


def windows(pool: int, hours: float, rounds: int) -> list[tuple[JobArrival, ...]]:
    """`rounds` windows of `hours` of k8s-batch, ending 6 h, 10 h, ... into the stream."""
    workload = build_workload("k8s-batch", 0, num_jobs=1000, num_executors=pool)
    out = []
    for r in range(rounds):
        end = (6 + 4 * r) * HOUR
        out.append(tuple(j for j in workload.jobs if end - hours * HOUR <= j.time < end))
    return out


def stream_windows(
    workload: str, rounds: int, size: int, tpch_dir: str | None
) -> tuple[int, list[tuple[JobArrival, ...]]]:
    """(pool, `rounds` windows of `size` consecutive workflows of `workload`'s
    1,000-workflow stream at its defaults, seed 2000, every 200 workflows)."""
    options = {"num_jobs": 1000} | ({"tpch_dir": tpch_dir} if tpch_dir else {})
    built = build_workload(workload, 2000, **options)
    jobs = built.jobs
    return built.num_executors, [tuple(jobs[200 * r : 200 * r + size]) for r in range(rounds)]


def round_cost(brain: PortfolioScheduler, window: tuple[JobArrival, ...], pool: int) -> tuple:
    request = ReplayRequest(window, pool, 0.0, brain.following, 0, 0.0)
    started = time.thread_time()
    choice = brain.replay(request)
    return time.thread_time() - started, choice


def each_cost(
    specs: list[str], window: tuple[JobArrival, ...], pool: int
) -> list[tuple[float, str]]:
    """(CPU seconds, spec) of each candidate replaying `window` alone, most first."""
    out = []
    for spec in specs:
        scheduler = make_scheduler(spec)
        started = time.thread_time()
        replay_portfolio(window, {spec: scheduler}, pool, 0)
        out.append((time.thread_time() - started, spec))
    return sorted(out, reverse=True)


def planner_cost(window: tuple[JobArrival, ...], pool: int) -> float:
    started = time.thread_time()
    replay_portfolio(window, {PLANNER: make_scheduler(PLANNER)}, pool, 0)
    return time.thread_time() - started


class Timed:
    """Times each `decide` of `inner` (wall microseconds)."""

    def __init__(self, inner: object) -> None:
        self.inner, self.name, self.micros = inner, "timed", []

    def reset(self, rng: object) -> None:
        self.inner.reset(rng)  # type: ignore[attr-defined]

    def decide(self, view: ClusterView) -> Action:
        started = time.perf_counter()
        action = self.inner.decide(view)  # type: ignore[attr-defined]
        self.micros.append((time.perf_counter() - started) * 1e6)
        return action


def decision_latency(pool: int) -> dict[str, np.ndarray]:
    workload = build_workload("k8s-batch", 0, num_jobs=1000, num_executors=pool)
    out = {}
    for label, spec in (
        ("srpt", "srpt"),
        ("portfolio following srpt", "portfolio?start=srpt&replayer=worker"),
    ):
        timed = Timed(make_scheduler(spec))
        simulate(workload, timed, seed=0)
        out[label] = np.asarray(timed.micros)
    return out


def constants(window: tuple[JobArrival, ...], pool: int) -> tuple[float, float]:
    """(seconds per event with a rule deciding, per ONNX decision beyond that) fitted on
    replays (a rule's decisions go with the events: they are proportional)."""
    rows, costs = [], []
    for spec in ("fifo", "srpt", "fair", "weighted-fair", "learned:default"):
        scheduler = make_scheduler(spec)
        for seed in range(3):
            started = time.thread_time()
            result = replay_portfolio(window, {spec: scheduler}, pool, seed)
            costs.append(time.thread_time() - started)
            learned = spec.startswith("learned")
            made = result.decisions[spec]
            rows.append([result.events, made if learned else 0])
    fit, *_ = np.linalg.lstsq(np.asarray(rows, float), np.asarray(costs), rcond=None)
    return tuple(float(x) for x in fit)  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--rounds", type=int, default=5, help="windows replayed (default 5)")
    parser.add_argument("--pool", type=int, default=40, help="executors (default 40)")
    parser.add_argument(
        "--hours", type=float, default=2.0, help="length of a window in hours (default 2)"
    )
    parser.add_argument(
        "--stream",
        default=None,
        help="replay windows of this workload's stream instead (e.g. alibaba, tpch), "
        "`--window` consecutive workflows each, and print only the rounds",
    )
    parser.add_argument("--window", type=int, default=200, help="workflows a --stream window holds")
    parser.add_argument("--tpch-dir", default=None, help="the TPC-H traces (--stream tpch)")
    parser.add_argument(
        "--each", action="store_true", help="--stream: each candidate's CPU seconds alone"
    )
    args = parser.parse_args()
    brain = make_scheduler("portfolio")
    assert isinstance(brain, PortfolioScheduler)
    if args.stream is not None:
        pool, streamed = stream_windows(args.stream, args.rounds, args.window, args.tpch_dir)
        print(f"{args.stream}, pool {pool}, windows of {args.window} workflows, default portfolio")
        for i, window in enumerate(streamed):
            seconds, choice = round_cost(brain, window, pool)
            tasks = sum(sum(a.dag.tasks) for a in window)
            print(
                f"  round {i}: {len(window)} workflows, {tasks} tasks, "
                f"{len(choice.scores)} candidates, {seconds:.3f} s CPU"
            )
            if args.each:
                for alone, spec in each_cost(list(choice.scores), window, pool):
                    print(f"    {spec}: {alone:.3f} s CPU")
        return
    print(f"k8s-batch, pool {args.pool}, windows of {args.hours:g} h, default portfolio")
    cpu, modelled = [], []
    for i, window in enumerate(windows(args.pool, args.hours, args.rounds)):
        seconds, choice = round_cost(brain, window, args.pool)
        cpu.append(seconds)
        modelled.append(choice.modelled_seconds)
        print(
            f"  round {i}: {len(window)} workflows, {len(choice.scores)} candidates, "
            f"{seconds:.3f} s CPU (modelled {choice.modelled_seconds:.3f} s); {choice.why}"
        )
    print(
        f"  max {max(cpu):.3f} s CPU, mean {np.mean(cpu):.3f} s (modelled max {max(modelled):.3f} s)"
    )
    last = windows(args.pool, args.hours, args.rounds)[-1]
    print(f"planner candidate alone ({PLANNER}): {planner_cost(last, args.pool):.3f} s CPU")
    for label, micros in decision_latency(args.pool).items():
        p50, p99 = np.percentile(micros, [50, 99])
        print(
            f"decide, {label}: p50 {p50:.0f} us, p99 {p99:.0f} us, max {micros.max():.0f} us "
            f"({micros.size} decisions)"
        )
    event, onnx = constants(last, args.pool)
    print(f"fitted: {event * 1e6:.1f} us per event, {onnx * 1e6:.0f} us per ONNX decision")


if __name__ == "__main__":
    main()
