"""The scale benchmark (benchmarks/scale.py) on the real control plane, beside the same run
on the test API server.

The real plane is idlegate.controlplane's (etcd, kube-apiserver, kube-scheduler,
kube-controller-manager and KWOK on loopback, each a process of its own: ``make cluster``'s
binaries, from ``IDLEGATE_CLUSTER_BIN`` or out/cluster/bin), with `--nodes` Nodes of 8 CPU
and 32 GiB played by KWOK, which runs each pod for its declared duration (time factor 1).
The operator (``idlegate operator --standalone``, its default pool following every node,
``--scheduler`` fair) serves one namespace; `--pods` over 12 DagWorkflows of
benchmarks/scale.py's shape are created at once (a chain of 4, 6 and 2 tasks of 1 to 3 s,
each pod requesting 4 CPU and 8 GiB: two fit a node), four requests at a time. No Argo
Workflow and no Airflow run: the real plane has neither controller.

With ``--planes test,real`` the same nodes and workflows run first on the test API server
(benchmarks/scale.py's `run`, in this process with its kube-scheduler and simulated
kubelet), then on the real plane. Per plane one JSON object, and a table of both:

* ``wall_seconds``: from the first creation to the last workflow's end (each workflow's
  phase as a watch on DagWorkflows sees it on the real plane; benchmarks/scale.py's
  monitor on the test one); ``pods``: the operator's ``idlegate_pods_created_total``;
  ``pods_per_second``: pods over the wall;
* ``decision_p99_ms``, ``peak_waiting_workflows``, ``operator`` (its CPU and memory from
  /proc) and ``cpu_ms_per_pod``, as benchmarks/scale.py reads them;
* on the real plane, ``components``: per component (etcd, kube-apiserver, kube-scheduler,
  kube-controller-manager, kwok) its CPU seconds over the run and its resident memory at
  the end and at its peak, from /proc; ``idle_cores``: the plane's CPU per wall second over
  `--idle` seconds with its nodes and nothing else (KWOK renewing their Leases and
  status), before the operator starts; ``start_seconds``: the plane's start until every
  node takes pods (Ready, and its ``not-ready`` taint lifted);
* on the real plane, every minute of the run a line: wall seconds, pods created, workflows
  ended, each process's CPU seconds and resident memory (MiB) (what a run cut short says).

    python -m benchmarks.scale_real [--nodes 1000] [--pods 5000] [--planes test,real]
        [--idle 30] [--scheduler fair] [--log FILE] [--out scale-real.json]

(run from the repository root: the script imports the test API server from tests/k8s.)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.live_operator import HANG, harness_missing
from benchmarks.operator_burst import fetch, free_port, metric, operator, process
from idlegate.api.crd import KINDS, render_crd
from idlegate.controlplane.launcher import NodeSpec, start
from idlegate.errors import IdlegateError
from idlegate.flags import description, run_script
from idlegate.progress import stderr_progress

try:  # (the test API server: tests/ and the dev and operator extras)
    from benchmarks import scale
    from benchmarks.live_harness import DWF, RealApiServer, need_binaries
except ModuleNotFoundError as exc:
    if __name__ != "__main__":
        raise
    sys.exit(harness_missing(exc, "benchmarks.scale_real"))

PODS_A_WORKFLOW = sum(scale.CHAIN)
ENDED = ("Succeeded", "Failed")
NAMESPACE = "scale"


def plane_cpu(pids: dict[str, int]) -> dict[str, dict[str, float]]:
    """Each of the plane's processes' CPU seconds and memory (benchmarks.operator_burst's
    `process`)."""
    return {name: process(pid) for name, pid in pids.items()}


def usable(node: dict[str, Any]) -> bool:
    """Whether a Node takes pods: Ready (KWOK's doing) and without a NoSchedule or NoExecute
    taint left (kube-controller-manager's node lifecycle controller lifts the ``not-ready``
    taint of a new node once it sees it Ready: at a thousand nodes, a minute or more after)."""
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    taints = (node.get("spec") or {}).get("taints") or []
    return ready and not any(t.get("effect") in ("NoSchedule", "NoExecute") for t in taints)


def reading(
    began: float, created: int, ended: int, pids: dict[str, int], operator_pid: int
) -> dict[str, Any]:
    """A minute's line of a run: wall seconds, pods created, workflows ended, and each
    process's CPU seconds and resident memory (MiB)."""
    found = {**plane_cpu(pids), "operator": process(operator_pid)}
    return {
        "t": round(time.monotonic() - began),
        "pods_created": created,
        "workflows_ended": ended,
        **{k: [v["cpu_seconds"], v["rss_mib"]] for k, v in found.items()},
    }


def wait_nodes_usable(api: Any, count: int) -> None:
    """Until `count` Nodes take pods (`usable`)."""
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        if sum(usable(n) for n in api.list("nodes")) >= count:
            return
        time.sleep(2)
    raise TimeoutError(f"fewer than {count} Nodes were Ready and untainted after {HANG:g} s")


def real_run(nodes: int, workflows: int, scheduler: str, idle: float, log: Any) -> dict[str, Any]:
    """One run on a fresh real plane (the module docstring): its figures."""
    with tempfile.TemporaryDirectory() as tmp:
        began = time.monotonic()
        spec = NodeSpec(nodes, scale.NODE_CPU, scale.NODE_MEMORY, prefix="node")
        plane = start(Path(tmp), need_binaries(), [spec], 1.0)
        with RealApiServer(plane) as api:
            for kind in KINDS:
                api.create("customresourcedefinitions", render_crd(kind))
            api.create("namespaces", {"metadata": {"name": NAMESPACE}})
            api.namespace_ready(NAMESPACE)
            wait_nodes_usable(api, nodes)
            started = time.monotonic() - began
            before, at = plane_cpu(plane.pids), time.monotonic()
            time.sleep(idle)
            idle_cpu = sum(p["cpu_seconds"] for p in plane_cpu(plane.pids).values()) - sum(
                p["cpu_seconds"] for p in before.values()
            )
            idle_cores = idle_cpu / (time.monotonic() - at)
            phases: dict[str, str] = {}
            stop = api.subscribe(
                lambda _res, _t, obj: phases.__setitem__(
                    obj["metadata"]["name"], (obj.get("status") or {}).get("phase") or ""
                ),
                ("dagworkflows",),
            )
            figures = _run_operator(api, plane.pids, nodes, workflows, scheduler, log, phases)
            stop()
            api.assert_no_internal_errors()
    return {"start_seconds": round(started, 1), "idle_cores": round(idle_cores, 2), **figures}


def _run_operator(
    api: Any,
    pids: dict[str, int],
    nodes: int,
    workflows: int,
    scheduler: str,
    log: Any,
    phases: dict[str, str],
) -> dict[str, Any]:
    """The operator on `api` and `workflows` DagWorkflows created at once, until all ended
    (`phases`, filled by a watch): the figures."""
    metrics, health = free_port(), free_port()
    flags = ("--status-interval", "1", *scale.POOLS["nodes"](nodes))
    proc = operator(
        api, nodes * 110, metrics, health, log, namespace=NAMESPACE, scheduler=scheduler,
        flags=flags,
    )  # fmt: skip
    try:
        with scale.Sampler(metrics) as sampler:
            deadline = time.monotonic() + 120
            while not fetch(f"http://127.0.0.1:{health}/healthz"):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the operator did not start (its log: --log)")
                time.sleep(0.1)
            before, began = plane_cpu(pids), time.monotonic()
            with ThreadPoolExecutor(4) as creating:
                bodies = [scale.dag_workflow(i) for i in range(workflows)]
                list(creating.map(lambda b: api.create(DWF, b, NAMESPACE), bodies))
            print(f"{workflows} workflows created in {time.monotonic() - began:.0f} s", flush=True)
            minute = began + 60
            with stderr_progress("workflows ended", workflows) as bar:
                while (done := sum(p in ENDED for p in list(phases.values()))) < workflows:
                    if proc.poll() is not None:
                        raise RuntimeError("the operator exited (its log: --log)")
                    if time.monotonic() - began > HANG + workflows:
                        raise TimeoutError(f"{done} of {workflows} workflows ended in time")
                    created = int(metric(sampler.text, "idlegate_pods_created_total"))
                    said = f"{created} pods created, {sampler.peak_waiting} waiting at most"
                    bar(done, workflows, said)
                    if time.monotonic() >= minute:  # (what a run cut short leaves)
                        minute += 60
                        print(json.dumps(reading(began, created, done, pids, proc.pid)), flush=True)
                    time.sleep(1)
            wall = time.monotonic() - began
            sampler.tick()
            after, spent = plane_cpu(pids), process(proc.pid)
    finally:
        proc.terminate()
        proc.wait(60)
    pods = int(metric(sampler.text, "idlegate_pods_created_total"))
    p99 = scale.quantile(scale.histogram(sampler.text, "idlegate_decision_duration_seconds"), 0.99)
    return {
        "nodes": nodes,
        "workflows": workflows,
        "phases": {p: list(phases.values()).count(p) for p in set(phases.values())},
        "pods": pods,
        "wall_seconds": round(wall, 1),
        "pods_per_second": round(pods / wall, 1),
        "decision_p99_ms": None if p99 is None else round(p99 * 1000, 2),
        "peak_waiting_workflows": sampler.peak_waiting,
        "operator": spent,
        "cpu_ms_per_pod": round(spent["cpu_seconds"] * 1000 / max(pods, 1), 2),
        "components": {
            name: {
                "cpu_seconds": round(after[name]["cpu_seconds"] - before[name]["cpu_seconds"], 1),
                "rss_mib": after[name]["rss_mib"],
                "peak_rss_mib": after[name]["peak_rss_mib"],
            }
            for name in pids
        },
    }


def test_run(nodes: int, workflows: int, scheduler: str, log: Any) -> dict[str, Any]:
    """The same nodes and workflows on the test API server (benchmarks/scale.py's `run`)."""
    with scale.cluster(nodes) as (api, namespace):
        found = scale.run(
            workflows / scale.WORKFLOWS_FULL, scheduler, "nodes", 0, 0, [], log, api,
            namespace, nodes,
        )  # fmt: skip
        api.assert_no_internal_errors()
    return {**found, "pods_per_second": round(found["pods"] / found["wall_seconds"], 1)}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--nodes", type=int, default=1000, help="KWOK Nodes (default 1000)")
    parser.add_argument(
        "--pods", type=int, default=5000, help="pods, over 12 a workflow (default 5000)"
    )
    parser.add_argument(
        "--planes", default="real", help="test, real or test,real, in turn (default real)"
    )
    parser.add_argument(
        "--idle",
        type=float,
        default=30.0,
        help="seconds the plane's CPU is read with its nodes alone (default 30)",
    )
    parser.add_argument("--scheduler", default="fair", help="the operator's --scheduler")
    parser.add_argument("--log", type=Path, help="keep the operator's output here")
    parser.add_argument("--out", type=Path, help="also write the figures here (JSON)")
    return parser


def measure(args: argparse.Namespace) -> dict[str, Any]:
    planes = args.planes.split(",")
    if not set(planes) <= {"test", "real"} or not planes:
        raise IdlegateError(f"--planes {args.planes}: give test, real or test,real")
    if args.nodes < 1 or args.pods < PODS_A_WORKFLOW or args.idle < 0:
        raise IdlegateError(
            f"--nodes {args.nodes}, --pods {args.pods}, --idle {args.idle:g}: give 1 node or "
            f"more, {PODS_A_WORKFLOW} pods or more (one workflow) and 0 idle seconds or more"
        )
    if "real" in planes:
        need_binaries()  # (its IdlegateError says to run make cluster)
    workflows = args.pods // PODS_A_WORKFLOW
    found = {}
    with args.log.open("a") if args.log else tempfile.TemporaryFile("w") as log:
        for plane in planes:
            try:
                if plane == "test":
                    found[plane] = test_run(args.nodes, workflows, args.scheduler, log)
                else:
                    found[plane] = real_run(args.nodes, workflows, args.scheduler, args.idle, log)
            except (RuntimeError, TimeoutError) as exc:
                sys.exit(f"Error: on the {plane} plane: {exc}")
            print(json.dumps({"plane": plane, **found[plane]}), flush=True)
    print(table(found))
    if args.out:
        args.out.write_text(json.dumps(found, indent=2))
    return found


def table(found: dict[str, dict[str, Any]]) -> str:
    """The planes' figures side by side."""
    rows = [
        f"{'plane':5} {'nodes':>5} {'pods':>6} {'wall s':>7} {'pods/s':>6} {'decision p99 ms':>15} "
        f"{'CPU ms/pod':>10} {'op. peak MiB':>12}"
    ]
    for plane, f in found.items():
        p99 = "-" if f["decision_p99_ms"] is None else f"{f['decision_p99_ms']:.2f}"
        rows.append(
            f"{plane:5} {f['nodes']:5} {f['pods']:6} {f['wall_seconds']:7.0f} "
            f"{f['pods_per_second']:6.1f} {p99:>15} "
            f"{f['cpu_ms_per_pod']:10.1f} {f['operator']['peak_rss_mib']:12.0f}"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return run_script(parser(), measure, argv)


if __name__ == "__main__":
    main()
