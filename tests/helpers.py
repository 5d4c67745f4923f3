"""Small builders shared by the tests: one-line DAGs, scripted schedulers, tiny training runs."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import io
import os
import runpy
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from idlegate.sim.alibaba import ENV_VAR as ALIBABA_ENV_VAR
from idlegate.sim.alibaba import default_alibaba_dir
from idlegate.sim.dag import Dag
from idlegate.sim.datadirs import SHARED_ENV_VAR, shared_data_dir
from idlegate.sim.engine import JobArrival, Workload
from idlegate.sim.pool import identical_nodes
from idlegate.sim.protocol import WAIT, Action, ClusterView, Decision, Stage
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import parse_workflow
from idlegate.sim.tpch import ENV_VAR, default_tpch_dir
from idlegate.sim.workloads import build_workload


def dag(
    *stages: tuple[str, int, float, list[str]] | tuple[str, int, float, list[str], bool],
) -> Dag:
    """Stages as (name, tasks, task duration, depends on[, gang])."""
    spec = [
        {"name": s[0], "tasks": s[1], "taskDurationSeconds": s[2], "dependsOn": s[3]}
        | ({"gang": s[4]} if len(s) > 4 else {})
        for s in stages
    ]
    return Dag.from_spec(parse_workflow({"stages": spec}))


def spec_dag(*specs: dict[str, Any]) -> Dag:
    """A DAG of stage specs as a workflow file gives them (`cpu_stage`)."""
    return Dag.from_spec(parse_workflow({"stages": list(specs)}))


def cpu_stage(
    name: str, tasks: int, seconds: float, cpu: str | None = None, **more: Any
) -> dict[str, Any]:
    """A stage spec whose tasks each request `cpu` (none: no request)."""
    out = {"name": name, "tasks": tasks, "taskDurationSeconds": seconds, **more}
    if cpu is not None:
        out["resources"] = {"cpu": cpu}
    return out


def cpu_diamond() -> Dag:
    """a (2 x 10 s, 4 CPUs) -> b (1 x 20 s, 1 CPU) and c (3 x 5 s, no request) -> d
    (1 x 4 s, 8 CPUs)."""
    return spec_dag(
        cpu_stage("a", 2, 10, "4"),
        cpu_stage("b", 1, 20, "1", dependsOn=["a"]),
        cpu_stage("c", 3, 5, dependsOn=["a"]),
        cpu_stage("d", 1, 4, "8", dependsOn=["b", "c"]),
    )


def chain(*lengths: float, tasks: int = 1) -> Dag:
    """A chain of stages s0 -> s1 -> ... with the given task durations."""
    stages = [
        {"name": f"s{i}", "tasks": tasks, "taskDurationSeconds": d}
        | ({"dependsOn": [f"s{i - 1}"]} if i else {})
        for i, d in enumerate(lengths)
    ]
    return Dag.from_spec(parse_workflow({"stages": stages}))


def workload(*jobs: tuple[float, str, Dag], executors: int = 1) -> Workload:
    return Workload("test", tuple(JobArrival(t, n, d) for t, n, d in jobs), executors)


class Scripted:
    """Runs `rule(view, stages)` on the runnable stages; the rule returns a Decision or WAIT."""

    name = "scripted"

    def __init__(self, rule: Callable[[ClusterView, list[Stage]], Action]) -> None:
        self.rule = rule

    def reset(self, rng: Any) -> None:
        pass

    def decide(self, view: ClusterView) -> Action:
        return self.rule(view, view.runnable_stages())


def fifo_rule(view: ClusterView, stages: list[Stage]) -> Action:
    s = stages[0]
    return Decision(s, view.num_executors)


def sjf_rule(view: ClusterView, stages: list[Stage]) -> Action:
    s = min(stages, key=lambda s: (s.job.remaining_work, s.job.id))
    return Decision(s, view.num_executors)


def idle_once(job_name: str, stage_index: int, delay: float, then=sjf_rule) -> Scripted:
    """Delay `job_name`'s stage `stage_index` by `delay` the first time it is offered."""

    def rule(view: ClusterView, stages: list[Stage]) -> Action:
        for s in stages:
            if s.job.name == job_name and s.index == stage_index and not s.delayed:
                return Decision(s, view.num_executors, delay)
        return then(view, stages) if stages else WAIT

    return Scripted(rule)


