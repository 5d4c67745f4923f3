"""What no input may do to the operator (issue 10): hold an executor with a bad pod template,
hide the time before admission from the JCT, flood etcd with Events, run a pod behind the
pool's back, or schedule with a broken policy. Unit and property tests on the bridge with
the in-memory fakes of tests/operator_fakes.py; the end-to-end ones are in test_e2e_operator.
"""

from __future__ import annotations

import copy
import logging
import math
from typing import Any

import kubernetes_validate
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from idlegate.api.labels import GATE
from idlegate.api.podsecurity import LEVEL_LABEL
from idlegate.api.settings import Settings
from idlegate.api.task_pods import Owner, task_pod
from idlegate.api.template import check_template
from idlegate.errors import IdlegateError, SpecError
from idlegate.operator.core.events import PodSeen
from idlegate.operator.core.intents import PostEvent
from idlegate.operator.decisions import load_scheduler
from idlegate.operator.edge import intake
from idlegate.operator.edge.kube import ApiError
from idlegate.operator.kinds.workflow import AdmitLaterError
from idlegate.operator.runtime import Operator
from idlegate.policy import DEFAULT_POLICY_PATH
from idlegate.sim.spec import StageSpec, parse_workflow
from idlegate.sim.timestamps import from_datetime, to_datetime
from tests.clocks import ScaledClock, run_in_loop_time
from tests.operator_fakes import FakeKube, IdleRootsOnce, harness, stage

CONTAINER = {"name": "task", "image": "busybox:1.36.1"}
BAD_TEMPLATES = {
    "containers a string": ({"spec": {"containers": "busybox"}}, "spec.containers must be a list"),
    "container a string": ({"spec": {"containers": ["busybox"]}}, "spec.containers[0] must be"),
    "env a string": (
        {"spec": {"containers": [{**CONTAINER, "env": "X=1"}]}},
        "spec.containers[0].env must be a list",
    ),
    "env entry a string": (
        {"spec": {"containers": [{**CONTAINER, "env": ["X=1"]}]}},
        "spec.containers[0].env[0] must be a mapping",
    ),
    "spec a string": ({"spec": "x"}, "template.spec must be a mapping"),
    "metadata a string": (
        {"metadata": "x", "spec": {"containers": [CONTAINER]}},
        "template.metadata must be a mapping",
    ),
    "labels a string": (
        {"metadata": {"labels": "x"}, "spec": {"containers": [CONTAINER]}},
        "metadata.labels must be a mapping",
    ),
    "gate a string": (
        {"spec": {"schedulingGates": ["g"], "containers": [CONTAINER]}},
        "spec.schedulingGates[0] must be a mapping",
    ),
    "initContainers a number": (
        {"spec": {"initContainers": 5, "containers": [CONTAINER]}},
        "spec.initContainers must be a list, not a number",
    ),
    "containers at the top": ({"containers": [CONTAINER]}, "template.spec is required"),
}
OWNER = Owner("default", "wf", "uid-1")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def run(coro: Any) -> Any:
    return run_in_loop_time(coro)


# -- 1. a bad pod template never holds an executor ---------------------------------------------


@pytest.mark.parametrize("name", list(BAD_TEMPLATES))
def test_a_bad_template_is_invalid_with_its_path_and_holds_no_executor(name):
    template, needle = BAD_TEMPLATES[name]

    async def scenario() -> None:
        h = harness(pool=1)
        await h.submit("bad", {"stages": [stage("a", template=template)]})
        await h.submit("good", {"stages": [stage("a", duration=1)]})
        status = h.kube.status("bad")
        assert status["phase"] == "Invalid"
        valid = {c["type"]: c for c in status["conditions"]}["Valid"]
        assert f"spec.stages[0].template.{needle.removeprefix('template.')}" in valid["message"]
        assert h.kube.pods_of("bad") == []
        assert h.released() == ["good-a-0"]  # the pool of 1 went to the valid workflow
        await h.run_to_completion()
        assert h.kube.status("good")["phase"] == "Succeeded"

    run(scenario())


