"""The operator's scheduler: loading a policy by name or file, and watching its decisions.

The policy is any `idlegate.sim.protocol.Scheduler`, named by the scheduler spec grammar
that ``idlegate simulate`` uses too (`idlegate.policy.make_scheduler`): a heuristic by
name, ``analytic:BASE``, or ``learned:PATH.onnx`` (onnxruntime only; the operator never
imports torch). The default is the ONNX model bundled in ``idlegate/policy/``; when it is
missing or broken the operator warns and runs ``fair``.

:class:`RecordingScheduler` wraps it for the bridge: it times every decision, counts the
kinds (launch, idle, wait), keeps the decisions of a scheduling round so the bridge can
tell *why* (policy, cap, idle length) in Events, and turns a decision the state machine
would reject into WAIT instead of losing the launches of the round.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from idlegate.errors import IdlegateError
from idlegate.operator.metrics import Metrics
from idlegate.sim.protocol import WAIT, Action, ClusterView, Decision, Scheduler

log = logging.getLogger(__name__)
DEFAULT_HEURISTIC = "fair"


def _bundled() -> Scheduler:
    """The bundled ONNX policy, or ``fair`` with a warning when it is missing or unusable."""
    from idlegate.policy import DEFAULT_POLICY_PATH, make_scheduler

    if not DEFAULT_POLICY_PATH.is_file():
        log.warning(
            "No bundled policy at %s (this install does not ship one); using %r. "
            "Pass --policy to choose a scheduler.",
            DEFAULT_POLICY_PATH,
            DEFAULT_HEURISTIC,
        )
        return make_scheduler(DEFAULT_HEURISTIC)
    try:
        return make_scheduler(f"learned:{DEFAULT_POLICY_PATH}")
    except IdlegateError as exc:
        log.warning(
            "The bundled policy %s cannot be used (%s); using %r. Pass --policy to choose "
            "a scheduler.",
            DEFAULT_POLICY_PATH,
            exc,
            DEFAULT_HEURISTIC,
        )
        return make_scheduler(DEFAULT_HEURISTIC)


def scheduler_spec(policy: str) -> str:
    """``--policy`` as a scheduler spec of `idlegate.policy.make_scheduler`: the spec itself,
    or ``learned:PATH`` for a bare path to an ``.onnx`` file (accepted for convenience)."""
    text = policy.strip()
    if ":" not in text and (text.endswith(".onnx") or Path(text).expanduser().is_file()):
        return f"learned:{text}"
    return text


def load_scheduler(policy: str | None) -> Scheduler:
    """The scheduler for ``--policy``, in the one spec grammar of
    `idlegate.policy.make_scheduler` (``fair``, ``analytic:fair``, ``learned:PATH.onnx``, a
    bare ``PATH.onnx``), or the default: the bundled ONNX policy, else ``fair``.

    An explicit `policy` never falls back: a missing or broken model raises IdlegateError
    (the operator does not start). Without one, a missing or broken bundled model is a
    warning and the operator runs ``fair``.
    """
    if policy is None:
        return _bundled()
    from idlegate.policy import make_scheduler

    try:
        return make_scheduler(scheduler_spec(policy))
    except ImportError as exc:
        raise IdlegateError(
            f"cannot use the policy {policy!r}: the ONNX runtime is not available ({exc}); "
            "install the operator extra (pip install 'idlegate[operator]')"
        ) from None


def decision_kind(action: Action) -> str:
    """``launch``, ``idle`` or ``wait``."""
    if not isinstance(action, Decision):
        return "wait"
    return "idle" if action.idle_delay > 0 else "launch"


class RecordingScheduler:
    """A `Scheduler` around another: metrics, the round's decisions, and a legality guard."""

    def __init__(self, inner: Scheduler, metrics: Metrics | None = None) -> None:
        self.inner = inner
        self.name = str(getattr(inner, "name", type(inner).__name__))
        self.metrics = metrics
        self.count = 0
        """Decisions so far (launch, idle and wait)."""
        self.rejected = 0
        """Decisions the state machine would have rejected (answered as WAIT)."""
        self.seconds = 0.0
        """Time spent deciding, in total."""
        self._round: list[Decision] = []

    def reset(self, rng: Any) -> None:
        self.inner.reset(rng)

    def decide(self, view: ClusterView) -> Action:
        start = time.perf_counter()
        try:
            action = self.inner.decide(view)
        except Exception:
            log.exception(
                "The policy %r failed to decide; waiting until the next event.", self.name
            )
            action = WAIT
        elapsed = time.perf_counter() - start
        if isinstance(action, Decision) and not self._legal(view, action):
            action = WAIT
        self.count += 1
        self.seconds += elapsed
        if self.metrics is not None:
            self.metrics.decision_duration.observe(elapsed)
            self.metrics.decisions.labels(decision_kind(action)).inc()
        if isinstance(action, Decision):
            self._round.append(action)
        return action

    def _legal(self, view: ClusterView, decision: Decision) -> bool:
        # The state machine's own check (the one definition of a legal decision), run before
        # it applies the decision: a rejected decision inside Cluster.schedule would lose the
        # launches the round already made.
        try:
            view.check(decision)
        except IdlegateError as exc:
            self.rejected += 1
            log.error("The policy %r made an illegal decision, treated as WAIT: %s", self.name, exc)
            return False
        return True

    def drain(self) -> list[Decision]:
        """The decisions since the last drain, in order."""
        out, self._round = self._round, []
        return out
