"""What one reading of a pool's room on its nodes costs the operator (issue 61).

    python benchmarks/room_cost.py [--sizes 30:1500,1000:50000] [--unbound 200] [--repeat 3]

A pool that follows its nodes (``--pool-nodes``, an ExecutorPool's ``nodeSelector``) is
told their room once per turn of the operator's event loop in which a node or a pod
changed (`idlegate.operator.edge.pools.Pools.room_soon`). Until its first node or pod
event the watch counts every node and every pod in kopf's indexes
(`idlegate.operator.nodes.ledger.room`); from then on it reads the room from a ledger the events
keep (`idlegate.operator.nodes.ledger.NodeLedger`). For each NODES:PODS size this builds that many
Ready nodes of 8 CPUs, 32 GiB and 110 pods and that many running pods of 100m and
128Mi spread over them, and `--unbound` pods of 1 CPU that idlegate released and the
kube-scheduler has not bound yet (each reading places them), then prints the CPU seconds of one reading both ways (counting
anew: the nodes read from their objects, the pods' requests cached by uid as
`NodeWatch` caches them; from the ledger: the reading after one more pod was bound, as
the pool reads it after a change), each the mean of `--repeat` after one not counted.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from idlegate.api.labels import ANNOTATION_EXECUTOR
from idlegate.api.nodes import read_node
from idlegate.api.pool_spec import LabelSelector
from idlegate.flags import description
from idlegate.operator.nodes.ledger import NodeLedger, requested, room
from idlegate.sim.resources import ResourceVector


def node(i: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"n{i}", "labels": {"kubernetes.io/hostname": f"n{i}"}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(j: int, nodes: int) -> dict[str, Any]:
    request = {"requests": {"cpu": "100m", "memory": "128Mi"}}
    return {
        "metadata": {"name": f"p{j}", "namespace": "ns", "uid": str(j), "resourceVersion": "1"},
        "spec": {"nodeName": f"n{j % nodes}", "containers": [{"resources": request}]},
        "status": {"phase": "Running"},
    }


def unbound(j: int) -> dict[str, Any]:
    """A pod idlegate released that is not bound yet."""
    request = {"requests": {"cpu": "1", "memory": "1Gi"}}
    meta = {"name": f"u{j}", "namespace": "ns", "uid": f"u{j}", "resourceVersion": "1"}
    meta["annotations"] = {ANNOTATION_EXECUTOR: str(j)}
    return {"metadata": meta, "spec": {"containers": [{"resources": request}]}, "status": {}}


def reading_seconds(nodes: int, pods: int, waiting: int, repeat: int) -> tuple[float, float]:
    """Mean CPU seconds of one reading of the room at `nodes` nodes and `pods` pods, and
    `waiting` released pods not bound, counted anew and from a ledger."""
    bodies = [node(i) for i in range(nodes)]
    live = [pod(j, nodes) for j in range(pods)] + [unbound(j) for j in range(waiting)]
    asked: dict[str, ResourceVector] = {}

    def request(p: Mapping[str, Any]) -> ResourceVector:
        uid = p["metadata"]["uid"]
        if uid not in asked:
            asked[uid] = requested(p)
        return asked[uid]

    def anew() -> None:
        room([read_node(b) for b in bodies], live, LabelSelector(), {}, request)

    ledger = NodeLedger.of([read_node(b) for b in bodies], live)
    selector, moved = LabelSelector(), iter(range(pods, 2**62))

    def kept() -> None:  # (a reading follows a change: one more pod bound)
        ledger.pod(pod(next(moved), nodes))
        ledger.room(selector)

    return mean_seconds(anew, repeat), mean_seconds(kept, repeat)


def mean_seconds(run: Callable[[], object], repeat: int) -> float:
    run()
    start = time.process_time()
    for _ in range(repeat):
        run()
    return (time.process_time() - start) / repeat


def main() -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--sizes", default="30:1500,1000:50000", help="NODES:PODS, ...")
    parser.add_argument("--unbound", type=int, default=200, help="released pods not bound")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    try:
        sizes = [tuple(int(x) for x in s.split(":")) for s in args.sizes.split(",") if s]
    except ValueError:
        print(
            f"Error: --sizes {args.sizes!r}: write NODES:PODS pairs, e.g. 30:1500", file=sys.stderr
        )
        return 1
    if any(len(s) != 2 or min(s) < 1 for s in sizes) or args.repeat < 1 or args.unbound < 0:
        print(
            "Error: give NODES:PODS pairs of counts >= 1, --unbound 0 or more and --repeat 1 "
            "or more",
            file=sys.stderr,
        )
        return 1
    print(f"{'nodes':>8} {'pods':>8} {'ms CPU a reading anew':>22} {'from the ledger':>16}")
    for n, p in sizes:
        anew, kept = reading_seconds(n, p, args.unbound, args.repeat)
        print(f"{n:>8} {p:>8} {anew * 1000:>22.1f} {kept * 1000:>16.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
