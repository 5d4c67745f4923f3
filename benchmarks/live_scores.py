"""The scores a live pool's start calibration held, read back from `benchmarks.live_forecast`'s
``--json``: which forecast each came from, and what they widened.

The node pool's operator runs a cold burst, then a warm one (`benchmarks.live_forecast`).
Each workflow's first forecast is in the JSON with the replays' own interval (before the
calibration widened it), when it was made and the real start: the very score the operator
recorded (`sim.forecast_calibration.Calibration.record`), once the workflow had started
before a refresh. So the calibration each of the warm burst's first forecasts was widened
by is rebuilt here, by the module the operator runs, pooled (the code before the lead
bands) and per lead band (`banded`), and per run it prints the scores held at the warm
burst's first refresh (the largest, with their forecasts: made when, lead, how far past
the top), Q either way, and the share of the warm starts (waits ≥ `WAITED` s) each
widening held. A forecast whose interval shown is neither rebuilt widening is counted
(it should be none: the code that ran calibrated as one of the two).

    python -m benchmarks.live_scores RUN.json [--code SRC] [--top 8]
    python -m benchmarks.live_scores RUN.json --cold [--row "node pool, cold"] [--code SRC]
        [--seed 0] [--before SRC]

``--cold`` reads a burst's first forecasts instead (`first_forecasts`), run by run: when
they were made, how many the interval shown and the replays' own held, which way the
misses went, how many of the missed were overtaken by workflows that arrived after the
forecast, the signed error per second of lead (of all, of those a later arrival
overtook, of the rest), the widening per second of lead the pool gave them and the one
they needed (the 80 % quantile of their scores against the replays' interval); on a node
pool, with the log stretches the kubelets drew for its tasks (`drawn`, from `--seed`, as
live_forecast's, run i drawing from seed + i), and the mean log stretch the replays of its
first refresh draw from, as the first wave stood then (`at_first_refresh`), by the row's
code and by ``--before``'s beside it, and the wave's own.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np

from idlegate.api.task_pods import pod_name
from idlegate.errors import IdlegateError
from idlegate.flags import description, run_script, script_extras
from idlegate.sim.forecast import Span
from idlegate.sim.forecast_calibration import FLOOR, Calibration, band, calibrations
from idlegate.sim.task_times import EVIDENCE

with script_extras(__name__):  # (the live harness: the dev and operator extras)
    from benchmarks.live_forecast import (
        BURST,
        LATER,
        NAMESPACES,
        NODE_COUNT,
        NODE_CPU,
        SHAPES,
        WAITED,
    )
    from benchmarks.live_harness import SimKubelet

Outcome = dict[str, Any]


def runs(outcomes: Sequence[Outcome]) -> list[list[Outcome]]:
    """A row's outcomes split into its runs (each `BURST` + `LATER` workflows, in turn)."""
    ordered = sorted(outcomes, key=lambda o: o["arrival"])
    size = BURST + LATER
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def span(o: Outcome, key: str) -> Span:
    return Span(*o[key][0])


def widened(cal: Calibration, o: Outcome) -> Span:
    return cal.widen(span(o, "replayed"), o["made"], earliest=o["made"])


