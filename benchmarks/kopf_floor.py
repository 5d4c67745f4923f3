"""kopf's own CPU a pod: the floor under the operator's pod handlers (issue 61).

A minimal kopf operator runs as a subprocess (this module with ``--serve HANDLERS``),
configured as the real one (`configure_kopf`, its log filters), whose handlers on pods do
nothing, against the test API server of tests/k8s. The benchmark creates `--pods` task
pods (the operator's manifest, `task_pod`: gated, 4 CPU and 8 GiB) and takes each through
the lifecycle of the scale run (benchmarks/scale.py): created gated; its gate removed
(`release_patch`, as the applier writes it), as many at once as `--room` and then one each
time a pod ends; bound to a Node by the API server's kube-scheduler; ``Running`` and then
``Succeeded`` after 1 s by the simulated kubelet (tests/k8s/kubelet.py). The handler sets,
side by side in one run (each in a namespace and an operator process of its own, one after
the other, `--repeat` times):

* ``two-each``: the operator's pod handlers until they were merged: the indexes
  ``task_pods`` (pods with the workflow label) and ``live_pods`` (every pod), the event
  handlers ``room-events`` (every pod) and ``pod-events`` (the workflow label);
* ``one-each``: the operator's since (src/idlegate/operator/handlers/): one index of every
  pod (a task pod under two keys, `idlegate.operator.edge.pod_index`) and one event handler;
* ``event-only``: one event handler only;
* ``own-index`` (with ``--own-index``): the operator's since issue 79's lag's seventh part,
  one event handler that keeps the operator's own index of pods (`PodIndex`, its first
  listing's end told by kopf's watch stream: `idlegate.operator.edge.pod_index.install`), no index
  of kopf's;
* ``one-each-writes``: ``one-each``, and the operator makes the pods' writes itself
  through idlegate's API client (`KubeApi`, as many at once as the operator's default
  ``--api-concurrency``): it creates every pod, releases ``--room`` of them, and then one
  each time its event handler sees a pod ``Succeeded``; the least a gating operator
  writes, a pod's creation and release, on top of ``one-each``.

For each it prints the operator's CPU milliseconds a pod (from /proc, from the moment the
first pod is created to the moment its handler saw every pod ``Succeeded``, so Linux only),
the watch events a pod (medians over the repeats), and its ratio to ``two-each`` (the
median of each repeat's ratio: rounds differ more than the sets of one round do); at the
end one JSON object with every run.

    python -m benchmarks.kopf_floor [--pods 2000] [--room 200] [--repeat 1] [--own-index]
        [--out floor.json]
    python -m benchmarks.kopf_floor --essence   # only kopf's essence of a pod at one event

(run from the repository root: the script imports the test API server from tests/k8s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any, cast

from idlegate.api.labels import LABEL_WORKFLOW
from idlegate.api.task_pods import Owner, release_patch, task_pod
from idlegate.flags import description, missing_extra, one_line
from idlegate.operator.edge.pod_index import Listing, PodIndex, install, pod_keys
from idlegate.sim.spec import parse_workflow

try:  # the test API server needs the dev extra (kmock), the operator its own extra
    import kmock
    import kopf

    from benchmarks.operator_burst import fetch, free_port, process
    from idlegate.api.settings import Settings
    from idlegate.kubeconfig import load_configuration
    from idlegate.operator.edge.kube import KubeApi, connection_info
    from idlegate.operator.kopf_retries import KopfRetryLog
    from idlegate.operator.kopf_settings import configure_kopf, quiet_event_handlers
    from idlegate.operator.metrics import Metrics
    from tests.e2e import new_namespace
    from tests.k8s.apiserver import NODES, PODS
    from tests.k8s.harness import ApiServer
    from tests.k8s.kubelet import SimKubelet
    from tests.k8s.scheduler import node
except ModuleNotFoundError as exc:
    if __name__ != "__main__":
        raise
    if exc.name == "tests":
        sys.exit("Error: run it from the repository root: python -m benchmarks.kopf_floor")
    error = missing_extra(exc)
    if error is None:
        raise
    sys.exit(f"Error: {one_line(error)}")

WRITES = "one-each-writes"
"""The handler set whose operator also makes the pods' writes (`Writer`)."""
HANDLERS = ("two-each", "one-each", "event-only", WRITES)
"""The handler sets measured (the module docstring), the first the others' ratios' base."""
OWN = "own-index"
"""The handler set of the operator's own index of pods (measured with ``--own-index``)."""
REQUESTS = {"cpu": "4", "memory": "8Gi"}
"""A task pod's requests (the scale run's): two fit a node."""
PODS_PER_WORKFLOW = 12
"""Task pods a workflow label is shared by (the scale run's 4 + 6 + 2)."""


