"""The portfolio's candidates and its configuration (`PortfolioConfig`).

The candidates the scheduler replays and may follow:

* the rules (`RULES`, and ``sjf`` on request);
* rules with a parameter, tuned on the same replays (`TUNING`): weighted fair's
  ``alpha`` (Decima's "tuned weighted fair"), fair's ``scale`` (its cap), srpt's
  ``cap`` (a reserve for arrivals, for heavy-tailed traces), and the
  analytic idle rule's threshold ``min_gain`` over the best plain rule of the round
  (``analytic``: the idle rule, so idling is chosen where the replay says it pays);
* the shipped ONNX policy (``learned``), an ONNX policy trained on this cluster's
  history (``trained``, with ``policy=PATH.onnx``), and the expected-future planner
  (``planner``: ``lookahead`` over srpt at the operator's pace, `FAST_PLANNING`).

A candidate is named in ``candidates=`` (`CANDIDATES`) and replayed as one or more spec
texts (`candidate_specs`, `analytic_specs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import ConfigDict, Field, StrictBool, StrictInt, field_validator, model_validator

from idlegate.config import Config, NonNegative, Positive
from idlegate.errors import IdlegateError

__all__ = [
    "CANDIDATES",
    "DEFAULT_CANDIDATES",
    "PLANNER",
    "RULES",
    "TUNING",
    "PortfolioConfig",
    "analytic_specs",
    "candidate_specs",
    "kind_of",
]

RULES: Final = ("fifo", "sjf-cp", "srpt", "fair", "weighted-fair")
"""The rules a replay compares by default (also `idlegate advise`'s default heuristics)."""
TUNING: Final[Mapping[str, tuple[str, tuple[float, ...]]]] = {
    "weighted-fair": ("alpha", (-2.0, -1.0, -0.5, 0.5, 1.0)),
    "fair": ("scale", (0.5, 1.0, 2.0)),
    "srpt": ("cap", (0.9, 1.0)),
    "analytic": ("min_gain", (0.0, 0.2)),
}
"""Per tuned family: its parameter and the grid a round searches (``tune=true``)."""
CANDIDATES: Final = (
    "fifo",
    "sjf",
    "sjf-cp",
    "srpt",
    "fair",
    "weighted-fair",
    "analytic",
    "learned",
    "trained",
    "planner",
)
"""The names ``candidates=`` takes (joined with ``+``)."""
_RULE_NAMES: Final = (*RULES, "sjf")
"""The candidates that are plain rules (what the analytic candidate runs over)."""
DEFAULT_CANDIDATES: Final = (*RULES, "analytic", "learned")
"""The portfolio without ``candidates=`` (``trained`` joins it with ``policy=``)."""
PLANNER: Final = "lookahead?max_decisions=100&race=0.05&plan_window=64:srpt"
"""The ``planner`` candidate: the planner over srpt at the operator's pace (`FAST_PLANNING`)."""
PLAIN_RULES: Final = ("fifo", "sjf", "sjf-cp", "srpt", "fair", "weighted-fair")


class PortfolioConfig(Config):
    """The portfolio, its replays and how it follows (every field has a working default)."""

    model_config = ConfigDict(title="the portfolio scheduler")

    candidates: tuple[str, ...] = DEFAULT_CANDIDATES
    """The candidates (`CANDIDATES`), joined with ``+`` in a spec."""
    policy: str | None = None
    """An ONNX policy trained on this cluster's history: the candidate ``trained``."""
    history: str | None = None
    """A history file (`sim.history`) to start from: the first round replays its last
    `window` workflows."""
    start: str = "learned"
    """The candidate followed before the first round (cold start without a history), and
    while the workflows arrived are like no workload of the prior's. Given, it is
    followed until a round moves it: the prior is not looked up."""
    prior: StrictBool = True
    """Look the workflows arrived up in the shipped prior (`prior.Prior.safest`) at the
    first decision and each time their number doubles, and follow its safest candidate
    for them until a round moves it or `min_window` workflows have finished (not when
    `start` is given)."""
    window: StrictInt = Field(200, ge=2)
    """Finished workflows a round replays (the most recent ones)."""
    min_window: StrictInt = Field(40, ge=2)
    """Finished workflows needed before the first round on finished workflows alone."""
    early: StrictInt | None = Field(8, ge=2)
    """Before that, a round replays the workflows that have arrived (the finished ones as
    recorded, the running ones with their duration models, or with ``records=fed`` their
    estimates) once this many have arrived, and again each time their number doubles
    (None: no such round)."""
    every: StrictInt = Field(25, ge=1)
    """A round after this many newly finished workflows."""
    period: Positive | None = 900.0
    """... or this many seconds of the clock after the last round, if a workflow finished
    since (None: only by `every`)."""
    backoff: StrictInt = Field(4, ge=1)
    """After a round that switches nothing, the next comes twice as late (`every` and
    `period` stretched), up to this factor; a switch, or the finished workflows changing
    character (`change`), brings back the first pace."""
    backoff_full: StrictInt | None = Field(16, ge=1)
    """... and after one on a full window (`window` finished workflows), up to this factor
    instead (None: `backoff`). On a long stream most rounds are on full windows, the
    costliest: on held-out streams of 500 workflows (36 runs) 16 left the mean JCT where
    it was (one run moved, by -0.02 %) and took the rounds' CPU down by 23 %
    (docs/brain.md, "What a round may cost")."""
    change: float = Field(3.0, gt=1.0)
    """The workload changed when the geometric mean work (task-seconds) of the workflows
    finished since the last round (at least `CHANGE_MIN`) differs from that of those
    before them since the last change by more than this factor."""
    change_noise: NonNegative | None = 3.0
    """... and by more than this many standard errors of the difference of the two
    groups' mean log work (None: any difference beyond `change`): on heavy-tailed
    workflows ten of them wander by a factor of `change` between draws of one workload
    (`state.Window.changed_size`)."""
    watch: bool = True
    """See a change of workload in the workflows arriving too (`arrivals.ArrivalWatch`):
    at once, the prior is read again and early rounds replay the workflows arrived since
    the change."""
    margin: NonNegative = 0.02
    """Switch only to a candidate whose score is lower by more than this fraction."""
    confidence: NonNegative = 1.0
    """... and whose lead exceeds this many standard errors of the paired per-workflow
    JCT differences of the window (`rounds.beyond_noise`; 0: any lead)."""
    carriers: StrictInt | None = Field(2, ge=1)
    """A lead must survive dropping this many of the window's workflows where it gains
    most (`rounds.carried`; None: no such test). On heavy-tailed workflows a window's mean
    is one or two huge jobs', and a challenger that finishes one of them sooner leads by
    tens of percent while it loses or ties on every other workflow."""
    switch: Literal["passed", "best"] = "passed"
    """When challengers beat the candidate followed, follow the best-scoring of them
    (``passed``), or the round's best-scoring candidate if it scores lower still
    (``best``): beating the followed candidate shows it should be left, and among the
    candidates the round's best is the best estimate. On held-out seed 1000 (Alibaba, 100
    workflows) a round left the candidate followed for srpt while fair?scale=0.5 scored
    22 % lower; its own lead was within the noise (`rounds.select`)."""
    correction: Literal["all", "early"] | None = "early"
    """Raise `confidence` for the challengers a round compares (`rounds.threshold`: the
    best of fifteen beats one standard error by luck more often than a pair does): in
    ``all`` rounds, in the ``early`` ones (`early`, 8 to 32 workflows) only, or never
    (None)."""
    uncorrected: StrictBool = True
    """A lead of the shipped prior's candidate (`prior`, the last lookup's) needs
    `confidence` standard errors in early rounds too, not the correction's: it is named
    before the round, not the best of its challengers, so no luck of a race lifts it. On
    tpch-15s (100 workflows, tuning seed 2002) the early rounds on 8 and 16 arrivals left
    fair for fair?scale=0.5, and on 32 fair's 7.8 % lead was within the corrected noise:
    the stream ended 13.9 % behind fair, 1.8 % with this."""
    heavy: StrictBool = True
    """A round on finished workflows also replays the workflows still running whose work
    (task-seconds) exceeds every finished one's of its window (false: only the finished
    ones). On heavy-tailed workflows the rule that caps a huge job's share of the pool
    finishes it last, so a window of finished workflows leaves out exactly the job that
    makes the uncapped rules slow, and its replays lead them back to it
    (`PortfolioScheduler.request`)."""
    unfinished: StrictBool = True
    """A round on finished workflows also replays the workflows unfinished when it begins
    (running or waiting; up to `window` of them, those waiting longest first), so their
    remaining work counts in every candidate's score (false: only the finished ones and
    `heavy`'s). On a shared pool a burst of small workflows fills the window with small
    ones while the large workflows a rule starves have not finished: without them a
    round sees only what the starving rule does well."""
    guard: NonNegative | None = 2.0
    """A guard on regret around the shipped prior's safest candidate (`safe`, the last
    lookup's): it is left only for a challenger whose lead over it exceeds this many
    standard errors in the round and that leads it over the stream so far (the standings
    of every round remembered), and a followed candidate that is behind it over the
    rounds since it was followed gives way to it again (`rounds.guarded`, `rounds.behind`;
    None: no guard)."""
    unlike: Literal["safest", "start"] = "safest"
    """Workflows like none the prior knows (beyond its calibrated reach,
    `prior.Prior.reach`): follow the candidate safest over every workload it knows
    (``safest``), or `start` (``start``, the behaviour before)."""
    trained_range: StrictBool = True
    """Follow a learned candidate only on windows within the range of the streams it was
    trained on (`prior.TrainedRange`; false: anywhere)."""
    hold: StrictBool = True
    """The margin protects the shipped prior's candidate (`prior`) in the rounds on
    finished workflows until a round moves it, as one that won a round outright (false:
    only once it wins one). Early rounds protect it by the noise rule alone either way (held
    there too, bursty's 200-workflow seed 2005 lost 5.5 %: the early round's 0.8 % lead
    for sjf-cp was real)."""
    confirm: StrictBool = True
    """While a round's window holds fewer than `window` finished workflows and the prior's
    candidate is followed (no round moved it), a switch must hold over the rounds before
    it too: the challenger's score over each round's best, averaged over the rounds
    remembered and this one (each weighted by its new workflows), must be below the
    followed candidate's (else reason ``unconfirmed``). Consecutive small windows share
    most of their workflows, but each replay draws its durations anew: on argo-shapes (100 workflows, seed 1009) the round on 40 finished
    workflows put srpt first and fair?scale=2 2.6 % behind, the next, 11 workflows later,
    fair?scale=2 5.4 % ahead; twelve other draws of that window gave −2.8 % to +2.2 %."""
    present: StrictBool = True
    """A switch must not cost the workflows in the pool now: the challenger and the
    candidate followed are rolled out from the present pool over the same futures like
    the window, and the switch stands unless the challenger's cost is higher by more
    than `margin` (`present.from_present`; false: no such check). A replay starts from an
    empty pool; on an overloaded heavy-tailed trace the present is days of work that the
    candidate followed shaped, and a switch the replay backs can cost several times what
    either candidate alone would."""
    present_samples: StrictInt = Field(3, ge=1)
    """Futures of the present check (two rollouts each)."""
    drop: NonNegative | None = 0.02
    """Leave out of the rounds a candidate whose standing trails the leader's by more
    than this (`standings`; None: not by this rule, `far` still applies)."""
    far: NonNegative | None = 0.5
    """... or, once its rounds have scored `min_window` new workflows, by more than this
    (0.5: 1.5 times the leader's JCT over each round's best; None: only by `drop`)."""
    cut_error: float | None = Field(0.01, gt=0.0, lt=1.0)
    """A replay a round may cut (`runs.Runs`, "Early cuts") is cut as soon as a sequential
    test on its running difference from the candidate followed says, at this error rate,
    that it ends past the cut's reference (`sequential.RunningTest`; None: only once its
    JCT so far alone is past it, a sure bound that comes late in the replay)."""
    cut_unjudged: StrictBool = True
    """With `cut_error`, a candidate the standings have not judged yet (fewer than
    `min_window` workflows of evidence) may be cut too, and they remember its estimate
    (false: replayed to its end, so that `far` reads its score). On teams (seed 1) the
    early rounds' replays of such candidates were a third of the rounds' CPU; on the
    held-out streams of 100 and 500 workflows (seeds 3100-3103) it moved one run of 88,
    by +0.01 % (docs/brain.md, "A sequential cut")."""
    cut_behind: StrictBool = True
    """A replay a round may cut is cut once it ends behind the candidate followed at all,
    not only `runs.CUT` (5 %) past the reference: by the sure bound at the followed
    one's score, and with `cut_error` by the test at that threshold (`runs.Runs`, "Behind
    the followed one"). Such a candidate can be neither chosen nor the round's best; it
    may be the runner-up, whose score is then the cut's estimate (false: cut only past the
    reference, so the runner-up is replayed to its end)."""
    rest: NonNegative | None = 0.05
    """A candidate that lost each of the last n ≥ 2 rounds that scored it by more than
    this fraction of the round's best is left out of the next n rounds, but the last
    round's runner-up (`state.Standings.rested`; None: none rests). On the held-out
    streams of 500 workflows (seeds 3100-3103) it moved no run of 40 and took the rounds'
    CPU down by 16 % (docs/brain.md, "Resting the clear losers")."""
    memory: StrictInt = Field(1000, ge=1)
    """The standings remember the rounds of the last this many new workflows."""
    seeds: StrictInt = Field(1, ge=1)
    """Duration seeds per candidate and round (the score is their mean)."""
    tune: StrictBool = True
    """Search the tuned families' grids (`TUNING`); false: their default values only."""
    budget: NonNegative | None = 1.0
    """Modelled CPU seconds a round's replays of workflows still running may cost
    (`replay.projected_seconds`: its candidates times their tasks at `EVENT_SECONDS`): more
    are trimmed to fit (`replay.trim`), the finished ones all kept (None: no bound). A
    flood of large workflows would otherwise be replayed hundreds at a time, every round
    (``teams``)."""
    budget_rested: StrictBool = True
    """The candidates resting (`rest`) count in `budget`'s projection as if replayed, so
    that a round of fewer candidates does not replay more of the workflows still running
    (false: only those replayed count; docs/brain.md, "What a round may cost")."""
    hourly: NonNegative | None = None
    """Modelled CPU seconds of rounds per hour of the scheduler's clock: a credit of at
    most a quarter of this that each round's modelled seconds spend and the clock
    refills; a round waits until the credit covers the last round's cost (`state.Credit`;
    None: no bound)."""
    replay_delay: NonNegative | None = None
    """Seconds from a round's start to its choice taking effect (``replayer=inline``);
    None: the round's modelled CPU seconds (`modelled_seconds`)."""
    replayer: Literal["inline", "worker"] = "inline"
    """``inline``: `decide` runs the rounds (the simulator); ``worker``: a driver does."""
    records: Literal["cluster", "fed"] = "cluster"
    """``cluster``: record the jobs that finish in the view; ``fed``: only `record`'s."""

    @field_validator("candidates", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return tuple(c for c in value.split("+") if c) if isinstance(value, str) else value

    @field_validator("candidates")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        names = tuple(dict.fromkeys(c.strip().lower().replace("_", "-") for c in value))
        unknown = [c for c in names if c not in CANDIDATES]
        if unknown:
            raise ValueError(
                f"unknown candidate {unknown[0]!r}; choose from {', '.join(CANDIDATES)} "
                "joined with +"
            )
        if not names:
            raise ValueError("give at least one candidate")
        if "analytic" in names and not set(names) & set(_RULE_NAMES):
            raise ValueError(
                "the analytic candidate runs over the round's best rule: add a rule among "
                f"{', '.join(_RULE_NAMES)}, e.g. candidates=analytic+sjf-cp"
            )
        return names

    @model_validator(mode="after")
    def _rounds_can_run(self) -> PortfolioConfig:
        # (a window smaller than the first round's need would never fill: no round at all)
        if self.window < self.min_window:
            raise ValueError(
                f"window={self.window} is below min_window={self.min_window}, so no round "
                f"would ever run; raise window or lower min_window to at most {self.window}"
            )
        return self

    def portfolio(self) -> tuple[str, ...]:
        """The candidates, ``trained`` added when a `policy` is given."""
        extra = ("trained",) if self.policy and "trained" not in self.candidates else ()
        return (*self.candidates, *extra)


def candidate_specs(config: PortfolioConfig) -> list[str]:
    """The spec texts a round replays before the analytic rule (`tune`: with the grids)."""
    out: list[str] = []
    for name in config.portfolio():
        if name in PLAIN_RULES:
            out.append(name)
            if config.tune and name in TUNING:
                key, grid = TUNING[name]
                out.extend(f"{name}?{key}={_num(v)}" for v in grid if not _is_default(name, v))
        elif name == "learned":
            out.append("learned:default")
        elif name == "trained":
            if not config.policy:
                raise IdlegateError(
                    "the candidate trained needs policy=PATH.onnx (a policy trained on this "
                    "cluster's history)"
                )
            out.append(f"learned:{config.policy}")
        elif name == "planner":
            out.append(PLANNER)
    return list(dict.fromkeys(out))


def analytic_specs(config: PortfolioConfig, base: str) -> list[str]:
    """The analytic idle rule over `base` (a plain rule's spec), at each threshold."""
    key, grid = TUNING["analytic"]
    values = grid if config.tune else (0.0,)
    return [f"analytic?{key}={_num(v)}:{base}" for v in values]


def _num(value: float) -> str:
    return f"{value:g}"


def _is_default(name: str, value: float) -> bool:
    return (name, value) in (("fair", 1.0), ("weighted-fair", -1.0), ("srpt", 1.0))


def kind_of(spec: str) -> str:
    """The cost class of a candidate: ``rule``, ``learned`` (ONNX) or ``planner``."""
    if spec.startswith("lookahead"):
        return "planner"
    return "learned" if spec.startswith("learned") else "rule"
