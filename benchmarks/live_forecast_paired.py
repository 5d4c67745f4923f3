"""Issue 80's live forecasts, paired: the same outcomes scored with and without a change of theirs.

The change: being overtaken, or (`--cold`) a cold pool's widening from its own tasks.

Run to run, the live benchmark's coverage moves more than the overtaking term does (the
warm pool's starts inside the 80 % interval went from 36 % to 88 % between runs of the
same code), so two runs, one with the term and one without, cannot tell it. Here one run
is scored twice. An operator without the term (`--code`: a checkout's src directory from
before it) runs `benchmarks.live_forecast`'s bursts; each workflow's first forecast
records its replays' own interval (``firstForecast.startReplayed``), when it was made,
and its outcome. From those inputs alone each forecast is shown twice, as the pool shows
it (`operator.forecasting.book.as_shown`, calibrated by `sim.forecast_calibration.calibrations`
of a live pool, which learn from the same forecasts' outcomes in time order; before
their fourth, each forecast widened as the pool widened it, `told_prior`):

* **without**: the replays' interval as it was;
* **with**: its tops raised by the delay being overtaken adds (`sim.forecast_overtake`:
  `Overtake.of` the run's arrivals until the forecast, its last `TEMPLATES` arrivals'
  sizes and the pool's executors, `Overtake.delay` under the rule's order key, `--key`).

and both are scored as `benchmarks.live_forecast` scores (`evaluation.forecast_report.
figures`: waits of at least `WAITED` s). A third line, *recorded*, is the interval the
operator really showed: the re-played calibration of *without* is checked against it.
The point forecast is the same on both sides (the term moves only the tops), so the start
error is too; what moves is the coverage, and the width (the interval's median width ÷ the
wait) is what it costs.

What it assumes: the rule orders by `--key` at every forecast (``remaining_work``: srpt's,
which the default portfolio follows on the node pools, `srpt?cap=0.9`; on the fixed pool it
follows `analytic?min_gain=0:srpt`, which gives no order key, and there the operator with
the term adds nothing), and a score is recorded at the start or finish itself (the
operator records it at its next refresh after: *recorded* agreeing with *without* says
that changed nothing).

    python -m benchmarks.live_forecast_paired --code /tmp/before/src [--pools node,fixed]
        [--speed 5] [--seed 0] [--runs 3] [--key remaining_work] [--json out.json]
    python -m benchmarks.live_forecast_paired --from out.json   (scored again, no run)

With `--cold`, an operator that adds the term already (this code's: `--code src`) is
scored twice instead: its cold pools' first forecasts widened by the stated default
(``stated``: `LIVE_COLD`, as before the pool learned from its tasks) and as the pool
widened them (``tasks``: what its tasks said, `sim.forecast_calibration.cold_margin`);
*recorded* agreeing with *tasks* says that re-play is right.

    python -m benchmarks.live_forecast_paired --code src --cold [--pools node,fixed] [--runs 3]

(run from the repository root: the script imports the test API server from tests/k8s).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.live_forecast import (
    FIXED_PODS,
    NAMESPACES,
    NODE_COUNT,
    NODE_CPU,
    WAITED,
    Outcome,
    add_run_options,
    scored,
    seed_run,
    width,
)
from benchmarks.live_operator import check_live_options
from idlegate.api.forecast_status import Forecast
from idlegate.errors import IdlegateError
from idlegate.evaluation.forecast_report import Figures, figures
from idlegate.flags import one_line
from idlegate.operator.forecasting.book import as_shown
from idlegate.sim.forecast import Span, WorkflowForecast
from idlegate.sim.forecast_arrivals import TEMPLATES
from idlegate.sim.forecast_calibration import FLOOR, calibrations
from idlegate.sim.forecast_overtake import KEYS, Overtake, raised

SIDES = ("without", "with")
COLD_SIDES = ("stated", "tasks")
"""`--cold`'s sides: a cold pool widened by the stated default (`LIVE_COLD`) and by what
its own tasks said (`cold_margin`, as the operator did)."""
EXECUTORS = {"node": NODE_COUNT * float(NODE_CPU), "fixed": float(FIXED_PODS)}
"""Each pool's size in tasks (`effective_executors`: every task asks 1 CPU)."""

