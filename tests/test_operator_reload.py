"""Hot reload of the policy's model files (operator/edge/reload.py): a new model takes over
between two rounds, a bad one keeps the policy in use with a Warning Event and a metric,
a ConfigMap's symlink swap is seen, and a planner's spec over an ONNX file reloads too.
Against the fake API of tests/operator_fakes.py, and the operator itself once."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from idlegate.api.settings import Settings
from idlegate.api.task_pods import Owner
from idlegate.operator.core.intents import PostEvent
from idlegate.operator.decisions import build_scheduler
from idlegate.operator.edge.reload import PolicyWatch, model_files
from idlegate.operator.runtime import Operator
from idlegate.policy import DEFAULT_POLICY_PATH
from idlegate.policy.lookahead import LookaheadScheduler
from tests.operator_fakes import FakeClock, FakeKube, Harness, harness, stage

pytestmark = pytest.mark.looptime  # the async tests: asyncio in fake loop time

MARKER = "idlegate.test_marker"
POD = Owner("idlegate-system", "idlegate-operator-0", "uid-op", kind="Pod", api_version="v1")


def variant(path: Path, marker: str, *, nan: bool = False) -> Path:
    """The bundled model with a metadata `marker` (a new content that loads), or with NaN
    weights (a content the probe refuses)."""
    onnx = pytest.importorskip("onnx", reason="onnx (the train extra) writes the variants")
    import numpy as np
    from onnx import numpy_helper

    model = onnx.load(str(DEFAULT_POLICY_PATH))
    onnx.helper.set_model_props(
        model, {**{p.key: p.value for p in model.metadata_props}, MARKER: marker}
    )
    if nan:
        for init in model.graph.initializer:
            weights = numpy_helper.to_array(init)
            if weights.dtype == np.float32 and weights.size > 1:
                init.CopyFrom(numpy_helper.from_array(np.full_like(weights, np.nan), init.name))
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def swap_in(target: Path, source: Path) -> None:
    """Replace `target` by `source`'s content as a rename (no half-written file)."""
    staged = target.with_name(target.name + ".new")
    shutil.copyfile(source, staged)
    os.replace(staged, target)


def marker(policy: Any) -> str | None:
    return policy.metadata.get(MARKER)  # (a guarded policy forwards to its model)


def watch(h: Harness, spec: str, posted: list[tuple[str, str, str]]) -> PolicyWatch:
    def report(notice: tuple[str, str, str]) -> None:
        posted.append(notice)
        h.bridge.carry([PostEvent(POD, *notice)])

    return PolicyWatch(
        spec,
        role="active",
        current=lambda: h.bridge.core.scheduler,
        users=lambda: [lambda policy: h.bridge.use_policy(policy)],
        metrics=h.metrics,
        report=report,
    )


def reloads(h: Harness, result: str) -> float:
    return h.metrics.value("idlegate_policy_reloads_total", role="active", result=result)


def test_model_files_are_found_inside_wrappers():
    assert model_files("fair") == ()
    assert model_files(None) == (DEFAULT_POLICY_PATH,)
    assert model_files("lookahead?max_decisions=5:learned:/m/p.onnx") == (Path("/m/p.onnx"),)
    assert model_files("/m/bare.onnx?window=32") == (Path("/m/bare.onnx"),)
    assert model_files("inspect:/m/i.onnx:easy:sjf") == (Path("/m/i.onnx"),)


@pytest.mark.asyncio
async def test_a_new_model_takes_over_between_rounds_and_nothing_is_lost(tmp_path):
    path = variant(tmp_path / "policy.onnx", "v1")
    spec = f"learned:{path}"
    h = harness(pool=1, scheduler=build_scheduler(spec))
    posted: list[tuple[str, str, str]] = []
    w = watch(h, spec, posted)
    await h.submit("a", {"stages": [stage("x", 1), stage("y", 1, deps=("x",))]})
    await h.submit("b", {"stages": [stage("x", 1)]})
    assert await w.check() is None  # nothing changed
    swap_in(path, variant(tmp_path / "v2.onnx", "v2"))
    assert await w.check() is True
    assert marker(h.bridge.core.scheduler) == marker(h.bridge.core.decider.policy) == "v2"
    assert reloads(h, "ok") == 1 and reloads(h, "failed") == 0
    await h.run_to_completion()
    assert {h.kube.status(n)["phase"] for n in "ab"} == {"Succeeded"}
    assert len(h.kube.pods) == 3  # every task ran once: no pod lost or made twice
    [event] = [e for e in h.kube.events if e["reason"] == "PolicyReloaded"]
    assert event["type"] == "Normal" and event["involvedObject"]["kind"] == "Pod"
    assert str(path) in event["message"]
    os.utime(path)  # touched, same content: no reload
    assert await w.check() is None and reloads(h, "ok") == 1


