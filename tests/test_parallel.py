"""Task pools: local processes and Ray give the same results, in task order; clear errors.

The Ray tests share one local Ray instance of 2 CPUs (a few seconds to start) and skip
when ray is not installed (it comes with the dev extra, so `make test` runs them).
"""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import types
from collections.abc import Iterator

import numpy as np
import pytest

from idlegate.errors import IdlegateError
from idlegate.parallel import LocalPool, RayPool, open_pool

# ---------------------------------------------------------------------------------------
# without Ray


def test_importing_parallel_loads_neither_torch_nor_ray():
    code = "import sys, idlegate.parallel; print(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = {m.split(".")[0] for m in out.stdout.split()}
    assert not loaded & {"torch", "ray"}


@pytest.mark.parametrize("workers", [1, 2])
def test_local_pool_returns_results_in_task_order_with_progress(workers):
    calls: list[tuple[int, int, int]] = []
    with LocalPool(workers) as pool:
        out = pool.map(pow, [3, 0, 5, 1], shared=(2,), progress=lambda *a: calls.append(a))
    assert out == [8, 1, 32, 2]
    assert [c[0] for c in calls] == [1, 2, 3, 4] and {c[1] for c in calls} == {4}
    assert sorted(c[2] for c in calls) == [0, 1, 2, 3]


def test_a_task_error_reaches_the_caller_unchanged():
    with LocalPool(2) as pool, pytest.raises(ValueError, match="math domain error"):
        pool.map(math.sqrt, [4, -1])


def test_open_pool_is_local_without_ray():
    pool = open_pool(None, 3)
    assert isinstance(pool, LocalPool) and pool.workers == 3
    with pytest.raises(IdlegateError, match="at least 1"):
        LocalPool(0)


def test_missing_ray_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(IdlegateError, match=r"pip install 'idlegate\[ray\]'"):
        open_pool("auto", 1)


def _fake_ray() -> types.SimpleNamespace:
    def init(**kwargs: object) -> None:
        raise AssertionError(f"ray.init must not be reached, got {kwargs}")

    return types.SimpleNamespace(is_initialized=lambda: False, init=init, __version__="0")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_cluster_fails_fast_with_the_address(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", _fake_ray())
    address = f"127.0.0.1:{_closed_port()}"
    with pytest.raises(IdlegateError, match=f"cannot reach the Ray cluster at {address}"):
        RayPool(address)
    with pytest.raises(IdlegateError, match="is not an address"):
        RayPool("head-node")


# ---------------------------------------------------------------------------------------
# on a local Ray instance


@pytest.fixture(scope="module")
def ray_pool() -> Iterator[RayPool]:
    pytest.importorskip("ray", reason="ray is not installed: pip install 'idlegate[ray]'")
    with RayPool("auto", num_cpus=2) as pool:
        yield pool


@pytest.mark.slow
def test_ray_returns_results_in_task_order_with_progress(ray_pool):
    calls: list[tuple[int, int, int]] = []
    out = ray_pool.map(pow, [3, 0, 5, 1], shared=(2,), progress=lambda *a: calls.append(a))
    assert out == [8, 1, 32, 2] and ray_pool.workers == 2
    assert [c[0] for c in calls] == [1, 2, 3, 4] and sorted(c[2] for c in calls) == [0, 1, 2, 3]
    assert ray_pool.map(pow, []) == []


@pytest.mark.slow
def test_rollouts_teacher_labels_and_validation_are_the_same_on_ray(ray_pool):
    torch = pytest.importorskip("torch")
    from idlegate.policy.model import PolicyNet
    from idlegate.policy.model_config import ModelConfig
    from idlegate.training.bc import record_demonstrations
    from idlegate.training.rollout import (
        CustomTask,
        EvalTask,
        RolloutRunner,
        RolloutTask,
        WorkloadRef,
        make_blob,
    )

    torch.manual_seed(0)
    cfg = ModelConfig()
    blob = make_blob(PolicyNet(cfg), "onnx")
    ref = WorkloadRef.of("synthetic", {"num_executors": 2, "num_jobs": 12}, 7)
    teacher = (("heuristic", "fair"), ("model_config", cfg.model_dump()))
    tasks = [
        RolloutTask(ref, 11),
        RolloutTask(ref, 12, max_time=60.0),
        EvalTask(ref, 13),
        EvalTask(ref, 13, "sjf-cp"),
    ]
    labels = [CustomTask(ref, 14, record_demonstrations, teacher)]
    with RolloutRunner(1) as local, RolloutRunner(ray="auto") as remote:
        here = local.run(blob, tasks) + local.run(None, labels)
        there = remote.run(blob, tasks) + remote.run(None, labels)
        # an input error in a Ray task keeps its type and message
        with pytest.raises(IdlegateError, match="needs the policy's weights"):
            remote.run(None, [EvalTask(ref, 13)])
    for a, b in zip(here[:2], there[:2], strict=True):
        np.testing.assert_array_equal(a.choices, b.choices)
        np.testing.assert_array_equal(a.integrals, b.integrals)
        assert (a.end_time, a.jct_sum, a.jobs_done) == (b.end_time, b.jct_sum, b.jobs_done)
    assert here[2:4] == there[2:4]
    assert here[2].avg_jct > 0
    a, b = here[4], there[4]
    assert a.avg_jct == b.avg_jct and a.choices == b.choices and len(a.choices) > 0
    for x, y in zip(a.observations, b.observations, strict=True):
        for name, value in x.inputs().items():
            np.testing.assert_array_equal(value, y.inputs()[name])


@pytest.mark.slow
def test_a_comparison_and_a_sweep_are_the_same_on_ray(ray_pool):
    from idlegate.evaluation.comparison import CompareConfig, WorkloadOptions, run_comparison
    from idlegate.evaluation.sweep import SweepConfig, run_idle_sweep

    config = CompareConfig(
        workload="synthetic",
        schedulers=("fifo", "sjf-cp", "fair"),
        seeds=2,
        first_seed=5,
        options=WorkloadOptions(num_jobs=20, num_executors=2),
        jobs=2,
    )
    calls: list[tuple[int, int, str, int]] = []
    local = run_comparison(config)
    remote = run_comparison(config, lambda *a: calls.append(a), ray_pool)
    assert local.to_dict() == remote.to_dict()
    for a, b in zip(local.results, remote.results, strict=True):
        for x, y in zip(a.jct, b.jct, strict=True):
            np.testing.assert_array_equal(x, y)
    assert [c[0] for c in calls] == list(range(1, 7))
    sweep = SweepConfig(loads=(0.8,), long_seconds=(40.0,), options={"num_stream": 15})
    entries = ["analytic=analytic:sjf-cp"]
    here = run_idle_sweep(sweep, entries, (1, 2), jobs=1)
    there = run_idle_sweep(sweep, entries, (1, 2), pool=ray_pool)
    assert here.to_dict() == there.to_dict() and len(here.points) == 2
