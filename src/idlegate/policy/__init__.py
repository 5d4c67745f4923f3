"""Scheduling policies: baseline heuristics, the analytic idle rule, features and the learned policy.

Every policy answers the `Scheduler` protocol of `idlegate.sim.cluster`. Build one from
its spec with `make_scheduler` (the grammar: `idlegate.policy.spec`); `SCHEDULERS` lists
the registered names. Keyword parameters of `make_scheduler` join the spec's own
``?KEY=VALUE`` ones (``make_scheduler("analytic", base="fair")``,
``make_scheduler("reject:easy:sjf", max_rejections=5)``: a wrapper passes the keywords it
does not take on to its base). onnxruntime is imported only when a spec with a model file
is built, and torch never.
"""

from dataclasses import replace
from pathlib import Path
from typing import Any

from idlegate.errors import IdlegateError, reject_unknown

# analytic imports heuristics, so it registers itself here rather than in heuristics
from idlegate.policy.airflow import AirflowScheduler
from idlegate.policy.analytic import make_analytic
from idlegate.policy.argo import ArgoScheduler
from idlegate.policy.bounded import WINDOW_FIELDS, WindowConfig, window_config
from idlegate.policy.heuristics import SCHEDULERS
from idlegate.policy.heuristics import make_scheduler as make_registered
from idlegate.policy.inspector import make_inspector
from idlegate.policy.lookahead import make_lookahead, planner_config
from idlegate.policy.portfolio import (
    PortfolioScheduler,
    make_portfolio,
    portfolio_config,
    portfolio_model_files,
)
from idlegate.policy.rigid import RIGID_SCHEDULERS, make_rigid
from idlegate.policy.spec import SchedulerSpec
from idlegate.sim.admission_baselines import Admitted
from idlegate.sim.protocol import PodsGate, Scheduler

SCHEDULERS["analytic"] = make_analytic
SCHEDULERS.update(RIGID_SCHEDULERS)
SCHEDULERS["argo"] = ArgoScheduler  # Argo Workflows' own order, a baseline for its users
SCHEDULERS["airflow"] = AirflowScheduler  # Airflow's own order, a baseline for its users


def _portfolio(**options: Any) -> Scheduler:
    """The registry's entry for ``portfolio`` (`idlegate.policy.portfolio`)."""
    return _rebuildable(make_portfolio(SchedulerSpec("portfolio"), make_scheduler, **options))


def _rebuildable(portfolio: PortfolioScheduler) -> PortfolioScheduler:
    """`portfolio`, its candidates built by `make_scheduler`: another process builds it
    again from its configuration (`policy.apart`)."""
    portfolio.rebuildable = True
    return portfolio


SCHEDULERS["portfolio"] = _portfolio

DEFAULT_POLICY_PATH = Path(__file__).resolve().parent / "default.onnx"
"""The learned policy shipped with the package (how it was trained: docs/research/results.md, §5)."""

DEFAULT_SCHEDULER = SchedulerSpec("portfolio")
"""What the spec ``default`` builds: the scheduler the operator runs unless told otherwise,
and each ExecutorPool without a policy (`idlegate.policy.portfolio`; docs/brain.md). Its
``learned`` candidate is ``learned:default``, never ``default``, so it cannot recurse."""

_LEARNED_KEYWORDS = ("name", "greedy", "threads", "starvation_factor", "starvation_minimum")


