"""The scores a live pool's start calibration held, read back from `benchmarks.live_forecast`'s
``--json`` (issue 80, item 1): which forecast each came from, and what they widened.

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
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.live_forecast import BURST, LATER, WAITED
from idlegate.sim.forecast import Span
from idlegate.sim.forecast_calibration import FLOOR, Calibration, band, calibrations

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


def replay(cold: Sequence[Outcome], warm: Sequence[Outcome], top: int) -> dict[str, int]:
    """One run's calibration rebuilt (module docstring); prints what it held. Returns the
    warm starts held by each widening, their number, and the intervals shown neither way."""
    forecasts = sorted(
        (o for o in [*cold, *warm] if o["made"] is not None), key=lambda o: o["start"]
    )
    t0 = cold[0]["arrival"]
    shown = sorted((o for o in warm if o["made"] is not None), key=lambda o: o["made"])
    out = {"pooled": 0, "banded": 0, "n": 0, "mismatch": 0}
    for i, o in enumerate(shown):
        cals = {
            "pooled": calibrations(live=True)["start"],
            "banded": calibrations(live=True)["start"],
        }
        cals["pooled"].banded = False
        held = [f for f in forecasts if f["start"] <= o["made"]]
        for f in held:
            for cal in cals.values():
                cal.record(span(f, "replayed"), f["made"], f["start"])
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


def score(f: Outcome) -> float:
    cal = Calibration()
    cal.record(span(f, "replayed"), f["made"], f["start"])
    return cal.scores[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", type=Path, help="benchmarks.live_forecast's --json")
    parser.add_argument("--code", help="the row's code (a src directory; default: the first)")
    parser.add_argument("--top", type=int, default=8, help="scores printed per run")
    args = parser.parse_args(argv)
    rows = json.loads(args.json.read_text())
    code = args.code or rows[0]["code"]
    found = {r["run"]: r["outcomes"] for r in rows if r["code"] == code}
    if "node pool, cold" not in found or "node pool, warm" not in found:
        raise SystemExit(f"Error: {args.json} has no node pool's cold and warm rows of {code}")
    print(f"python -m benchmarks.live_scores {args.json} --code {code}")
    total = {"pooled": 0, "banded": 0, "n": 0, "mismatch": 0}
    for i, (cold, warm) in enumerate(
        zip(runs(found["node pool, cold"]), runs(found["node pool, warm"]), strict=True)
    ):
        print(f"run {i}:")
        got = replay(cold, warm, args.top)
        print(
            f"  warm starts held: pooled {got['pooled']} of {got['n']}, "
            f"per lead band {got['banded']} of {got['n']}"
        )
        total = {k: total[k] + got[k] for k in total}
    n = max(total["n"], 1)
    print(
        f"all runs: pooled {100 * total['pooled'] / n:.0f} %, per lead band "
        f"{100 * total['banded'] / n:.0f} % of {total['n']} warm starts; intervals shown "
        f"neither way: {total['mismatch']}"
    )


if __name__ == "__main__":
    main()
