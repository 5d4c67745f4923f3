"""Parts of the DagWorkflow status the operator writes, shaped by
:class:`idlegate.operator.crd.WorkflowStatus`: conditions in metav1.Condition style, idle
slots as persisted, and the status of a rejected workflow (an admitted one's is
:meth:`idlegate.operator.tracking.Workflow.status`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from idlegate.operator.clock import to_datetime
from idlegate.operator.crd import Condition, IdleSlot, Phase, WorkflowStatus

MAX_MESSAGE = 1024
"""Longest condition or Event message the operator writes (longer ones are cut)."""


def clip(message: str, limit: int = MAX_MESSAGE) -> str:
    """`message` cut to `limit` characters (with an ellipsis)."""
    return message if len(message) <= limit else message[: limit - 1] + "…"


@dataclass(slots=True)
class SlotState:
    """One idle slot of a workflow, as the operator tracks and persists it."""

    stage: str
    delay: float
    release: float
    """Release time, clock seconds."""
    released: bool = False
    reason: str = ""

    def model(self) -> IdleSlot:
        return IdleSlot(
            stage=self.stage,
            delay_seconds=round(self.delay, 6),
            release_time=to_datetime(self.release),
            released=self.released,
            reason=clip(self.reason) or None,
        )


class Conditions:
    """The workflow's conditions; lastTransitionTime moves only when a status changes."""

    def __init__(self, existing: list[dict[str, Any]] | None = None) -> None:
        self._by_type: dict[str, Condition] = {}
        for raw in existing or []:
            try:
                cond = Condition.model_validate(raw)
            except ValueError:
                continue
            self._by_type[cond.type] = cond

    def set(
        self, type_: str, status: bool, reason: str, message: str, generation: int, now: float
    ) -> None:
        value = "True" if status else "False"
        old = self._by_type.get(type_)
        when = old.last_transition_time if old is not None and old.status == value else None
        self._by_type[type_] = Condition(
            type=type_,
            status=value,
            reason=reason,
            message=clip(message),
            observed_generation=generation,
            last_transition_time=when or to_datetime(now),
        )

    def get(self, type_: str) -> Condition | None:
        return self._by_type.get(type_)

    def remove(self, type_: str) -> None:
        self._by_type.pop(type_, None)

    def models(self) -> list[Condition]:
        order = {"Valid": 0, "Running": 1, "Complete": 2, "Failed": 3}
        return sorted(self._by_type.values(), key=lambda c: (order.get(c.type, 9), c.type))


def dump(status: WorkflowStatus) -> dict[str, Any]:
    """The status as the API takes it (camelCase, no nulls)."""
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def invalid_status(
    conditions: Conditions, generation: int, stages_total: int | None
) -> dict[str, Any]:
    """The status of a workflow the operator rejected."""
    return dump(
        WorkflowStatus(
            observed_generation=generation,
            phase=Phase.INVALID,
            conditions=conditions.models(),
            stages_total=stages_total,
            stages_done=0 if stages_total is not None else None,
            stages_summary=f"0/{stages_total}" if stages_total is not None else None,
            # an empty list replaces the task counts of an earlier judgement (a merge patch
            # replaces lists): an invalid workflow has no pending tasks
            stages=[],
        )
    )
