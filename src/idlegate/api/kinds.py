"""idlegate's API group, version and kinds: the names of its custom resources, as the CRDs
(:mod:`idlegate.api.crd`), the operator's watches and writes, and the offline tools (lint,
history export) spell them. Constants only, importing nothing, so that any module may name
a kind without importing the CRDs' models (and what they import).
"""

GROUP = "idlegate.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "DagWorkflow"
LIST_KIND = "DagWorkflowList"
PLURAL = "dagworkflows"
SINGULAR = "dagworkflow"
SHORT_NAMES = ("dwf",)
CATEGORIES = ("idlegate",)
CRD_NAME = f"{PLURAL}.{GROUP}"
CRON_KIND = "DagCronWorkflow"
CRON_PLURAL = "dagcronworkflows"
POOL_KIND = "ExecutorPool"
POOL_PLURAL = "executorpools"
