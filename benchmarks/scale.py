"""Issue 61's scale benchmark: the real ``idlegate operator`` on a thousand nodes.

The operator runs as a subprocess (``python -m idlegate operator --standalone``, its default
pool following every node: ``--pool-nodes ''``) against the test API server of tests/k8s,
its kube-scheduler (which binds pods by their requests, tests/k8s/scheduler.py), the
simulated kubelet, the stand-in for Argo's controller and the one for Airflow's scheduler
and KubernetesExecutor (tests/k8s/airflow_executor.py, its REST API read by the operator's
``--airflow-url``), in wall-clock time. At full size (`--scale 1`):

* 1,000 Nodes of 8 CPU and 32 GiB;
* 4,000 DagWorkflows created at once, each a chain of three stages of 4, 6 and 2 tasks
  (48,000 pods) whose pods request 4 CPU and 8 GiB (two fit a node: at most 2,000 run at
  once, so 2,000 workflows or more wait for their first task at the peak);
* an Argo Workflow of 5,000 steps (100 chains of 50 tasks), created with them;
* an Airflow DAG run of 2,000 tasks (100 chains of 20 tasks of 1 s, the DAG
  ``layered_2000`` generated in the shape of Airflow's recorded answers), triggered with
  them; its tasks' pod overrides (``executor_config``) request what the DagWorkflows'
  pods do.

A run at `--scale F` has F times the nodes and the DagWorkflows (`--scale 0.1`: 100 nodes,
400 workflows, 4,800 pods), and the Argo Workflow and the Airflow run only at full size
(`--argo-steps` and `--airflow-tasks` set their sizes at any scale; 0: none). Tasks run 1
to 3 wall seconds. Progress is printed every 10 s; at the end one JSON object:

* what ran: ``nodes``, ``workflows``, ``argo_steps``, ``airflow_tasks``, ``scheduler``,
  ``pool``, ``wall_seconds``, ``decisions`` (the policy's answers, from its metric);
* ``decision_p99_ms`` (of ``idlegate_decision_duration_seconds``: the time the policy
  takes to answer one question, interpolated in its buckets as Prometheus'
  ``histogram_quantile`` does), ``decisions_within_5ms`` (the answers' share in the
  buckets up to 5 ms, exact); ``decision_cpu_p99_ms``, the same of the deciding thread's
  CPU time (``idlegate_decision_cpu_seconds``: the wall less its waits for a core or the
  interpreter's lock); both histograms' buckets, ``decision_buckets``;
* ``load_average``: the machine's one-minute load average at the end (from the OS);
* ``harness_cores``: the CPU this script took over the run (the test API server, the
  kube-scheduler, the kubelet, the stand-ins) per wall second: cores the operator lacked;
* ``operator``: its CPU seconds and resident memory, now and at its peak (from /proc, so
  Linux only), and ``cpu_ms_per_pod`` (its CPU over the pods created); its
  ``children_cpu_seconds`` are its child processes' (the forecasts' replay process, with
  ``--forecast-workers process``), not in its own;
* ``peak_waiting_workflows``: the most workflows admitted whose first task was not released
  yet (the operator's gauge ``idlegate_pending_workflows``, read every second);
* ``writes_per_pod``: the operator's write requests over the pods created, by sender (its
  own client, ``idlegate``, or kopf's), method and resource (from the API server's audit);
* ``status_lag_s``: per DagWorkflow, the wall seconds from its last pod ending to its
  status saying Succeeded (what ``kubectl get dagworkflows`` shows late), median and max;
* ``pods``, ``pods_created_twice``, ``released``, ``unschedulable`` and
  ``unschedulable_released`` (pods the kube-scheduler found no room for, and of those the
  ones idlegate released), the workflows' phases (tests/nodes_e2e.py's ClusterMonitor sees
  every write); an Airflow task that had more than one pod (Airflow's pending timeout
  requeued it) counts in ``pods_created_twice``;
* ``airflow`` (None without the run): its state, how many of its task instances are in
  each state and the tasks that had more than one pod, as the stand-in holds them.

It exits 1 if a workflow or the Airflow run or one of its tasks did not succeed, a pod was
created twice or a released pod was found Unschedulable. With ``--wrap 'py-spy record -f raw
-o op.txt --'`` the operator runs under that command (a profiler), its figures the profiled's.

    python -m benchmarks.scale [--scale 0.1] [--pool nodes|fixed] [--scheduler fair] [--queues N] [--argo-steps N]
        [--airflow-tasks N] [--wrap CMD] [--out scale.json]
    python -m benchmarks.scale --question 200,2000   # a decision's question alone
    python -m benchmarks.scale --argo-map 5000       # one map of the big Argo Workflow
    python -m benchmarks.scale --scale 0.1 --forecasts 5   # decisions, forecasts off and on
    python -m benchmarks.scale --scale 0.1 --forecasts 5 --forecast-workers thread
    python -m benchmarks.forecast_p99 --pairs 4    # the same, in pairs, off and on in turn
    python -m benchmarks.scale --refresh 1000        # one forecast refresh's CPU, alone

(run from the repository root: the script imports the test API server from tests/k8s;
Argo's Workflow CRD is read from ../shared/data/argo).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import re
import shlex
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import yaml

from benchmarks.operator_burst import (
    children,
    children_cpu,
    fetch,
    free_port,
    metric,
    operator,
    process,
)
from benchmarks.scale_queues import NODES_FULL, queues_report
from benchmarks.scale_queues import REQUESTS as TASK_REQUESTS
from idlegate.api.crd import KINDS, render_crd
from idlegate.api.settings import WORKERS
from idlegate.flags import description
from idlegate.policy import make_scheduler
from idlegate.progress import stderr_progress
from idlegate.sim.argo import DURATION_ANNOTATION
from tests.airflow_data import PASSWORD
from tests.argo_data import WORKFLOW_CRD
from tests.argo_workflows import argo
from tests.e2e import DWF, Periodic, new_namespace, stage, workflow
from tests.k8s.airflow_executor import AirflowExecutor, layered
from tests.k8s.apiserver import NODES, Write
from tests.k8s.argo_controller import WORKFLOWS, ArgoController
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import SimKubelet
from tests.k8s.scheduler import node
from tests.nodes_e2e import ENDED, ClusterMonitor

POOLS: dict[str, Callable[[int], tuple[str, ...]]] = {
    "nodes": lambda n: ("--pool-nodes", ""),
    "fixed": lambda n: ("--pool-resources", f"cpu={8 * n},memory={32 * n}Gi"),
}
"""The default pool: following every node, or of their allocatable as a fixed capacity
(with every pod of one size, two to a node, the same room)."""
WORKFLOWS_FULL, ARGO_STEPS, AIRFLOW_TASKS = 4000, 5000, 2000
"""Full size (and `NODES_FULL` nodes): DagWorkflows, steps of the big Argo Workflow, tasks of the Airflow run."""
CPU_SECONDS = "idlegate_decision_cpu_seconds"
NODE_CPU, NODE_MEMORY = "8", "32Gi"
REQUESTS = {"requests": dict(TASK_REQUESTS)}
"""A task pod's requests: two fit a node."""
CHAIN = (4, 6, 2)
"""Tasks of each DagWorkflow's stages, in a chain."""
ARGO_WIDTH = 100
"""Chains of the big Argo Workflow and of the Airflow DAG (their tasks over this many, one
after the other)."""
AIRFLOW_RUN = "manual__scale"
"""The Airflow run's id."""
AIRFLOW_QUEUED_TIMEOUT = 600.0
"""Airflow's ``task_queued_timeout`` (its default), in wall seconds: the operator is told."""


