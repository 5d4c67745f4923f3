"""A burst of workflows through the real ``idlegate operator`` command: throughput and memory.

The operator runs as a subprocess (``python -m idlegate operator --standalone``) against the
test API server of tests/k8s and its simulated kubelet in wall-clock time (tiny tasks of
0.05-0.1 s). All workflows (four stages, six pods each) are created at once; the script
waits for all of them to end and prints one JSON line: the time to submit and to finish,
the decisions the operator made (per wall second, and per second of policy time), gate
removals, the mean JCT, CPU seconds and resident memory of the operator (from /proc, so
Linux only) and of this process (API server and kubelet included).

It also checks what must hold whatever the machine: every workflow succeeded, no pod was
created twice and the pool was never exceeded (tests/test_e2e_operator.py checks the
same on a small burst).

With ``--restart-at F`` the operator is killed (SIGKILL: no clean shutdown) once a
fraction F of the workflows has ended, and a new one takes over the rest: its memory is
that of a restart in the middle of a burst (it rebuilds the state of every workflow
left at once); the first one's figures are under ``operator_before_restart``.

    python -m benchmarks.operator_burst [--workflows 200] [--pool 16] [--scheduler fair]
        [--restart-at 0.5] [--out burst.json]

(run from the repository root: the script imports the test API server from tests/k8s).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from idlegate.api.crd import render_crd
from idlegate.api.kinds import API_VERSION
from idlegate.api.labels import GATE
from idlegate.flags import description, missing_extra, one_line

try:  # the test API server needs the dev extra (kmock), the operator run its own extra
    import kopf  # noqa: F401 (not used here: the operator subprocess needs it)

    from tests.k8s.apiserver import PODS
    from tests.k8s.harness import ApiServer
    from tests.k8s.kubelet import SimKubelet
except ModuleNotFoundError as exc:
    # (run as a benchmark, this one or one built on it: one line; imported by a test: raised)
    script = getattr(sys.modules["__main__"].__spec__, "name", "")
    if not script.startswith("benchmarks."):
        raise
    if exc.name == "tests":
        sys.exit(f"Error: run it from the repository root: python -m {script}")
    error = missing_extra(exc)
    if error is None:
        raise
    sys.exit(f"Error: {one_line(error)}")

DWF = "idlegate.io/v1alpha1/dagworkflows"
NAMESPACE = "burst"
STAGES = [
    {"name": "extract", "tasks": 2, "taskDurationSeconds": 0.05, "dependsOn": []},
    {"name": "left", "tasks": 2, "taskDurationSeconds": 0.05, "dependsOn": ["extract"]},
    {"name": "right", "tasks": 1, "taskDurationSeconds": 0.1, "dependsOn": ["extract"]},
    {"name": "merge", "tasks": 1, "taskDurationSeconds": 0.05, "dependsOn": ["left", "right"]},
]
PODS_PER_WORKFLOW = sum(stage["tasks"] for stage in STAGES)


class Occupancy:
    """Pods created (by name) and the most pods holding an executor at once."""

    def __init__(self) -> None:
        self.created: Counter[str] = Counter()
        self.holding: set[str] = set()
        self.most = 0

    def __call__(self, res: Any, etype: str, pod: dict[str, Any]) -> None:
        if res != PODS:
            return
        name = pod["metadata"]["name"]
        if etype == "ADDED":
            self.created[name] += 1
        gated = any(g.get("name") == GATE for g in pod["spec"].get("schedulingGates") or [])
        ended = pod["status"].get("phase") in ("Succeeded", "Failed")
        if etype == "DELETED" or gated or ended:
            self.holding.discard(name)
        else:
            self.holding.add(name)
        self.most = max(self.most, len(self.holding))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url: str) -> str:
    """The body at `url`, or "" while nothing answers there."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()
    except OSError:
        return ""