def replay(
    cold: Sequence[Outcome],
    warm: Sequence[Outcome],
    top: int,
    typical: dict[str, float] | None = None,
) -> dict[str, int]:
    """One run's calibration rebuilt (module docstring); prints what it held. Returns the
    warm starts held by each widening, their number, and the intervals shown neither way;
    with `typical` (a forecast's name → the pool's typical stretch as known at its score
    over its refresh's, 1 if not named), also per lead band with each score taken relative
    to it (`Calibration.record`'s `typical`: "rescaled")."""
    forecasts = sorted(
        (o for o in [*cold, *warm] if o["made"] is not None), key=lambda o: o["start"]
    )
    t0 = cold[0]["arrival"]
    shown = sorted((o for o in warm if o["made"] is not None), key=lambda o: o["made"])
    out = {"pooled": 0, "banded": 0, "rescaled": 0, "n": 0, "mismatch": 0}
    for i, o in enumerate(shown):
        cals = {
            "pooled": calibrations(live=True)["start"],
            "banded": calibrations(live=True)["start"],
            "rescaled": calibrations(live=True)["start"],
        }
        cals["pooled"].banded = False
        held = [f for f in forecasts if f["start"] <= o["made"]]
        for f in held:
            for name, cal in cals.items():
                ratio = (typical or {}).get(f["name"], 1.0) if name == "rescaled" else 1.0
                cal.record(span(f, "replayed"), f["made"], f["start"], ratio)
        if all(abs(widened(c, o).high - span(o, "shown").high) > 0.5 for c in cals.values()):
            out["mismatch"] += 1  # (shown neither way: not this module's calibration)
        if i == 0:
            pooled = cals["pooled"]
            print(f"  the warm burst's first refresh, {o['made'] - t0:.0f} s after the cold burst:")
            bands = ", ".join(
                f"{FLOOR * 2**b:.0f}-{FLOOR * 2 ** (b + 1):.0f} s: {n} scores, Q {q:.3f}"
                for b in sorted(set(map(band, pooled.aheads)))
                if (n := sum(band(a) == b for a in pooled.aheads)) >= pooled.least
                and (q := cals["banded"].margin(FLOOR * 2**b)) is not None
            )
            print(f"  {len(held)} scores held; pooled Q {pooled.margin():.3f}; per band: {bands}")
            scored = sorted(held, key=lambda f: -score(f))[:top]
            for f in scored:
                median = span(f, "replayed").median
                print(
                    f"    {f['name']}: made {f['made'] - t0:.0f} s in, {median - f['made']:.0f} s "
                    f"ahead, started {f['start'] - median:+.0f} s from its median: score {score(f):.3f}"
                )
        if o["start"] - o["arrival"] < WAITED:
            continue
        out["n"] += 1
        for name, cal in cals.items():
            s = widened(cal, o)
            out[name] += s.low <= o["start"] <= s.high
    return out


def first_forecasts(run: Sequence[Outcome]) -> dict[str, float]:
    """One run's first forecasts of a burst, read as `--cold` prints them (module
    docstring): counts, and medians per second of lead (`FLOOR` at least)."""
    first = sorted((o for o in run if o["made"] is not None), key=lambda o: o["made"])
    out: dict[str, float] = dict.fromkeys(
        ("n", "at_first", "held", "held_replayed", "early", "late", "overtaken"), 0
    )
    if not first:
        return out | {"refresh": float("nan"), "error": float("nan"), "used": float("nan"),
                      "needed": float("nan")}  # fmt: skip
    errors, used, needed = [], [], Calibration()
    split: dict[bool, list[float]] = {True: [], False: []}
    for o in first:
        shown, replayed = span(o, "shown"), span(o, "replayed")
        lead = max(shown.median - o["made"], FLOOR)
        out["n"] += 1
        out["at_first"] += o["made"] == first[0]["made"]
        out["held"] += shown.low <= o["start"] <= shown.high
        out["held_replayed"] += replayed.low <= o["start"] <= replayed.high
        out["early"] += o["start"] > shown.high
        out["late"] += o["start"] < shown.low
        missed = not shown.low <= o["start"] <= shown.high
        overtaken = any(w["arrival"] > o["made"] and w["start"] < o["start"] for w in run)
        out["overtaken"] += missed and overtaken
        errors.append((o["start"] - shown.median) / lead)
        split[overtaken].append(errors[-1])
        used.append((shown.high - replayed.high) / lead)
        needed.record(replayed, o["made"], o["start"])
    t0 = min(o["arrival"] for o in run)
    q = sorted(needed.scores)[min(len(needed.scores), math.ceil(0.8 * len(needed.scores))) - 1]
    return out | {
        "refresh": first[0]["made"] - t0,
        "error": float(np.median(errors)),
        "error_overtaken": float(np.median(split[True])) if split[True] else float("nan"),
        "error_rest": float(np.median(split[False])) if split[False] else float("nan"),
        "n_overtaken": len(split[True]),
        "used": float(np.median(used)),
        "needed": q,
    }


