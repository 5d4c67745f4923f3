"""The operator's pure core: intents in, intents out, no API."""

from __future__ import annotations

from idlegate.operator.core.intents import (
    CreatePod,
    DeletePod,
    PatchStatus,
    PostEvent,
    RemoveGate,
)
from idlegate.operator.pods import Owner


def test_a_pods_writes_share_one_lane_and_a_workflows_status_and_events_another() -> None:
    owner = Owner("ns", "wf", "uid-1")
    other = Owner("ns", "wf2", "uid-2")
    create = CreatePod(owner, "a", 0, 0, "wf-a-0", {})
    release = RemoveGate(owner, "a", 0, 0, "wf-a-0", 3, {})
    assert create.gated and create.lane == release.lane == DeletePod(owner, "wf-a-0").lane
    assert PatchStatus(owner, {}).lane == PostEvent(owner, "Normal", "R", "m").lane
    assert PatchStatus(owner, {}).lane != PatchStatus(other, {}).lane
    assert PatchStatus(owner, {}).lane != create.lane
