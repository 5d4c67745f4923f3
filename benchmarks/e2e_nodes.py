"""Issue 52's e2e on nodes: mixed workflows on one resource pool over three nodes.

Three Nodes of 8 CPU and 32 GiB on the test API server of tests/k8s, whose kube-scheduler
binds each pod by its requests (tests/k8s/scheduler.py); `--workflows` mixed workflows
(two in three DagWorkflows of 2 to 4 stages whose pod templates request 500m/1Gi to
4/8Gi, one in three Argo Workflows whose templates do, all created at once) on the real
operator's default pool and ``fair``: following the nodes (``--pool-nodes ''``, `--pool
nodes`) or of their allocatable as a fixed capacity (``--pool-resources
cpu=24,memory=96Gi``, `--pool fixed`); the simulated kubelet and the stand-in for Argo's controller; the clock `--speed` (20) times
the wall's pace (tests/nodes_e2e.py). Printed, from every write the API server saw:

* workflows succeeded, pods created (and created twice), pods idlegate released;
* how often a node's pods requested more than its allocatable (checked at every write),
  and each node's peak CPU requested;
* pods the kube-scheduler found no room for (PodScheduled False, Unschedulable), and how
  many of them idlegate had released;
* the CPU the nodes' pods requested over their allocatable, averaged over the wall time
  during which some pod waited to run (gated, or released and unbound);
* the run's wall time and the DagWorkflows' mean JCT.

    python -m benchmarks.e2e_nodes [--workflows 60] [--seed 0] [--pool nodes|fixed] [--speed 20]

(run from the repository root: the script imports the test API server from tests/k8s;
Argo's Workflow CRD is read from ../shared/data/argo).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import yaml

from idlegate.api.crd import KINDS, render_crd
from idlegate.flags import description
from tests.argo_data import WORKFLOW_CRD
from tests.e2e import SPEED, new_namespace
from tests.k8s.harness import ApiServer
from tests.nodes_e2e import POOLS, Outcome, run


def main(argv: list[str] | None = None) -> Outcome:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--workflows", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--pool",
        choices=sorted(POOLS),
        default="nodes",
        help="the default pool follows the nodes (--pool-nodes ''), or has their allocatable "
        "as a fixed capacity (--pool-resources cpu=24,memory=96Gi)",
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=SPEED,
        help="simulated seconds per wall second, for the operator's clock and the kubelet",
    )
    args = parser.parse_args(argv)
    if not WORKFLOW_CRD.exists():
        sys.exit(f"Error: Argo's Workflow CRD not found at {WORKFLOW_CRD.resolve()}")
    with tempfile.TemporaryDirectory() as tmp, ApiServer(Path(tmp)) as api:
        for kind in KINDS:
            api.create("customresourcedefinitions", render_crd(kind))
        api.create("customresourcedefinitions", yaml.safe_load(WORKFLOW_CRD.read_text()))
        namespace = new_namespace(api, "nodes")
        outcome = run(
            api,
            namespace,
            workflows=args.workflows,
            seed=args.seed,
            pool=args.pool,
            speed=args.speed,
        )
        api.assert_no_internal_errors()
    print(
        f"{args.workflows} workflows, seed {args.seed}, 3 nodes x 8 CPU / 32 GiB, pool {args.pool}"
    )
    print("\n".join(outcome.lines()))
    return outcome


if __name__ == "__main__":
    main()