def cold_line(i: int, got: dict[str, float]) -> str:
    """`first_forecasts`' figures of run `i` as a line."""
    return (
        f"run {i}: first refresh {got['refresh']:.0f} s in, {got['at_first']:.0f} of "
        f"{got['n']:.0f} first forecasts made there; held {got['held']:.0f} (replays' own "
        f"{got['held_replayed']:.0f}); missed early {got['early']:.0f}, late {got['late']:.0f}, "
        f"overtaken {got['overtaken']:.0f}; error a second of lead {got['error']:+.3f} "
        f"({_signed(got['error_overtaken'])} of the {got['n_overtaken']:.0f} overtaken by a "
        f"later arrival, {_signed(got['error_rest'])} of the rest); "
        f"widening used {got['used']:.3f}, needed {got['needed']:.3f}"
    )


def drawn(
    run: Sequence[Outcome], seed: int, namespace: str = NAMESPACES["node"][0]
) -> tuple[float, float]:
    """The mean log stretch the kubelets drew (`SimKubelet.draws`, seed `seed`, the
    benchmark's σ and latency) for every task of `run`, and for the first `EVIDENCE` of
    its first wave to end: the root stages' tasks of the workflows in the order they
    started, as many as the node pool has CPUs, the quickest by latency + stretch ×
    declared. What a cold pool's first refresh has seen is about those (a proxy: their
    order of release within the wave is the operator's)."""
    every: list[tuple[float, float]] = []
    wave: list[tuple[float, float]] = []
    slots = NODE_COUNT * int(NODE_CPU)
    kubelet = SimpleNamespace(stretch=0.3, start_latency=3.0, seed=seed, namespace=namespace)
    for o in sorted(run, key=lambda o: o["start"]):
        number = o["name"].rsplit("-", 1)[-1]
        if not number.isdigit():
            continue  # (not a workflow the benchmark submitted: `submit`'s names)
        for name, tasks, seconds, deps in SHAPES[int(number) % len(SHAPES)]:
            for k in range(tasks):
                pod = pod_name(o["name"], name, k)
                factor, latency = SimKubelet.draws(kubelet, pod)  # type: ignore[arg-type]
                every.append((math.log(factor), latency + factor * seconds))
                if not deps and len(wave) < slots:
                    wave.append(every[-1])
    if not every:
        return float("nan"), float("nan")
    first = sorted(wave, key=lambda t: t[1])[:EVIDENCE]
    return float(np.mean([t[0] for t in every])), float(np.mean([t[0] for t in first]))


def first_wave(
    run: Sequence[Outcome], seed: int, namespace: str = NAMESPACES["node"][0]
) -> list[tuple[float, float, float, float]]:
    """The first wave of `run`'s tasks as `drawn` takes it, each (its workflow's start, its
    latency, its stretch factor, its declared seconds): the root stages' tasks of the
    workflows in the order they started, as many as the node pool has CPUs."""
    wave: list[tuple[float, float, float, float]] = []
    kubelet = SimpleNamespace(stretch=0.3, start_latency=3.0, seed=seed, namespace=namespace)
    for o in sorted(run, key=lambda o: o["start"]):
        number = o["name"].rsplit("-", 1)[-1]
        if not number.isdigit():
            continue
        for name, tasks, seconds, deps in SHAPES[int(number) % len(SHAPES)]:
            for k in range(tasks if not deps else 0):
                factor, latency = SimKubelet.draws(kubelet, pod_name(o["name"], name, k))  # type: ignore[arg-type]
                if len(wave) < NODE_COUNT * int(NODE_CPU):
                    wave.append((o["start"], latency, factor, seconds))
    return wave


