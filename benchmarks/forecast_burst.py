"""Forecasts through a burst under queues (issue 96, items 4-6): each refresh's CPU, and the
accuracy before, during and after the burst, with and without the queues file.

    .venv/bin/python -m benchmarks.forecast_burst cost --stream out/burst-9601
        [--window 3600:3720] [--stride 1] [--replays 20] [--against OLD/src] [--json FILE]
    .venv/bin/python -m benchmarks.forecast_burst accuracy --stream out/burst-9601
        [--seed 9601] [--replays 20] [--one-queue | --queues-only] [--json FILE]

``--stream DIR`` is a stream `benchmarks/burst_stream.py` wrote (``stream.yaml``,
``queues.yaml``); each command runs it twice, with its queues file (``queues``) and as one
queue (``one``), under ``default``.

``cost``: the run stops at every `--stride`-th arrival time inside `--window` (seconds;
by default the burst's, 3600 to 3720 s) and refreshes there the forecasts of every
workflow present, two ways, each timed in CPU seconds of this process:

* ``evaluate``: what `idlegate forecast evaluate` runs at a refresh (`sim.forecast.
  forecast` of `--replays` replays, the start at its quantile, within the command's
  default budget of events where the package has one, `EvalSettings.budget`);
* ``operator``: the operator's refresh, within `sim.forecast.BUDGET` events and
  `sim.forecast.SECONDS` of CPU.

With `--arrivals poisson|queues` both ways replay the arrivals the operator's refresh
invents (`sim.forecast_arrivals.invent`, from the last `TEMPLATES` workflows that
arrived); the first replay always runs whole, so a refresh may take more than
`SECONDS` (`--window LO:HI` after the burst's last arrival times its drain).

Printed: per pool and way, the refreshes, their CPU p50, p99 and largest, and the events
of the largest. `--against SRC` runs the same in a child process on the package at SRC
(the code before), and prints each figure beside it with the ratio now ÷ before.

``accuracy``: `idlegate forecast evaluate`'s runs (`evaluation.forecast_eval.evaluate`,
at every arrival), scored over all forecasts and per window of when they were made:
``before`` the burst, ``burst`` (its arrivals), ``drain`` (until the hour after it ends)
and ``after``; per window the shipped forecast's start error ÷ the wait (median, and how
many were scored), finish error ÷ the JCT, the 80 % interval's coverage of starts and
finishes, and how many forecasts of a waiting workflow gave a finish equal to their
start (item 6: none may). Each refresh's CPU is recorded too (p50, p99 over the burst's
and the drain's refreshes).

``stretch --dumps BEFORE.json AFTER.json``: two ``accuracy --dump`` runs of one pool, on
the code before item 5's stretch and with it, compared forecast by forecast per window:
the share of the pool the stretch took (`sim.forecast_overtake.Overtake.stretch`), the
share the actual start needed, and how many later submissions overtook the workflow.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.evaluation import forecast_eval
from idlegate.evaluation.comparison import WorkloadOptions, build
from idlegate.evaluation.forecast_report import figures
from idlegate.flags import description, run_script
from idlegate.policy import make_scheduler
from idlegate.sim import forecast as sim_forecast
from idlegate.sim.engine import Engine
from idlegate.sim.forecast_arrivals import TEMPLATES, arrived, invent

POOLS = ("queues", "one")
"""The pools a stream runs as: its queues file, or one queue."""
DRAIN = 3600.0
"""The ``drain`` window: this long after the burst's last arrival."""


def options(stream: Path, pool: str) -> WorkloadOptions:
    queues = stream / "queues.yaml" if pool == "queues" else None
    return WorkloadOptions(path=stream / "stream.yaml", queues=queues)


def burst_window(stream: Path) -> tuple[float, float]:
    """The burst's first and last arrival (its workflows are named ``burst-N``)."""
    built = build("file", 0, options(stream, "one"))
    times = [a.time for a in built.jobs if a.name.startswith("burst-")]
    return min(times), max(times)


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    began = time.process_time()
    out = call()
    return out, time.process_time() - began


