"""The operator under API-server faults (issue 21): recovery time and throughput per fault.

For each fault, the real ``idlegate operator`` command (a subprocess, pool `--pool`, fair)
runs `--workflows` workflows of two or three stages (3 + 2, or 2 + 2 + 1 tasks of
`--task-seconds` wall seconds each, all created at once) against the test API server of
tests/k8s and its simulated kubelet, through the fault proxy of tests/k8s/faults.py. A
fault that is an event (an outage, a 429 storm, a spell of latency) is switched on one
second after the pool first filled and off after its duration; one that is weather
(watch cuts, dropped connections) lasts the whole run. A run without faults comes first,
in the same invocation, and the throughputs are given against it.

Per fault, one row:

* *recovery*: from the API's return (the fault switched off) to the pool full again: the
  pods really running in the emulator equal min(pool, pods running + gated pods waiting),
  sampled every 50 ms; "-" for weather;
* *throughput*: workflows finished per minute, from their creation to the last one's end,
  and its ratio to the run without faults;
* *duplicates*: pod names created twice, or (workflow, stage, task, attempt) with two pods;
* *counters*: ``idlegate_pods_created_total`` and ``idlegate_gate_removals_total`` from
  /metrics against the pods the emulator created and the gates it saw removed;
* whether the operator process was still running at the end.

    python -m benchmarks.api_faults [--workflows 200] [--pool 16] [--faults outage,storm]

(run from the repository root: the script imports the test API server from tests/k8s).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.operator_burst import fetch, free_port, metric, operator
from idlegate.api.crd import render_crd
from idlegate.flags import description
from tests.e2e import DWF, Periodic, PodMonitor, stage, workflow
from tests.k8s.faults import FaultProxy, Faults
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import SimKubelet


@dataclasses.dataclass(frozen=True)
class Fault:
    """One fault of the proxy (tests/k8s/faults.py), for `seconds` or for the whole run."""

    label: str
    switches: dict[str, Any]
    seconds: float | None = None
    """How long it lasts once the pool is full; None: the whole run."""


def faults(args: argparse.Namespace) -> dict[str, Fault]:
    return {
        "none": Fault("no fault", {}),
        "outage": Fault(f"503 for {args.outage:g} s", {"outage": True}, args.outage),
        "storm": Fault(f"429 (Retry-After: 3) for {args.storm:g} s", {"throttle": 3.0}, args.storm),
        "latency": Fault(
            f"+500 ms per request for {args.latency:g} s", {"latency": 0.5}, args.latency
        ),
        "watch-cuts": Fault("watch streams cut every 5 s", {"cut_watches": 5.0}),
        "drop-before": Fault("10 % of connections dropped before the server", {"drop_before": 0.1}),
        "drop-after": Fault("10 % of connections dropped after the server", {"drop_after": 0.1}),
        "long-outage": Fault(f"503 for {args.long_outage:g} s", {"outage": True}, args.long_outage),
    }


def bodies(count: int, seconds: float) -> list[dict[str, Any]]:
    """The workflows: alternately 3 + 2 tasks and 2 + 2 + 1 tasks of `seconds` each."""
    out = []
    for i in range(count):
        if i % 2:
            stages = (stage("a", 3, seconds), stage("b", 2, seconds, ("a",)))
        else:
            stages = (
                stage("a", 2, seconds),
                stage("b", 2, seconds, ("a",)),
                stage("c", 1, seconds, ("b",)),
            )
        out.append(workflow(f"wf-{i:03d}", *stages))
    return out


class Sampler(Periodic):
    """(time, pods running, gated pods) every 50 ms, in a thread."""

    def __init__(self, monitor: PodMonitor) -> None:
        super().__init__(0.05, "pool-sampler")
        self.monitor = monitor
        self.samples: list[tuple[float, int, int]] = []

    def tick(self) -> None:
        self.samples.append((time.monotonic(), *self.monitor.counts()))

    def recovery(self, since: float, pool: int) -> float | None:
        """Seconds from `since` to the first sample with the pool full (or all the work
        there is running); None if that never happened."""
        for t, running, gated in self.samples:
            if t >= since and running >= min(pool, running + gated):
                return t - since
        return None


def finished(api: ApiServer, namespace: str) -> int:
    phases = [(w.get("status") or {}).get("phase") for w in api.list(DWF, namespace)]
    return sum(p in ("Succeeded", "Failed") for p in phases)


def until(predicate: Any, timeout: float, proc: Any) -> bool:
    """Wait for `predicate` while the operator runs; False on a timeout or its exit."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline or proc.poll() is not None:
            return False
        time.sleep(0.05)
    return True


