"""The operator's scheduler: loading a policy by name or file, and watching its decisions.

The policy is any `idlegate.sim.cluster.Scheduler`: a heuristic by name, or an exported
ONNX policy (onnxruntime only; the operator never imports torch). The default is the
ONNX model bundled in ``idlegate/policy/`` if the package ships one, else ``fair``.

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
from idlegate.sim.cluster import WAIT, Action, ClusterView, Decision, Scheduler

log = logging.getLogger(__name__)
DEFAULT_HEURISTIC = "fair"


def bundled_policy() -> Path | None:
    """The ONNX policy shipped with the package, if it is there."""
    from idlegate.policy import DEFAULT_POLICY_PATH

    return DEFAULT_POLICY_PATH if DEFAULT_POLICY_PATH.is_file() else None


def _onnx_policy(path: Path) -> Scheduler:
    try:
        from idlegate.policy.onnx_runtime import OnnxPolicy
    except ImportError as exc:
        raise IdlegateError(
            f"cannot use the ONNX policy {path}: the ONNX runtime is not available ({exc}); "
            "install the operator extra (pip install 'idlegate[operator]')"
        ) from None
    return OnnxPolicy(path, name=path.stem)


def load_scheduler(policy: str | None) -> Scheduler:
    """The scheduler for ``--policy``: a heuristic's name, an ``.onnx`` file, or the default."""
    if policy is None:
        bundled = bundled_policy()
        if bundled is not None:
            try:
                return _onnx_policy(bundled)
            except IdlegateError as exc:
                log.warning("The bundled policy cannot be used (%s); using %r.", exc, "fair")
        from idlegate.policy import make_scheduler

        return make_scheduler(DEFAULT_HEURISTIC)
    path = Path(policy)
    if policy.endswith(".onnx") or path.is_file():
        return _onnx_policy(path)
    from idlegate.policy import make_scheduler

    return make_scheduler(policy)


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