Run = Sequence[tuple[str, Sequence[Outcome]]]
"""One operator's bursts in turn: (row label, its outcomes); a pool's calibration and
arrivals carry from one burst to the next (the node pool's cold, then warm)."""


def delay(every: Sequence[Outcome], o: Outcome, executors: float, key: str) -> float:
    """Seconds being overtaken adds to the top of `o`'s first forecast, as the pool would
    have added it then: from the arrivals of `every` (its run's) until the forecast."""
    assert o.made is not None and o.replayed is not None
    made = o.made
    seen = sorted((w for w in every if w.arrival <= made), key=lambda w: (w.arrival, w.name))
    log = [(w.arrival, w.work) for w in seen]
    sizes = [(w.work, w.critical_path, 0) for w in seen[-TEMPLATES:]]  # (no priorities here)
    overtake = Overtake.of(log, made, sizes, executors)
    if overtake is None:
        return 0.0
    own = (o.work, o.critical_path)[KEYS[key]]  # (the size item the key orders by)
    return overtake.delay(key, own, o.replayed[0].median - made)


def shown(run: Run, executors: float, key: str | None, stated: bool = False) -> list[list[Outcome]]:
    """Each burst's outcomes of `run` with each first forecast shown again from its
    replays' interval, its tops raised by being overtaken under `key` (None: not), and
    calibrated as a live pool calibrates: at each forecast by the scores of the forecasts
    whose workflows had started (finished) by then; before four, by the widening the pool
    gave that forecast (`told_prior`: whatever its operator's cold pool widened by, the
    stated default or its tasks'), or (`stated`) by the stated cold default `LIVE_COLD`."""
    every = [o for _, burst in run for o in burst]
    made = [o for o in every if o.made is not None and o.replayed is not None]
    entries = {}
    for i, o in enumerate(made):
        start, finish = o.replayed  # type: ignore[misc]
        entry = WorkflowForecast(i, o.name, o.queue, None, start, finish)
        late = delay(every, o, executors, key) if key is not None else 0.0
        entries[o.name] = raised(entry, late)
    happened = sorted(
        [(o.made, 0, o) for o in made]
        + [(o.start, 1, o) for o in made]
        + [(o.finish, 2, o) for o in made],
        key=lambda e: (e[0], e[1], e[2].name),
    )
    calibration = calibrations(live=True)
    again: dict[str, Outcome] = {}
    for _, kind, o in happened:
        entry, when = entries[o.name], o.made
        assert when is not None
        if kind == 0:
            if not stated:
                calibration["start"].prior = told_prior(o)
            f = as_shown(entry, when, calibration)
            assert isinstance(f, Forecast)
            spans = (
                Span(f.start_interval[0], f.start, f.start_interval[1]),
                Span(f.finish_interval[0], f.finish, f.finish_interval[1]),
            )
            again[o.name] = dataclasses.replace(o, shown=spans)
        elif kind == 1:
            calibration["start"].record(entry.start, when, o.start)
        else:
            calibration["finish"].record(entry.finish, when, o.finish)
    return [[again.get(o.name, o) for o in burst] for _, burst in run]


def told_prior(o: Outcome) -> float:
    """The widening per second ahead the pool gave `o`'s first forecast's start: its shown
    top over its replays' (which hold the overtaking term already if its operator adds it),
    over the lead; re-played with it, the start's top is the shown one (both to the
    second, as the status writes them). Before the pool's fourth score it is its cold
    widening (the stated default, or its tasks', `cold_margin`); after, the calibration's
    own, which `shown` takes instead: a re-play scores at the start itself, the operator
    at its next refresh, so the re-play is cold only where the pool was."""
    assert o.shown is not None and o.replayed is not None and o.made is not None
    start, replays = o.shown[0], o.replayed[0]
    return (start.high - replays.high) / max(replays.median - o.made, FLOOR)


