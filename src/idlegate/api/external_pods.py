"""The pods other controllers create (Argo's, Airflow's) as idlegate reads them, whatever
the kind: how a kind's reading of a pod looks to the operator's core (`ExternalPod`), the
gate a webhook adds at creation (`with_our_gate`), and how long a finished pod ran
(`run_seconds`). Which pods are a kind's, and which stage each is, is each kind's own
(`idlegate.api.argo_pods`, `idlegate.integrations.airflow_pods`). Pure: dicts in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from idlegate.api.labels import GATE
from idlegate.sim.timestamps import parse_time

MAIN = "main"
"""The container Argo runs a template's container, script or resource in."""
WAIT = "wait"
"""Argo's sidecar, which outlives the main container to save its outputs."""


def run_seconds(pod: Mapping[str, Any]) -> float | None:
    """How long a finished pod ran: its ``main`` container's start to finish as the
    kubelet reports them in ``status.containerStatuses`` (without one named ``main``, as
    a containerSet's pod: the first start to the last finish of its containers but Argo's
    ``wait``). None when the status does not say, or says a run shorter than its 1 s
    precision.

    Not the node's ``finishedAt - startedAt``: Argo starts a node's clock when it creates
    the pod, so that counts the time the pod waited at idlegate's gate too."""
    status = pod.get("status") if isinstance(pod.get("status"), Mapping) else {}
    found = [c for c in status.get("containerStatuses") or [] if isinstance(c, Mapping)]
    main = [c for c in found if c.get("name") == MAIN]
    ended = [
        (c.get("state") or {}).get("terminated") or {}
        for c in main or [c for c in found if c.get("name") != WAIT]
    ]
    starts = [t for t in (parse_time(e.get("startedAt")) for e in ended) if t is not None]
    ends = [t for t in (parse_time(e.get("finishedAt")) for e in ended) if t is not None]
    if not ended or len(starts) < len(ended) or len(ends) < len(ended):
        return None  # (a container not started or not ended: not a run to measure)
    seconds = max(ends) - min(starts)
    return seconds if seconds > 0 else None


def with_our_gate(pod: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The scheduling gates a pod another controller creates is to be created with (its
    own, then idlegate's); None if it has idlegate's gate already, so that a gating
    webhook is idempotent. Which pods to gate is each kind's own question."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    gates = [dict(g) for g in spec.get("schedulingGates") or [] if isinstance(g, Mapping)]
    if any(g.get("name") == GATE for g in gates):
        return None
    return [*gates, {"name": GATE}]


class ExternalPod(Protocol):
    """One pod of a workflow another controller runs, as its kind reads it (Argo's
    `ArgoPod`): `gated`: idlegate's gate is still on it; `phase`: Pending if none yet; `executor`: the slot
    idlegate released it on (``idlegate.io/executor``), if any; `ran`: a succeeded pod's
    own run time in seconds, if its status tells it; `stage_key`: its stage as
    `Mapped.stage_keys` names it (None: none of the workflow's); `task_key`: its task, the
    attempts of one task sharing it; `run_key`: what `ran` is recorded under; `terminal`:
    it has ended (Succeeded or Failed)."""

    # (read-only: the kinds' pods are frozen)
    @property
    def name(self) -> str: ...
    @property
    def gated(self) -> bool: ...
    @property
    def phase(self) -> str: ...
    @property
    def executor(self) -> int | None: ...
    @property
    def ran(self) -> float | None: ...
    @property
    def stage_key(self) -> str | None: ...
    @property
    def task_key(self) -> str | None: ...
    @property
    def run_key(self) -> str: ...
    @property
    def terminal(self) -> bool: ...
