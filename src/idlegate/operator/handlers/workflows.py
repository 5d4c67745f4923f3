"""DagWorkflows: admitted when created (or there at kopf's start), a spec's change, and
each event (a deletion, a finish); a cron's runs' events sync their cron."""

from __future__ import annotations

from typing import Any

import kopf

from idlegate.operator.runtime import Operator


def ours(operator: Operator, status: kopf.Status, **_: Any) -> bool:
    return operator.ours(status)


async def admit(operator: Operator, body: kopf.Body, **_: Any) -> None:
    await operator.workflow_created(body)


async def spec_changed(operator: Operator, body: kopf.Body, **_: Any) -> None:
    await operator.spec_changed(body)


async def workflow_event(
    operator: Operator, type: str | None, body: kopf.Body, meta: kopf.Meta, **_: Any
) -> None:
    await operator.workflow_seen(type, body, meta)


async def cron_run_event(
    operator: Operator, type: str | None, meta: kopf.Meta, status: kopf.Status, **_: Any
) -> None:
    await operator.cron_run_seen(type, meta, status)
