"""Queues lending and reclaiming on the real control plane: kube-scheduler binds the task pods
to three KWOK nodes by their requests, and a reclaim goes through kube-apiserver's Eviction
API, which a PodDisruptionBudget (its status kept by kube-controller-manager's disruption
controller) refuses with a 429: the scenarios of tests/test_e2e_evict_nodes.py, unchanged."""

from tests.test_e2e_evict_nodes import (  # noqa: F401  (collected here, on the real plane)
    nodes,
    test_the_owners_pod_gets_a_node_by_evicting_the_cheapest_task_there_a_budget_allows,
    test_with_reclaim_off_nothing_is_evicted_and_the_owner_waits_for_a_task_to_end,
)
