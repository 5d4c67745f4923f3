"""The nodes' index (idlegate.sim.nodeset): placement and room from the event that changed
them give what a full scan of every node gives (idlegate.sim.pool.packed, Need.on)."""

from __future__ import annotations

import random

from idlegate.sim.nodeset import MILLI, NodeSet, tasks_on
from idlegate.sim.pool import packed
from idlegate.sim.protocol import Need

CPU, MEM = 0, 1
SCORED = (CPU, MEM)


def node(cpu: int, mem: int, pods: int) -> list[int]:
    """A node's amounts in milli-units from whole cpus, GiB-ish units and pods."""
    return [cpu * MILLI, mem * MILLI, pods * MILLI]


def scan_place(
    nodes: NodeSet, need: list[int], allowed: tuple[int, ...] | None = None
) -> int | None:
    """packed over every node (of `allowed`), as the pool placed before the index."""
    pick = list(range(len(nodes))) if allowed is None else list(allowed)
    free = [list(nodes[i]) for i in pick]
    alloc = [nodes.allocatable[i] for i in pick]
    at = packed(need, free, alloc, SCORED)
    return None if at is None else pick[at]


def scan_room(nodes: NodeSet, need: list[int], allowed: tuple[int, ...] | None = None) -> int:
    pick = range(len(nodes)) if allowed is None else allowed
    return sum(tasks_on(nodes[i], need) for i in pick)


def test_a_task_goes_to_the_fullest_node_that_fits_and_gives_its_room_back():
    # three nodes of 8 cpus: the task of 2 goes where least is left after it (packing)
    nodes = NodeSet([node(8, 32, 4), node(3, 32, 4), node(8, 32, 4)], [node(8, 32, 4)] * 3, SCORED)
    assert nodes.place([2 * MILLI, 1 * MILLI, MILLI]) == 1
    assert nodes.room([2 * MILLI, 1 * MILLI]) == 4 + 1 + 4
    nodes.move(1, [2 * MILLI, 1 * MILLI], -1)  # (bound there)
    assert nodes[1] == node(1, 31, 3)
    # node 1 no longer fits 2 cpus: of the two equal empty nodes the first
    assert nodes.place([2 * MILLI, 1 * MILLI, MILLI]) == 0
    assert nodes.room([2 * MILLI, 1 * MILLI]) == 8
    nodes.move(1, [2 * MILLI, 1 * MILLI], 1)  # (it ended)
    assert nodes[1] == node(3, 32, 4)
    assert nodes.place([2 * MILLI, 1 * MILLI, MILLI]) == 1
    # a task larger than every node fits none
    assert nodes.place([9 * MILLI, 0, MILLI]) is None
    assert nodes.room([9 * MILLI, 0]) == 0


def test_equal_nodes_are_one_shape_and_a_node_without_a_pod_free_holds_nothing():
    nodes = NodeSet([node(8, 32, 1)] * 1000, [node(8, 32, 1)] * 1000, SCORED)
    assert nodes.shapes() == 1
    for _ in range(3):
        nodes.move(nodes.place([MILLI, MILLI, MILLI]) or 0, [MILLI, MILLI], -1)
    # each node holds one pod: the three first took one each, and hold no more
    assert [nodes[i][-1] for i in range(4)] == [0, 0, 0, MILLI]
    assert nodes.place([MILLI, MILLI, MILLI]) == 3
    assert nodes.room([MILLI, MILLI]) == 997
    assert nodes.shapes() == 2