def at_first_refresh(
    run: Sequence[Outcome], seed: int, task_times: ModuleType
) -> tuple[float, int, int]:
    """The mean log stretch a pool's replays draw from (`TaskTimes.frozen` of `task_times`,
    the module of the code to read) at `run`'s first refresh, as the first wave
    (`first_wave`, each task started with its workflow) stood then: the tasks ended by then
    recorded, the rest running then censored at what they had run; with how many ended and
    ran. A proxy: the wave's tasks released later than their workflow's start, and the
    tasks released into the rooms the first ends freed, are left out."""
    made = [o["made"] for o in run if o["made"] is not None]
    if not made:
        return float("nan"), 0, 0
    now, times, running = min(made), task_times.TaskTimes(), []
    for start, latency, factor, seconds in first_wave(run, seed):
        if start + latency + factor * seconds <= now:
            times.record(seconds, latency + factor * seconds, factor * seconds)
        elif start + latency <= now:
            running.append((now - start - latency, seconds))
    live = times.frozen(running)
    weights = np.diff(np.asarray((0.0, *live.cumulative)))
    return float(np.dot(weights, np.log(live.stretches))), len(times.seen), len(running)


def typical_ratios(cold: Sequence[Outcome], seed: int, task_times: ModuleType) -> dict[str, float]:
    """The cold burst's first refresh's forecasts (by name) → the pool's typical stretch as
    known later over the one that refresh drew from, as ``--typical`` takes it: the mean
    log stretch of all of `cold`'s tasks (`drawn`, what the pool knows by their scores)
    against the first wave's as it stood at the refresh (`at_first_refresh`), both a proxy.
    Every other forecast is made knowing about as much as at its score (1, not named)."""
    made = [o["made"] for o in cold if o["made"] is not None]
    if not made:
        return {}
    every, _ = drawn(cold, seed)
    then, _, _ = at_first_refresh(cold, seed, task_times)
    if not math.isfinite(every - then):
        return {}  # (no workflow the benchmark submitted: nothing drawn)
    return {o["name"]: math.exp(every - then) for o in cold if o["made"] == min(made)}


def load_task_times(src: Path) -> ModuleType:
    """The module `sim.task_times` of the code at `src` (a src directory), loaded beside
    this one's."""
    name, path = f"task_times_{abs(hash(src))}", src / "idlegate" / "sim" / "task_times.py"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise SystemExit(f"Error: {src} has no idlegate/sim/task_times.py; give a src directory")
    module = sys.modules[name] = importlib.util.module_from_spec(spec)  # (its dataclasses')
    spec.loader.exec_module(module)
    return module


def _signed(x: float) -> str:
    return "—" if x != x else f"{x:+.3f}"


def score(f: Outcome) -> float:
    cal = Calibration()
    cal.record(span(f, "replayed"), f["made"], f["start"])
    return cal.scores[0]


def main(argv: list[str] | None = None) -> None:
    run_script(parser(), report, argv)


def parser() -> argparse.ArgumentParser:
    """The script's options."""
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("json", type=Path, help="a file written by benchmarks.live_forecast --json")
    parser.add_argument(
        "--code", help="whose rows to read: a src directory in the file (default: the first)"
    )
    parser.add_argument("--top", type=int, default=8, help="scores printed per run (default 8)")
    parser.add_argument("--cold", action="store_true", help="a burst's first forecasts")
    parser.add_argument(
        "--row",
        default="node pool, cold",
        help="with --cold: the table's row whose burst to read (default 'node pool, cold')",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="with --cold or --typical: live_forecast's --seed (default 0)",
    )
    parser.add_argument(
        "--typical",
        action="store_true",
        help="also rebuild the warm widening with the cold first refresh's scores taken "
        "relative to its error of the typical stretch (`typical_ratios`, a proxy)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="with --cold: a src directory whose stretch estimate to show beside (default: none)",
    )
    return parser


FROM = "give a file benchmarks.live_forecast --json wrote"


