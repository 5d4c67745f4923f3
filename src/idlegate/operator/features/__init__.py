"""What the operator does beside releasing pods, each a module over the core and the edge:
pools (``ExecutorPool``), cron (``DagCronWorkflow``), cleanup (podGC, TTLs), a workflow's
lifecycle (suspend, deadlines), the history sink and its export, the lookahead planner's
worker, shadow mode and hot reload of the policy."""