def dag_workflow(i: int) -> dict[str, Any]:
    """The i-th DagWorkflow: a chain of `CHAIN`'s stages, tasks of 1 to 3 s."""
    template = {
        "spec": {"containers": [{"name": "task", "image": "busybox", "resources": REQUESTS}]}
    }
    stages = [
        stage(f"s{k}", tasks, 1 + (i + k) % 3, (f"s{k - 1}",) if k else (), template=template)
        for k, tasks in enumerate(CHAIN)
    ]
    return workflow(f"dwf-{i}", *stages)


def argo_workflow(steps: int) -> dict[str, Any]:
    """An Argo Workflow of `steps` tasks: `ARGO_WIDTH` chains, each task after the one
    before it in its chain, all of one 1-second template."""
    tasks = []
    for n in range(steps):
        deps = [f"t{n - ARGO_WIDTH}"] if n >= ARGO_WIDTH else []
        tasks.append({"name": f"t{n}", "template": "step", "dependencies": deps})
    template = {
        "name": "step",
        "metadata": {"annotations": {DURATION_ANNOTATION: "1"}},
        "container": {"image": "busybox", "resources": REQUESTS},
    }
    return argo(f"argo-{steps}", {"dag": {"tasks": tasks}}, template)


def histogram(text: str, name: str) -> list[tuple[float, float]]:
    """(upper bound, cumulative count) of a Prometheus histogram's buckets, summed over
    its labels, in increasing bounds."""
    counts: dict[float, float] = {}
    for line in text.splitlines():
        found = re.match(rf'{name}_bucket\{{.*le="([^"]+)".*\}} (\S+)$', line)
        if found:
            bound = float(found[1])
            counts[bound] = counts.get(bound, 0.0) + float(found[2])
    return sorted(counts.items())


