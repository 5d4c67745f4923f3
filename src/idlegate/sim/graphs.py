"""Graph checks the workflow mappings share (Argo's DAG templates, Airflow's DAGs, the
workflow spec's dependencies), without importing networkx: ``idlegate lint`` and
``forecast FILE`` start without it (issue 93, item 7)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import networkx as nx


def find_cycle(successors: Mapping[str, Sequence[str]]) -> list[tuple[str, str]] | None:
    """The edges of a cycle of the graph whose nodes are `successors`' keys, in order, each
    with its successors, or None: a depth-first search from each node in turn, as
    networkx's ``find_cycle`` walks a graph of the same order (the same cycle)."""
    done: set[str] = set()
    for root in successors:
        if root in done:
            continue
        path, on_path = [root], {root}
        branches = [iter(successors[root])]
        while branches:
            nxt = next(branches[-1], None)
            if nxt is None:
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                branches.pop()
                continue
            if nxt in on_path:
                return list(itertools.pairwise([*path[path.index(nxt) :], nxt]))
            if nxt not in done:
                path.append(nxt)
                on_path.add(nxt)
                branches.append(iter(successors.get(nxt, ())))
    return None


def cycle_path(graph: nx.DiGraph) -> str | None:
    """A cycle of `graph` written ``a -> b -> a`` for an error message, None if it has none."""
    found = find_cycle({n: list(graph.successors(n)) for n in graph.nodes})
    if found is None:
        return None
    cycle = [edge[0] for edge in found]
    return " -> ".join([*cycle, cycle[0]])