@pytest.mark.asyncio
async def test_a_bad_model_keeps_the_policy_in_use_with_a_warning_and_a_metric(tmp_path):
    path = variant(tmp_path / "policy.onnx", "good")
    spec = str(path)
    h = harness(pool=1, scheduler=build_scheduler(spec))
    before = h.bridge.core.scheduler
    posted: list[tuple[str, str, str]] = []
    w = watch(h, spec, posted)
    swap_in(path, variant(tmp_path / "nan.onnx", "nan", nan=True))
    assert await w.check() is False
    assert h.bridge.core.scheduler is before and h.bridge.core.decider.policy is before
    assert reloads(h, "failed") == 1 and reloads(h, "ok") == 0
    [(kind, reason, message)] = posted
    assert (kind, reason) == ("Warning", "PolicyReloadFailed")
    assert "not finite" in message and f"keeps the policy {before.name}" in message
    assert await w.check() is None  # the same bad content is not tried again
    await h.submit("a", {"stages": [stage("x", 2)]})
    assert h.released() == ["a-x-0"]  # the old model still decides
    path.write_bytes(b"not a model")  # written in place, and broken another way
    assert await w.check() is False and reloads(h, "failed") == 2
    swap_in(path, variant(tmp_path / "fixed.onnx", "fixed"))
    assert await w.check() is True and marker(h.bridge.core.scheduler) == "fixed"
    await h.settle()
    assert [e["reason"] for e in h.kube.events if e["involvedObject"]["kind"] == "Pod"] == [
        "PolicyReloadFailed",
        "PolicyReloadFailed",
        "PolicyReloaded",
    ]


@pytest.mark.asyncio
async def test_a_configmap_update_swaps_the_data_symlink_and_reloads(tmp_path):
    """A ConfigMap volume: KEY -> ..data/KEY, ..data -> ..TIMESTAMP/; an update writes a new
    timestamped directory and renames a new ..data symlink over the old one."""
    volume = tmp_path / "policy"
    first = volume / "..2024_01_01_00_00_00.1"
    variant(first / "model.onnx", "v1")
    (volume / "..data").symlink_to(first.name)
    (volume / "model.onnx").symlink_to("..data/model.onnx")
    spec = f"learned:{volume / 'model.onnx'}"
    h = harness(pool=1, scheduler=build_scheduler(spec))
    w = watch(h, spec, [])
    second = volume / "..2024_01_02_00_00_00.2"
    variant(second / "model.onnx", "v2")
    (volume / "..data_tmp").symlink_to(second.name)
    os.replace(volume / "..data_tmp", volume / "..data")
    shutil.rmtree(first)
    assert await w.check() is True
    assert marker(h.bridge.core.scheduler) == "v2"
    await h.submit("a", {"stages": [stage("x", 1)]})
    await h.run_to_completion()
    assert h.kube.status("a")["phase"] == "Succeeded"


@pytest.mark.asyncio
async def test_a_planner_over_an_onnx_file_reloads_with_a_new_worker(tmp_path):
    path = variant(tmp_path / "policy.onnx", "v1")
    spec = f"lookahead?max_decisions=20:learned:{path}"
    h = harness(pool=2, scheduler=build_scheduler(spec), plan_budget_ms=50)
    old_worker = h.bridge.planning
    assert old_worker is not None
    w = watch(h, spec, [])
    assert w.files == (path,)
    await h.submit("a", {"stages": [stage("x", 1, duration=30)]})
    swap_in(path, variant(tmp_path / "v2.onnx", "v2"))
    assert await w.check() is True
    planner = h.bridge.core.scheduler
    assert isinstance(planner, LookaheadScheduler) and marker(planner.base) == "v2"
    assert h.bridge.planning is not None and h.bridge.planning is not old_worker
    assert h.bridge.planning.planner is planner and planner.config.planner == "worker"
    await h.submit("b", {"stages": [stage("x", 1)]})
    await h.bridge.planning.idle()
    await h.run_to_completion()
    assert {h.kube.status(n)["phase"] for n in "ab"} == {"Succeeded"}