def metric(text: str, name: str) -> float:
    """The sum of a Prometheus metric's samples (all labels)."""
    samples = (line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    return sum(float(v) for key, v in samples if key.split("{")[0] == name)


def process(pid: int) -> dict[str, float]:
    """CPU seconds and resident memory (now and peak, MiB) of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return {
        "cpu_seconds": round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 1),
        "rss_mib": round(int(status["VmRSS"].split()[0]) / 1024, 1),
        "peak_rss_mib": round(int(status["VmHWM"].split()[0]) / 1024, 1),
    }


def children(pid: int) -> list[int]:
    """The child processes of `pid`, and theirs (from /proc)."""
    found = Path(f"/proc/{pid}/task/{pid}/children")
    direct = [int(c) for c in found.read_text().split()] if found.exists() else []
    return [d for c in direct for d in (c, *children(c))]


def children_cpu(pid: int) -> float:
    """CPU seconds of `pid`'s live descendants (a replay process's), each from /proc."""
    total = 0.0
    for child in children(pid):
        with suppress(OSError):  # (ended meanwhile)
            total += process(child)["cpu_seconds"]
    return round(total, 1)


def wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            sys.exit(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def operator(
    api: ApiServer,
    pool: int,
    metrics: int,
    health: int,
    log: Any,
    *,
    namespace: str = NAMESPACE,
    kubeconfig: Path | None = None,
    scheduler: str = "fair",
    flags: Sequence[str] = (),
    wrap: Sequence[str] = (),
) -> subprocess.Popen:
    """``idlegate operator`` serving `namespace` through `kubeconfig` (default: the API
    server's own) with `scheduler` and `flags`, its output into `log`; run under the
    command `wrap` if given (a profiler)."""
    command = [
        *wrap,
        *(sys.executable, "-m", "idlegate", "operator", "--standalone"),
        *(f"--pool-size={pool}", "--scheduler", scheduler, "--namespace", namespace),
        *("--metrics-port", str(metrics), "--health-port", str(health)),
        *("--kubeconfig", str(kubeconfig or api.kubeconfig)),
        *flags,
    ]
    env = {**os.environ, "POD_ID": "idlegate-operator-burst", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)


def burst(
    api: ApiServer,
    count: int,
    pool: int,
    log: Any,
    scheduler: str = "fair",
    restart_at: float | None = None,
) -> dict[str, Any]:
    metrics, health = free_port(), free_port()
    occupancy = Occupancy()
    unsubscribe = api.call(api.emulator.subscribe, occupancy)
    proc = operator(api, pool, metrics, health, log, scheduler=scheduler)
    before: dict[str, Any] | None = None
    try:
        with SimKubelet(api, NAMESPACE):
            wait(lambda: fetch(f"http://127.0.0.1:{health}/healthz"), 60, "the operator")
            start = time.monotonic()
            for i in range(count):
                body = {
                    "apiVersion": API_VERSION,
                    "kind": "DagWorkflow",
                    "metadata": {"name": f"burst-{i:03d}"},
                    "spec": {"stages": STAGES},
                }
                api.create(DWF, body, NAMESPACE)
            submitted = time.monotonic() - start

            def ended(at_least: int = count) -> bool:
                phases = [(w.get("status") or {}).get("phase") for w in api.list(DWF, NAMESPACE)]
                return sum(p in ("Succeeded", "Failed") for p in phases) >= at_least

            if restart_at is not None:
                wait(lambda: ended(int(restart_at * count)), 300, "the restart point")
                before = process(proc.pid)
                proc.kill()
                proc.wait(30)
                proc = operator(api, pool, metrics, health, log, scheduler=scheduler)
            wait(ended, 300, f"{count} workflows to end")
            elapsed = time.monotonic() - start
            text = fetch(f"http://127.0.0.1:{metrics}/metrics")
            figures = process(proc.pid)
    finally:
        api.call(unsubscribe)
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    workflows = api.list(DWF, NAMESPACE)
    decisions = metric(text, "idlegate_decisions_total")
    plans = metric(text, "idlegate_planning_duration_seconds_count")
    policy_seconds = metric(text, "idlegate_decision_duration_seconds_sum")
    own = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "workflows": count,
        "pods": count * PODS_PER_WORKFLOW,
        "pool": pool,
        "scheduler": scheduler,
        "phases": dict(Counter(w["status"]["phase"] for w in workflows)),
        "pods_created_twice": sum(n > 1 for n in occupancy.created.values()),
        "most_pods_holding_an_executor": occupancy.most,
        "submit_seconds": round(submitted, 2),
        "wall_seconds": round(elapsed, 2),
        "decisions": int(decisions),
        "decisions_per_second_wall": round(decisions / elapsed, 1),
        "decisions_per_second_policy": round(decisions / policy_seconds)
        if policy_seconds
        else None,
        "gate_removals": int(metric(text, "idlegate_gate_removals_total")),
        "plans": int(plans),
        "mean_jct_seconds": round(sum(w["status"]["jctSeconds"] for w in workflows) / count, 2),
        "operator": figures,
        "operator_before_restart": before,
        "this_process": {
            "cpu_seconds": round(own.ru_utime + own.ru_stime, 1),
            "peak_rss_mib": round(own.ru_maxrss / 1024, 1),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--workflows", type=int, default=200)
    parser.add_argument("--pool", type=int, default=16)
    parser.add_argument("--scheduler", default="fair", help="the operator's --scheduler")
    parser.add_argument(
        "--restart-at",
        type=float,
        help="kill the operator once this fraction of the workflows has ended, and start "
        "another (see above)",
    )
    parser.add_argument("--out", type=Path, help="also write the figures here (JSON)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ApiServer(Path(tmp)) as api:
        api.create("customresourcedefinitions", render_crd())
        api.create("namespaces", {"metadata": {"name": NAMESPACE}})
        with (Path(tmp) / "operator.log").open("w") as log:
            report = burst(api, args.workflows, args.pool, log, args.scheduler, args.restart_at)
        held = report["most_pods_holding_an_executor"] > args.pool
        broken = report["phases"] != {"Succeeded": args.workflows} or report["pods_created_twice"]
        if broken or held:
            print((Path(tmp) / "operator.log").read_text()[-3000:], file=sys.stderr)
    print(json.dumps(report))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    if broken or held:
        sys.exit("a workflow failed, a pod was created twice or the pool was exceeded")


if __name__ == "__main__":
    main()