# -- the operator (the subprocess) ---------------------------------------------------------


def register(
    registry: kopf.OperatorRegistry, handlers: str, seen: Callable[[Mapping[str, Any]], None]
) -> None:
    """The no-op pod handlers of `handlers` in kopf's `registry`; `seen` is given each pod
    as an event shows it (by the one event handler every set has)."""
    workflow = {LABEL_WORKFLOW: kopf.PRESENT}
    if handlers == "two-each":

        @kopf.index("v1", "pods", registry=registry, id="task_pods", labels=workflow)
        async def task_pods(
            namespace: str | None, labels: kopf.Labels, body: kopf.Body, **_: Any
        ) -> Any:
            return {(namespace, labels[LABEL_WORKFLOW]): body}

        @kopf.index("v1", "pods", registry=registry, id="live_pods")
        async def live_pods(namespace: str | None, name: str, body: kopf.Body, **_: Any) -> Any:
            return {(namespace, name): body}

        @kopf.on.event("v1", "pods", registry=registry, id="pod-events", labels=workflow)
        async def pod_event(**_: Any) -> None:
            pass

    elif handlers in ("one-each", WRITES):

        @kopf.index("v1", "pods", registry=registry, id="pods")
        async def pods(
            namespace: str | None, name: str, labels: kopf.Labels, body: kopf.Body, **_: Any
        ) -> Any:
            return dict.fromkeys(pod_keys(namespace, name, labels), body)

    index, listing = PodIndex(), Listing(())
    own = handlers == OWN

    if own:

        @kopf.on.startup(registry=registry)
        async def listen(settings: kopf.OperatorSettings, **_: Any) -> None:
            install(settings, listing.listed)

    @kopf.on.event("v1", "pods", registry=registry, id="room-events")
    async def room_event(event: kopf.RawEvent, **_: Any) -> None:
        if own:  # (as the operator's handler keeps it)
            listing.handled(index.seen(event))
        seen(event["object"])


class Writer:
    """The pods' writes of ``one-each-writes``, in the minimal operator's loop: once the
    file `go` exists, create `pods` task pods (`manifests`) through `KubeApi`, then
    release `room` of them; `release_next` releases one more (a pod ended)."""

    def __init__(self, configuration: Any, namespace: str, pods: int, room: int) -> None:
        concurrency = Settings(pool_size=1).api_concurrency
        self.kube = KubeApi(configuration, concurrency=concurrency)
        self.limit = asyncio.Semaphore(concurrency)
        self.namespace, self.bodies, self.room = namespace, manifests(namespace, pods), room
        self.created: list[dict[str, Any]] = []
        self.released = 0
        self.tasks: set[asyncio.Task[None]] = set()

    def start(self, go: Path) -> None:
        self._spawn(self._run(go))

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)  # (kept until done: the loop holds tasks weakly)
        task.add_done_callback(self.tasks.discard)

    async def _run(self, go: Path) -> None:
        while not go.exists():
            await asyncio.sleep(0.05)

        async def create(body: dict[str, Any]) -> dict[str, Any]:
            async with self.limit:
                return await self.kube.create_pod(self.namespace, body)

        self.created = list(await asyncio.gather(*(create(b) for b in self.bodies)))
        for _ in range(self.room):
            self.release_next()

    def release_next(self) -> None:
        if self.released < len(self.created):
            pod, self.released = self.created[self.released], self.released + 1
            self._spawn(self._release(pod, self.released % self.room))

    async def _release(self, pod: dict[str, Any], executor: int) -> None:
        patch = release_patch(pod, executor)
        if patch is not None:
            async with self.limit:
                await self.kube.patch_pod(self.namespace, pod["metadata"]["name"], patch)