def moved(before: Sequence[Outcome], after: Sequence[Outcome]) -> tuple[int, int, int, int]:
    """The paired count of one run's workflows shown two ways (`before`, `after`: the same
    workflows, in the same order): starts inside `after`'s interval and not `before`'s,
    the reverse, and the same of finishes."""
    counts = [0, 0, 0, 0]
    for (o, *was), (_, *now) in zip(scored(before), scored(after), strict=True):
        for i, actual in enumerate((o.start, o.finish)):
            inside = now[i].low <= actual <= now[i].high
            inside_before = was[i].low <= actual <= was[i].high
            counts[2 * i] += inside and not inside_before
            counts[2 * i + 1] += inside_before and not inside
    return counts[0], counts[1], counts[2], counts[3]


@dataclasses.dataclass(frozen=True)
class Paired:
    """One row's figures on each side (``recorded``: as the operator showed, then `SIDES`
    or `COLD_SIDES`)."""

    run: str
    figures: dict[str, Figures]
    widths: dict[str, float]
    moved: tuple[int, int, int, int]
    """`moved` from the first side to the last: starts in, out; finishes in, out."""
    added: tuple[float, ...] = ()
    """The seconds the term added to each first forecast's tops (`delay`), or (`--cold`)
    the widening a second ahead the pool gave it (`told_prior`)."""


def paired(runs: Sequence[Run], executors: float, key: str, cold: bool = False) -> list[Paired]:
    """The rows of `runs` (each one operator's bursts), each scored on every side: without
    and with the term (`key`), or (`cold`) an operator's that adds it already with the
    stated cold default and with the widening its tasks gave (`COLD_SIDES`)."""
    labels = [label for label, _ in runs[0]]
    a, b = COLD_SIDES if cold else SIDES
    per_side: dict[str, list[list[list[Outcome]]]] = {
        "recorded": [[list(burst) for _, burst in run] for run in runs],
        a: [shown(run, executors, None, stated=cold) for run in runs],
        b: [shown(run, executors, None if cold else key) for run in runs],
    }
    out = []
    for i, label in enumerate(labels):
        figs, widths = {}, {}
        for side, bursts in per_side.items():
            mine = [run[i] for run in bursts]
            figs[side] = figures([seed_run(o) for o in mine], "calibrated", WAITED)
            widths[side] = width([o for one in mine for o in one])
        each = [moved(x[i], y[i]) for x, y in zip(per_side[a], per_side[b], strict=True)]
        starts_in, starts_out, finishes_in, finishes_out = (
            sum(column) for column in zip(*each, strict=True)
        )
        added = tuple(
            told_prior(o) if cold else delay([o for _, bu in run for o in bu], o, executors, key)
            for run in runs
            for o in run[i][1]
            if o.made is not None and o.replayed is not None
        )
        out.append(
            Paired(label, figs, widths, (starts_in, starts_out, finishes_in, finishes_out), added)
        )
    return out


HEADER = (
    "| run | side | n | start error ÷ wait | in the 80 % interval: start / finish "
    "| interval width ÷ wait | moved in / out, to the last side: starts; finishes |"
    "\n|---|---|---|---|---|---|---|"
)


def lines(p: Paired) -> list[str]:
    """`p` as rows of the paired table: recorded, then its two sides."""
    out = []
    last = list(p.figures)[-1]
    for side in p.figures:
        f = p.figures[side]
        out.append(
            f"| {p.run} | {side} | {f.start_n} | {100 * f.start_rel_median:.1f} % | "
            f"{100 * f.start_inside:.0f} % / {100 * f.finish_inside:.0f} % | "
            f"{100 * p.widths[side]:.0f} % | "
            + ("{} / {}; {} / {} |".format(*p.moved) if side == last else "|")
        )
    return out


def note(p: Paired) -> str:
    """What the term added to `p`'s forecasts' tops (`--cold`: the widening the pool gave
    them, per second ahead): its median and largest."""
    if not p.added:
        return f"  {p.run}: no first forecast"
    if COLD_SIDES[-1] in p.figures:
        return (
            f"  {p.run}: the pool widened {len(p.added)} first forecasts by a median "
            f"{statistics.median(p.added):.3f} (at most {max(p.added):.3f}) a second ahead"
        )
    return (
        f"  {p.run}: the term added a median {statistics.median(p.added):.1f} s "
        f"(at most {max(p.added):.1f} s) to the tops of {len(p.added)} first forecasts"
    )


