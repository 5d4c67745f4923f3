"""Victims by least work lost (`idlegate.sim.reclaim`): known answers on hand-built cases
of 3 to 5 tasks, and the choice compared with every subset of small random cases."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idlegate.errors import IdlegateError
from idlegate.sim.reclaim import Bound, Running, allowed, choose_victims, fits

POD = 1000
NOW = 100.0


def task(
    name: str,
    start: float,
    *,
    cpu: int = 0,
    queue: int = 1,
    priority: int = 0,
    checkpointed: bool = False,
    node: int | None = None,
    executors: int = 1,
) -> Running:
    demand = {"pods": POD * executors, **({"cpu": cpu} if cpu else {})}
    return Running(
        name, queue, priority, start, demand, executors, checkpointed, node, workflow=name
    )


def names(victims) -> list[str]:
    return [t.task for t in victims.tasks]


def test_the_task_that_has_run_least_is_stopped():
    running = [task("a", 0.0), task("b", 50.0), task("c", 90.0)]
    got = choose_victims({"pods": POD}, running, NOW, free={"pods": 0})
    assert got is not None and names(got) == ["c"]
    assert (got.lost, got.seconds) == (10_000, 10.0)


def test_a_checkpointed_task_loses_nothing_and_goes_first():
    running = [task("a", 0.0, checkpointed=True), task("b", 50.0), task("c", 90.0)]
    got = choose_victims({"pods": POD}, running, NOW, free={"pods": 0})
    assert got is not None and names(got) == ["a"] and got.lost == 0


def test_a_loss_is_time_run_times_executors():
    running = [task("wide", 80.0, executors=3), task("old", 60.0)]
    got = choose_victims({"pods": POD}, running, NOW, free={"pods": 0})
    assert got is not None and names(got) == ["old"] and got.seconds == 40.0  # (not 3 × 20)


def test_ties_go_to_the_lowest_priority_then_the_most_recently_started():
    same = [task("hi", 50.0, priority=2), task("lo", 50.0, priority=1), task("x", 10.0)]
    got = choose_victims({"pods": POD}, same, NOW, free={"pods": 0})
    assert got is not None and names(got) == ["lo"]
    saved = [task(n, s, checkpointed=True) for n, s in (("early", 10.0), ("late", 70.0))]
    got = choose_victims({"pods": POD}, saved, NOW, free={"pods": 0})
    assert got is not None and names(got) == ["late"]


def test_one_large_task_that_loses_less_beats_several_small_ones():
    # a greedy by loss would stop the four 1-CPU tasks (40 s lost); one 4-CPU task loses 12
    small = [task(f"s{i}", 90.0, cpu=1000) for i in range(4)]
    running = [*small, task("big", 88.0, cpu=4000)]
    got = choose_victims({"pods": POD, "cpu": 4000}, running, NOW, free={"pods": 5 * POD})
    assert got is not None and names(got) == ["big"] and got.seconds == 12.0


def test_never_more_than_needed():
    # {a, c} fits too but loses 6 s; b alone loses 3 s
    running = [
        task("a", 99.0, cpu=1000),
        task("b", 97.0, cpu=2000),
        task("c", 95.0, cpu=1000),
    ]
    got = choose_victims({"cpu": 2000}, running, NOW, free={"cpu": 0})
    assert got is not None and names(got) == ["b"]
    saved = [task(n, 0.0, checkpointed=True) for n in "xyz"]  # (all lose nothing)
    got = choose_victims({"pods": POD}, saved, NOW, free={"pods": 0})
    assert got is not None and len(got.tasks) == 1


def test_what_is_free_already_counts_and_a_fit_needs_no_victim():
    running = [task("a", 10.0, cpu=1000), task("b", 20.0, cpu=2000), task("c", 30.0, cpu=500)]
    got = choose_victims({"cpu": 2500}, running, NOW, free={"cpu": 1000})
    assert got is not None and names(got) == ["b"]  # (1 + 2 CPU; c's ½ would not do)
    got = choose_victims({"cpu": 500}, running, NOW, free={"cpu": 1000})
    assert got is not None and got.tasks == () and got.lost == 0


def test_no_set_fits_is_none():
    running = [task("a", 10.0, cpu=1000), task("b", 20.0, cpu=1000)]
    assert choose_victims({"cpu": 3000}, running, NOW, free={"cpu": 0}) is None
    assert choose_victims({"cpu": 2000}, running, NOW, free={"cpu": 0}, most=1) is None


def test_at_most_most_victims_even_if_more_would_lose_less():
    running = [task("a", 95.0, cpu=1000), task("b", 95.0, cpu=1000), task("c", 50.0, cpu=2000)]
    got = choose_victims({"cpu": 2000}, running, NOW, free={"cpu": 0})
    assert got is not None and sorted(names(got)) == ["a", "b"]
    got = choose_victims({"cpu": 2000}, running, NOW, free={"cpu": 0}, most=1)
    assert got is not None and names(got) == ["c"]


def test_on_nodes_all_victims_are_on_the_one_node_the_pod_fits_on_after():
    running = [
        task("n0", 95.0, cpu=1000, node=0),  # the cheapest, but node 0 is too small
        task("n1a", 80.0, cpu=2000, node=1),
        task("n1b", 90.0, cpu=2000, node=1),
        task("n2a", 85.0, cpu=1000, node=2),
        task("n2b", 85.0, cpu=1000, node=2),
    ]
    nodes = [{"pods": POD, "cpu": 500}, {"pods": POD, "cpu": 0}, {"pods": POD, "cpu": 0}]
    got = choose_victims({"pods": POD, "cpu": 2000}, running, NOW, nodes=nodes)
    assert got is not None and (names(got), got.node) == (["n1b"], 1)
    nodes[2] = {"pods": 2 * POD, "cpu": 2000}  # (fits there as it is)
    got = choose_victims({"pods": POD, "cpu": 2000}, running, NOW, nodes=nodes)
    assert got is not None and (got.tasks, got.node) == ((), 2)


def test_a_borrowing_queue_is_taken_back_only_to_its_nominal_quota():
    # queue 1 uses one pod beyond its nominal quota, queue 2 one: one task from each,
    # though queue 1's are the cheapest
    running = [
        task("q1a", 99.0, queue=1),
        task("q1b", 98.0, queue=1),
        task("q2a", 10.0, queue=2),
        task("q2b", 20.0, queue=2),
    ]
    over = {1: {"pods": POD}, 2: {"pods": POD}}
    got = choose_victims({"pods": 2 * POD}, running, NOW, free={"pods": 0}, borrowed=over)
    assert got is not None and names(got) == ["q1a", "q2b"]
    assert choose_victims({"pods": 3 * POD}, running, NOW, free={"pods": 0}, borrowed=over) is None


def test_kueues_rule_allows_the_last_victim_to_go_below_nominal():
    # queue 1 borrows ½ CPU in 1-CPU tasks: one may go (it borrows before it is stopped)
    mine = [task("a", 90.0, cpu=1000), task("b", 80.0, cpu=1000)]
    assert allowed(mine[:1], {1: {"cpu": 500}}) and not allowed(mine, {1: {"cpu": 500}})
    got = choose_victims({"cpu": 1000}, mine, NOW, free={"cpu": 0}, borrowed={1: {"cpu": 500}})
    assert got is not None and names(got) == ["a"]


def test_a_queues_quota_is_given_back_by_its_own_tasks_only():
    # the pool has room, the waiting task's queue (0) has none left: queue 1's task,
    # though cheaper, gives none back
    running = [
        task("own", 50.0, queue=0),
        task("other", 99.0, queue=1),
        task("own2", 40.0, queue=0),
    ]
    quota = Bound({"pods": 0}, frozenset({0}))
    got = choose_victims({"pods": POD}, running, NOW, free={"pods": POD}, limits=[quota])
    assert got is not None and names(got) == ["own"]


def test_free_or_nodes_one_of_them():
    with pytest.raises(IdlegateError, match="not both or neither"):
        choose_victims({"pods": POD}, [], NOW)


# -- every subset of small cases -------------------------------------------------------


def _rank(tasks: Sequence[Running], order: Mapping[int, int]) -> tuple[object, ...]:
    """The module docstring's order, restated: loss, count, (priority, −start) highest
    first (the input's position last)."""
    ties = sorted(((t.priority, -t.start, order[id(t)]) for t in tasks), reverse=True)
    return (sum(t.loss(NOW) for t in tasks), len(tasks), tuple(ties))


def brute(need, running, free, nodes, limits, borrowed, most):
    order = {id(t): i for i, t in enumerate(running)}
    rooms = [(None, free)] if nodes is None else list(enumerate(nodes))
    best = None
    for node, room in rooms:
        mine = [t for t in running if nodes is None or t.node == node]
        for k in range(len(mine) + 1):
            if most is not None and k > most:
                break
            for subset in combinations(mine, k):
                if fits(need, room, subset, limits) and allowed(subset, borrowed):
                    rank = (_rank(subset, order), -1 if node is None else node)
                    if best is None or rank < best[0]:
                        best = (rank, set(map(id, subset)), node)
    return best


demands = st.fixed_dictionaries(
    {"pods": st.sampled_from([POD, 2 * POD]), "cpu": st.sampled_from([0, 500, 1000, 2000])}
)
runnings = st.lists(
    st.builds(
        Running,
        task=st.integers(),
        queue=st.integers(0, 2),
        priority=st.integers(0, 2),
        start=st.sampled_from([0.0, 40.0, 70.0, 95.0, 100.0]),
        demand=demands,
        executors=st.integers(1, 2),
        checkpointed=st.booleans(),
        node=st.integers(0, 1),
    ),
    max_size=7,
)
rooms = st.fixed_dictionaries(
    {"pods": st.integers(0, 2).map(lambda n: n * POD), "cpu": st.sampled_from([0, 500, 1500])}
)


@settings(max_examples=400, deadline=None)
@given(
    running=runnings,
    cpu=st.sampled_from([0, 500, 1000, 2500, 4000]),
    pods=st.integers(1, 3),
    free=rooms,
    on_nodes=st.booleans(),
    nodes=st.lists(rooms, min_size=2, max_size=2),
    quota=st.one_of(st.none(), st.sampled_from([0, 1000])),
    over=st.dictionaries(st.integers(1, 2), st.sampled_from([0, 500, 1000, 2000]), max_size=2),
    most=st.one_of(st.none(), st.integers(1, 3)),
)
def test_the_choice_is_the_best_of_every_subset(
    running, cpu, pods, free, on_nodes, nodes, quota, over, most
):
    need = {"pods": pods * POD, "cpu": cpu}
    limits = [] if quota is None else [Bound({"cpu": quota}, frozenset({0}))]
    borrowed = {q: {"cpu": b} for q, b in over.items()}
    where = {"nodes": nodes} if on_nodes else {"free": free}
    got = choose_victims(need, running, NOW, limits=limits, borrowed=borrowed, most=most, **where)
    best = brute(
        need,
        running,
        None if on_nodes else free,
        nodes if on_nodes else None,
        limits,
        borrowed,
        most,
    )
    if best is None:
        assert got is None
        return
    assert got is not None
    assert set(map(id, got.tasks)) == best[1]
    assert got.node == best[2]
    assert got.lost == sum(t.loss(NOW) for t in got.tasks)
    room = nodes[got.node] if on_nodes else free
    assert fits(need, room, got.tasks, limits) and allowed(got.tasks, borrowed)
    for t in got.tasks:  # (minimal: none can be dropped)
        rest = [v for v in got.tasks if v is not t]
        assert not fits(need, room, rest, limits)


def test_a_spent_budget_keeps_the_greedy_choice_which_fits_and_is_minimal(monkeypatch):
    import idlegate.sim.reclaim as reclaim

    monkeypatch.setattr(reclaim, "BUDGET", 0)
    small = [task(f"s{i}", 90.0, cpu=1000) for i in range(4)]
    running = [*small, task("big", 88.0, cpu=4000)]
    got = choose_victims({"cpu": 4000}, running, NOW, free={"cpu": 0})
    assert got is not None and sorted(names(got)) == ["s0", "s1", "s2", "s3"]  # (not exact)
    assert fits({"cpu": 4000}, {"cpu": 0}, got.tasks)