def refreshes(text: str) -> dict[str, Any] | None:
    """The operator's forecast refreshes (``idlegate_forecast_refresh_seconds``): how many,
    their mean and largest CPU (ms; the largest as its histogram bucket's bound); None
    when it made none (forecasts off)."""
    buckets = histogram(text, "idlegate_forecast_refresh_seconds")
    total = re.search(r"^idlegate_forecast_refresh_seconds_sum\{.*\} (\S+)$", text, re.M)
    if not buckets or not buckets[-1][1] or total is None:
        return None
    n = buckets[-1][1]
    top = next(bound for bound, count in buckets if count == n)
    return {
        "count": int(n),
        "mean_cpu_ms": round(float(total[1]) * 1000 / n, 1),
        "max_cpu_ms_le": top * 1000,
    }


def refresh_cost(waiting: int, scheduler: str, repeat: int = 3) -> dict[str, float]:
    """CPU milliseconds (median of `repeat`) of one forecast refresh of a pool with `waiting`
    workflows waiting (benchmarks/forecast.py's k8s-batch state), in its two parts: the
    event loop's (the fork, and taking the result back) and the worker thread's (the
    replays), as the operator's refresh does them (no operator); and what a replay
    process costs the operator beside them (`shipped_ms`: the fork pickled to it, the
    result unpickled back, in its threads)."""
    from statistics import median

    from benchmarks.forecast import waiting_state
    from idlegate.operator.forecasting.refresh import ForecastRefresh
    from idlegate.operator.forecasting.request import compute

    cluster = waiting_state(waiting, scheduler)
    loop_ms, thread_ms, shipped_ms = [], [], []
    for _ in range(repeat):
        refresh = ForecastRefresh(
            cluster,
            lambda: (make_scheduler(scheduler), scheduler, None),
            now=lambda: cluster.now,
            later=lambda key, at, fire: None,
            write=lambda moved: None,
        )
        began = time.process_time()
        snap = refresh.request()
        forked = time.process_time()
        result, _ = compute(snap, refresh.replays, refresh.budget, refresh.seconds)
        computed = time.process_time()
        refresh.take(snap, result, computed - forked)
        taken = time.process_time()
        back = pickle.dumps(result)  # (the process's part)
        ship = time.process_time()
        pickle.dumps(snap)
        pickle.loads(back)
        shipped = time.process_time()
        loop_ms.append((forked - began + taken - computed) * 1000)
        thread_ms.append((computed - forked) * 1000)
        shipped_ms.append((shipped - ship) * 1000)
    return {
        "loop_ms": median(loop_ms),
        "thread_ms": median(thread_ms),
        "shipped_ms": median(shipped_ms),
    }