# -- cost ------------------------------------------------------------------------------


def cost(args: argparse.Namespace) -> dict[str, Any]:
    lo, hi = _window(args)
    out: dict[str, Any] = {"window": [lo, hi], "stride": args.stride, "replays": args.replays}
    if args.arrivals != "none":
        out["arrivals"] = args.arrivals
    for pool in POOLS:
        out[pool] = _pool_cost(
            args.stream, pool, (lo, hi), args.stride, args.replays, args.seed, args.arrivals
        )
    return out


def _window(args: argparse.Namespace) -> tuple[float, float]:
    if args.window:
        lo, hi = (float(x) for x in args.window.split(":"))
        return lo, hi
    return burst_window(args.stream)


def _pool_cost(
    stream: Path,
    pool: str,
    window: tuple[float, float],
    stride: int,
    replays: int,
    seed: int,
    arrivals: str = "none",
) -> dict[str, Any]:
    lo, hi = window
    built = build("file", seed, options(stream, pool))
    engine = Engine.for_workload(built, make_scheduler("default"), seed)
    times = sorted({a.time for a in built.jobs if lo <= a.time <= hi})[::stride]
    seen = _Seen(built.jobs, arrivals != "none")
    waves = built.fidelity.wave_durations
    cache: dict[str, Any] = {}
    spent: dict[str, list[tuple[float, int, int]]] = {"evaluate": [], "operator": []}
    rng = np.random.default_rng(seed)
    for t in times:
        seen.run(engine, t)
        cluster = engine.cluster
        assert engine.scheduler is not None
        rule = forecast_eval.replay_scheduler(engine.scheduler, "default", cache)
        s = int(rng.integers(2**63))
        drawn = invent(arrivals, cluster, seen.recent, replays, rng)
        futures = None if drawn is None else list(drawn)
        for way, caps in (("evaluate", _evaluate_caps()), ("operator", OPERATOR)):
            got, cpu = timed(
                functools.partial(
                    sim_forecast.forecast,
                    cluster,
                    rule,
                    seed=s,
                    replays=replays,
                    waves=waves,
                    start_quantile=sim_forecast.start_quantile(futures is not None),
                    **({} if futures is None else {"futures": futures}),
                    **caps,
                )
            )
            spent[way].append((cpu, got.events, len(cluster.jobs)))
    return {way: _summary(rows) for way, rows in spent.items()}


class _Seen:
    """The last `TEMPLATES` workflows that arrived (what the operator's refresh copies when
    it invents arrivals), kept by running the engine to each arrival time on the way to a
    refresh's (only where `wanted`: else it runs straight there)."""

    def __init__(self, jobs: Sequence[Any], wanted: bool) -> None:
        self.times = deque(sorted({a.time for a in jobs}) if wanted else [])
        self.recent: deque[Any] = deque(maxlen=TEMPLATES)

    def run(self, engine: Engine, until: float) -> None:
        while self.times and self.times[0] <= until:
            t = self.times.popleft()
            engine.run(t)
            arrived(self.recent, engine.cluster.jobs, t)
        engine.run(until)


OPERATOR = {
    "budget": sim_forecast.BUDGET,
    "seconds": sim_forecast.SECONDS,
    "clock": time.process_time,
}
"""The operator's caps of a refresh's replays (`api.forecast_book`'s)."""


def _evaluate_caps() -> dict[str, Any]:
    """What `forecast evaluate` caps a refresh's replays with, on this package (none
    before its `EvalSettings.budget`)."""
    fields = forecast_eval.EvalSettings.__dataclass_fields__
    return {"budget": fields["budget"].default} if "budget" in fields else {}


def _summary(rows: Sequence[tuple[float, int, int]]) -> dict[str, Any]:
    cpu = [r[0] for r in rows]
    top = max(rows) if rows else (0.0, 0, 0)
    return {
        "refreshes": len(rows),
        "p50": float(np.quantile(cpu, 0.5)) if cpu else None,
        "p99": float(np.quantile(cpu, 0.99)) if cpu else None,
        "max": top[0],
        "events_of_max": top[1],
        "present_at_max": top[2],
    }