def jcts(result: Any) -> dict[str, float]:
    return {r.name: r.jct for r in result.records}


class CappedFifo:
    """FIFO with every workflow capped at `cap` executors (the operator tests' policy)."""

    name = "capped-fifo"

    def __init__(self, cap: int) -> None:
        self.cap = cap

    def reset(self, rng: Any) -> None:
        pass

    def decide(self, view: ClusterView) -> Action:
        if view.free_executors <= 0:
            return WAIT
        for stage in view.runnable_stages():
            if stage.job.held < self.cap:
                return Decision(stage, self.cap)
        return WAIT


def tiny_train_config(out: Any, **over: Any) -> Any:
    """A `TrainConfig` that trains in seconds: two executors, 25 two-task synthetic jobs,
    3 rollouts per sequence, one worker, validation on two seeds against fifo, a 2-episode
    BC warm start; `over` replaces top-level fields (e.g. ``algorithm="ppo"``)."""
    from idlegate.training.config import TrainConfig  # needs the train extra's pydantic models

    data = {
        "seed": 5,
        "workload": {
            "name": "synthetic",
            "options": {"num_executors": 2, "num_jobs": 25, "tasks_per_job": 2, "load": 0.9},
        },
        "validation": {
            "seeds": [1_000_000, 1_000_001],
            "every": 1,
            "reference_schedulers": ["fifo"],
        },
        "iterations": 2,
        "rollouts_per_sequence": 3,
        "workers": 1,
        "curriculum": {"initial_mean_seconds": 150, "increment_seconds": 50},
        "bc": {"episodes": 2, "epochs": 1},
        "out_dir": str(out),
    }
    return TrainConfig.of({**data, **over})


def load_benchmark(name: str) -> ModuleType:
    """Import benchmarks/<name>.py (the scripts are not a package); registered in sys.modules,
    so that its dataclasses resolve their module."""
    path = Path(__file__).parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@functools.cache
def benchmark_help(name: str) -> str:
    """What ``python benchmarks/<name>.py --help`` prints, the script run in this process as
    Python runs one (its folder first on sys.path, so its siblings import)."""
    path = Path(__file__).parents[1] / "benchmarks" / f"{name}.py"
    argv, syspath, out = sys.argv, sys.path[:], io.StringIO()
    sys.argv, sys.path[:0] = [str(path), "--help"], [str(path.parent)]
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(str(path), run_name="__main__")
    except SystemExit as stopped:
        if stopped.code in (0, None):
            return out.getvalue()
        raise AssertionError(f"{name} --help exited {stopped.code}: {out.getvalue()}") from None
    finally:
        sys.argv, sys.path[:] = argv, syspath
    raise AssertionError(f"{name} ran to its end on --help, printing {out.getvalue()!r}")


def shared_path(name: str, *parts: str) -> Path:
    """Where ``../shared/data/<name>/<parts>`` is, existing or not: under
    ``$IDLEGATE_SHARED_DATA`` when it is set (`idlegate.sim.datadirs.shared_data_dir`), which
    is how CI hides the data from the tests (``make test-without-data``). Tests find the
    shared data through this function or `need_shared` only, never by a path of their own
    (test_data_hidden checks), so that hiding it hides it from every test."""
    base = shared_data_dir(name) or Path("..", "shared", "data", name)
    return base.joinpath(*parts)


def need_shared(name: str, *parts: str) -> Path:
    """`shared_path(name, *parts)`, or skip the calling test saying what is missing, where
    it was looked for and how to provide it: the one skip of every test that needs a data
    set of ../shared/data (called in the test or its fixture, not as a ``skipif`` mark, so
    that the reason is this one)."""
    path = shared_path(name, *parts)
    if not path.exists():
        root = os.environ.get(SHARED_ENV_VAR)
        if root:
            where = f"{SHARED_ENV_VAR}={root} names the data folder, in place of ../shared/data"
            how = f"put {name}/ there, or unset {SHARED_ENV_VAR} to read ../shared/data"
        else:
            where = "../shared/data beside the clone is absent or lacks it"
            how = f"put {name}/ there, or set {SHARED_ENV_VAR} to a folder holding {name}/"
        pytest.skip(f"{path} not found: {where}; to run this test, {how}")
    return path