def live(args: argparse.Namespace) -> dict[str, list[Run]]:
    """Each pool's runs under `args.code`'s operator (`benchmarks.live_forecast.run`)."""
    from benchmarks.live_forecast import run

    found: dict[str, list[Run]] = {}
    log = open(args.log, "ab") if args.log else open(os.devnull, "wb")  # noqa: SIM115
    with log:
        for kind in args.pools.split(","):
            for i in range(args.runs):
                try:
                    rows = run(kind, args.code, args, args.seed + i, log)
                except (RuntimeError, TimeoutError) as exc:
                    sys.exit(f"Error: {exc} (the operator's output: --log FILE)")
                found.setdefault(kind, []).append(list(rows.items()))
    return found


def outcome_of(d: dict[str, Any]) -> Outcome:
    """An :class:`Outcome` from its JSON (`dataclasses.asdict`)."""
    spans = {k: tuple(Span(*s) for s in d[k]) if d[k] else None for k in ("shown", "replayed")}
    return Outcome(**{**d, **spans})


def main(argv: list[str] | None = None) -> list[Paired]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--code", type=Path, help="src directory of an operator without the term (--cold: with)"
    )
    parser.add_argument("--from", dest="source", type=Path, help="score a --json file again")
    add_run_options(parser)
    parser.add_argument("--key", default="remaining_work", choices=sorted(KEYS))
    parser.add_argument(
        "--cold",
        action="store_true",
        help="an operator with the term: score its cold pools' widening (its tasks') "
        "against the stated default",
    )
    parser.add_argument("--json", type=Path, help="write the runs' outcomes there")
    parser.add_argument("--log", type=Path, help="the operator's output (default: discarded)")
    args = parser.parse_args(argv)
    if args.source is not None:
        saved = json.loads(args.source.read_text())
        found: dict[str, list[Run]] = {
            kind: [
                [(label, [outcome_of(o) for o in burst]) for label, burst in run] for run in runs
            ]
            for kind, runs in saved.items()
        }
    else:
        if args.code is None:
            sys.exit("Error: give --code (an operator's src directory) or --from (a --json file)")
        if not set(args.pools.split(",")) <= set(NAMESPACES):
            sys.exit(f"Error: --pools takes node and fixed, not {args.pools}")
        try:
            check_live_options(args.speed, [args.policy], args.runs)
        except IdlegateError as exc:
            sys.exit(f"Error: {one_line(exc)}")
        args.code = args.code.resolve()
        if not args.cold and (args.code / "idlegate" / "sim" / "forecast_overtake.py").exists():
            sys.exit(
                f"Error: {args.code}'s operator already adds the overtaking term, so its "
                "replays' tops cannot be scored without it: give a checkout from before it"
            )
        print(
            f"python -m benchmarks.live_forecast_paired --code {args.code} --pools {args.pools} "
            f"--speed {args.speed:g} --stretch {args.stretch:g} --latency {args.latency:g} "
            f"--interval {args.interval:g} --later {args.later:g} --policy {args.policy} "
            f"--seed {args.seed} "
            f"--runs {args.runs} --key {args.key}" + (" --cold" if args.cold else ""),
            flush=True,
        )
        found = live(args)
        if args.json:
            plain = {
                kind: [
                    [(label, [dataclasses.asdict(o) for o in b]) for label, b in run]
                    for run in runs
                ]
                for kind, runs in found.items()
            }
            args.json.write_text(json.dumps(plain, indent=1))
    print(HEADER)
    out = []
    for kind, runs in found.items():
        for p in paired(runs, EXECUTORS[kind], args.key, args.cold):
            print("\n".join(lines(p)), flush=True)
            out.append(p)
    print("\n".join(note(p) for p in out))
    return out


if __name__ == "__main__":
    main()
