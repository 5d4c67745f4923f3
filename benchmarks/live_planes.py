"""The two API servers benchmarks/live_pool.py runs its scenario on, side by side.

* ``test``: the test API server of tests/k8s in this process (its kube-scheduler binds pods
  by their requests and node selectors, tests/k8s/scheduler.py), a simulated kubelet per
  namespace running each pod for its declared duration over the clock's speed, and a
  :class:`~benchmarks.live_figures.Recorder` subscribed to the emulator's writes and audit;
* ``real``: the local control plane of idlegate.controlplane (etcd, kube-apiserver,
  kube-scheduler, kube-controller-manager, KWOK, each a process of its own; ``make
  cluster``'s binaries, from ``IDLEGATE_CLUSTER_BIN`` or out/cluster/bin), KWOK's nodes and
  its stages running each pod for its declared duration over the clock's speed (the plane's
  time factor), kube-apiserver keeping an audit log that an
  :class:`~benchmarks.live_audit.AuditRecorder` reads.

Both serve idlegate's CRDs, the benchmark's namespaces (labelled for a pool's
``namespaceSelector``, each with its ``default`` ServiceAccount on the real plane) and the
same Nodes.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.live_audit import AuditRecorder
from benchmarks.live_figures import Recorder
from benchmarks.live_harness import ApiServer, RealApiServer, SimKubelet, need_binaries, node
from benchmarks.live_operator import prepare
from idlegate.controlplane.launcher import AUDIT_LOG, NodeSpec, start

PLANES = ("test", "real")


@contextlib.contextmanager
def opened(
    plane: str, speed: float, namespaces: Sequence[str], nodes: NodeSpec
) -> Iterator[tuple[Any, Recorder | AuditRecorder, list[int]]]:
    """The API server of `plane` (``test`` or ``real``, the module docstring) with
        idlegate's CRDs, `namespaces` and `nodes`, its pods run `speed` times faster than
        declared, its recorder and the pids of the real plane's processes (none on the test
    API server), from enter to exit; at the end it fails if the API server
        panicked. The caller closes the recorder before exit."""
    with tempfile.TemporaryDirectory() as tmp:
        if plane == "test":
            with ApiServer(Path(tmp)) as api, contextlib.ExitStack() as kubelets:
                bodies = [
                    node(f"{nodes.prefix}-{i}", cpu=nodes.cpu, memory=nodes.memory)
                    for i in range(nodes.count)
                ]
                prepare(api, namespaces, bodies)
                for ns in namespaces:
                    kubelets.enter_context(SimKubelet(api, ns, time_factor=1 / speed))
                yield api, Recorder(api), []
            api.assert_no_internal_errors()
            return
        started = start(Path(tmp), need_binaries(), [nodes], speed, audit=True)
        with RealApiServer(started) as real:
            prepare(real, namespaces)
            for ns in namespaces:
                real.namespace_ready(ns)
            recorder = AuditRecorder(started.directory / AUDIT_LOG)
            yield real, recorder, list(started.pids.values())
            real.assert_no_internal_errors()
