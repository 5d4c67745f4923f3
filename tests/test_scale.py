"""Issue 61's scale benchmark (benchmarks/scale.py) and what its profile found in the
operator's edge: what runs on every pod event."""

from __future__ import annotations

import inspect

import pytest

pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")


def test_every_index_runs_in_kopfs_loop():
    """kopf runs a plain function in its thread pool, an async one in its loop: an index is
    evaluated on every event of its resource (every pod, for two of them), and a thread hop
    per index and event was a tenth of the operator's CPU at 50 nodes (benchmarks/scale.py
    profiled with py-spy)."""
    from idlegate.operator.main import Operator, build_registry
    from idlegate.operator.settings import Settings
    from tests.operator_fakes import FakeClock, FakeKube

    operator = Operator(Settings(pool_size=2, clock=FakeClock()), kube=FakeKube())
    handlers = list(build_registry(operator)._indexing.get_all_handlers())
    assert {h.id for h in handlers} >= {"task_pods", "namespaces", "cluster_nodes", "live_pods"}
    assert [h.id for h in handlers if not inspect.iscoroutinefunction(h.fn)] == []
