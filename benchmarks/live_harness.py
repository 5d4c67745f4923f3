"""The test API server and its simulated cluster, and the real control plane's stand-in
for it, for the live benchmarks (benchmarks/live_pool.py, benchmarks/live_forecast.py,
benchmarks/live_planes.py): one place that imports them from
tests/ (run from the repository root) with the dev extra (kmock) and the operator's extra
(kopf, which the operator's own process needs). A script that cannot import this module
exits with `live_operator.harness_missing`'s sentence."""

from __future__ import annotations

import kopf  # noqa: F401 (not used here: the operator's process needs it)

from tests.e2e import DWF, stage, workflow
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import SimKubelet
from tests.k8s.real import RealApiServer, need_binaries
from tests.k8s.scheduler import node

__all__ = [
    "DWF",
    "ApiServer",
    "RealApiServer",
    "SimKubelet",
    "need_binaries",
    "node",
    "stage",
    "workflow",
]