def test_any_error_while_creating_a_pod_fails_the_workflow_and_frees_its_executors(monkeypatch):
    import idlegate.operator.core.intents as intents

    real = intents.task_pod

    def broken(owner: Owner, *args: Any, **kw: Any) -> dict[str, Any]:
        if owner.name == "boom":
            raise AttributeError("'str' object has no attribute 'get'")
        return real(owner, *args, **kw)

    monkeypatch.setattr(intents, "task_pod", broken)

    async def scenario() -> None:
        h = harness(pool=1)
        await h.submit("boom", {"stages": [stage("a")]})
        await h.submit("next", {"stages": [stage("a", duration=1)]})
        status = h.kube.status("boom")
        assert status["phase"] == "Failed"
        failed = {c["type"]: c for c in status["conditions"]}["Failed"]
        assert failed["reason"] == "PodError" and "AttributeError" in failed["message"]
        assert "PodError" in h.kube.reasons("boom")
        assert h.released() == ["next-a-0"]
        assert h.bridge.core.busy == 1 and h.bridge.core.workflows.keys() == {("default", "next")}

    run(scenario())


def test_an_error_while_releasing_a_pod_fails_the_workflow_too(monkeypatch):
    import idlegate.operator.edge.writes as writes

    async def scenario() -> None:
        h = harness(pool=1)
        await h.submit("hold", {"stages": [stage("a", duration=5)]})
        await h.submit("late", {"stages": [stage("a", duration=1)]})  # gated: pool full
        monkeypatch.setattr(writes, "release_patch", lambda *a: 1 / 0)
        await h.finish("hold-a-0", after=5)
        status = h.kube.status("late")
        assert status["phase"] == "Failed"
        failed = {c["type"]: c for c in status["conditions"]}["Failed"]
        assert "could not release" in failed["message"] and "ZeroDivisionError" in failed["message"]
        assert h.bridge.core.busy == 0 and h.bridge.core.cluster.free_executors == 1

    run(scenario())


# JSON-like values, and templates built from the fields the operator reads or writes with
# such values in every place (mostly wrong shapes, some right ones)
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False), st.text(max_size=4)
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
_name = st.sampled_from(["task", "x", "TASK_INDEX"]) | _json
_env = st.lists(
    st.fixed_dictionaries({"name": _name}, optional={"value": st.text(max_size=3) | _json}) | _json,
    max_size=3,
)
_container = st.fixed_dictionaries(
    {"name": st.sampled_from(["task", "side"]) | _json, "image": st.just("busybox") | _json},
    optional={"env": _env | _json},
)
_containers = (
    st.lists(_container, min_size=1, max_size=2) | st.lists(_container | _json, max_size=2) | _json
)
_gates = st.lists(st.fixed_dictionaries({"name": _name}) | _json, max_size=2) | _json
_labels = st.dictionaries(st.text(max_size=4), st.text(max_size=4) | _json, max_size=2) | _json
_template = (
    st.fixed_dictionaries(
        {},
        optional={
            "metadata": st.fixed_dictionaries(
                {}, optional={"labels": _labels, "annotations": _labels}
            )
            | _json,
            "spec": st.fixed_dictionaries(
                {"containers": _containers},
                optional={"initContainers": _containers, "schedulingGates": _gates},
            )
            | _json,
            "containers": _containers,
        },
    )
    | _json
)


@settings(max_examples=300, deadline=None)
@given(template=_template)
def test_task_pod_builds_every_template_that_passes_the_admission_check(template):
    """Property: a template is refused with a SpecError naming the template, or task_pod
    builds a pod from it with the operator's gate, labels and environment in place."""
    try:
        check_template(template, "spec.stages[0].template")
    except SpecError as exc:
        assert "spec.stages[0].template" in str(exc)
        return
    stage_spec = StageSpec.model_validate(
        {"name": "s", "tasks": 1, "taskDurationSeconds": 1, "template": template}
    )
    pod = task_pod(OWNER, stage_spec, 0, gated=True)
    gates = [g["name"] for g in pod["spec"]["schedulingGates"]]
    assert gates.count(GATE) == 1
    assert pod["metadata"]["labels"]["idlegate.io/workflow"] == "wf"
    for container in pod["spec"]["containers"]:
        names = [e["name"] for e in container["env"]]
        assert names.count("TASK_INDEX") == 1
    released = task_pod(OWNER, stage_spec, 0, gated=False, executor=0)
    assert GATE not in [g["name"] for g in released["spec"].get("schedulingGates", [])]