# -- accuracy --------------------------------------------------------------------------


def accuracy(args: argparse.Namespace) -> dict[str, Any]:
    lo, hi = burst_window(args.stream)
    windows = {
        "all": (-np.inf, np.inf),
        "before": (-np.inf, lo),
        "burst": (lo, hi + 1e-9),
        "drain": (hi + 1e-9, hi + DRAIN),
        "after": (hi + DRAIN, np.inf),
    }
    pools = [p for p in POOLS if p in args.pools.split(",")]
    out: dict[str, Any] = {"burst": [lo, hi], "seed": args.seed, "replays": args.replays}
    for pool in pools:
        budget = {} if args.budget is None else {"budget": args.budget or None}
        settings = forecast_eval.EvalSettings(
            "file",
            args.scheduler,
            options(args.stream, pool),
            replays=args.replays,
            arrivals=args.arrivals,
            **budget,
        )
        counted = _Counted(forecast_eval.forecast)
        forecast_eval.forecast = counted  # type: ignore[assignment]
        try:
            began = time.process_time()
            (run,) = forecast_eval.evaluate(settings, [args.seed])
            took = time.process_time() - began
        finally:
            forecast_eval.forecast = counted.real  # type: ignore[assignment]
        cpu = counted.cpu
        if args.dump:
            _dump(run, Path(f"{args.dump}.{pool}.json"), cpu)
        out[pool] = {
            "cpu_seconds": took,
            "refresh_cpu": _cpu_by_window(cpu, windows),
            "windows": {name: _scored(run, w) for name, w in windows.items()},
        }
        print(f"{pool}: {took:.0f} s of CPU", file=sys.stderr)
    return out


