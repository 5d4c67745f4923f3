"""`portfolio`: a scheduler that chooses and tunes its policy by replaying the recent past.

Each rule is best somewhere and far off elsewhere, and a cluster runs one workload. So
this scheduler keeps a *portfolio* of candidates (listed in `candidates`) and follows the
one that would have done best on the cluster's own recent workflows.

The package, by responsibility:

* `candidates`: the candidates, their spec texts and the configuration
  (`PortfolioConfig`);
* `replay`: a round's replay of a window under every candidate (`replay_portfolio`),
  its request and its modelled cost;
* `runs`: a round's replays, shared by the rules that decide alike and cut once they
  cannot change the round (`Runs`);
* `rounds`: what a round says (`Scores`, `Choice`) and the evidence it weighs
  (`select`: the margin, the noise, the confirmation);
* `present`: the present check, a switch rolled out from the pool as it is now
  (`from_present`);
* `decision`: a round, what it decides and why, as one numbered pipeline
  (`play_round`);
* `state`: what the scheduler remembers between decisions, in small objects (the
  window, the arrivals, the start, the trust in the candidate followed, the pace, the
  standings);
* `scheduler`: the scheduler (`PortfolioScheduler`): one scheduling event, in order
  (`PortfolioScheduler.decide`), and the steps a driver's worker calls;
* here: building a ``portfolio`` spec (`make_portfolio`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from idlegate.errors import IdlegateError, reject_unknown
from idlegate.policy.portfolio.candidates import (
    CANDIDATES,
    DEFAULT_CANDIDATES,
    PLANNER,
    RULES,
    TUNING,
    PortfolioConfig,
    analytic_specs,
    candidate_specs,
    kind_of,
)
from idlegate.policy.portfolio.replay import (
    DECISION_SECONDS,
    EVENT_SECONDS,
    ReplayOptions,
    ReplayRequest,
    modelled_seconds,
    replay_portfolio,
)
from idlegate.policy.portfolio.rounds import (
    Choice,
    Scores,
    beyond_noise,
    select,
    tied_best,
    won,
)
from idlegate.policy.portfolio.scheduler import (
    CHANGE_MIN,
    PortfolioScheduler,
    SchedulerBuilder,
    segments,
)
from idlegate.policy.spec import SchedulerSpec

__all__ = [
    "CANDIDATES",
    "CHANGE_MIN",
    "DECISION_SECONDS",
    "DEFAULT_CANDIDATES",
    "EVENT_SECONDS",
    "PLANNER",
    "RULES",
    "TUNING",
    "Choice",
    "PortfolioConfig",
    "PortfolioScheduler",
    "ReplayOptions",
    "ReplayRequest",
    "Scores",
    "analytic_specs",
    "beyond_noise",
    "candidate_specs",
    "kind_of",
    "make_portfolio",
    "modelled_seconds",
    "portfolio_config",
    "portfolio_model_files",
    "replay_portfolio",
    "segments",
    "select",
    "tied_best",
    "won",
]


def portfolio_config(
    spec: SchedulerSpec, options: Mapping[str, Any]
) -> tuple[PortfolioConfig, str | None]:
    """(config, ``name``) of a ``portfolio`` spec and keyword `options`; nothing is loaded."""
    given = spec.keywords(options)
    name = given.pop("name", None)
    reject_unknown(given, PortfolioConfig.model_fields, "the portfolio scheduler")
    for key in ("policy", "history", "start"):
        if key in given and given[key] is not None:
            given[key] = str(given[key])
    config = PortfolioConfig(**given)
    if config.start not in CANDIDATES and _holds_a_portfolio(SchedulerSpec.parse(config.start)):
        raise IdlegateError(
            f"the portfolio cannot start by following {config.start!r}, a portfolio itself "
            "(default is the portfolio); give one of its candidates, e.g. start=learned or "
            "start=srpt"
        )
    if "trained" in config.candidates and not config.policy:
        raise IdlegateError(
            "the portfolio's candidate trained needs policy=PATH.onnx (a policy trained on "
            "this cluster's history)"
        )
    return config, name


def _holds_a_portfolio(spec: SchedulerSpec | None) -> bool:
    """True if `spec` or a base inside it is ``portfolio`` or ``default`` (a portfolio
    following a portfolio would build portfolios inside portfolios)."""
    while spec is not None:
        if spec.kind in ("portfolio", "default"):
            return True
        spec = spec.base
    return False


def make_portfolio(
    spec: SchedulerSpec, build: SchedulerBuilder, /, **options: Any
) -> PortfolioScheduler:
    """Build a ``portfolio`` spec with its and the keyword options (`PortfolioConfig`
    fields and ``name``), its candidates built by `build` (`idlegate.policy.make_scheduler`,
    the builder of every spec kind); IdlegateError for a bad option or a missing file."""
    config, name = portfolio_config(spec, options)
    if config.policy is not None and not Path(config.policy).expanduser().is_file():
        raise IdlegateError(
            f"the portfolio's policy {config.policy} does not exist; give a policy.onnx "
            "trained on this cluster's history (idlegate train --preset cluster --history)"
        )
    return PortfolioScheduler(config, build, name=name or spec.format(label=False))


def portfolio_model_files(spec: SchedulerSpec, shipped: Path) -> tuple[Path, ...]:
    """The model files a ``portfolio`` spec loads (for reloads and replays elsewhere),
    `shipped` standing for the shipped policy (``learned:default``)."""
    config, _ = portfolio_config(spec, {})
    out = []
    if "learned" in config.portfolio() or config.start == "learned":
        out.append(shipped)
    if config.policy is not None:
        out.append(Path(config.policy).expanduser())
    return tuple(out)