def make_learned(
    path: str | Path,
    *,
    name: str | None = None,
    greedy: bool = True,
    threads: int = 1,
    starvation_factor: float | None = 20.0,
    starvation_minimum: float = 60.0,
    window: WindowConfig | int | None = None,
    **window_fields: Any,
) -> Scheduler:
    """The exported policy at `path` as a Scheduler (an OnnxPolicy named `name` or the stem).

    It runs inside a `StarvationGuard` (`idlegate.policy.guard`) with the given factor and
    minimum; `starvation_factor=None` leaves the policy unguarded. `window` bounds the
    observation (`idlegate.policy.bounded`): a `WindowConfig`, or its threshold with the
    other fields as ``window_head=``, ``window_tail=``, ``window_smallest=``,
    ``window_holders=``, ``window_summary=``; None (the default): the policy sees every job.
    """
    from idlegate.policy.onnx_runtime import OnnxPolicy  # onnxruntime only when needed

    # "default" names the policy shipped in the package, wherever it is installed
    p = DEFAULT_POLICY_PATH if str(path) == "default" else Path(path).expanduser()
    policy = OnnxPolicy(
        p,
        greedy=greedy,
        threads=threads,
        name=name or p.stem,
        window=_window(window, window_fields),
    )
    if starvation_factor is None:
        return policy
    from idlegate.policy.guard import StarvationGuard

    return StarvationGuard(policy, factor=starvation_factor, minimum=starvation_minimum)


def _window(window: WindowConfig | int | None, fields: dict[str, Any]) -> WindowConfig | None:
    """The window of `make_learned` from its `window` and ``window_*`` arguments."""
    names = {f"window_{f}": f for f in WINDOW_FIELDS if f != "threshold"}
    reject_unknown(fields, [*_LEARNED_KEYWORDS, "window", *names], "a learned policy")
    if isinstance(window, WindowConfig):
        if fields:
            raise IdlegateError("give the window as a WindowConfig or as window_* values, not both")
        return window
    if window is None or str(window).strip().lower() in ("off", "none"):
        if fields:
            raise IdlegateError(
                f"{sorted(fields)[0]} needs a window: add window=THRESHOLD (e.g. window=64)"
            )
        return None
    return window_config(window, prefix="window_", **{names[k]: v for k, v in fields.items()})


def _pods_gate(spec: SchedulerSpec, keywords: dict[str, Any]) -> Scheduler:
    """``pods-gate[?pods=N]:BASE`` (`idlegate.sim.gate`)."""
    reject_unknown(keywords, ["pods"], "pods-gate")
    pods = keywords.get("pods")
    if pods is not None and (isinstance(pods, bool) or not isinstance(pods, int) or pods < 1):
        raise IdlegateError(
            f"pods-gate: pods={pods!r} is no pool size; give a whole number of pods >= 1, or "
            "leave it out to size the pool from the cluster's CPUs"
        )
    assert spec.base is not None  # (SchedulerSpec checks a BASE kind has one)
    if spec.base.kind == "pods-gate":  # (a gate's pods released into another gate's pool)
        raise IdlegateError(
            f"{spec} puts a pods-only pool behind another: the cluster has one gate; "
            f"give pods-gate once, e.g. pods-gate:{spec.base.base}"
        )
    return PodsGate(make_scheduler(spec.base), pods)


def _admission(spec: SchedulerSpec, keywords: dict[str, Any]) -> Scheduler:
    """``admission?mode=MODE[&victims=V][&grace=S][&patience=S][&ending=R]:BASE``
    (`sim.admission_baselines.Admitted`)."""
    reject_unknown(keywords, ["mode", "victims", "grace", "patience", "ending"], "admission")
    if spec.base is None or spec.base.kind == "admission":
        raise IdlegateError(f"{spec} needs one base scheduler, e.g. admission?mode=kueue:fifo")
    mode = keywords.get("mode", "queues")  # (``mode=none`` reads as None)
    victims = str(keywords.get("victims", "least"))
    calm: dict[str, float] = {}
    for name, example in (("grace", "60"), ("patience", "30"), ("ending", "0.5")):
        value = keywords.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise IdlegateError(f"admission {name} {value!r} must be a number, e.g. {example}")
        if value is not None:
            calm[name] = float(value)
    base = make_scheduler(spec.base)
    return Admitted(base, "none" if mode is None else str(mode), victims, **calm)


def resolve_default(spec: SchedulerSpec) -> SchedulerSpec:
    """`spec`, or for ``default?K=V`` the `DEFAULT_SCHEDULER` it stands for with ``K=V``
    as its options (over the default's own): ``default?window=100`` is
    ``portfolio?window=100``."""
    if spec.kind != "default":
        return spec
    own = dict(DEFAULT_SCHEDULER.params) | dict(spec.params)
    return replace(DEFAULT_SCHEDULER, params=tuple(own.items()))


