"""benchmarks/kueue_vs_idlegate.py's scenario in idlegate's simulator, beside the live runs:
the same arrivals as a history file (docs/workloads.md, ``-w file``: each workflow at its
time, in its team's queue, its tasks' CPU and their one duration), the same queues as a
queues file (docs/queues.md) and the same nodes (``--nodes 3 --resources cpu=8``), run by
``idlegate simulate`` under idlegate's policy and under the simulator's Kueue-like
baseline (``admission?mode=kueue:fifo``: each workflow admitted whole, BestEffortFIFO;
with reclaim, ``admission?victims=kueue:fifo``: idlegate's queues stopping whole workflows,
newest admitted first, as Kueue chooses its victims). What the simulator leaves out (every
controller's latency, the Job controller, the DAG driver) is what the live rows add.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from benchmarks.kueue_scenario import BORROW_CPU, NODES, NOMINAL_CPU, POOL_PODS, TEAMS, Arrival

KUEUE_LIKE = {False: "admission?mode=kueue:fifo", True: "admission?victims=kueue:fifo"}
"""The simulator's Kueue-like baseline, reclaim off and on (docs/queues.md)."""


def history(found: list[Arrival]) -> list[dict[str, Any]]:
    """The arrivals as a history file's workflows (one name space: ``<team>-<name>``)."""
    out = []
    for a in found:
        requests = {"requests": {"cpu": a.shape.cpu}}
        container = {"name": "task", "image": "busybox", "resources": requests}
        template = {"spec": {"containers": [container]}}
        stages = [
            {
                "name": name,
                "tasks": tasks,
                "taskDurationSeconds": a.shape.seconds,
                "measuredDurationSeconds": [a.shape.seconds],
                "dependsOn": list(deps),
                "template": template,
            }
            for name, tasks, deps in a.shape.stages
        ]
        out.append({"name": f"{a.team}-{a.name}", "submitTime": a.at, "queueName": a.team, "stages": stages})  # fmt: skip
    return out


def queues(reclaim: bool) -> list[dict[str, Any]]:
    """The scenario's queues as a queues file."""
    return [
        {
            "name": team,
            "nominal": {"cpu": NOMINAL_CPU},
            "borrowingLimit": {"cpu": BORROW_CPU},
            "preemption": {"reclaim": "Any" if reclaim else "Never"},
        }
        for team in TEAMS
    ]


def simulate(found: list[Arrival], reclaim: bool, spec: str, directory: Path) -> dict[str, Any]:
    """``idlegate simulate --json`` of the arrivals under `spec`, its files written in
    `directory`: its figures."""
    directory.mkdir(parents=True, exist_ok=True)
    workload, queue_file = directory / "history.yaml", directory / "queues.yaml"
    workload.write_text(yaml.safe_dump(history(found), sort_keys=False))
    queue_file.write_text(yaml.safe_dump(queues(reclaim), sort_keys=False))
    command = [
        sys.executable, "-m", "idlegate", "simulate", "-w", "file", "--file", str(workload),
        "--queues", str(queue_file), "-k", str(POOL_PODS), "--nodes", str(NODES.count),
        "--resources", f"cpu={NODES.cpu}", "-s", spec, "--json",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the simulator refused {spec}: {done.stderr.strip()[-500:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def team_jcts(result: dict[str, Any]) -> dict[str, float]:
    """Each team's mean JCT in a simulation's figures."""
    return {q["queue"]: q["mean_jct"] for q in result.get("queues") or [] if q["workflows"]}