def serve(
    handlers: str,
    kubeconfig: Path,
    namespace: str,
    pods: int,
    room: int,
    health: int,
    done: Path,
) -> None:
    """Run the minimal operator until SIGTERM; write `done` (its events, JSON) once its
    event handler saw `pods` pods ``Succeeded``."""
    kopf.configure(verbose=False)  # (the operator's logging, as `idlegate operator` sets it)
    logging.getLogger("kopf.objects").addFilter(quiet_event_handlers)
    registry = kopf.OperatorRegistry()
    succeeded: set[str] = set()
    events = 0

    configuration = load_configuration(kubeconfig)
    writer = Writer(configuration, namespace, pods, room) if handlers == WRITES else None

    def seen(pod: Mapping[str, Any]) -> None:
        nonlocal events
        events += 1
        if (pod.get("status") or {}).get("phase") == "Succeeded":
            name = pod["metadata"]["name"]
            if writer is not None and name not in succeeded:
                writer.release_next()
            succeeded.add(name)
            if len(succeeded) == pods and not done.exists():
                done.write_text(json.dumps({"events": events}))

    register(registry, handlers, seen)

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure_kopf(settings, Settings(pool_size=1), Metrics(1, "fifo"))
        KopfRetryLog().install()
        if writer is not None:
            writer.start(done.with_suffix(".go"))

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(configuration)

    kopf.run(
        registry=registry,
        standalone=True,
        namespaces=[namespace],
        liveness_endpoint=f"http://127.0.0.1:{health}/healthz",
    )


# -- the benchmark -------------------------------------------------------------------------


class Releaser:
    """Removes the gates of `namespace`'s pods, in creation order: `room` at first, then
    one each time a pod ends (as the operator releases a pool's next task); it lives in
    the API server's loop, as tests/k8s/kubelet.py's kubelet does."""

    def __init__(self, api: ApiServer, namespace: str, names: list[str], room: int) -> None:
        self.api, self.namespace = api, namespace
        self.waiting, self.room = list(reversed(names)), room

    def __enter__(self) -> Releaser:
        self._unsubscribe = self.api.call(self.api.emulator.subscribe, self._on_event)
        self.api.call(self._release, self.room)
        return self

    def __exit__(self, *exc: object) -> None:
        self.api.call(self._unsubscribe)

    def _on_event(self, res: kmock.resource, etype: str, pod: dict[str, Any]) -> None:
        ours = res == PODS and pod["metadata"].get("namespace") == self.namespace
        if ours and etype == "MODIFIED" and (pod.get("status") or {}).get("phase") == "Succeeded":
            self.api.emulator._safely(self._release)

    def _release(self, count: int = 1) -> None:
        """Remove the gates of the next `count` pods."""
        for _ in range(min(count, len(self.waiting))):
            name = self.waiting.pop()
            pod = self.api.emulator.get(PODS, self.namespace, name)
            patch = release_patch(pod, len(self.waiting) % self.room)
            self.api.emulator.patch(PODS, self.namespace, name, patch, patch_type="json")


def manifests(namespace: str, pods: int) -> list[dict[str, Any]]:
    """`pods` gated task pods, `PODS_PER_WORKFLOW` to a workflow, of 1 s tasks."""
    stage = {"name": "s", "tasks": PODS_PER_WORKFLOW, "taskDurationSeconds": 1}
    spec = parse_workflow({"stages": [{**stage, "resources": REQUESTS}]}).stages[0]
    return [
        task_pod(Owner(namespace, f"wf-{i // PODS_PER_WORKFLOW}", f"uid-{i}"), spec, i)
        for i in range(pods)
    ]


def measure(
    api: ApiServer, handlers: str, pods: int, room: int, tmp: Path, log: Any
) -> dict[str, Any]:
    """One run of the operator with `handlers` over `pods` pods in a new namespace."""
    namespace = new_namespace(api, "floor")
    health, done = free_port(), tmp / f"{namespace}.done"
    command = [
        *(sys.executable, "-m", "benchmarks.kopf_floor", "--serve", handlers),
        *("--kubeconfig", str(api.kubeconfig), "--namespace", namespace, "--pods", str(pods)),
        *("--room", str(room)),
        *("--health-port", str(health), "--done", str(done)),
    ]
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not fetch(f"http://127.0.0.1:{health}/healthz"):
            if time.monotonic() > deadline or proc.poll() is not None:
                sys.exit("Error: the minimal operator did not start (its log: --log)")
            time.sleep(0.1)
        bodies = manifests(namespace, pods)
        with SimKubelet(api, namespace), ExitStack() as stack:
            before, start = process(proc.pid)["cpu_seconds"], time.monotonic()
            if handlers == WRITES:  # (the operator creates and releases them)
                done.with_suffix(".go").touch()
            else:
                for body in bodies:
                    api.create(PODS, body, namespace)
                names = [b["metadata"]["name"] for b in bodies]
                stack.enter_context(Releaser(api, namespace, names, room))
            deadline = time.monotonic() + 60 + pods  # (a safety net against a hang)
            while not done.exists():
                if time.monotonic() > deadline or proc.poll() is not None:
                    sys.exit("Error: the minimal operator did not see every pod end")
                time.sleep(0.05)
            after, elapsed = process(proc.pid)["cpu_seconds"], time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    events = json.loads(done.read_text())["events"]
    return {
        "handlers": handlers,
        "pods": pods,
        "cpu_seconds": round(after - before, 2),
        "cpu_ms_per_pod": round((after - before) * 1000 / pods, 3),
        "events_per_pod": round(events / pods, 2),
        "wall_seconds": round(elapsed, 1),
    }


