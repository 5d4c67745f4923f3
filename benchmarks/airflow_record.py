"""Re-record the answers of a real Airflow that idlegate's Airflow tests replay (tests/data/airflow).

    # Airflow 3 with its example DAGs (load_examples), its API server at --url;
    # docs/airflow.md, "Re-recording the tests' answers", sets one up in a virtualenv
    AIRFLOW_PASSWORD=admin python benchmarks/airflow_record.py --url http://localhost:18080 \
        --username admin --trigger 3

With --trigger N, each DAG of --dags is unpaused and run N times first, and the script
waits for the runs to finish. Then it writes, under --out:

* ``session-<dag_id>.json``: every request `AirflowClient.dag_export` made for that DAG
  (the token exchange first) and Airflow's answer, status and JSON body as they came,
  the access token replaced by ``recorded-token``;
* ``errors.json``: Airflow's answers to a wrong password, a token it did not issue and
  a DAG it does not have;
* ``examples.json``: every DAG of the example set, its export without runs (details and
  tasks; of each, only the fields idlegate reads, to keep the file small), a JSON list
  `idlegate lint` reads as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.parse
from pathlib import Path
from typing import Any

from idlegate.flags import description
from idlegate.integrations.airflow import (
    AirflowAuth,
    AirflowClient,
    AirflowError,
    HttpAnswer,
    Transport,
    urllib_transport,
)

DAGS = (
    "example_dynamic_task_mapping",
    "example_task_group",
    "example_bash_operator",
    "example_branch_operator",
    "tutorial",
    "example_task_mapping_second_order",
    "example_setup_teardown_taskflow",
    "example_time_delta_sensor_async",
)
"""The DAGs whose runs are recorded: mapped tasks, task groups, branches, skips, retries,
setup and teardown, a deferrable sensor."""
TOKEN = "recorded-token"
DAG_FIELDS = ("dag_id", "max_active_tasks", "relative_fileloc", "bundle_name")
TASK_FIELDS = (
    "task_id",
    "operator_name",
    "class_ref",
    "downstream_task_ids",
    "is_mapped",
    "trigger_rule",
    "retries",
    "priority_weight",
    "weight_rule",
)
OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "airflow"


class Recorder:
    """A transport that records every request's answer by ``METHOD /path?query``."""

    def __init__(self, base: str, inner: Transport) -> None:
        self.base = base.rstrip("/")
        self.inner = inner
        self.answers: dict[str, Any] = {}

    def __call__(self, method: str, url: str, body: bytes | None, headers: Any) -> HttpAnswer:
        answer = self.inner(method, url, body, headers)
        key = f"{method} {url[len(self.base) :]}"
        try:
            found = json.loads(answer.body)
        except json.JSONDecodeError:
            found = answer.body.decode(errors="replace")
        if isinstance(found, dict) and "access_token" in found:
            found = {**found, "access_token": TOKEN}
        self.answers[key] = {"status": answer.status, "body": found}
        return answer


def trigger(client: AirflowClient, dags: list[str], runs: int) -> None:
    """Unpause each DAG, run it `runs` times and wait until no run of them is unfinished."""
    send = client.transport
    headers = {**client.headers(), "Content-Type": "application/json"}
    for dag in dags:
        url = f"{client.url}/api/{client.api}/dags/{urllib.parse.quote(dag, safe='')}"
        send("PATCH", url, json.dumps({"is_paused": False}).encode(), headers)
        for _ in range(runs):
            send("POST", f"{url}/dagRuns", json.dumps({"logical_date": None}).encode(), headers)
    while True:
        waiting = [
            dag
            for dag in dags
            for run in client.pages(f"dags/{dag}/dagRuns", "dag_runs", {})
            if run.get("state") in ("queued", "running")
        ]
        if not waiting:
            return
        print(f"waiting for {len(waiting)} run(s): {', '.join(sorted(set(waiting)))}")
        time.sleep(10)


def trimmed(export: dict[str, Any]) -> dict[str, Any]:
    """An export without runs, each object cut to the fields idlegate reads."""
    return {
        "dag": {k: export["dag"].get(k) for k in DAG_FIELDS},
        "tasks": [{k: t.get(k) for k in TASK_FIELDS} for t in export["tasks"]],
    }


def lines(found: dict[str, Any]) -> str:
    """`found` as JSON, one key and its value per line (small, and diffs by answer)."""
    items = [f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(found.items())]
    return "{\n" + ",\n".join(items) + "\n}\n"


def errors(url: str, username: str) -> dict[str, Any]:
    """Airflow's answers to a wrong password, a token it did not issue, an unknown DAG."""
    send = urllib_transport()
    out = {}
    wrong = json.dumps({"username": username, "password": "not-the-password"}).encode()
    answer = send("POST", f"{url}/auth/token", wrong, {"Content-Type": "application/json"})
    out["wrong-password"] = {"status": answer.status, "body": json.loads(answer.body)}
    bad = {"Authorization": "Bearer not-a-token-airflow-issued"}
    answer = send("GET", f"{url}/api/v2/dags/tutorial/details", None, bad)
    out["bad-token"] = {"status": answer.status, "body": json.loads(answer.body)}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--url", required=True)
    parser.add_argument("--username", default="admin")
    parser.add_argument("--dags", nargs="+", default=list(DAGS))
    parser.add_argument("--trigger", type=int, default=0, help="runs of each DAG to make first")
    parser.add_argument("--runs", type=int, default=3, help="finished runs recorded per DAG")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    auth = AirflowAuth(username=args.username, password=os.environ.get("AIRFLOW_PASSWORD"))
    args.out.mkdir(parents=True, exist_ok=True)
    if args.trigger:
        trigger(AirflowClient(args.url, auth), args.dags, args.trigger)
    for dag in args.dags:
        recorder = Recorder(args.url, urllib_transport())
        AirflowClient(args.url, auth, transport=recorder).dag_export(dag, runs=args.runs)
        path = args.out / f"session-{dag}.json"
        path.write_text(lines(recorder.answers))
        print(f"{path}: {len(recorder.answers)} answers")
    client = AirflowClient(args.url, auth)
    found = errors(client.url, args.username)
    answer = client.transport(
        "GET", f"{client.url}/api/v2/dags/no_such_dag/details", None, client.headers()
    )
    found["unknown-dag"] = {"status": answer.status, "body": json.loads(answer.body)}
    (args.out / "errors.json").write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    examples = []
    for dag in client.pages("dags", "dags", {}):
        dag_id = dag["dag_id"]
        if dag.get("is_stale"):  # no longer in a DAG file (an asset example's leftover)
            continue
        try:
            details = client.get(f"dags/{dag_id}/details", what=f"DAG {dag_id!r}")
        except AirflowError as exc:  # listed, yet not served (Airflow 3.1.3 does so for one)
            print(f"left out of the example set: {exc}")
            continue
        tasks = client.get(f"dags/{dag_id}/tasks")["tasks"]
        examples.append(trimmed({"dag": details, "tasks": tasks}))
    path = args.out / "examples.json"
    path.write_text("[\n" + ",\n".join(json.dumps(e, sort_keys=True) for e in examples) + "\n]\n")
    print(f"{path}: {len(examples)} DAGs")


if __name__ == "__main__":
    main()
