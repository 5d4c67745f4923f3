"""Argo's Workflows (``--argo``): each event to the operator's Argo side (its pods' events:
:mod:`.pods`)."""

from __future__ import annotations

from typing import Any

import kopf

from idlegate.operator.features.argo import ArgoSide


async def workflow_event(side: ArgoSide, type: str | None, event: kopf.RawEvent, **_: Any) -> None:
    side.operator.lag.seen("workflow", event["object"], type)
    await side.workflow_seen(type == "DELETED", event["object"])
