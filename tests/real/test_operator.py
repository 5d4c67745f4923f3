"""A DagWorkflow's life on the real control plane: the scenarios of tests/test_e2e_operator.py,
run here unchanged (tests/real/conftest.py gives them the real plane). Not here: failed pods'
retries, whose kubelet fails chosen pods (on the real plane, tests/real/test_nodes.py makes
first tries fail through KWOK)."""

from tests.test_e2e_operator import (  # noqa: F401  (collected here, on the real plane)
    escalations,
    test_a_bad_pod_template_never_holds_the_pool,
    test_a_burst_of_workflows_all_finish_without_duplicates_or_held_executors,
    test_a_gate_removed_by_hand_is_noticed_and_counted,
    test_a_stop_writes_the_status_changes_still_batched,
    test_a_wide_stage_posts_a_few_events,
    test_an_escalation_attempt_is_invalid_before_any_pod_exists,
    test_an_exported_onnx_policy_drives_the_operator,
    test_an_idle_delay_is_applied_evented_and_counted,
    test_an_invalid_spec_is_rejected_and_the_others_run,
    test_deleting_a_workflow_frees_its_executors_and_collects_its_pods,
    test_diamond_completes_with_the_right_jct,
    test_jct_counts_the_time_before_the_operator_saw_the_workflow,
    test_kubectl_apply_get_and_describe,
    test_pool_and_parallelism_caps_are_never_exceeded,
    test_restart_in_the_middle_of_a_delay_neither_duplicates_nor_repeats,
    test_rigid_jobs_are_backfilled_under_easy_fcfs,
    test_the_lookahead_planner_runs_the_operator_planning_in_its_worker,
    test_the_namespace_decides_what_its_task_pods_may_be,
)
