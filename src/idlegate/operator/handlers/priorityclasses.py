"""PriorityClasses: a workflow's priority in its queue (docs/queues.md)."""

from __future__ import annotations

from typing import Any

import kopf

from idlegate.operator.runtime import Operator


async def priority_class(
    operator: Operator, type: str | None, name: str, body: kopf.Body, **_: Any
) -> None:
    operator.priority_class_seen(type, name, body)