@pytest.mark.asyncio
async def test_the_operator_watches_its_policy_and_its_shadow(tmp_path, monkeypatch):
    monkeypatch.setenv("POD_ID", POD.name)
    monkeypatch.setenv("POD_NAMESPACE", POD.namespace)
    active = variant(tmp_path / "active.onnx", "a1")
    shadow = variant(tmp_path / "shadow.onnx", "s1")
    kube = FakeKube()
    settings = Settings(
        pool_size=2,
        policy=str(active),
        shadow=f"learned:{shadow}",
        shadow_estimate=False,
        policy_reload_interval=0.05,
        metrics_port=None,
        health_port=None,
        clock=FakeClock(),
    )
    operator = Operator(settings, kube=kube)
    assert [w.role for w in operator.reloads.watches] == ["active", "shadow"]
    await operator.start()
    try:
        await asyncio.wait_for(operator.watchdog.rebuilt.wait(), 5)
        swap_in(active, variant(tmp_path / "a2.onnx", "a2"))
        swap_in(shadow, variant(tmp_path / "s2.onnx", "s2", nan=True))
        value = operator.metrics.value
        for _ in range(500):  # the watches look every 0.05 s of loop time
            await asyncio.sleep(0.02)
            if value("idlegate_policy_reloads_total", role="shadow", result="failed") and value(
                "idlegate_policy_reloads_total", role="active", result="ok"
            ):
                break
        assert marker(operator.scheduler) == marker(operator.bridge.core.scheduler) == "a2"
        assert (
            operator.metrics.value("idlegate_policy_reloads_total", role="active", result="ok") == 1
        )
        assert operator.shadow is not None and marker(operator.shadow.policy) == "s1"
        await operator.bridge.lanes.wait_idle(timeout=5)
        reasons = sorted(e["reason"] for e in kube.events)
        assert reasons == ["PolicyReloadFailed", "PolicyReloaded"]
    finally:
        await operator.stop()


@pytest.mark.asyncio
async def test_every_pool_reloads_its_policy_with_an_object_of_its_own(tmp_path):
    """A pool without spec.policy takes --scheduler's new model (its own object); a pool
    whose spec.policy names a file reloads from that file; a deleted pool's watch stops."""
    active = variant(tmp_path / "active.onnx", "a1")
    own = variant(tmp_path / "own.onnx", "o1")
    settings = Settings(
        pool_size=2,
        policy=str(active),
        policy_reload_interval=0.05,
        metrics_port=None,
        health_port=None,
        clock=FakeClock(),
    )
    operator = Operator(settings, kube=FakeKube())
    operator.listing.listed(None, set())  # (no kopf here: the pods' first listing, empty)
    await operator.start()
    try:
        await asyncio.wait_for(operator.watchdog.rebuilt.wait(), 5)
        await operator.pool_changed("follows", {"size": 1})
        await operator.pool_changed("owns", {"size": 1, "policy": f"learned:{own}"})
        bridges = operator.pools.bridges
        assert [marker(bridges[n].core.scheduler) for n in ("follows", "owns")] == ["a1", "o1"]
        swap_in(active, variant(tmp_path / "a2.onnx", "a2"))
        swap_in(own, variant(tmp_path / "o2.onnx", "o2"))
        value = operator.metrics.value
        for _ in range(500):  # the watches look every 0.05 s of loop time
            await asyncio.sleep(0.02)
            if value("idlegate_policy_reloads_total", role="active", result="ok") == 2:
                break
        assert marker(bridges["default"].core.scheduler) == "a2"
        assert marker(bridges["follows"].core.scheduler) == "a2"
        assert bridges["follows"].core.scheduler is not bridges["default"].core.scheduler
        assert marker(bridges["owns"].core.scheduler) == "o2"
        await operator.pool_deleted("owns")
        assert "owns" not in operator.reloads._pools
    finally:
        await operator.stop()