def tpch_traces() -> Path:
    """The TPC-H traces the simulator finds by itself (``IDLEGATE_TPCH_DIR``, else the
    checkout's ``../shared/data/tpch``: :func:`idlegate.sim.tpch.default_tpch_dir`), or skip
    the calling test saying how to provide them."""
    found = default_tpch_dir()
    if found is None or not found.is_dir():
        where = f"{found or shared_path('tpch')} is absent"
        pytest.skip(f"TPC-H traces not found ({where}): set {ENV_VAR} to their directory")
    return found


def alibaba_trace() -> Path:
    """Alibaba's trace as the simulator finds it by itself (``IDLEGATE_ALIBABA_DIR``, else
    the checkout's ``../shared/data/alibaba``), or skip the calling test saying how to
    provide it."""
    found = default_alibaba_dir()
    if found is None or not found.is_dir():
        where = f"{found or shared_path('alibaba')} is absent"
        pytest.skip(f"Alibaba trace not found ({where}): set {ALIBABA_ENV_VAR} to its directory")
    return found


def gang_workload(seed: int, jobs: int = 25, executors: int = 6) -> Workload:
    """Small random DAGs, about a third of their stages gangs, Poisson arrivals."""
    rng = np.random.default_rng(seed)
    arrivals, t = [], 0.0
    for i in range(jobs):
        n = int(rng.integers(1, 6))
        stages = []
        for k in range(n):
            gang = bool(rng.random() < 0.35)
            tasks = int(rng.integers(1, executors + 1 if gang else 12))
            parents = (
                sorted({f"s{int(p)}" for p in rng.integers(0, k, size=min(k, 2))}) if k else []
            )
            stages.append((f"s{k}", tasks, float(rng.uniform(0.5, 4)), parents, gang))
        arrivals.append(JobArrival(t, f"j{i}", dag(*stages)))
        t += float(rng.exponential(3.0))
    return Workload("gangs", tuple(arrivals), executors)


def shapes_signature(kind: str, seed: int, **options: object) -> list[tuple]:
    """What 60 jobs of the workload `kind` are: arrival, name, tasks, estimates, edges."""
    w = build_workload(kind, seed, num_jobs=60, **options)
    return [(j.time, j.name, j.dag.tasks, j.dag.durations, j.dag.parents) for j in w.jobs]


WIDE_STAGES = 2_200
"""Stages of `wide_workflow` whose object fits with 20 measured durations a stage (the
operator's default --history-samples) and not with 64 (its most): the tests that use it
check both."""


def wide_workflow(stages: int = WIDE_STAGES, name: str = "wide") -> dict[str, Any]:
    """A DagWorkflow manifest of `stages` independent stages of 100 tasks each: every
    stage's status keeps as many measured durations as --history-samples allows, so the
    object's size depends on that setting."""
    spec = [{"name": f"s{i}", "tasks": 100, "taskDurationSeconds": 1.5} for i in range(stages)]
    return {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "DagWorkflow",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"stages": spec},
    }


def batch_on_nodes(seed: int, num_jobs: int, nodes: int) -> Workload:
    """k8s-batch with its pods' requests on a pool of three 8-CPU, 32 GiB nodes' worth of
    resources, counted as one (`nodes` 0) or on `nodes` such nodes: stages of several
    sizes, some that do not fit while others run."""
    workload = build_workload("k8s-batch", seed, num_jobs=num_jobs, requests=True)
    node = ResourceVector.parse("cpu=8,memory=32Gi")
    if not nodes:
        return dataclasses.replace(workload, resources=node * 3)
    spread = identical_nodes(node, nodes, workload.num_executors)
    return dataclasses.replace(workload, resources=node * nodes, nodes=spread)


class Waits:
    """A policy that never starts anything: every decision is WAIT (a round ends with
    executors free; a switch away from it is what starts pods)."""

    name = "waits"

    def reset(self, rng: Any) -> None:
        pass

    def decide(self, view: ClusterView) -> Action:
        return WAIT