class _Counted:
    """`sim.forecast.forecast` timed: each refresh's (time, CPU seconds), not the declared
    plan's (its one replay without waves)."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real
        self.cpu: list[tuple[float, float]] = []

    def __call__(self, cluster: Any, scheduler: Any, **kw: Any) -> Any:
        got, took = timed(functools.partial(self.real, cluster, scheduler, **kw))
        if kw.get("waves", True):
            self.cpu.append((cluster.now, took))
        return got


def _dump(run: forecast_eval.SeedRun, path: Path, cpu: Sequence[tuple[float, float]]) -> None:
    """Every forecast of `run` and what happened, as JSON (for a look of one's own)."""
    doc = {
        "predictions": [
            [p.method, p.job_id, p.made_at, p.started, list(p.start), list(p.finish)]
            for p in run.predictions
            if p.method in ("calibrated", "forecast")
        ],
        "actual": {
            str(i): [r.name, r.arrival, r.first_start, r.finish] for i, r in run.actual.items()
        },
        "refresh_cpu": list(cpu),
    }
    path.write_text(json.dumps(doc))


def _cpu_by_window(
    cpu: Sequence[tuple[float, float]], windows: dict[str, tuple[float, float]]
) -> dict[str, Any]:
    out = {}
    for name, (lo, hi) in windows.items():
        got = [c for t, c in cpu if lo <= t < hi]
        out[name] = {
            "refreshes": len(got),
            "p50": float(np.quantile(got, 0.5)) if got else None,
            "p99": float(np.quantile(got, 0.99)) if got else None,
            "max": max(got, default=None),
        }
    return out


def _scored(run: forecast_eval.SeedRun, window: tuple[float, float]) -> dict[str, Any]:
    lo, hi = window
    part = forecast_eval.SeedRun(
        run.seed,
        [p for p in run.predictions if lo <= p.made_at < hi],
        [u for u in run.unavailable],
        run.actual,
    )
    f = figures([part], "calibrated")
    raw = [p for p in part.predictions if p.method == "forecast" and not p.started]
    return {
        "start_n": f.start_n,
        "start_rel_median": f.start_rel_median,
        "start_inside": f.start_inside,
        "start_bias_median": f.start_bias_median,
        "finish_n": f.finish_n,
        "finish_rel_median": f.finish_rel_median,
        "finish_inside": f.finish_inside,
        "waiting_forecasts": len(raw),
        "finish_equals_start": sum(p.finish.median == p.start.median for p in raw),
        "calibrated_finish_equals_start": sum(
            p.finish.median == p.start.median
            for p in part.predictions
            if p.method == "calibrated" and not p.started
        ),
    }


# -- the stretch, forecast by forecast ---------------------------------------------------


def stretch(args: argparse.Namespace) -> dict[str, Any]:
    """Per window, from two `--dump`s of the same run (the code before the stretch, then
    with it): the share ρ the stretch took of each waiting forecast scored (it moved the
    start m from a lead L: ρ = m / (m + L)), the ρ its actual start needed (1 − L ÷ the
    wait from the forecast), and how many workflows submitted after the forecast started
    before it (the ones that overtook it)."""
    lo, hi = burst_window(args.stream)
    before, after = (json.loads(Path(p).read_text()) for p in args.dumps)
    actual = after["actual"]
    starts = sorted((r[1], r[2]) for r in actual.values())
    old = {(p[1], p[2]): p for p in before["predictions"] if p[0] == "forecast" and not p[3]}
    rows: dict[str, list[tuple[float, float, int]]] = {}
    for p in after["predictions"]:
        was = old.get((p[1], p[2]))
        if p[0] != "forecast" or p[3] or was is None:
            continue
        made, lead = p[2], was[4][1] - p[2]
        _, arrival, start, _ = actual[str(p[1])]
        if start - arrival < 60 or lead <= 0:
            continue
        moved = p[4][1] - was[4][1]
        over = sum(made < a and s < start for a, s in starts)
        window = _window_of(made, lo, hi)
        rows.setdefault(window, []).append(
            (moved / (moved + lead), 1 - lead / (start - made), over)
        )
    return {
        w: {
            "n": len(v),
            "rho_taken": float(np.median([r[0] for r in v])),
            "rho_needed": float(np.median([r[1] for r in v])),
            "overtaken_by": float(np.median([r[2] for r in v])),
        }
        for w, v in rows.items()
    }


def _window_of(made: float, lo: float, hi: float) -> str:
    if made < lo:
        return "before"
    return "burst" if made <= hi else "drain" if made < hi + DRAIN else "after"


def show_stretch(now: dict[str, Any]) -> None:
    for w, got in now.items():
        print(
            f"{w:7} n {got['n']:4}  rho taken {got['rho_taken']:.3f}  needed "
            f"{got['rho_needed']:.3f}  overtaken by {got['overtaken_by']:.0f} (medians)"
        )


# -- printing and the code before ------------------------------------------------------


def before(args: argparse.Namespace, src: str) -> dict[str, Any]:
    """The same command in a child process on the package at `src`."""
    argv = [a for a in sys.argv[1:]]
    i = argv.index("--against")
    del argv[i : i + 2]
    env = {**os.environ, "PYTHONPATH": str(Path(src).resolve())}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.forecast_burst", *argv, "--json", "-"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout)


def show_cost(now: dict[str, Any], old: dict[str, Any] | None) -> None:
    lo, hi = now["window"]
    invented = f", {now['arrivals']} arrivals invented" if "arrivals" in now else ""
    print(f"refresh CPU at the arrivals of {lo:g}-{hi:g} s, every {now['stride']}{invented}")
    for pool in POOLS:
        for way in ("evaluate", "operator"):
            got = now[pool][way]
            line = (
                f"{pool:6} {way:8}  n {got['refreshes']:4}  p50 {got['p50']:.3f} s  "
                f"p99 {got['p99']:.3f} s  max {got['max']:.3f} s ({got['events_of_max']} events)"
            )
            if old is not None:
                was = old[pool][way]
                line += (
                    f"  | before p50 {was['p50']:.3f} s  p99 {was['p99']:.3f} s  "
                    f"ratio p50 {got['p50'] / was['p50']:.2f}  p99 {got['p99'] / was['p99']:.2f}"
                )
            print(line)


def show_accuracy(now: dict[str, Any]) -> None:
    lo, hi = now["burst"]
    print(f"burst {lo:g}-{hi:g} s, seed {now['seed']}, {now['replays']} replays")
    for pool in POOLS:
        if pool not in now:
            continue
        print(f"{pool}: {now[pool]['cpu_seconds']:.0f} s of CPU in all")
        for name, w in now[pool]["windows"].items():
            print(
                f"  {name:7} start {100 * w['start_rel_median']:5.1f} % (n {w['start_n']:4})"
                f"  finish {100 * w['finish_rel_median']:5.1f} %"
                f"  in 80 %: {100 * w['start_inside']:3.0f} / {100 * w['finish_inside']:3.0f} %"
                f"  finish = start {w['finish_equals_start']} of {w['waiting_forecasts']}"
            )
        for name, c in now[pool]["refresh_cpu"].items():
            if c["refreshes"]:
                print(
                    f"  refresh CPU {name:7} n {c['refreshes']:4}  p50 {c['p50']:.3f} s"
                    f"  p99 {c['p99']:.3f} s  max {c['max']:.3f} s"
                )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description(__doc__))
    p.add_argument(
        "what",
        choices=("cost", "accuracy", "stretch"),
        help="cost: refreshes' CPU through the burst; accuracy: forecast evaluate per window; "
        "stretch: two --dump runs matched",
    )
    p.add_argument(
        "--stream", type=Path, required=True, help="a directory benchmarks.burst_stream wrote"
    )
    p.add_argument("--seed", type=int, default=9601, help="the runs' seed (default: %(default)s)")
    p.add_argument("--replays", type=int, default=20, help="replays a refresh (default: 20)")
    p.add_argument("--window", default=None, help="LO:HI seconds (cost; default the burst)")
    p.add_argument("--stride", type=int, default=1, help="cost: every Nth arrival (default: 1)")
    p.add_argument("--pools", default="queues,one", help="accuracy: queues, one or both")
    p.add_argument("--scheduler", default="default", help="accuracy: the pool's scheduler")
    p.add_argument(
        "--arrivals",
        choices=("none", "poisson", "queues", "oracle"),
        default="none",
        help="what the replays invent, as forecast evaluate's --arrivals (cost: none, "
        "poisson or queues, as the operator invents them; default: %(default)s)",
    )
    p.add_argument(
        "--budget", type=int, default=None, help="accuracy: forecast evaluate's --budget"
    )
    p.add_argument("--against", default=None, help="cost: another checkout's src, timed beside")
    p.add_argument("--json", default=None, help="write the figures here (- : stdout only)")
    p.add_argument("--dump", default=None, help="accuracy: write every forecast to DUMP.POOL.json")
    p.add_argument("--dumps", nargs=2, default=None, help="stretch: BEFORE.json AFTER.json")
    return p


def main(args: argparse.Namespace) -> None:
    if args.what == "stretch" and not args.dumps:
        raise IdlegateError("stretch compares two runs' dumps: give --dumps BEFORE.json AFTER.json")
    if args.what == "cost" and args.arrivals == "oracle":
        raise IdlegateError(
            "cost times the operator's refresh, which invents none, poisson or queues "
            "arrivals: give --arrivals one of those (oracle is accuracy's only)"
        )
    if not (args.stream / "stream.yaml").is_file():
        raise IdlegateError(
            f"{args.stream} holds no stream.yaml: write one first, e.g. "
            f"python -m benchmarks.burst_stream --seed 9601 --out {args.stream}"
        )
    run = {"cost": cost, "accuracy": accuracy, "stretch": stretch}[args.what]
    got = run(args)
    if args.json == "-":
        print(json.dumps(got))
        return
    if args.json:
        Path(args.json).write_text(json.dumps(got, indent=1) + "\n")
    if args.what == "cost":
        show_cost(got, before(args, args.against) if args.against else None)
    elif args.what == "stretch":
        show_stretch(got)
    else:
        show_accuracy(got)


if __name__ == "__main__":
    run_script(parser(), main)