def load_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of `path`, a `benchmarks.live_forecast` ``--json`` output."""
    try:
        rows = json.loads(path.read_text())
    except OSError as exc:
        raise IdlegateError(f"cannot read {path} ({exc.strerror}): {FROM}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IdlegateError(f"{path} is not JSON ({exc}): {FROM}") from exc
    keys = ("code", "run", "outcomes")
    if not (
        isinstance(rows, list)
        and rows
        and all(isinstance(r, dict) and all(k in r for k in keys) for r in rows)
    ):
        raise IdlegateError(
            f"{path} is not a live_forecast output (a list of rows with code, run and "
            f"outcomes): {FROM}"
        )
    return rows


def report(args: argparse.Namespace) -> None:
    """Print the scores of `args.json`'s runs (or with ``--cold``, a burst's first forecasts)."""
    rows = load_rows(args.json)
    code = args.code or rows[0]["code"]
    found = {r["run"]: r["outcomes"] for r in rows if r["code"] == code}
    if not found:
        held = ", ".join(dict.fromkeys(r["code"] for r in rows))
        raise IdlegateError(f"{args.json} has no runs of the code {code}; it holds: {held}")
    if args.cold:
        if args.row not in found:
            raise SystemExit(f"Error: {args.json} has no row {args.row!r} of {code}")
        print(f"python -m benchmarks.live_scores {args.json} --cold --row {args.row!r} "
              f"--code {code}")  # fmt: skip
        for i, one in enumerate(runs(found[args.row])):
            print(cold_line(i, first_forecasts(one)))
            if args.row.startswith("node pool"):
                every, first = drawn(one, args.seed + i)
                print(f"  its tasks' log stretches drawn: a mean {_signed(every)}; the first "
                      f"{EVIDENCE} of its first wave to end {_signed(first)}")  # fmt: skip
                codes = [("now", load_task_times(Path(code)))]
                if args.before:
                    codes.insert(0, ("before", load_task_times(args.before)))
                wave = np.log([t[2] for t in first_wave(one, args.seed + i)])
                if not len(wave):
                    continue  # (no workflow the benchmark submitted: nothing drawn)
                got = [(label, *at_first_refresh(one, args.seed + i, m)) for label, m in codes]
                print(f"  at its first refresh ({got[0][2]} of its first wave of {len(wave)} "
                      f"ended, {got[0][3]} running), the mean log stretch the replays draw: "
                      + ", ".join(f"{label} {_signed(mean)}" for label, mean, _, _ in got)
                      + f"; the wave's own {_signed(float(np.mean(wave)))}")  # fmt: skip
        return
    if "node pool, cold" not in found or "node pool, warm" not in found:
        raise SystemExit(f"Error: {args.json} has no node pool's cold and warm rows of {code}")
    print(f"python -m benchmarks.live_scores {args.json} --code {code}"
          + (f" --typical --seed {args.seed}" if args.typical else ""))  # fmt: skip
    total = {"pooled": 0, "banded": 0, "rescaled": 0, "n": 0, "mismatch": 0}
    for i, (cold, warm) in enumerate(
        zip(runs(found["node pool, cold"]), runs(found["node pool, warm"]), strict=True)
    ):
        print(f"run {i}:")
        ratios = typical_ratios(cold, args.seed + i, load_task_times(Path(code)))
        got = replay(cold, warm, args.top, ratios if args.typical else None)
        print(
            f"  warm starts held: pooled {got['pooled']} of {got['n']}, "
            f"per lead band {got['banded']} of {got['n']}"
            + (f", rescaled {got['rescaled']} of {got['n']}" if args.typical else "")
        )
        total = {k: total[k] + got[k] for k in total}
    n = max(total["n"], 1)
    rescaled = f", rescaled {100 * total['rescaled'] / n:.0f} %" if args.typical else ""
    print(
        f"all runs: pooled {100 * total['pooled'] / n:.0f} %, per lead band "
        f"{100 * total['banded'] / n:.0f} %{rescaled} of {total['n']} warm starts; intervals "
        f"shown neither way: {total['mismatch']}"
    )


if __name__ == "__main__":
    main()