def run(
    api: ApiServer, proxy: FaultProxy, name: str, fault: Fault, args: argparse.Namespace, log: Any
) -> dict[str, Any]:
    namespace = f"faults-{name}"
    api.create("namespaces", {"metadata": {"name": namespace}})
    monitor = PodMonitor(api, namespace)
    metrics, health = free_port(), free_port()
    proc = operator(
        api, args.pool, metrics, health, log, namespace=namespace, kubeconfig=proxy.kubeconfig
    )
    returned = None
    try:
        with SimKubelet(api, namespace), Sampler(monitor) as sampler:
            if not until(lambda: fetch(f"http://127.0.0.1:{health}/healthz"), 60, proc):
                sys.exit(f"the operator did not start for {name}")
            if fault.seconds is None:
                proxy.set(**fault.switches)
            start = time.monotonic()
            for body in bodies(args.workflows, args.task_seconds):
                api.create(DWF, body, namespace)
            until(lambda: monitor.counts()[0] >= args.pool, 60, proc)
            if fault.seconds is not None:
                time.sleep(1.0)
                with proxy.fault(**fault.switches):
                    time.sleep(fault.seconds)
                returned = time.monotonic()
                log.write(f"=== {time.strftime('%H:%M:%S')}: the fault ends ===\n")
                log.flush()  # (in the operator's log, which shares this file's offset)
            done = until(lambda: finished(api, namespace) == args.workflows, args.timeout, proc)
            elapsed = time.monotonic() - start
            proxy.set(**dataclasses.asdict(Faults()))
            time.sleep(1.0)  # the last writes (the counters are read from the API's answers)
            text = fetch(f"http://127.0.0.1:{metrics}/metrics")
            alive = proc.poll() is None
    finally:
        monitor.close()
        if proc.poll() is None:
            proc.terminate()
        proc.wait(30)
    recovery = sampler.recovery(returned, args.pool) if returned is not None else None
    ended = finished(api, namespace)
    return {
        "fault": name,
        "label": fault.label,
        "finished": ended,
        "all_finished": done,
        "operator_alive": alive,
        "recovery_seconds": None if recovery is None else round(recovery, 2),
        "recovered": returned is None or recovery is not None,
        "per_minute": round(ended / elapsed * 60, 1),
        "duplicates": len(monitor.duplicates),
        "pods_created": (int(metric(text, "idlegate_pods_created_total")), len(monitor.created)),
        "gate_removals": (
            int(metric(text, "idlegate_gate_removals_total")),
            len(monitor.released),
        ),
    }


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table, throughput against the first row (no fault)."""
    base = rows[0]["per_minute"] or 1.0
    lines = [
        "| fault | recovery | workflows/min (vs none) | finished | duplicates | "
        "pods created: metric / emulator | gate removals: metric / emulator | operator |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        recovery = (
            "-"
            if r["fault"] == "none" or r["label"].startswith(("watch", "10 %"))
            else (
                f"{r['recovery_seconds']:.1f} s" if r["recovery_seconds"] is not None else "never"
            )
        )
        lines.append(
            f"| {r['label']} | {recovery} | {r['per_minute']:.0f} ({r['per_minute'] / base:.2f}) "
            f"| {r['finished']} | {r['duplicates']} | {r['pods_created'][0]} / "
            f"{r['pods_created'][1]} | {r['gate_removals'][0]} / {r['gate_removals'][1]} | "
            f"{'running' if r['operator_alive'] else 'EXITED'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--workflows", type=int, default=200)
    parser.add_argument("--pool", type=int, default=16)
    parser.add_argument("--task-seconds", type=float, default=0.5)
    parser.add_argument("--outage", type=float, default=20.0, help="seconds of the short outage")
    parser.add_argument("--storm", type=float, default=15.0, help="seconds of the 429 storm")
    parser.add_argument("--latency", type=float, default=60.0, help="seconds of +500 ms")
    parser.add_argument("--long-outage", type=float, default=70.0)
    parser.add_argument("--timeout", type=float, default=600.0, help="per run, seconds")
    parser.add_argument("--logs", type=Path, help="keep each run's operator log in this folder")
    parser.add_argument(
        "--faults",
        default="outage,storm,latency,watch-cuts,drop-before,drop-after,long-outage",
        help="comma-separated, from: outage, storm, latency, watch-cuts, drop-before, "
        "drop-after, long-outage; the run without faults always comes first",
    )
    args = parser.parse_args(argv)
    known = faults(args)
    chosen = ["none", *(f for f in args.faults.split(",") if f and f != "none")]
    unknown = [f for f in chosen if f not in known]
    if unknown:
        parser.error(f"unknown fault(s) {unknown}; known: {', '.join(known)}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp, ApiServer(Path(tmp)) as api:
        api.create("customresourcedefinitions", render_crd())
        with FaultProxy(api, Path(tmp)) as proxy:
            for name in chosen:
                with ((args.logs or Path(tmp)) / f"operator-{name}.log").open("w") as log:
                    rows.append(run(api, proxy, name, known[name], args, log))
                print(rows[-1], file=sys.stderr, flush=True)
        api.assert_no_internal_errors()
    print(table(rows))
    return rows


if __name__ == "__main__":
    main()