def make_scheduler(spec: SchedulerSpec | str, /, **params: Any) -> Scheduler:
    """Build the scheduler `spec` names (`idlegate.policy.spec`) with keyword `params`.

    Raises IdlegateError for an unknown name, kind or parameter, an invalid value, or a
    model file that is missing or not an idlegate model.
    """
    s = SchedulerSpec.of(spec)
    if s.kind in ("strict", "easy", "reject"):
        return make_rigid(s, **params)
    if s.kind == "inspect":
        return make_inspector(s, **params)
    if s.kind == "lookahead":
        return make_lookahead(s, make_scheduler, **params)
    if s.kind == "window":
        from idlegate.policy.window import make_window  # onnxruntime only when needed

        return make_window(s, **params)
    if s.kind == "portfolio":
        return _rebuildable(make_portfolio(s, make_scheduler, **params))
    if s.kind == "default":
        return make_scheduler(resolve_default(s), **params)
    keywords = s.keywords(params)
    if s.kind == "pods-gate":
        return _pods_gate(s, keywords)
    if s.kind == "admission":
        return _admission(s, keywords)
    if s.kind == "learned":
        return make_learned(s.argument or "", **keywords)
    if s.base is not None:  # analytic:BASE
        if "base" in keywords:
            raise IdlegateError(f"scheduler {s.format()!r} names its base already; drop base=")
        keywords["base"] = make_scheduler(s.base)
    return make_registered(s.kind, **keywords)


__all__ = [
    "DEFAULT_POLICY_PATH",
    "DEFAULT_SCHEDULER",
    "SCHEDULERS",
    "SchedulerSpec",
    "check_params",
    "make_learned",
    "make_registered",
    "make_scheduler",
    "model_files",
    "resolve_default",
]


def check_params(spec: SchedulerSpec | str) -> None:
    """IdlegateError for the first parameter of `spec`, its base or a planner's candidate
    that its builder would reject, loading no file: what ``idlegate lint`` checks of a
    pool's policy (whether its model and history files load is the cluster's business).
    A ``window:`` or ``inspect:`` spec's parameters are its model's and are not checked."""
    s = resolve_default(SchedulerSpec.of(spec))
    if s.kind == "lookahead":
        config = planner_config(s, {})[0]
        parts: list[SchedulerSpec | str] = [s.base or SchedulerSpec("sjf-cp"), *config.candidates]
        for part in parts:
            check_params(part)
    elif s.kind == "analytic" and s.base is not None:
        make_scheduler(replace(s, base=SchedulerSpec("sjf-cp")))  # its own parameters
        check_params(s.base)
    elif s.kind == "learned":
        rest = {k: v for k, v in s.keywords().items() if k not in _LEARNED_KEYWORDS}
        _window(rest.pop("window", None), rest)
    elif s.kind == "portfolio":
        portfolio_config(s, {})
    elif s.kind in ("pods-gate", "admission") and s.base is not None:
        make_scheduler(replace(s, base=SchedulerSpec("fifo")))  # its own parameters
        check_params(s.base)
    elif s.kind not in ("window", "inspect"):
        make_scheduler(s)  # a heuristic or a rigid order: no file, cheap to build


def model_files(spec: SchedulerSpec | str | None) -> tuple[Path, ...]:
    """The model files `spec` (None: ``default``) loads, in the order they appear: what the
    operator watches for reloads, and what a replay of a recorded spec needs on this machine."""
    s: SchedulerSpec | None = SchedulerSpec.of(spec or "default")
    found: list[Path] = []
    while s is not None:
        s = resolve_default(s)
        if s.kind in ("learned", "window", "inspect") and s.argument is not None:
            default = s.kind == "learned" and s.argument == "default"
            found.append(DEFAULT_POLICY_PATH if default else Path(s.argument).expanduser())
        if s.kind == "portfolio":
            found.extend(portfolio_model_files(s, DEFAULT_POLICY_PATH))
        s = s.base
    return tuple(found)
