"""Graph checks the workflow mappings share (Argo's DAG templates, Airflow's DAGs)."""

from __future__ import annotations

import networkx as nx


def cycle_path(graph: nx.DiGraph) -> str | None:
    """A cycle of `graph` written ``a -> b -> a`` for an error message, None if it has none."""
    if nx.is_directed_acyclic_graph(graph):
        return None
    cycle = [edge[0] for edge in nx.find_cycle(graph)]
    return " -> ".join([*cycle, cycle[0]])
