"""A real Airflow 3 on the test API server (issue 43): N runs of each e2e DAG, measured.

Brings up the test API server of tests/k8s, PostgreSQL, Airflow's API server, scheduler
(KubernetesExecutor) and DAG processor, the kubelet stand-in that runs Airflow's pods as
processes of this machine (tests/k8s/airflow_stack.py) and, with --operator, the idlegate
operator on the same namespace (extra flags after --operator, e.g. ``--operator
--scheduler=default``) with --workflows DagWorkflows beside the DAG runs. Triggers --runs
runs of each DAG of --dags at once, waits for all of them, stops every process, and prints:

* runs succeeded;
* task instances failed, and how many for a pending timeout (Airflow's
  ``task_queued_timeout``: requeued, then failed; its ``[scheduler]`` setting can be given
  with --setting);
* pods created, and task tries with a pod created twice;
* the most Airflow pods running at once (and all pods of the namespace);
* deaths of the executor's pod watcher in the scheduler's log;
* with --operator: the operator's pool, which Airflow's pods share with the DagWorkflows'
  (Airflow creates them gated, its worker pod template, and the operator releases them;
  --ungated leaves them out of it), and the operator killed -9 once the first Airflow pod
  runs and started again (--no-kill: not);
* the processes left after the stop (an orphan check over /proc).

    IDLEGATE_AIRFLOW_PYTHON=/path/to/airflow-venv/bin/python \\
        python benchmarks/airflow_e2e.py --runs 3 [--operator] [--keep DIR]

(run from the repository root: it imports the harness from tests/). Without
IDLEGATE_AIRFLOW_PYTHON it installs Airflow into .venv-airflow first (tests/data/airflow/
requirements-e2e.txt). Exits 1 if a run did not succeed or a process outlived it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # (the harness is in tests/)

from tests.airflow_e2e import AirflowE2E
from tests.k8s.airflow_stack import E2E_DAGS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each DAG, all at once")
    parser.add_argument("--dags", nargs="+", default=list(E2E_DAGS))
    parser.add_argument(
        "--operator",
        nargs=argparse.REMAINDER,
        default=None,
        help="start idlegate operator on the namespace too; what follows goes to its command",
    )
    parser.add_argument("--pool", type=int, default=4, help="the operator's pool size")
    parser.add_argument("--workflows", type=int, default=2, help="DagWorkflows, with --operator")
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="AIRFLOW__SECTION__KEY=VALUE",
        help="an Airflow setting of the run (repeatable)",
    )
    parser.add_argument(
        "--ungated", action="store_true", help="with --operator: Airflow's pods not gated"
    )
    parser.add_argument(
        "--no-kill", action="store_true", help="with --operator: no kill -9 of the operator"
    )
    parser.add_argument("--keep", type=Path, help="keep the logs in this directory")
    args = parser.parse_args(argv)
    settings = dict(s.split("=", 1) for s in args.setting)
    directory = args.keep or Path(tempfile.mkdtemp(prefix="airflow-e2e-"))
    directory.mkdir(parents=True, exist_ok=True)
    scenario = AirflowE2E(
        directory,
        settings=settings,
        operator_args=args.operator,
        pool=args.pool,
        workflows=args.workflows,
        gate_airflow=args.operator is not None and not args.ungated,
        kill_operator=args.operator is not None and not args.no_kill,
    )
    try:
        with scenario as e2e:
            outcome = e2e.run({dag: args.runs for dag in args.dags})
        outcome.leftovers = scenario.leftovers()
    finally:
        if args.keep is None:
            shutil.rmtree(directory, ignore_errors=True)
    print("\n".join(outcome.lines()))
    ok = outcome.runs_succeeded == outcome.runs and not outcome.leftovers
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