def quantile(buckets: list[tuple[float, float]], q: float) -> float | None:
    """The q-quantile of the histogram, by linear interpolation in the bucket that holds it
    (Prometheus' histogram_quantile); None without observations."""
    total = buckets[-1][1] if buckets else 0.0
    if not total:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = bound, count
    return lower


class Sampler(Periodic):
    """Reads the operator's /metrics every second: the most workflows waiting at once."""

    def __init__(self, port: int) -> None:
        super().__init__(1.0, "scale-sampler")
        self.port, self.peak_waiting, self.text = port, 0, ""

    def tick(self) -> None:
        text = fetch(f"http://127.0.0.1:{self.port}/metrics")
        if text:
            self.text = text
            self.peak_waiting = max(
                self.peak_waiting, int(metric(text, "idlegate_pending_workflows"))
            )


def innermost(pid: int) -> int:
    """The process a wrapper (a profiler) runs: its last descendant (`pid` without one;
    read at the start, before the operator starts a replay process of its own)."""
    return (children(pid) or [pid])[-1]


@contextmanager
def cluster(nodes: int) -> Iterator[tuple[ApiServer, str]]:
    """The test API server serving the CRDs (the project's, Argo's) and `nodes` Nodes."""
    with tempfile.TemporaryDirectory() as tmp, ApiServer(Path(tmp)) as api:
        for kind in KINDS:
            api.create("customresourcedefinitions", render_crd(kind))
        api.create("customresourcedefinitions", yaml.safe_load(WORKFLOW_CRD.read_text()))
        for i in range(nodes):
            api.create(NODES, node(f"node-{i:04d}", cpu=NODE_CPU, memory=NODE_MEMORY))
        yield api, new_namespace(api, "scale")


