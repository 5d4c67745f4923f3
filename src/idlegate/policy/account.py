"""What a portfolio run followed, in words: the share of the run each candidate had.

The portfolio scheduler (`idlegate.policy.portfolio`) accounts for a run as seconds of
the clock per candidate followed (`PortfolioScheduler.time_followed`). Every report says
it the same way, from that plain data alone (so it travels from worker processes):

* `shares`: one run's seconds as fractions of the run, longest first;
* `mean_shares`: the fractions of several runs (seeds) averaged, a candidate a run
  never followed counting 0 in it;
* `percents`: fractions as whole percents that add up to exactly 100 (largest
  remainder), so a printed line sums to what it claims;
* `followed_line`: "portfolio followed srpt 71 %, fair 22 %, learned:default 7 %".

No import of the scheduler: the reports build on this module, and the scheduler's code
can move without them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

__all__ = ["followed_line", "mean_shares", "percents", "shares"]


def shares(seconds: Mapping[str, float]) -> dict[str, float]:
    """Each candidate's fraction of the total `seconds`, largest first (ties in the
    given order); empty when no time passed."""
    total = sum(seconds.values())
    if total <= 0:
        return {}
    fractions = {name: s / total for name, s in seconds.items() if s > 0}
    return dict(sorted(fractions.items(), key=lambda kv: -kv[1]))


def mean_shares(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The mean over `runs` of each candidate's share (0 in a run that never followed
    it), largest first (ties in the order first met); empty for no run."""
    if not runs:
        return {}
    names = dict.fromkeys(name for run in runs for name in run)
    means = {name: sum(run.get(name, 0.0) for run in runs) / len(runs) for name in names}
    return dict(sorted(means.items(), key=lambda kv: -kv[1]))


def percents(fractions: Mapping[str, float]) -> dict[str, int]:
    """`fractions` (summing to 1) as whole percents summing to 100: each rounded down,
    the points left over given to the largest remainders (ties: the earlier name)."""
    if not fractions:
        return {}
    total = sum(fractions.values()) or 1.0
    exact = {name: 100 * f / total for name, f in fractions.items()}
    out = {name: math.floor(p) for name, p in exact.items()}
    left = 100 - sum(out.values())
    by_remainder = sorted(exact, key=lambda name: -(exact[name] - out[name]))
    for name in by_remainder[:left]:
        out[name] += 1
    return out


def followed_line(name: str, fractions: Mapping[str, float], runs: int = 1) -> str:
    """``portfolio followed srpt 71 %, fair 22 %, learned:default 7 % of the run``, with
    "(mean over 3 seeds)" when `runs` > 1; `fractions` as `shares` gives them."""
    if not fractions:
        return f"{name} followed nothing: the run took no time"
    parts = ", ".join(f"{c} {p} %" for c, p in percents(fractions).items())
    over = f" (mean over {runs} seeds)" if runs > 1 else ""
    return f"{name} followed {parts} of the run{over}"
