"""The operator's scheduler: loading a policy by name or file, and asking it for decisions.

The policy is any `idlegate.sim.protocol.Scheduler`, named by the scheduler spec grammar
that ``idlegate simulate`` uses too (`idlegate.policy.make_scheduler`): a heuristic by
name, ``analytic:BASE``, or ``learned:PATH.onnx`` (onnxruntime only; the operator never
imports torch). The default is the ONNX model bundled in ``idlegate/policy/``; when it is
missing or broken the operator warns and runs ``fair``.

:func:`decide` asks it on the bridge's behalf: it times and counts every decision, hands
back the round's decisions so the bridge can tell *why* (policy, cap, idle length) in
Events, and answers WAIT for a policy that fails or decides illegally, without losing the
launches of the round.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from idlegate.errors import IdlegateError, IllegalDecisionError
from idlegate.operator.metrics import Metrics
from idlegate.sim.cluster import Cluster
from idlegate.sim.protocol import WAIT, Action, Decision, Launch, Scheduler

if TYPE_CHECKING:
    from idlegate.policy.spec import SchedulerSpec

log = logging.getLogger(__name__)
DEFAULT_HEURISTIC = "fair"


def _bundled(spec: SchedulerSpec) -> Scheduler:
    """The spec ``default`` (the bundled ONNX policy), or ``fair`` with a warning when it
    cannot be built (a missing or broken file)."""
    from idlegate.policy import make_scheduler

    try:
        return make_scheduler(spec)
    except IdlegateError as exc:
        log.warning(
            "The default scheduler cannot be used (%s); using %r. Pass --scheduler to choose one.",
            exc,
            DEFAULT_HEURISTIC,
        )
        return make_scheduler(DEFAULT_HEURISTIC)


def load_scheduler(spec: str | None) -> Scheduler:
    """The scheduler for ``--scheduler`` (`idlegate.policy.spec`: ``fair``,
    ``analytic:fair``, ``learned:PATH.onnx``, a bare ``PATH.onnx``, …); None is the spec
    ``default``: the bundled ONNX policy, else ``fair``.

    Only ``default`` falls back: any other spec with a missing or broken model raises
    IdlegateError (the operator does not start).
    """
    from idlegate.policy import SchedulerSpec, make_scheduler

    parsed = SchedulerSpec.parse(spec or "default")
    if parsed.kind == "default":
        return _bundled(parsed)
    try:
        return make_scheduler(parsed)
    except ImportError as exc:
        raise IdlegateError(
            f"cannot use the scheduler {spec!r}: the ONNX runtime is not available ({exc}); "
            "install the operator extra (pip install 'idlegate[operator]')"
        ) from None


def decide(
    cluster: Cluster, scheduler: Scheduler, now: float, metrics: Metrics
) -> list[tuple[Decision, list[Launch]]]:
    """Ask `scheduler` until it waits or nothing more can start, each answer applied at once
    (the operator's `Cluster.schedule`): the decisions taken, with their launches, in order.

    Every answer is timed and counted by kind (launch, idle, wait). A policy that raises or
    answers illegally changes nothing (`Cluster.decide_once` checks before it applies), so
    the launches of the round so far stand; what happens instead is :func:`_unanswered`'s.
    """
    cluster.needs_schedule = False
    taken: list[tuple[Decision, list[Launch]]] = []
    while True:
        start = time.perf_counter()
        try:
            step = cluster.decide_once(scheduler, now)
        except Exception as exc:  # whatever the policy does, the operator goes on
            step = _unanswered(scheduler, exc)
        if step is None:
            return taken
        action, launches = step
        metrics.decision_duration.observe(time.perf_counter() - start)
        if not isinstance(action, Decision):
            metrics.decisions.labels("wait").inc()
            return taken
        metrics.decisions.labels("idle" if action.idle_delay > 0 else "launch").inc()
        taken.append((action, launches))


def _unanswered(scheduler: Scheduler, exc: Exception) -> tuple[Action, list[Launch]]:
    """The step instead of a policy's answer that failed or was illegal (nothing of it was
    applied): WAIT until the next event, logged. The one place to change for a fallback."""
    if isinstance(exc, IllegalDecisionError):
        log.error(
            "The policy %r made an illegal decision, treated as WAIT: %s", scheduler.name, exc
        )
    else:
        log.exception(
            "The policy %r failed to decide; waiting until the next event.", scheduler.name
        )
    return WAIT, []