def queues_file(count: int, nodes: int, folder: Path) -> Path:
    """A ``--queues`` file of `count` queues ``q0``, ``q1``, … sharing the nodes' CPU and
    memory in equal nominal quotas, each free to borrow the others' idle quota."""
    queues = [
        {
            "name": f"q{q}",
            "nominal": {"cpu": str(8 * nodes // count), "memory": f"{32 * nodes // count}Gi"},
        }
        for q in range(count)
    ]
    path = folder / "queues.yaml"
    path.write_text(yaml.safe_dump(queues))
    return path


def run(
    scale: float,
    scheduler: str,
    pool: str,
    argo_steps: int,
    airflow_tasks: int,
    wrap: list[str],
    log: Any,
    api: ApiServer,
    namespace: str,
    nodes: int,
    queues: int = 0,
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    """One run on `api`'s `nodes` Nodes (the module docstring): the operator's output into
    `log`, under the command `wrap` if given, with the flags `extra`; the figures. With
    `queues`, the default pool has that many queues (`queues_file`) and the i-th
    DagWorkflow names queue i mod it."""
    count = round(WORKFLOWS_FULL * scale)
    dags = [dag_workflow(i) for i in range(count)]
    if queues:
        for i, body in enumerate(dags):
            body["spec"]["queueName"] = f"q{i % queues}"
    argos = [argo_workflow(argo_steps)] if argo_steps else []
    names = {w["metadata"]["name"] for w in [*dags, *argos]}
    monitor = ClusterMonitor(api, namespace, names)
    metrics, health = free_port(), free_port()
    flags = ("--argo", "--status-interval", "1", *POOLS[pool](nodes), *extra)
    stack = ExitStack()
    if queues:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        flags += ("--queues", str(queues_file(queues, nodes, folder)))
    airflow = None
    if airflow_tasks:
        dag, answers = layered(airflow_tasks, ARGO_WIDTH, requests=REQUESTS["requests"])
        airflow = stack.enter_context(
            AirflowExecutor(
                api,
                dag,
                {f"t{i}": 1.0 for i in range(airflow_tasks)},
                queued_timeout=AIRFLOW_QUEUED_TIMEOUT,
                answers=answers,
            )
        )
        secret = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "airflow-password"
        secret.write_text(PASSWORD)
        flags += (
            f"--airflow-url={airflow.url}",
            "--airflow-username=admin",
            f"--airflow-password-file={secret}",
            f"--airflow-queued-timeout={AIRFLOW_QUEUED_TIMEOUT:g}",
        )

    def airflow_progress(airflow: AirflowExecutor) -> str:
        tasks = airflow_states(api, airflow, namespace)["tasks"]
        return f"{tasks.get('success', 0)}/{airflow_tasks} tasks succeeded"

    def ended() -> bool:
        """Every workflow and the Airflow run ended."""
        over = airflow is None or api.call(airflow.done, namespace, AIRFLOW_RUN)
        return monitor.finished.is_set() and over

    writes: Counter[str] = Counter()

    def audited(write: Write) -> None:  # (in the API server's loop)
        sub = f"/{write.subresource}" if write.subresource else ""
        agent = write.user_agent.split("/")[0]
        writes[f"{agent} {write.method} {write.resource.plural}{sub}"] += 1

    stack.callback(api.call(api.emulator.audit, audited))
    proc = operator(
        api,
        nodes * 110,
        metrics,
        health,
        log,
        namespace=namespace,
        scheduler=scheduler,
        flags=flags,
        wrap=wrap,
    )
    sampler, pid = Sampler(metrics), proc.pid  # (`pid`: the operator, once it answers)
    try:
        with stack, SimKubelet(api, namespace), ArgoController(api, namespace, settle=0.5), sampler:
            deadline = time.monotonic() + 120
            while not fetch(f"http://127.0.0.1:{health}/healthz"):
                if time.monotonic() > deadline or proc.poll() is not None:
                    sys.exit("Error: the operator did not start (its log: --log)")
                time.sleep(0.1)
            pid = innermost(proc.pid) if wrap else proc.pid
            start, harness = time.monotonic(), time.process_time()
            for body in dags:
                api.create(DWF, body, namespace)
            for body in argos:
                api.create(WORKFLOWS, body, namespace)
            if airflow is not None:
                airflow.trigger(namespace, AIRFLOW_RUN)
            print(f"{len(names)} workflows created in {time.monotonic() - start:.0f} s", flush=True)
            with stderr_progress("workflows ended", len(names)) as bar:
                while not ended():
                    monitor.finished.wait(1)  # (the end is seen within a second)
                    if proc.poll() is not None:
                        sys.exit("Error: the operator exited (its log: --log)")
                    seen = monitor.outcome()
                    done = sum(p in ENDED for p in seen.workflows.values())
                    tasks = "" if airflow is None else f"Airflow {airflow_progress(airflow)}, "
                    bar(
                        done,
                        len(names),
                        f"{tasks}{seen.pods} pods, {sampler.peak_waiting} waiting at most, "
                        f"operator {process(pid)}",
                    )
            elapsed = time.monotonic() - start
            harness = time.process_time() - harness
            sampler.tick()
            figures = {**process(pid), "children_cpu_seconds": children_cpu(pid)}
            states = None if airflow is None else airflow_states(api, airflow, namespace)
    finally:
        monitor.close()
        if proc.poll() is None:  # (a profiler writes its profile once its process ends)
            os.kill(pid, signal.SIGTERM)  # (not innermost now: its replay process is)
            proc.wait(120)
    seen = monitor.outcome()
    lags = monitor.status_lags()
    buckets = histogram(sampler.text, "idlegate_decision_duration_seconds")
    p99 = quantile(buckets, 0.99)
    cpu_p99 = quantile(histogram(sampler.text, CPU_SECONDS), 0.99)
    within = [c for bound, c in buckets if bound <= 0.005]
    return {
        "nodes": nodes,
        "workflows": len(names),
        "argo_steps": argo_steps,
        "airflow_tasks": airflow_tasks,
        "airflow": states,
        "scheduler": scheduler,
        "pool": pool,
        "phases": {p: list(seen.workflows.values()).count(p) for p in set(seen.workflows.values())},
        "pods": seen.pods,
        "pods_created_twice": len(seen.twice) + len(states["requeued"] if states else []),
        "released": seen.released,
        "unschedulable": len(seen.unschedulable),
        "unschedulable_released": len(seen.unschedulable_released),
        "peak_waiting_workflows": sampler.peak_waiting,
        "wall_seconds": round(elapsed, 1),
        "decisions": int(buckets[-1][1]) if buckets else 0,
        "decision_p99_ms": None if p99 is None else round(p99 * 1000, 2),
        "decisions_within_5ms": round(within[-1] / buckets[-1][1], 4) if within else None,
        "decision_cpu_p99_ms": None if cpu_p99 is None else round(cpu_p99 * 1000, 2),
        "decision_buckets": {"wall": buckets, "cpu": histogram(sampler.text, CPU_SECONDS)},
        "forecast_refreshes": refreshes(sampler.text),
        "load_average": round(os.getloadavg()[0], 1),
        "harness_cores": round(harness / elapsed, 2),
        "operator": figures,
        "cpu_ms_per_pod": round(figures["cpu_seconds"] * 1000 / max(seen.pods, 1), 2),
        "writes_per_pod": {k: round(n / max(seen.pods, 1), 3) for k, n in sorted(writes.items())},
        "status_lag_s": {
            "median": round(lags[len(lags) // 2], 2) if lags else None,
            "max": round(lags[-1], 2) if lags else None,
        },
    }


def airflow_states(api: ApiServer, airflow: AirflowExecutor, namespace: str) -> dict[str, Any]:
    """The Airflow run's state, how many of its task instances are in each state, and its
    tasks that had more than one pod."""

    def read() -> dict[str, Any]:
        key = (namespace, AIRFLOW_RUN)
        tis = airflow.instances[key].values()
        twice = [i[2] for i, n in airflow.pods.items() if i[:2] == key and n > 1]
        states = dict(Counter(str(t["state"]) for t in tis))
        return {"run": airflow.runs[key]["state"], "tasks": states, "requeued": twice}

    return api.call(read)


def question_cost(waiting: int, questions: int = 200) -> dict[str, float]:
    """Milliseconds of CPU of one question of a decision, with `waiting` one-task workflows
    of the full size's pods waiting behind 2,000 running on the full size's pool (the state
    machine alone, no operator). Before each question one running task ends, so a stage
    fits: `can_schedule_ms` is `Cluster.can_schedule` saying so and `fair_ms` is `fair`'s
    answer. The answer is launched, the pool is full again, and `nothing_fits_ms` is
    `can_schedule` saying so. Each question follows a change, as the operator's do. The
    means of `questions`, after one unmeasured question of each kind (the first reads
    every workflow), the interpreter's garbage collection off while they run."""
    from idlegate.policy import make_scheduler
    from idlegate.sim.cluster import Cluster
    from idlegate.sim.dag import Dag
    from idlegate.sim.protocol import Decision
    from idlegate.sim.resources import ResourceVector
    from idlegate.sim.spec import parse_workflow

    def job() -> Dag:
        one = {"name": "a", "tasks": 1, "taskDurationSeconds": 1, "resources": REQUESTS["requests"]}
        return Dag.from_spec(parse_workflow({"stages": [one]}))

    total = ResourceVector.parse(f"cpu={8 * NODES_FULL},memory={32 * NODES_FULL}Gi")
    cluster = Cluster(NODES_FULL * 110, resources=total)
    running = []
    for _ in range(2 * NODES_FULL):  # (the pool's CPUs, all taken)
        started = cluster.add_job(job(), 0.0)
        running += cluster.apply(Decision(started.stages[0], 1), 0.0)
    for _ in range(waiting + 1):  # (one for the unmeasured question)
        cluster.add_job(job(), 0.0)
    fair = make_scheduler("fair")
    spent = {"can_schedule_ms": 0.0, "fair_ms": 0.0, "nothing_fits_ms": 0.0}
    gc.collect()
    gc.disable()  # (a collection's pause is not the question's)
    for i in range(questions + 1):  # (the first unmeasured: it reads every workflow)
        now = 1.0 + i
        cluster.task_finished(running.pop().executor, now)
        fits = time.process_time()
        assert cluster.can_schedule()
        asked = time.process_time()
        answer = fair.decide(cluster)
        answered = time.process_time()
        assert isinstance(answer, Decision)
        running += cluster.apply(answer, now)
        full = time.process_time()
        assert not cluster.can_schedule()
        if i:
            spent["can_schedule_ms"] += asked - fits
            spent["fair_ms"] += answered - asked
            spent["nothing_fits_ms"] += time.process_time() - full
    gc.enable()
    return {k: round(v / questions * 1000, 3) for k, v in spent.items()}


def argo_map_cost(steps: int, repeat: int = 3) -> float:
    """Milliseconds of CPU one map of the big Argo Workflow of `steps` steps costs (the
    operator maps it again each time Argo writes its status; the best of `repeat`)."""
    from idlegate.sim.argo import map_workflow

    body = argo_workflow(steps)
    body["metadata"].update(namespace="scale", uid="uid-argo")
    costs = []
    for _ in range(repeat):
        start = time.process_time()
        map_workflow(body)
        costs.append(time.process_time() - start)
    return min(costs) * 1000


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--scale", type=float, default=1.0, help="of the nodes and workflows")
    parser.add_argument("--scheduler", default="fair", help="the operator's --scheduler")
    parser.add_argument(
        "--pool",
        choices=sorted(POOLS),
        default="nodes",
        help="the default pool follows the nodes (--pool-nodes ''), or has their allocatable "
        "as a fixed capacity (--pool-resources)",
    )
    parser.add_argument(
        "--argo-steps",
        type=int,
        help=f"steps of the big Argo Workflow (default: {ARGO_STEPS} at full size, else none)",
    )
    parser.add_argument(
        "--airflow-tasks",
        type=int,
        help=f"tasks of the Airflow run (default: {AIRFLOW_TASKS} at full size, else none)",
    )
    parser.add_argument("--wrap", default="", help="a command the operator runs under")
    parser.add_argument("--log", type=Path, help="keep the operator's output here")
    parser.add_argument("--out", type=Path, help="also write the figures here (JSON)")
    parser.add_argument(
        "--question",
        type=lambda text: [int(n) for n in text.split(",")],
        metavar="WAITING[,WAITING...]",
        help="only time a decision's question (can_schedule and fair's answer, and "
        "can_schedule when nothing fits) with WAITING "
        "workflows waiting on a full pool of the full size's, each count in turn (no operator)",
    )
    parser.add_argument(
        "--argo-map",
        type=int,
        metavar="STEPS",
        help="only time one map of the big Argo Workflow of STEPS steps (no operator)",
    )
    parser.add_argument(
        "--queues",
        type=int,
        metavar="N",
        help="with --question: the questions through an admission of N queues (0: none); "
        "in a run: the default pool has N queues sharing its CPU and memory, the "
        "DagWorkflows spread over them in turn",
    )
    parser.add_argument(
        "--reclaim",
        action="store_true",
        help="with --question and --queues: half the queues borrow the whole pool and the "
        "other half reclaim it, a task stopped at each question (issue 82)",
    )
    parser.add_argument(
        "--against",
        metavar="SRC",
        help="with --queues: the same questions on the package at SRC too (another "
        "checkout's src/, the code before a change), printed beside these",
    )
    parser.add_argument(
        "--forecasts",
        type=float,
        metavar="SECONDS",
        help="run twice, forecasts off then on (--forecast-interval SECONDS), on fresh "
        "clusters, and report both runs' figures side by side",
    )
    parser.add_argument(
        "--forecast-workers",
        choices=WORKERS,
        default="process",
        help="with --forecasts: the operator's --forecast-workers in the run with forecasts",
    )
    parser.add_argument(
        "--refresh",
        type=int,
        metavar="WAITING",
        help="only time one forecast refresh with WAITING workflows waiting (no operator)",
    )
    args = parser.parse_args(argv)
    if args.question is not None and args.queues is not None:
        return queues_report(args.question, args.queues, args.against, args.reclaim)
    if args.refresh is not None:
        cost = refresh_cost(args.refresh, args.scheduler)
        print(
            f"a forecast refresh at {args.refresh} waiting ({args.scheduler}): "
            f"{cost['loop_ms']:.0f} ms of CPU in the event loop (fork, result taken), "
            f"{cost['thread_ms']:.0f} ms in its worker thread (the replays); with a replay "
            f"process, {cost['shipped_ms']:.0f} ms to pickle the fork and unpickle the result"
        )
        return {"refresh": cost}
    if args.argo_map is not None:
        cost = argo_map_cost(args.argo_map)
        print(f"one map of an Argo Workflow of {args.argo_map} steps: {cost:.0f} ms of CPU")
        return {"argo_map_ms": cost}
    if args.question is not None:
        costs = {n: question_cost(n) for n in args.question}
        for n, each in costs.items():
            print(
                f"{n} waiting: a stage fits: can_schedule {each['can_schedule_ms']:.3f} ms "
                f"of CPU, fair's answer {each['fair_ms']:.3f} ms; nothing fits: "
                f"can_schedule {each['nothing_fits_ms']:.3f} ms"
            )
        return {"question": costs}
    if not WORKFLOW_CRD.exists():
        sys.exit(f"Error: Argo's Workflow CRD not found at {WORKFLOW_CRD.resolve()}")
    nodes = round(NODES_FULL * args.scale)
    full = args.scale >= 1
    steps = args.argo_steps if args.argo_steps is not None else ARGO_STEPS * full
    tasks = args.airflow_tasks if args.airflow_tasks is not None else AIRFLOW_TASKS * full
    runs = (
        {"": ()}
        if args.forecasts is None
        else {
            "forecasts_off": (),
            "forecasts_on": (
                *("--forecast-interval", f"{args.forecasts:g}"),
                *("--forecast-workers", args.forecast_workers),
            ),
        }
    )
    reports = {}
    for name, extra in runs.items():
        with cluster(nodes) as (api, namespace), tempfile.NamedTemporaryFile("w+") as tmp:
            log = args.log.open("w") if args.log else tmp
            reports[name] = run(
                args.scale,
                args.scheduler,
                args.pool,
                steps,
                tasks,
                shlex.split(args.wrap),
                log,
                api,
                namespace,
                nodes,
                args.queues or 0,
                extra,
            )
            api.assert_no_internal_errors()
    if args.forecasts is not None:
        for name, r in reports.items():
            print(
                f"{name}: decision p99 {r['decision_p99_ms']} ms (CPU {r['decision_cpu_p99_ms']} "
                f"ms), {r['peak_waiting_workflows']} waiting at most, refreshes "
                f"{r['forecast_refreshes']}"
            )
        report = {**reports["forecasts_on"], "forecasts": reports}
    else:
        report = reports[""]
    print(json.dumps(report))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    broken = report["phases"] != {"Succeeded": report["workflows"]}
    airflow = report["airflow"]
    if airflow is not None and (airflow["run"], airflow["tasks"]) != (
        "success",
        {"success": tasks},
    ):
        broken = True
    if broken or report["pods_created_twice"] or report["unschedulable_released"]:
        sys.exit(
            "a workflow, the Airflow run or one of its tasks did not succeed, a pod was created "
            "twice or a released pod was found Unschedulable"
        )
    return report


if __name__ == "__main__":
    main()
