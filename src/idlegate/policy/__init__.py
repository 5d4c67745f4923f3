"""Scheduling policies: baseline heuristics, the analytic idle rule, features and the learned policy.

Every policy answers the `Scheduler` protocol of `idlegate.sim.protocol`. Build one from
its *spec* with `make_scheduler`; `SCHEDULERS` lists the registered names. A spec is

* a registered name: ``"fair"``, ``"sjf-cp"``, ``"analytic"`` (keyword parameters pass
  through: ``make_scheduler("analytic", base="fair")``);
* ``"analytic:BASE"``: the analytic idle rule on top of the heuristic BASE
  (``"analytic:fair"`` is ``make_scheduler("analytic", base="fair")``);
* ``"lookahead:BASE"``: the rollout planner (`idlegate.policy.lookahead`) with BASE (any
  spec, e.g. ``"lookahead:sjf-cp"`` or ``"lookahead:learned:policy.onnx"``) deciding
  inside its simulated futures; `LookaheadConfig` fields pass as keyword parameters;
* ``"strict:BASE"``, ``"easy:BASE"``, ``"reject:BASE"``: rigid-job rules
  (`idlegate.policy.rigid`): a priority order without backfilling, with EASY
  backfilling, or with the reject rule (``"reject:easy:sjf"``); ``fcfs``, ``saf``,
  ``srf`` and ``f1`` are registered names for strict orders;
* ``"inspect:PATH.onnx:BASE"``: a learned inspector (`idlegate.policy.inspector`)
  accepting or rejecting the picks of the rigid BASE (``easy:sjf``, ``strict:sjf``);
* ``"window:PATH.onnx"``: the split-window agent for rigid jobs (`idlegate.policy.window`,
  trained by ``idlegate train-window``);
* ``"learned:default"``: the policy shipped in the package (`DEFAULT_POLICY_PATH`);
* ``"learned:PATH.onnx"``: an exported learned policy, run by onnxruntime
  (`idlegate.policy.onnx_runtime.OnnxPolicy`, greedy); its name is the file's stem
  unless ``name=`` is given. onnxruntime is imported only when such a spec is built, and
  torch never. Parameters may follow the path as ``?KEY=VALUE&KEY=VALUE`` (so that a
  command line can give them): ``"learned:policy.onnx?window=64&window_smallest=32"``
  bounds the observation above 64 jobs (`idlegate.policy.bounded`).
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any

from idlegate.errors import IdlegateError, reject_unknown

# analytic imports heuristics, so it registers itself here rather than in heuristics
from idlegate.policy.analytic import make_analytic
from idlegate.policy.bounded import WINDOW_FIELDS, WindowConfig, window_config
from idlegate.policy.heuristics import SCHEDULERS
from idlegate.policy.heuristics import make_scheduler as make_registered
from idlegate.policy.inspector import INSPECT_PREFIX, make_inspector
from idlegate.policy.rigid import RIGID_PREFIXES, RIGID_SCHEDULERS, make_rigid
from idlegate.sim.protocol import Scheduler

SCHEDULERS["analytic"] = make_analytic
SCHEDULERS.update(RIGID_SCHEDULERS)

DEFAULT_POLICY_PATH = Path(__file__).resolve().parent / "default.onnx"
"""The learned policy shipped with the package (how it was trained: docs/results.md, §5)."""

SPEC_PREFIXES: tuple[str, ...] = (
    "learned",
    "analytic",
    "lookahead",
    *RIGID_PREFIXES,
    INSPECT_PREFIX,
    "window",
)
"""The ``KIND:ARGUMENT`` spec kinds `make_scheduler` accepts besides registered names."""


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
    text = str(path).strip()
    if not text:
        raise IdlegateError("a learned policy needs a path: learned:PATH.onnx")
    from idlegate.policy.onnx_runtime import OnnxPolicy  # onnxruntime only when needed

    # "default" names the policy shipped in the package, wherever it is installed
    p = DEFAULT_POLICY_PATH if text == "default" else Path(text).expanduser()
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
    reject_unknown(fields, names, "a learned policy's window")
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


_LEARNED_TYPES: dict[str, Callable[[str], Any]] = {
    "name": str,
    "greedy": lambda v: _flag(v, "greedy"),
    "threads": lambda v: _whole(v, "threads"),
    "starvation_factor": lambda v: (
        None if v.lower() in ("none", "off") else _real(v, "starvation_factor")
    ),
    "starvation_minimum": lambda v: _real(v, "starvation_minimum"),
}
"""How `?KEY=VALUE` texts of a learned spec become `make_learned` arguments (the window's
values are validated by `WindowConfig`, which reads texts itself)."""


def _flag(text: str, key: str) -> bool:
    low = text.strip().lower()
    if low not in ("true", "false", "1", "0", "yes", "no"):
        raise IdlegateError(f"{key}={text!r} must be true or false")
    return low in ("true", "1", "yes")


def _whole(text: str, key: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise IdlegateError(f"{key}={text!r} must be a whole number") from None


def _real(text: str, key: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise IdlegateError(f"{key}={text!r} must be a number") from None


def spec_params(spec: str) -> tuple[str, dict[str, str]]:
    """``"PATH?k=v&k2=v2"`` as ("PATH", {"k": "v", "k2": "v2"}); no ``?``: (spec, {})."""
    base, sep, query = spec.partition("?")
    params: dict[str, str] = {}
    if not sep:
        return base, params
    for pair in query.split("&"):
        key, eq, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or not key or not value.strip():
            raise IdlegateError(
                f"{spec!r}: write parameters as ?KEY=VALUE&KEY=VALUE, e.g. "
                "learned:policy.onnx?window=64"
            )
        if key in params:
            raise IdlegateError(f"{spec!r} gives {key} twice; give each parameter once")
        params[key] = value.strip()
    return base, params


def make_scheduler(spec: str, /, **params: Any) -> Scheduler:
    """Build the scheduler `spec` names (see the module docstring) with keyword `params`.

    Raises IdlegateError for an unknown name, kind or parameter, an invalid value, or a
    learned policy file that is missing or not an idlegate policy.
    """
    kind, sep, argument = str(spec).partition(":")
    if not sep:
        return make_registered(spec, **params)
    kind = kind.strip().lower()
    if kind == "learned":
        argument, query = spec_params(argument)
        window_keys = [f"window_{f}" for f in WINDOW_FIELDS if f != "threshold"]
        accepted = (*_LEARNED_TYPES, "window", *window_keys)
        reject_unknown({*params, *query}, accepted, "a learned policy")
        twice = sorted(set(params) & set(query))
        if twice:
            raise IdlegateError(f"{spec!r} gives {twice[0]} in the spec and as a keyword")
        typed = {k: _LEARNED_TYPES[k](v) if k in _LEARNED_TYPES else v for k, v in query.items()}
        return make_learned(argument, **params, **typed)
    if kind == "lookahead":
        from idlegate.policy.lookahead import make_lookahead

        return make_lookahead(argument, **params)
    if kind in RIGID_PREFIXES:
        return make_rigid(kind, argument, **params)
    if kind == INSPECT_PREFIX:
        return make_inspector(argument, **params)
    if kind == "window":
        from idlegate.policy.window import make_window  # onnxruntime only when needed

        return make_window(argument, **params)
    if kind == "analytic":
        base = argument.strip()
        if not base:
            raise IdlegateError("analytic:BASE needs a base heuristic, e.g. analytic:fair")
        if "base" in params:
            raise IdlegateError(f"scheduler {spec!r} names its base already; drop base=")
        return make_registered("analytic", base=base, **params)
    raise IdlegateError(
        f"unknown scheduler kind {kind!r} in {spec!r}; a spec is a name "
        f"({', '.join(SCHEDULERS)}) or one of {', '.join(f'{p}:…' for p in SPEC_PREFIXES)}"
    )


__all__ = [
    "DEFAULT_POLICY_PATH",
    "SCHEDULERS",
    "SPEC_PREFIXES",
    "make_learned",
    "make_registered",
    "make_scheduler",
    "spec_params",
]
