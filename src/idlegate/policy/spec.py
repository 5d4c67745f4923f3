"""The scheduler spec: one typed value for "which scheduler", with one parse and one format.

Every text that names a scheduler becomes a `SchedulerSpec` through `SchedulerSpec.parse`
(``idlegate simulate --scheduler``, ``compare``/``evaluate --schedulers``, ``operator
--scheduler``, a training teacher, a planner's base, the benchmarks), and
`idlegate.policy.make_scheduler` builds it. `SchedulerSpec.format` writes the canonical
text back: ``parse(s.format()) == s`` for every spec. The text is

    [LABEL=]KIND[:ARGUMENT][?KEY=VALUE&KEY=VALUE]

Kinds (KIND is case-blind; ``_`` reads as ``-``):

* a registered name, no argument (`idlegate.policy.SCHEDULERS`): ``fair``, ``sjf-cp``,
  ``srpt``, …, ``analytic`` (over ``sjf-cp``), the strict rigid orders ``fcfs``, ``saf``,
  ``srf``, ``f1``;
* ``portfolio``: the scheduler that follows the candidate (rules, tuned rules, ONNX
  policies, the planner) its replays of the recent past find best
  (`idlegate.policy.portfolio`), e.g. ``portfolio?window=100&margin=0.05``;
* ``default``: what the operator runs when no ``--scheduler`` is given, the portfolio
  (`idlegate.policy.DEFAULT_SCHEDULER`). Its parameters are the portfolio's:
  ``default?window=100`` is ``portfolio?window=100``;
* ``learned:PATH.onnx``: an exported policy, ``learned:default`` the one shipped in the
  package (`idlegate.policy.make_learned`). A bare ``PATH.onnx`` is short for it;
* ``window:PATH.onnx``: the split-window agent for rigid jobs (`idlegate.policy.window`);
* ``strict:ORDER``, ``easy:ORDER``: a rigid priority order without backfilling or with
  EASY backfilling (`idlegate.policy.rigid`);

and five kinds whose argument is another spec, the BASE:

* ``analytic:BASE``: the analytic idle rule over BASE (`idlegate.policy.analytic`);
* ``lookahead:BASE``: the rollout planner with BASE inside its futures
  (`idlegate.policy.lookahead`), e.g. ``lookahead:learned:default``;
* ``reject:BASE``: the reject rule over ORDER, ``strict:ORDER`` or ``easy:ORDER``
  (``reject:sjf``, ``reject:easy:sjf``);
* ``inspect:PATH.onnx:BASE``: a learned inspector over the same bases
  (`idlegate.policy.inspector`);
* ``pods-gate:BASE``: in the simulator, BASE behind a pods-only pool on the cluster of
  ``--resources``, the kube-scheduler placing the pods it releases (`idlegate.sim.gate`);
  ``pods-gate?pods=N:BASE`` gives the pool's size, else it is the cluster's CPUs over the
  mean CPU request.
* ``admission?mode=MODE:BASE``: in the simulator, BASE behind another admission of the
  workload's queues (`idlegate.sim.admission`): ``queues`` (idlegate's, what a workload
  with queues gets anyway), ``kueue`` (whole workflows against quota, BestEffortFIFO),
  ``drf`` (plain dominant-resource fairness), ``pooled`` (idlegate's queues, the policy
  asked of the whole pool rather than of each queue) or ``none`` (one queue, today's pool).

**Parameters** ``?KEY=VALUE&KEY=VALUE`` belong to the spec they follow. A spec that wraps
a BASE ends with that BASE, so its own parameters come right after its kind:

* ``lookahead:learned:x.onnx?window=32``: ``window`` is the learned policy's;
* ``lookahead?horizon=60:srpt``: ``horizon`` is the planner's;
* ``reject?max_rejections=10:easy:sjf?extra_nodes=false``: one for each.

A value reads as true/false, None (``none``, ``off``), a whole number or a number, else
as text (``name=`` is always text); ``-`` in a key reads as ``_``. Which keys a kind takes
is its builder's business: an unknown one is an error naming those it takes.

**Labels.** ``LABEL=`` names the spec's row in `compare`, `evaluate` and the sweep, and is
optional everywhere: without one the row is the spec's canonical text (`title`). The
label is what precedes the first ``=`` when no ``:``, ``?`` or ``/`` comes before it, and
uses letters, digits and ``. _ + -``:

* ``full=learned:default?window=32``: label ``full``;
* ``learned:default?window=32``: no label, the row is ``learned:default?window=32``;
* ``learned:out/lr=0.1/policy.onnx``: no label (``:`` first), the ``=`` is the path's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, NoReturn

from idlegate.errors import IdlegateError

PATH_KINDS: Final = ("learned", "window", "strict", "easy")
"""Kinds whose argument is a text: a model path or a priority order."""
BASE_KINDS: Final = ("analytic", "lookahead", "reject", "inspect", "pods-gate", "admission")
"""Kinds whose argument is another spec (``inspect``: a model path, then the spec)."""
_NEEDS: Final = {
    "learned": "a path, e.g. learned:default",
    "window": "a model path, e.g. window:out/window.onnx",
    "strict": "a priority order, e.g. strict:sjf",
    "easy": "a priority order, e.g. easy:sjf",
    "analytic": "a base heuristic, e.g. analytic:fair",
    "lookahead": "a base scheduler, e.g. lookahead:sjf-cp",
    "reject": "a base, e.g. reject:easy:sjf",
    "inspect": "a model and a base, e.g. inspect:out/insp.onnx:easy:sjf",
    "pods-gate": "a base scheduler, e.g. pods-gate:default",
    "admission": "a base scheduler, e.g. admission?mode=kueue:fifo",
}

RUN_COSTS: Final[Mapping[str, float]] = {
    "default": 60.0,
    "portfolio": 60.0,
    "lookahead": 55.0,
    "learned": 20.0,
    "window": 20.0,
    "inspect": 20.0,
}
"""CPU a run of a kind takes beside a rule's on the same workflows (any kind not named: 1),
for a comparison's progress to weigh its runs by (`SchedulerSpec.run_cost`): the medians
`python benchmarks/run_costs.py` prints, rounded (the demo's workload, seeds 1-3: learned
21.6, default 58.4, lookahead:srpt 55.8, analytic:srpt 1.3 of fifo's)."""

_LABEL: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def names() -> tuple[str, ...]:
    """The kinds that take no argument: the registered names, then ``default``."""
    from idlegate.policy.heuristics import SCHEDULERS  # filled in by idlegate.policy

    return (*SCHEDULERS, "default")


@dataclass(frozen=True)
class SchedulerSpec:
    """One scheduler spec (see the module docstring); every field is checked on creation.

    `argument` is the text argument (a path or an order); `base` the spec a BASE kind
    wraps; `params` the ``?KEY=VALUE`` pairs as texts, in order. IdlegateError if the
    kind is unknown or lacks, or should not have, an argument or a base.
    """

    kind: str
    argument: str | None = None
    base: SchedulerSpec | None = None
    params: tuple[tuple[str, str], ...] = ()
    label: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in (*names(), *PATH_KINDS, *BASE_KINDS):
            raise _unknown(self.kind)
        wants_text = self.kind in (*PATH_KINDS, "inspect")
        wants_base = self.kind in BASE_KINDS and self.kind != "analytic"
        if (self.argument is None and wants_text) or (self.base is None and wants_base):
            _missing(self.kind)
        if (self.argument is not None and not wants_text) or (
            self.base is not None and self.kind not in BASE_KINDS
        ):
            raise IdlegateError(
                f"{self.kind} takes no argument; the kinds with one are "
                f"{', '.join(f'{k}:…' for k in (*PATH_KINDS, *BASE_KINDS))}"
            )
        self._check_texts()

    def _check_texts(self) -> None:
        """What `format` writes must parse back to this value."""
        arg = self.argument
        if arg is not None and (not arg or arg != arg.strip() or "?" in arg):
            raise IdlegateError(f"{self.kind}: {arg!r} is not a path or name (no ?, no spaces)")
        if self.kind == "inspect" and (arg is None or not arg.endswith(".onnx") or ".onnx:" in arg):
            raise IdlegateError(
                f"inspect:PATH.onnx:BASE needs a model file ending in .onnx, not {arg!r}"
            )
        if self.base is not None and self.base.label is not None:
            raise IdlegateError(f"a label names a whole spec, not the base {self.base.label}=…")
        keys = [k for k, _ in self.params]
        for key, value in self.params:
            if _KEY.fullmatch(key) and not value:
                raise IdlegateError(
                    f"parameter {key} has no value: write {key}=VALUE, or leave it out for "
                    "its default"
                )
            if not _KEY.fullmatch(key) or value != value.strip() or set(value) & set("&?:"):
                raise IdlegateError(
                    f"parameter {key}={value!r}: write ?KEY=VALUE&KEY=VALUE with names and "
                    "values without spaces, & ? or : (they separate a spec's parts), e.g. "
                    "learned:default?window=64"
                )
            if keys.count(key) > 1:
                raise IdlegateError(f"{key} is given twice; give each parameter once")
        if self.label is not None and not _LABEL.fullmatch(self.label):
            raise IdlegateError(
                f"label {self.label!r}: use letters, digits and . _ + - (e.g. full, learned-no-idle)"
            )

    # -- text --------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> SchedulerSpec:
        """The spec `text` names (nothing is loaded); IdlegateError naming what is wrong."""
        whole = str(text).strip()
        head, eq, body = whole.partition("=")
        try:
            if not eq or set(head) & set(":?/"):
                return _parse_body(whole, whole)
            if not head.strip():
                raise IdlegateError(
                    "write LABEL=SPEC (e.g. full=learned:default) or the spec alone"
                )
            return replace(_parse_body(body.strip(), whole), label=head.strip())
        except IdlegateError as exc:
            if repr(whole) in str(exc):
                raise
            raise IdlegateError(f"{whole!r}: {exc}") from None

    @classmethod
    def of(cls, value: SchedulerSpec | str) -> SchedulerSpec:
        """`value` itself, or the spec it names."""
        return value if isinstance(value, SchedulerSpec) else cls.parse(value)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """As a config field (`idlegate.config`): a spec or its text, dumped as its text."""
        from pydantic_core import core_schema

        text = core_schema.plain_serializer_function_ser_schema(cls.format)
        return core_schema.no_info_plain_validator_function(cls.of, serialization=text)

    def format(self, *, label: bool = True) -> str:
        """The canonical text (with the label unless `label` is False)."""
        own = "?" + "&".join(f"{k}={v}" for k, v in self.params) if self.params else ""
        if self.kind in BASE_KINDS:
            parts = (self.argument, self.base.format() if self.base else None)
            text = self.kind + own + "".join(f":{p}" for p in parts if p is not None)
        else:
            text = self.kind + (f":{self.argument}" if self.argument is not None else "") + own
        return f"{self.label}={text}" if label and self.label else text

    def __str__(self) -> str:
        return self.format()

    @property
    def title(self) -> str:
        """The spec's row in reports: its label, else its text."""
        return self.label or self.format()

    @property
    def run_cost(self) -> float:
        """A run's expected CPU beside a rule's (`RUN_COSTS`): the dearest of its kind and
        its bases' (``analytic:default`` costs what ``default`` does)."""
        own = RUN_COSTS.get(self.kind, 1.0)
        return own if self.base is None else max(own, self.base.run_cost)

    # -- values ------------------------------------------------------------------------

    def keywords(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The parameters as keyword values (see the module docstring), plus `extra`.

        IdlegateError if a key is both in the spec and in `extra`.
        """
        own = {k: v if k == "name" else _value(v) for k, v in self.params}
        twice = sorted(own.keys() & (extra or {}).keys())
        if twice:
            raise IdlegateError(f"{self.format()!r} gives {twice[0]} in the spec and as a keyword")
        return {**own, **(extra or {})}


def _value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "off"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _parse_body(text: str, whole: str) -> SchedulerSpec:
    """`text` without a label: KIND[:ARGUMENT][?PARAMS], a wrapper's BASE parsed in turn."""
    cut = min((i for i in (text.find(":"), text.find("?")) if i >= 0), default=len(text))
    kind, rest = text[:cut].strip().lower().replace("_", "-"), text[cut:]
    if kind not in (*names(), *PATH_KINDS, *BASE_KINDS):
        if text.partition("?")[0].strip().endswith(".onnx"):  # a bare policy file
            return _parse_body(f"learned:{text}", whole)
        raise _unknown(text[:cut].strip(), whole)  # as written: `_` stays `_`
    params: tuple[tuple[str, str], ...] = ()
    if kind in BASE_KINDS:
        query = ""
        if rest.startswith("?"):
            query, colon, rest = rest[1:].partition(":")
            params, rest = _params(query), colon + rest
        try:
            argument, base = _base(kind, rest[1:].strip(), whole) if rest else (None, None)
        except IdlegateError:
            _check_cut(kind, query, rest[1:], whole)  # a clearer reason, if that is it
            raise
        return SchedulerSpec(kind, argument, base, params)
    argument, query_mark, query = rest.removeprefix(":").partition("?")
    if query_mark:
        params = _params(query)
    if not rest.startswith(":"):
        return SchedulerSpec(kind, None, None, params)
    return SchedulerSpec(kind, argument.strip() or _missing(kind), None, params)


def _base(kind: str, text: str, whole: str) -> tuple[str | None, SchedulerSpec]:
    """A wrapper's argument: (None, BASE), or for ``inspect`` (PATH.onnx, BASE)."""
    if kind != "inspect":
        return None, _parse_body(text or _missing(kind), whole)
    path, sep, base = text.partition(".onnx:")
    if not sep or not path.strip() or not base.strip():
        raise IdlegateError(
            f"{whole!r} is not inspect:PATH.onnx:BASE; give the model file (ending in .onnx) "
            "and a base, e.g. inspect:out/insp.onnx:easy:sjf"
        )
    return path.strip() + ".onnx", _parse_body(base, whole)


def _check_cut(kind: str, query: str, tail: str, whole: str) -> None:
    """A value holding ``:`` ends KIND's parameters early, and its rest reads as the base
    (``lookahead?candidates=fair+analytic:sjf-cp&margin=0.02:srpt``): name that value."""
    head = re.split(r"[:?]", tail, maxsplit=1)[0]
    if not query or not set(head) & set("&="):
        return
    key, _, value = query.rpartition("&")[2].partition("=")
    part = f"{value.rpartition('+')[2]}:{head.partition('&')[0]}"
    what = "candidate" if key == "candidates" else f"value of {key}"
    hint = (
        f"name candidates without ':' (analytic is analytic:sjf-cp), from {', '.join(names())}"
        if key == "candidates"
        else "give it as a keyword option instead"
    )
    raise IdlegateError(
        f"{whole!r}: the {what} {part!r} cannot be written in a spec, since ':' ends "
        f"{kind}'s parameters; {hint}"
    )


def parse_part(text: str, role: str) -> SchedulerSpec:
    """The spec `text` names as `role` inside another (e.g. a planner's candidate); its
    IdlegateError names the part, e.g. ``the lookahead planner's candidate 'bogus': …``."""
    try:
        return SchedulerSpec.parse(text)
    except IdlegateError as exc:
        raise IdlegateError(f"{role} {text!r}: {exc}") from None


def _params(query: str) -> tuple[tuple[str, str], ...]:
    """``KEY=VALUE&…`` as pairs (the spec checks them): a pair without ``=`` has an empty
    key, which no spec takes."""
    pairs = [pair.partition("=")[::2] for pair in query.split("&")]
    return tuple((k.strip().replace("-", "_"), v.strip()) for k, v in pairs)


def _missing(kind: str) -> NoReturn:
    raise IdlegateError(f"{kind} needs {_NEEDS[kind]}")


def _unknown(kind: str, whole: str | None = None) -> IdlegateError:
    where = f" in {whole!r}" if whole is not None and whole != kind else ""
    what = f"unknown scheduler {kind!r}{where}" if kind else f"{whole!r} names no scheduler"
    return IdlegateError(
        f"{what}; valid names are {', '.join(names())}, and the "
        f"kinds {', '.join(f'{k}:…' for k in (*PATH_KINDS, *BASE_KINDS))} take an argument "
        "(a bare PATH.onnx is learned:PATH.onnx)"
    )
