"""What a portfolio's rounds cost, side by side with a plain rule on the same run.

Each scheduler runs the same workload and seed in this process, one after the other; for
each it prints the CPU of the whole run, the rounds' own CPU and modelled seconds
(`Choice.cpu_seconds`, `Choice.modelled_seconds`), the number of rounds, the mean JCT,
and the run's CPU over the first scheduler's (the rule's: the column "× srpt"). With ``--rounds`` it lists
every round: when, its window (running, trimmed), modelled and measured CPU, its
candidates and how many of their replays it cut (`policy.portfolio.runs`), and what it
chose. With ``--profile AT`` it profiles (cProfile) every round that starts within a
second of the clock's AT and prints where its CPU went (process time, so the profiler's
own cost is in it); with ``--sample``, where every round's time goes by sampling the
stack (`Sampler`: cProfile's shares are mostly its own on these small calls); with
``--replays``, every replay of the rounds (`Replays`: its lead, events, CPU, whether it
was cut) and the events they replay against the run's own; with ``--cuts``, every
replay the sequential test cut (`policy.portfolio.sequential`) replayed again to the
sure bound and to its end (`Cuts`): how many of its cuts were wrong (the whole replay
ended within the reference) and the events they saved. The
figures of docs/research/brain-cost.md, "What a round may cost":

    .venv/bin/python -m benchmarks.round_cost -w teams --seed 1 \\
        --schedulers "srpt,default?budget=none,default,default?hourly=20"
    .venv/bin/python -m benchmarks.round_cost -w tpch --tpch-dir ../shared/data/tpch -k 50 \\
        --interarrival 15 --jobs-count 100 --seed 2002 \\
        --schedulers "srpt,default?budget=none,default,default?hourly=20"
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from idlegate.evaluation.comparison import WorkloadOptions, build
from idlegate.flags import description, run_script
from idlegate.policy import make_scheduler
from idlegate.policy.portfolio import PortfolioScheduler
from idlegate.policy.portfolio import runs as runs_module
from idlegate.policy.portfolio.runs import Runs
from idlegate.sim.engine import simulate


def profiled(scheduler: Any, at: float) -> None:
    """Profile `scheduler`'s rounds that start within a second of `at` (a portfolio's)."""
    if not isinstance(scheduler, PortfolioScheduler):
        return
    own = scheduler.replay

    def replay(request: Any, check: Any = None) -> Any:
        if abs(request.at - at) >= 1.0:
            return own(request, check)
        profile = cProfile.Profile(time.process_time)
        choice = profile.runcall(own, request, check)
        print(f"{scheduler.name}, the round at {request.at:.0f} s: its {choice.cpu_seconds:.2f} s")
        pstats.Stats(profile).sort_stats("tottime").print_stats(12)
        return choice

    scheduler.replay = replay  # type: ignore[method-assign]


class Sampler:
    """Where the rounds' time goes, by sampling the main thread's stack every `interval`
    seconds while a round runs (`sampled`): cProfile's cost per call is most of a call
    of the replays' small functions, so its shares are its own (it put the idle rule's
    stage scan first on teams, which a sample puts below 1 %)."""

    def __init__(self, interval: float = 0.002) -> None:
        self.interval, self.on, self.samples = interval, False, 0
        self.lines: Counter[str] = Counter()
        """Per line of code running (the innermost frame): samples."""
        self.functions: Counter[str] = Counter()
        """Per function on the stack (inclusive): samples."""
        self._main = threading.main_thread().ident or 0
        # (the sampler runs when the main thread lets go of the interpreter's lock: at
        # once in a call that releases it, an ONNX run, else after the switch interval,
        # which a short one keeps from weighing the releasing calls several times over)
        sys.setswitchinterval(interval / 20)
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while True:
            time.sleep(self.interval)
            frame = sys._current_frames().get(self._main) if self.on else None
            if frame is None:
                continue
            self.samples += 1
            self.lines[f"{_where(frame.f_code)} line {frame.f_lineno}"] += 1
            seen = set()
            while frame is not None:
                seen.add(_where(frame.f_code))
                frame = frame.f_back
            self.functions.update(seen)

    def report(self, top: int = 25) -> None:
        n = max(1, self.samples)
        print(
            f"{self.samples} samples of the rounds; by line running, then by function on the stack"
        )
        for counter in (self.lines, self.functions):
            # (those on every sample's stack, the run and the round's own calls, say nothing)
            shown = [(w, c) for w, c in counter.most_common() if c < 0.99 * n][:top]
            for where, count in shown:
                print(f"{100 * count / n:6.1f} %  {where}")


def _where(code: Any) -> str:
    return f"{code.co_filename.rsplit('/src/', 1)[-1]}:{code.co_firstlineno}({code.co_name})"


def sampled(scheduler: Any, sampler: Sampler) -> None:
    """`sampler` on while `scheduler`'s rounds run (a portfolio's)."""
    if not isinstance(scheduler, PortfolioScheduler):
        return
    own = scheduler.replay

    def replay(request: Any, check: Any = None) -> Any:
        sampler.on = True
        try:
            return own(request, check)
        finally:
            sampler.on = False

    scheduler.replay = replay  # type: ignore[method-assign]


class Replays:
    """Each replay the rounds ran (`policy.portfolio.runs.Runs`: the candidate it led, the
    window's workflows, its events, its CPU, whether it was cut), while `on`: how many
    events the rounds replay against the run's own."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, str, int, float, bool]] = []
        own = self.own = Runs._run

        def timed(runs: Runs, lead: str, s: int) -> None:
            began = time.process_time()
            events = runs._replays[lead].events if lead in runs._replays else 0
            own(runs, lead, s)
            r = runs._replays[lead]
            cpu = time.process_time() - began
            self.rows.append((len(runs._times), lead, r.events - events, cpu, r.bound is not None))

        Runs._run = timed  # type: ignore[method-assign]

    def report(self, events: int) -> None:
        replayed = sum(row[2] for row in self.rows)
        print(f"{len(self.rows)} replays, {replayed:,} events ({replayed / max(1, events):.1f}× "
              f"the run's {events:,}); per replay: window, events, CPU s, cut, lead")  # fmt: skip
        for n, lead, ev, cpu, cut in self.rows:
            print(f"    {n:4d} {ev:8d} {cpu:6.2f} {'cut' if cut else '   '} {lead}")


class Cuts:
    """Each replay the sequential test cut, replayed again to the sure bound and to its
    end, while `on` (the rounds' answers are those of the test's cuts): `wrong`, the cuts
    whose whole replay ended within the limit, and `beyond`, how far past the cut's
    reference each of those ended (the limit is `margin` past it: `CUT`, or with
    `cut_behind` a hair over the followed candidate's score); `saved` of `would`, the
    events the test saved of those the sure bound would have run."""

    def __init__(self, margin: float = runs_module.CUT) -> None:
        self.cuts = self.wrong = self.saved = self.would = 0
        self.beyond: list[float] = []
        own = self.own = runs_module._simulate

        def watched(workload: Any, scheduler: Any, seed: int, limit: Any, test: Any) -> Any:
            out = own(workload, scheduler, seed, limit, test)
            cut = isinstance(out, runs_module._Cut)
            if not cut or test is None or out.area >= limit * (1 - runs_module._SLACK):
                return out  # (not the test's cut: the sure bound's, or none)
            sure = own(workload, scheduler, seed, limit, None)
            whole = own(workload, scheduler, seed, None, None)
            self.cuts += 1
            if whole.jobs_time_integral < limit:
                self.wrong += 1
                self.beyond.append(whole.jobs_time_integral / limit * (1 + margin) - 1)
            self.would += sure.events
            self.saved += sure.events - out.events
            return out

        runs_module._simulate = watched  # type: ignore[assignment]

    def close(self) -> None:
        runs_module._simulate = self.own  # type: ignore[assignment]

    def report(self) -> None:
        beyond = (
            f" (they ended {100 * min(self.beyond):+.1f} to {100 * max(self.beyond):+.1f} % "
            "past the reference)"
            if self.beyond
            else ""
        )
        print(
            f"{self.cuts} cuts by the test, {self.wrong} wrong{beyond}; they ran "
            f"{self.would - self.saved:,} of the {self.would:,} events the sure bound would "
            f"have ({100 * self.saved / max(1, self.would):.0f} % saved)"
        )


def cut_margin(spec: str) -> float:
    """How far past its reference a replay of `spec`'s rounds is cut (`Cuts`)."""
    config = getattr(make_scheduler(spec), "config", None)
    return runs_module._BEHIND if getattr(config, "cut_behind", False) else runs_module.CUT


def run(
    workload: Any,
    spec: str,
    seed: int,
    profile: float | None = None,
    sampler: Sampler | None = None,
) -> dict[str, Any]:
    """One run of `spec`: its CPU, its rounds' and its mean JCT (`profile`: `profiled`;
    `sampler`: `sampled`)."""
    scheduler = make_scheduler(spec)
    if profile is not None:
        profiled(scheduler, profile)
    if sampler is not None:
        sampled(scheduler, sampler)
    began = time.process_time()
    result = simulate(workload, scheduler, seed=seed)
    cpu = time.process_time() - began
    rounds = [c for c in getattr(scheduler, "rounds", []) if c.workflows]
    return {
        "spec": spec,
        "cpu": cpu,
        "rounds": rounds,
        "rounds_cpu": sum(c.cpu_seconds for c in rounds),
        "modelled": sum(c.modelled_seconds for c in rounds),
        "jct": sum(r.jct for r in result.records) / max(1, len(result.records)),
        "end": result.end_time,
        "events": result.events,
    }


def parser() -> argparse.ArgumentParser:
    """The script's options."""
    ap = argparse.ArgumentParser(description=description(__doc__))
    ap.add_argument("-w", "--workload", default="teams", help="the workload (default teams)")
    ap.add_argument("--seed", type=int, default=1, help="the workload's seed (default 1)")
    ap.add_argument("-k", "--executors", type=int, help="executors (default: the workload's own)")
    ap.add_argument(
        "--interarrival", type=float, help="mean seconds between arrivals (default: the workload's)"
    )
    ap.add_argument("--jobs-count", type=int, help="workflows (default: the workload's own)")
    ap.add_argument(
        "--tpch-dir", type=Path, help="TPC-H traces for -w tpch (default $IDLEGATE_TPCH_DIR)"
    )
    ap.add_argument(
        "--schedulers",
        default=SCHEDULERS,
        help="scheduler specs, comma-separated; the first is the one each run's CPU is "
        f"divided by (the column '× FIRST' names it); 'rounds' counts a portfolio's rounds that had "
        f"workflows to judge (default {SCHEDULERS})",
    )
    ap.add_argument("--rounds", action="store_true", help="list every round")
    ap.add_argument(
        "--profile", type=float, metavar="AT", help="profile a round at AT s (default: none)"
    )
    ap.add_argument("--sample", action="store_true", help="sample where the rounds' time goes")
    ap.add_argument("--replays", action="store_true", help="list the rounds' replays")
    ap.add_argument(
        "--cuts",
        action="store_true",
        help="check the sequential test's cuts (each replayed again to its end: the CPU columns count those replays too)",
    )
    return ap


SCHEDULERS = "srpt,default?budget=none,default"
"""``--schedulers``'s default: a plain rule, then the portfolio without and with its budget."""


def main(argv: list[str] | None = None) -> None:
    run_script(parser(), report, argv)


def report(args: argparse.Namespace) -> None:
    """Run each of ``--schedulers`` on the workload and print the table (and the asked
    listings); every spec is checked before the first run starts."""
    specs = args.schedulers.split(",")
    for spec in specs:
        make_scheduler(spec)  # (a mistake in the last spec stops before the first run)
    sampler = Sampler() if args.sample else None
    options = WorkloadOptions(
        num_executors=args.executors,
        interarrival=args.interarrival,
        num_jobs=args.jobs_count,
        tpch_dir=args.tpch_dir,
    )
    workload = build(args.workload, args.seed, options)
    runs = []
    for spec in specs:
        replays = Replays() if args.replays else None
        cuts = Cuts(cut_margin(spec)) if args.cuts else None
        runs.append(run(workload, spec, args.seed, args.profile, sampler))
        if cuts is not None:
            cuts.close()
            print(f"{spec}: ", end="")
            cuts.report()
        if replays is not None:
            Runs._run = replays.own  # type: ignore[method-assign]
            if replays.rows:
                print(f"{spec}:")
                replays.report(runs[-1]["events"])
    base = runs[0]["cpu"]
    times = f"× {specs[0]}"
    wide = max(8, len(times))
    print(f"{args.workload}, seed {args.seed}: {len(workload.jobs)} workflows")
    print(f"{'scheduler':32} {'run CPU s':>9} {times:>{wide}} {'rounds':>6} {'their CPU s':>11} "
          f"{'modelled s':>10} {'mean JCT s':>10}")  # fmt: skip
    for r in runs:
        # (a run too fast to divide by shows '-')
        ratio = f"{r['cpu'] / base:{wide}.1f}" if base >= 0.05 else f"{'-':>{wide}}"
        print(
            f"{r['spec']:32} {r['cpu']:9.2f} {ratio} {len(r['rounds']):6d} "
            f"{r['rounds_cpu']:11.2f} {r['modelled']:10.2f} {r['jct']:10.2f}"
        )
        if args.rounds:
            for c in r["rounds"]:
                print(
                    f"    at {c.at:8.0f} s: {c.workflows} workflows ({c.running} running, "
                    f"{c.trimmed} trimmed), modelled {c.modelled_seconds:.2f} s, CPU "
                    f"{c.cpu_seconds:.2f} s, {len(c.scores)} candidates ({len(c.cut)} cut), "
                    f"{c.candidate} ({c.reason})"
                )
    if sampler is not None:
        sampler.report()


if __name__ == "__main__":
    main()