class ValidatingKube(FakeKube):
    """The in-memory API, refusing pods the way the API server's schema does (422)."""

    async def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            kubernetes_validate.validate(body, "1.30.0", strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise ApiError(422, "Invalid", f"Pod is invalid: {exc.message}") from None
        return await super().create_pod(namespace, body)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(template=_template)
@example(template={"spec": {"containers": [{**CONTAINER, "env": [{"name": "X", "value": 1}]}]}})
@example(template={"spec": {"containers": [CONTAINER]}})
def test_no_template_leaves_an_executor_held(template):
    """Property, through the handlers' entry point: whatever the template, the workflow ends
    Invalid, Failed or running, and the executors the operator counts as busy are exactly
    the pods that hold one; a valid workflow after it gets the pool."""

    async def scenario() -> None:
        h = harness(pool=1, kube=ValidatingKube())
        await h.submit("any", {"stages": [stage("a", template=template)]})
        phase = h.kube.status("any").get("phase")
        assert phase in ("Invalid", "Failed", "Running")
        assert h.bridge.core.busy == len(h.kube.occupying())
        if phase != "Running":
            assert h.bridge.core.busy == 0
            await h.submit("next", {"stages": [stage("a")]})
            assert h.released("next") == ["next-a-0"]

    run(scenario())


def test_the_namespace_decides_the_level_and_is_never_guessed():
    """Templates meet their namespace's level (its label; none: --pod-security); a namespace
    kopf's index has not seen yet, or the API refuses (403) at a rebuild, is read again
    later, never assumed."""
    loose = {"stages": [stage("a", template={"spec": {"containers": [CONTAINER]}})]}

    async def scenario() -> None:
        h = harness(pool=1)
        h.kube.add_namespace("strict", labels={LEVEL_LABEL: "restricted"})
        body = h.kube.add_workflow("wf", loose, namespace="strict")
        with pytest.raises(AdmitLaterError, match="is not seen yet"):
            h.pools.admit(copy.deepcopy(body), [], None)  # (not in the namespaces' index yet)
        assert h.kube.status("wf", "strict") == {} and h.kube.pods == {}
        h.admit(body)
        await h.settle()
        valid = h.kube.status("wf", "strict")["conditions"][0]
        assert valid["status"] == "False" and "at Pod Security level restricted" in valid["message"]
        await h.submit("fine", loose)  # "default" has no label: baseline
        assert h.released("fine") == ["fine-a-0"]
        # at a restart, with --pod-security restricted, an unlabelled namespace is restricted
        kube = FakeKube()
        kube.add_workflow("later", loose)
        kube.fail["list_namespaces"] = [ApiError(403, "Forbidden", "no list on namespaces")]
        again = harness(pool=1, kube=kube, pod_security="restricted")
        with pytest.raises(AdmitLaterError, match="cannot read the namespace"):
            await intake.rebuild(again.pools)
        assert not again.bridge.rebuilt and kube.status("later") == {}
        await intake.rebuild(again.pools)
        await again.settle()
        assert kube.status("later")["phase"] == "Invalid"

    run(scenario())


# -- 2. JCT from creation; the admission lag on its own --------------------------------------


def test_jct_counts_from_creation_and_the_admission_lag_is_reported():
    async def scenario() -> None:
        h = harness(pool=1)
        created = h.clock.now() - 20.0  # created while the operator was down
        body = h.kube.add_workflow("late", {"stages": [stage("a", duration=10)]})
        body["metadata"]["creationTimestamp"] = f"{to_datetime(created):%Y-%m-%dT%H:%M:%SZ}"
        h.admit(body)
        await h.settle()
        wf = h.bridge.core.workflows[("default", "late")]
        # the state machine sees the true time in system (at the stamp's 1 s precision)
        assert wf.job.arrival == pytest.approx(math.floor(created) + 1)
        assert h.kube.status("late")["admissionLagSeconds"] == pytest.approx(19.0)
        assert from_datetime(h.kube.status("late")["startTime"]) == pytest.approx(h.clock.now())
        assert h.metrics.value("idlegate_admission_lag_seconds_sum") == pytest.approx(19.0)
        await h.run_to_completion()
        status = h.kube.status("late")
        assert status["jctSeconds"] == pytest.approx(29.0)  # 19 s before admission + 10 s
        assert h.metrics.value(
            "idlegate_workflow_completion_time_seconds_sum", result="succeeded"
        ) == pytest.approx(29.0)

    run(scenario())


def test_a_restart_keeps_the_arrival_and_a_fresh_workflow_has_no_lag():
    async def scenario() -> None:
        h = harness(pool=1)
        body = h.kube.add_workflow("wf", {"stages": [stage("a", duration=10)]})
        # created within the second the operator sees it: no measurable lag
        body["metadata"]["creationTimestamp"] = f"{to_datetime(h.clock.now()):%Y-%m-%dT%H:%M:%SZ}"
        h.admit(body)
        await h.settle()
        assert h.kube.status("wf")["admissionLagSeconds"] == 0
        arrival = h.bridge.core.workflows[("default", "wf")].arrival
        h.clock.advance(5)
        again = harness(pool=1, kube=h.kube)
        again.clock.t = h.clock.t
        await intake.rebuild(again.pools)
        await again.settle()
        assert again.bridge.core.workflows[("default", "wf")].arrival == pytest.approx(arrival)
        assert again.metrics.value("idlegate_admission_lag_seconds_count") == 0  # not re-observed

    run(scenario())


def test_scaled_clock_maps_api_timestamps_onto_its_time():
    clock = ScaledClock(10.0, anchor=1000.0)
    assert clock.from_wall(1000.0) == 1000.0 and clock.from_wall(1002.0) == 1020.0


# -- 3. Events: one per decision, aggregated, bounded -----------------------------------------


def test_a_large_stage_leaves_a_few_events_not_one_per_task():
    async def scenario() -> None:
        h = harness(pool=2)
        await h.submit("wide", {"stages": [stage("s", tasks=60, duration=1)]})
        await h.run_to_completion(limit=2000)
        events = [e for e in h.kube.events if e["involvedObject"]["name"] == "wide"]
        assert h.kube.status("wide")["phase"] == "Succeeded"
        assert len(events) <= 4  # Accepted, Released (decision), Released (continuing), Succeeded
        released = [e for e in events if e["reason"] == "Released"]
        assert len(released) == 2  # 1 decision of 2 tasks; 58 equal continuations, posted once
        decision = next(e for e in released if "policy" in e["message"])
        assert (
            "2 of 60 task(s) of stage 's' (2 of 60 so far)" in decision["message"]
            and "cap" in decision["message"]
        )

    run(scenario())


def test_equal_events_are_posted_once_and_a_workflows_events_are_bounded():
    async def scenario() -> None:
        h = harness(pool=1, max_events_per_workflow=3)
        owner = Owner("default", "wf", "uid-x")
        for _ in range(5):
            h.bridge.carry([PostEvent(owner, "Normal", "Same", "the same message")])
        for n in range(4):  # (each posted before the next: not joined to one waiting)
            h.bridge.carry([PostEvent(owner, "Warning", "TaskRetry", f"retry {n}")])
            await h.settle()
        h.bridge.carry([PostEvent(owner, "Normal", "Succeeded", "done")])
        await h.settle()
        posted = [(e["type"], e["reason"], e["message"]) for e in h.kube.events]
        assert h.kube.events[0]["count"] == 5  # (said while its post waited: in it)
        assert posted == [
            ("Normal", "Same", "the same message"),
            ("Warning", "TaskRetry", "retry 0"),
            ("Warning", "TaskRetry", "retry 1"),
            ("Normal", "Succeeded", "done"),  # (beyond the 3: the first of a new reason)
        ]

    run(scenario())


# -- 4. a gate removed by someone else ------------------------------------------------------


async def _remove_gate(h: Any, name: str) -> None:
    pod = h.kube.pods[("default", name)]
    pod["spec"]["schedulingGates"] = [
        g for g in pod["spec"]["schedulingGates"] if g["name"] != GATE
    ]
    h.pools.handle(PodSeen(copy.deepcopy(pod)))
    await h.settle()


def test_a_pod_released_by_hand_counts_against_a_full_pool():
    async def scenario() -> None:
        h = harness(pool=1)
        await h.submit("hold", {"stages": [stage("a", duration=10)]})
        await h.submit("other", {"stages": [stage("a", duration=10)]})
        await _remove_gate(h, "other-a-0")  # kubectl patch ... remove /spec/schedulingGates
        assert h.metrics.value("idlegate_foreign_gate_removals_total") == 1
        (warning,) = [e for e in h.kube.events if e["reason"] == "ReleasedByOthers"]
        assert warning["type"] == "Warning" and "runs beyond the pool" in warning["message"]
        assert h.bridge.core.busy == 2 and h.metrics.value("idlegate_busy_executors") == 2
        await h.submit("third", {"stages": [stage("a", duration=1)]})
        await h.finish("hold-a-0", after=10)
        # the freed executor is the hand-released pod's: nothing else is released
        assert h.released() == ["other-a-0"] and h.bridge.core.busy == 1
        await h.run_to_completion()
        assert {h.kube.status(n)["phase"] for n in ("hold", "other", "third")} == {"Succeeded"}
        assert h.max_occupying == 2

    run(scenario())


def test_a_pod_released_by_hand_takes_a_free_executor_and_ends_its_idle_slot():
    async def scenario() -> None:
        h = harness(pool=2, scheduler=IdleRootsOnce(delay=50))
        await h.submit("idle", {"stages": [stage("a", tasks=2, duration=10)]})
        assert h.released() == [] and h.bridge.core.busy == 0
        await _remove_gate(h, "idle-a-1")
        assert h.metrics.value("idlegate_foreign_gate_removals_total") == 1
        wf = h.bridge.core.workflows[("default", "idle")]
        assert wf.job.stages[0].idle_until is None and h.timers.armed == {}
        # the stage is runnable again: the policy releases the other task on the other executor
        assert h.released() == ["idle-a-0", "idle-a-1"]
        await h.run_to_completion()
        assert h.kube.status("idle")["phase"] == "Succeeded"
        assert h.max_occupying == 2

    run(scenario())


def test_a_pod_released_by_hand_that_ends_before_it_had_an_executor_is_accounted():
    async def scenario() -> None:
        h = harness(pool=1)
        await h.submit("hold", {"stages": [stage("a", duration=10)]})
        await h.submit("x", {"stages": [stage("a", tasks=2, duration=1)]})
        await _remove_gate(h, "x-a-0")
        await h.finish("x-a-0", after=1)  # done before any executor was free
        assert h.kube.status("x")["stages"][0]["succeeded"] == 0
        await h.finish("hold-a-0", after=9)
        # the freed executor took the finished task and continued with the next one
        assert h.released() == ["x-a-1"]
        await h.run_to_completion()
        assert h.kube.status("x")["phase"] == "Succeeded"
        assert h.kube.status("x")["stages"][0]["succeeded"] == 2

    run(scenario())


# -- 5. policy loading ------------------------------------------------------------------------


def test_policy_specs_share_the_simulators_grammar(tmp_path):
    assert load_scheduler("analytic:fair").name.startswith("analytic")
    assert load_scheduler("default").name == load_scheduler(None).name  # the spec default
    if DEFAULT_POLICY_PATH.is_file():
        assert load_scheduler(f"learned:{DEFAULT_POLICY_PATH}").name == DEFAULT_POLICY_PATH.stem
        assert load_scheduler(str(DEFAULT_POLICY_PATH)).name == DEFAULT_POLICY_PATH.stem
    with pytest.raises(IdlegateError, match="does not exist"):
        load_scheduler(f"learned:{tmp_path / 'missing.onnx'}")


def _nan_model(path: Any) -> Any:
    onnx = pytest.importorskip("onnx", reason="onnx (the train extra) writes the broken model")
    import numpy as np
    from onnx import numpy_helper

    if not DEFAULT_POLICY_PATH.is_file():
        pytest.skip("no bundled policy to break")
    model = onnx.load(str(DEFAULT_POLICY_PATH))
    for init in model.graph.initializer:
        weights = numpy_helper.to_array(init)
        if weights.dtype == np.float32 and weights.size > 1:
            init.CopyFrom(numpy_helper.from_array(np.full_like(weights, np.nan), init.name))
    onnx.save(model, str(path))
    return path


def test_a_model_with_nan_weights_is_refused_at_load(tmp_path):
    bad = _nan_model(tmp_path / "nan.onnx")
    for spec in (f"learned:{bad}", str(bad)):
        with pytest.raises(IdlegateError, match="not finite"):
            load_scheduler(spec)


def test_a_missing_or_broken_bundled_model_warns_and_falls_back_to_fair(
    tmp_path, monkeypatch, caplog
):
    import idlegate.policy as policy

    monkeypatch.setattr(policy, "DEFAULT_POLICY_PATH", tmp_path / "absent.onnx")
    with caplog.at_level(logging.WARNING, "idlegate.operator.decisions"):
        assert load_scheduler(None).name == "fair"
    assert "absent.onnx' does not exist" in caplog.text
    caplog.clear()
    corrupt = tmp_path / "default.onnx"
    corrupt.write_bytes(b"not a model")
    monkeypatch.setattr(policy, "DEFAULT_POLICY_PATH", corrupt)
    with caplog.at_level(logging.WARNING, "idlegate.operator.decisions"):
        assert load_scheduler(None).name == "fair"
    assert "cannot be used" in caplog.text
    with pytest.raises(IdlegateError):  # named explicitly: never a fallback
        load_scheduler(str(corrupt))


# -- 6. smaller things ------------------------------------------------------------------------


def test_a_namespace_that_does_not_exist_is_warned_about(caplog):
    async def scenario() -> list[str]:
        settings = Settings(
            pool_size=1, namespaces=("default", "team-a"), metrics_port=None, scheduler=_fifo()
        )
        operator = Operator(settings, kube=FakeKube())
        with caplog.at_level(logging.WARNING, "idlegate.operator.runtime"):
            return await operator.warn_missing_namespaces()

    assert run(scenario()) == ["team-a"]
    assert "Namespace 'team-a' does not exist" in caplog.text


def _fifo() -> Any:
    from idlegate.policy import make_scheduler

    return make_scheduler("fifo")


def test_a_nan_duration_must_be_a_finite_number():
    with pytest.raises(SpecError, match=r"taskDurationSeconds: must be a finite number"):
        parse_workflow({"stages": [{"name": "a", "tasks": 1, "taskDurationSeconds": math.nan}]})


def test_failed_and_invalid_workflows_have_no_pending_tasks():
    async def scenario() -> None:
        h = harness(pool=1)
        await h.submit("f", {"stages": [stage("a", tasks=3), stage("b", tasks=2, deps=("a",))]})
        await h.finish("f-a-0", phase="Failed", after=1)
        status = h.kube.status("f")
        assert status["phase"] == "Failed"
        assert [s["pending"] for s in status["stages"]] == [0, 0]
        assert status["stages"][0]["failed"] == 1
        # a workflow judged Invalid after an earlier status had counts: they are cleared
        body = h.kube.add_workflow("i", {"stages": [stage("a", template={"spec": "x"})]})
        body["status"] = {"stages": [{"name": "a", "tasks": 1, "pending": 1}]}
        h.admit(body)
        await h.settle()
        assert h.kube.status("i")["phase"] == "Invalid" and h.kube.status("i")["stages"] == []

    run(scenario())
