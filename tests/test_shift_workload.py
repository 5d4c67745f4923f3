"""The `shift` workload: two generated phases on one cluster, switching where stated."""

from __future__ import annotations

import numpy as np
import pytest

from idlegate.errors import IdlegateError
from idlegate.sim.engine import Workload
from idlegate.sim.workloads import (
    ShiftConfig,
    as_rng,
    build_workload,
    shift_phase,
    split_streams,
    switch_time,
    workload_config,
    workload_kind,
)

SMALL = {"first_jobs": 30, "second_jobs": 20}


def _shift(seed: int = 0, **options: object) -> Workload:
    return build_workload("shift", seed, **{**SMALL, **options})


def _phase(name: str, rng: np.random.Generator, **options: object) -> Workload:
    config = workload_config(name, num_executors=50, **options)
    return workload_kind(name).generate(config, rng)


def _signature(w: Workload) -> list[tuple]:
    return [(j.time, j.name, j.dag.tasks, j.dag.durations, j.durations) for j in w.jobs]


def test_same_seed_same_arrivals_and_another_seed_others() -> None:
    assert _signature(_shift(4)) == _signature(_shift(4))
    assert [j.time for j in _shift(5).jobs] != [j.time for j in _shift(4).jobs]


def test_the_switch_is_after_the_first_phases_stated_jobs() -> None:
    w = _shift(2)
    phases = [shift_phase(j.name) for j in w.jobs]
    assert phases == [1] * 30 + [2] * 20
    switch = switch_time(workload_config("shift", **SMALL), 2)
    assert switch == w.jobs[29].time  # the first phase's last arrival
    assert all(j.time >= switch for j in w.jobs[30:])
    # each phase is its own workload's arrival sequence, drawn from its own stream of the
    # seed: the first one unchanged, the second one delayed by the switch time
    one, two = split_streams(as_rng(2))
    first = _phase("tpch-like", one, load=0.85, num_jobs=30)
    second = _phase("k8s-batch", two, load=0.7, num_jobs=20)
    assert [(j.time, j.dag.durations) for j in w.jobs[:30]] == [
        (j.time, j.dag.durations) for j in first.jobs
    ]
    assert [j.dag.durations for j in w.jobs[30:]] == [j.dag.durations for j in second.jobs]
    assert [j.time - switch for j in w.jobs[30:]] == pytest.approx([j.time for j in second.jobs])


def test_switch_at_drops_later_first_phase_jobs_and_starts_the_second_there() -> None:
    w = _shift(1, switch_at=100.0)
    first = [j for j in w.jobs if shift_phase(j.name) == 1]
    second = [j for j in w.jobs if shift_phase(j.name) == 2]
    assert 0 < len(first) < 30 and all(j.time < 100.0 for j in first)
    assert len(second) == 20 and all(j.time >= 100.0 for j in second)
    assert switch_time(workload_config("shift", switch_at=100.0), 1) == 100.0


def test_one_cluster_for_both_phases_and_each_phases_options() -> None:
    w = _shift(
        3,
        first="k8s-batch",
        second="follow",
        first_options="load=0.5&task_sigma=0",
        second_options={"load": 0.9, "lag": 5},
        num_executors=8,
    )
    assert w.num_executors == 8 and w.name == "shift"
    # the pod phase keeps its pod durations, drawn because that phase draws them
    assert all(j.durations is not None for j in w.jobs if shift_phase(j.name) == 1)
    assert w.fidelity.wave_durations and w.fidelity.moving_delay == 0
    # a phase that runs at its estimates (tpch-like) keeps doing so after the switch
    back = _shift(3, first="k8s-batch", second="tpch-like", second_options="")
    assert all(j.durations is None for j in back.jobs if shift_phase(j.name) == 2)
    assert _shift(3, moving_delay=2.0).fidelity.moving_delay == 2.0


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"first": "file"}, "first"),
        ({"second": "shift"}, "second"),
        ({"first_options": "num_executors=3"}, "first_options"),
        ({"second_options": "bogus=1"}, "bogus"),
        ({"first_options": "load"}, "KEY=VALUE"),
        ({"second_options": "load=-1"}, "load"),
    ],
)
def test_invalid_phase_options_are_user_errors_naming_what(options: dict, field: str) -> None:
    with pytest.raises(IdlegateError) as err:
        build_workload("shift", 0, **options)
    assert field in str(err.value)


def test_a_name_outside_the_shift_has_no_phase() -> None:
    with pytest.raises(IdlegateError):
        shift_phase("tpch-like-3")
    assert ShiftConfig().first == "tpch-like"