def essence_cost(repeat: int = 5000) -> dict[str, float]:
    """Microseconds of CPU kopf spends on a task pod's essence at each of its events (its
    diff base built and its progress cleared), with kopf's storage and with the operator's
    (`OursOnlyDiffBase`); the pod as `manifests` makes it, with a Running status."""
    from idlegate.operator.kopf_settings import ANNOTATION_PREFIX, DIFF_BASE_KEY, OursOnlyDiffBase

    pod = manifests("ns", 1)[0]
    ready = {"type": "Ready", "status": "True"}
    body = kopf.Body(
        cast(kopf.RawBody, {**pod, "status": {"phase": "Running", "conditions": [ready]}})
    )
    key = DIFF_BASE_KEY
    progress = kopf.AnnotationsProgressStorage(prefix=ANNOTATION_PREFIX)
    costs = {}
    for name, storage in (
        ("kopf", kopf.AnnotationsDiffBaseStorage(prefix=ANNOTATION_PREFIX, key=key)),
        ("operator", OursOnlyDiffBase(prefix=ANNOTATION_PREFIX, key=key)),
    ):
        start = time.process_time()
        for _ in range(repeat):
            progress.clear(essence=storage.build(body=body))
        costs[name] = round((time.process_time() - start) / repeat * 1e6, 1)
    return costs


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument(
        "--pods", type=int, default=2000, help="task pods of each run (default: %(default)s)"
    )
    parser.add_argument(
        "--room",
        type=int,
        default=200,
        help="pods released and running at once (default: %(default)s)",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each handler set (default: %(default)s)"
    )
    parser.add_argument("--log", type=Path, help="keep the operators' output here")
    parser.add_argument("--out", type=Path, help="also write the figures here (JSON)")
    parser.add_argument(
        "--essence",
        action="store_true",
        help="only time kopf's essence of a task pod at one event, with kopf's diff base "
        "storage and the operator's (no operator)",
    )
    parser.add_argument(
        "--own-index",
        action="store_true",
        help=f"also measure '{OWN}': the operator's own index of pods kept by its event "
        "handler, beside kopf's index (one-each)",
    )
    parser.add_argument("--serve", choices=(*HANDLERS, OWN), help=argparse.SUPPRESS)
    for hidden in ("--kubeconfig", "--namespace", "--health-port", "--done"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(
            args.serve,
            Path(args.kubeconfig),
            args.namespace,
            args.pods,
            args.room,
            int(args.health_port),
            Path(args.done),
        )
        return {}
    if args.essence:
        costs = essence_cost()
        print(
            f"a task pod's essence at one event: {costs['kopf']} us of CPU with kopf's "
            f"storage, {costs['operator']} us with the operator's"
        )
        return costs
    sets = (*HANDLERS, OWN) if args.own_index else HANDLERS
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as name, ApiServer(Path(name)) as api:
        tmp = Path(name)
        for i in range((args.room + 1) // 2):  # (two pods to a node)
            api.create(NODES, node(f"node-{i:04d}"))
        log = args.log.open("w") if args.log else (tmp / "operators.log").open("w")
        with log:
            for _ in range(args.repeat):
                for handlers in sets:
                    runs.append(measure(api, handlers, args.pods, args.room, tmp, log))
                    print(json.dumps(runs[-1]), flush=True)
        api.assert_no_internal_errors()
    median, ratio = {}, {}
    for h in sets:
        of = [r for r in runs if r["handlers"] == h]
        median[h] = statistics.median(r["cpu_ms_per_pod"] for r in of)
        # (each to the first set's run of its round: rounds differ more than sets in a round)
        base = runs[:: len(sets)]
        each = [r["cpu_ms_per_pod"] / b["cpu_ms_per_pod"] for r, b in zip(of, base, strict=True)]
        ratio[h] = round(statistics.median(each), 3)
        events = statistics.median(r["events_per_pod"] for r in of)
        print(
            f"{h:10s} {median[h]:6.2f} ms of CPU a pod, {events:.2f} events a pod, {ratio[h]:.2f}x"
        )
    report = {
        "pods": args.pods,
        "room": args.room,
        "cpu_ms_per_pod": median,
        "ratio": ratio,
        "runs": runs,
    }
    print(json.dumps(report))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