def test_nodes_told_again_move_only_where_they_changed_and_say_if_room_grew():
    alloc = [node(8, 32, 4)] * 3
    nodes = NodeSet([node(8, 32, 4)] * 3, alloc, SCORED)
    assert not nodes.reset([node(8, 32, 4), node(4, 32, 4), node(8, 32, 4)], alloc)
    assert nodes.place([5 * MILLI, 0, MILLI]) == 0
    assert nodes.reset([node(8, 32, 4), node(6, 32, 4), node(8, 32, 4)], alloc)
    assert nodes.place([5 * MILLI, 0, MILLI]) == 1
    # a node added: the index is built again, and there is more room
    assert nodes.reset([node(8, 32, 4)] * 3 + [node(16, 64, 4)], [*alloc, node(16, 64, 4)])
    assert nodes.place([12 * MILLI, 0, MILLI]) == 3
    # a node removed
    assert not nodes.reset([node(8, 32, 4)] * 2, alloc[:2])
    assert nodes.place([12 * MILLI, 0, MILLI]) is None
    assert len(nodes) == 2


def test_a_stage_barred_from_some_nodes_is_placed_and_counted_among_the_others():
    alloc = [node(8, 32, 4)] * 4
    nodes = NodeSet([node(8, 32, 4), node(2, 32, 4), node(8, 32, 4), node(4, 32, 4)], alloc, SCORED)
    assert nodes.place([2 * MILLI, 0, MILLI]) == 1
    assert nodes.place([2 * MILLI, 0, MILLI], (0, 2, 3)) == 3
    assert nodes.room([2 * MILLI, 0], (0, 2)) == 8
    nodes.move(3, [2 * MILLI, 0], -1)  # (the subset's index moves with the others)
    assert nodes.place([2 * MILLI, 0, MILLI], (0, 2, 3)) == 3
    nodes.move(3, [2 * MILLI, 0], -1)
    assert nodes.place([2 * MILLI, 0, MILLI], (0, 2, 3)) == 0
    assert nodes.room([2 * MILLI, 0], (0, 2, 3)) == 8


def test_a_need_more_than_any_node_has_free_is_refused_before_counting():
    nodes = NodeSet([node(8, 32, 4), node(2, 64, 4)], [node(8, 32, 4), node(2, 64, 4)], SCORED)
    assert nodes.may_hold([8 * MILLI, 0]) and nodes.may_hold([0, 64 * MILLI])
    # the most of each is on a different node: a bound, not an answer
    assert nodes.may_hold([8 * MILLI, 64 * MILLI]) and nodes.room([8 * MILLI, 64 * MILLI]) == 0
    assert not nodes.may_hold([9 * MILLI, 0])
    nodes.move(0, [4 * MILLI, 0], -1)  # (a change of shape: the bound is read again)
    assert not nodes.may_hold([5 * MILLI, 0]) and nodes.may_hold([4 * MILLI, 0])
    twin = nodes.copy()
    nodes.move(0, [4 * MILLI, 0], 1)
    assert nodes.may_hold([8 * MILLI, 0]) and not twin.may_hold([8 * MILLI, 0])
    owed = NodeSet([[-MILLI, 8 * MILLI, MILLI]], [node(8, 32, 4)], SCORED)  # (cpu owed)
    assert owed.may_hold([0, MILLI]) and owed.room([0, MILLI]) == 1  # (no cpu asked)
    full = NodeSet([node(8, 32, 0)], [node(8, 32, 4)], SCORED)  # (no pod free)
    assert not full.may_hold([0, 0]) and full.room([0, 0]) == 0


def test_a_copy_is_independent():
    nodes = NodeSet([node(8, 32, 4)] * 2, [node(8, 32, 4)] * 2, SCORED)
    twin = nodes.copy()
    twin.move(0, [8 * MILLI, 0], -1)
    assert nodes.place([8 * MILLI, 0, MILLI]) == 0
    assert twin.place([8 * MILLI, 0, MILLI]) == 1


