"""``idlegate dashboard``: a read-only web page of the cluster's pools, queues, waiting
workflows and workflows (docs/dashboard.md). It reads the API with the user's credentials,
so RBAC decides what a user sees."""
