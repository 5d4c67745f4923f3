"""A DagWorkflow stage's demand has one source (issue 52): its template's pod, which is
what the kube-scheduler places, else its `resources`, which become the task container's
requests. A stage giving both is refused with its path, at lint and at admission; a
history record, which leaves templates out, keeps what the template's pod requested."""

from __future__ import annotations

import pytest

from idlegate.errors import SpecError
from idlegate.sim.history.records import HistoryWorkflow, history_record
from idlegate.sim.spec import parse_workflow
from tests.operator_fakes import harness, stage

TEMPLATE = {"spec": {"containers": [{"name": "task", "resources": {"requests": {"cpu": "4"}}}]}}


def test_a_stage_with_both_resources_and_a_template_is_refused_with_its_path():
    both = stage("train", resources={"cpu": "2"}, template=TEMPLATE)
    with pytest.raises(SpecError, match=r"stages\[1\]: give what a task requests once"):
        parse_workflow({"stages": [stage("prep"), both]})
    assert parse_workflow({"stages": [stage("t", template=TEMPLATE)]}).stages[
        0
    ].demand.format() == ("cpu=4")


@pytest.mark.asyncio
async def test_the_operator_makes_a_workflow_with_both_invalid_saying_where():
    h = harness(pool=4, pool_resources="cpu=8")
    await h.submit("w", {"stages": [stage("train", resources={"cpu": "2"}, template=TEMPLATE)]})
    status = h.kube.status("w")
    assert status["phase"] == "Invalid" and h.kube.pods_of("w") == []
    (valid,) = [c for c in status["conditions"] if c["type"] == "Valid"]
    assert "stages[0]: give what a task requests once" in valid["message"]


def test_a_history_record_keeps_what_a_templates_pod_requested():
    spec = parse_workflow({"stages": [stage("t", template=TEMPLATE), stage("u")]})
    (sized, plain) = history_record(HistoryWorkflow(spec, "w", 0.0, (None, None), "w"))["stages"]
    assert sized["resources"] == {"cpu": "4"} and "template" not in sized
    assert "resources" not in plain
    replayed = parse_workflow({"stages": [sized]})
    assert replayed.stages[0].demand == spec.stages[0].demand