def test_after_random_events_the_index_answers_as_a_scan_of_every_node():
    # binds, ends, nodes told again, added and removed, in a seeded random order: each
    # answer equals the full recomputation's (packed over all nodes, Need.on summed), the
    # rooms it keeps between changes included
    rng = random.Random(61)
    kinds = [node(8, 32, 4), node(16, 64, 8), node(4, 16, 2)]
    alloc = [rng.choice(kinds) for _ in range(40)]
    nodes = NodeSet([list(a) for a in alloc], alloc, SCORED)
    bound: list[tuple[int, list[int]]] = []
    refused = 0
    for _ in range(3000):
        need = [rng.choice((0, 500, 1000, 2000, 3000)), rng.choice((0, 1000, 4000, 8000)), MILLI]
        allowed = None
        if rng.random() < 0.3:
            allowed = tuple(sorted(rng.sample(range(len(nodes)), rng.randint(0, len(nodes)))))
        assert nodes.place(need, allowed) == scan_place(nodes, need, allowed)
        # (holds before room: read partly, or whole and kept, then room from what it kept)
        scanned = scan_room(nodes, need[:2], allowed)
        tasks = rng.choice((0, 1, 2, 5, 40))
        assert nodes.holds(need[:2], tasks, allowed) == (scanned >= tasks)
        assert nodes.room(need[:2], allowed) == scanned
        assert nodes.holds(need[:2], tasks + 1, allowed) == (scanned >= tasks + 1)
        if not nodes.may_hold(need[:2]):  # (a bound: none of all the nodes could)
            assert scanned == scan_room(nodes, need[:2]) == 0
            refused += 1
        assert nodes.first_fit(need) == next(
            (i for i, n in enumerate(nodes) if all(map(int.__ge__, n, need))), None
        )
        event = rng.random()
        if event < 0.5:  # a pod bound where placement puts it
            at = nodes.place(need, allowed)
            if at is not None:
                nodes.move(at, need[:2], -1)
                bound.append((at, need[:2]))
        elif event < 0.85 and bound:  # a pod ended
            at, amounts = bound.pop(rng.randrange(len(bound)))
            nodes.move(at, amounts, 1)
        elif event < 0.95:  # the driver tells the same nodes again, some changed
            told = [list(n) for n in nodes]
            for n in rng.sample(told, 3):
                n[0] = max(0, n[0] + rng.choice((-1000, 1000)))
            nodes.reset(told, alloc)
        else:  # a node added or removed (the tasks bound there forgotten)
            if rng.random() < 0.5 or len(alloc) < 5:
                alloc = [*alloc, rng.choice(kinds)]
                told = [*(list(n) for n in nodes), list(alloc[-1])]
            else:
                alloc, told = alloc[:-1], [list(n) for n in nodes][:-1]
                bound = [(at, a) for at, a in bound if at < len(alloc)]
            nodes.reset(told, alloc)
    assert refused > 100  # (the bound was put to the test)


def test_a_need_of_nothing_counted_is_held_by_the_pods_free():
    # a stage that asks nothing the pool counts but may use some nodes only (the operator's
    # `_restrict`) has a need of zeros: its room was a TypeError (min of one int)
    alloc = [node(8, 32, 4), node(8, 32, 2)]
    nodes = NodeSet([node(8, 32, 4), node(8, 32, 2)], alloc, SCORED)
    need = Need((0, 0), [16 * MILLI, 64 * MILLI], nodes, allowed=(1,))
    assert need.room() == 2
    assert need.on([0, 0, 3 * MILLI]) == 3
    assert Need((0, 0), [0, 0], [node(1, 1, 5)], allowed=(0,)).room() == 5


def test_a_released_pod_of_the_pods_gate_starts_on_the_first_node_it_fits():
    nodes = NodeSet([node(2, 32, 4), node(8, 32, 4), node(4, 32, 4)], [node(8, 32, 4)] * 3)
    assert nodes.first_fit([3 * MILLI, 0, MILLI]) == 1  # (first fit, not the fullest: 2)
    nodes.move(1, [6 * MILLI, 0], -1)
    assert nodes.first_fit([3 * MILLI, 0, MILLI]) == 2
    assert nodes.first_fit([5 * MILLI, 0, MILLI]) is None
