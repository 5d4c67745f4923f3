"""A real Airflow 3 on the test API server (issue 43): N runs of each e2e DAG, measured.

Brings up the test API server of tests/k8s, PostgreSQL, Airflow's API server, scheduler
(KubernetesExecutor) and DAG processor, the kubelet stand-in that runs Airflow's pods as
processes of this machine (tests/k8s/airflow_stack.py) and, with --operator, the idlegate
operator on the same namespace (a flag of its own each with --operator-arg, written with
``=``: ``--operator --operator-arg=--scheduler=default``) with --workflows DagWorkflows and
--argo Argo Workflows (run by the stand-in for Argo's controller of
tests/k8s/argo_controller.py, its CRD from
../shared/data/argo) beside the DAG runs, created once the first Airflow pod runs.
Triggers --runs runs of each DAG of --dags at once, waits for all of them and the
workflows, stops every process, and prints:

* runs succeeded;
* task instances failed, and how many for a pending timeout (Airflow's
  ``task_queued_timeout``: requeued, then failed; its ``[scheduler]`` setting can be given
  with --setting);
* pods created, and task tries with a pod created twice;
* the most Airflow pods running at once (and all pods of the namespace, and the most of
  each kind);
* deaths of the executor's pod watcher in the scheduler's log;
* with --operator: the operator's pool, which Airflow's pods share with the DagWorkflows'
  and Argo's (Airflow creates them gated, its worker pod template, and the operator
  releases them; --ungated leaves them out of it), the operator killed -9 once each kind
  has a pod not ended and started again (--no-kill: not), and what of each kind had not
  ended at the kill; the DagWorkflows' and Argo Workflows' phases, Argo's pods created
  and Argo nodes with a pod created twice;
* with --operator, the longest an Airflow pod waited at the gate, the pods still gated at
  the end and the operator's Warnings on Airflow's pods by reason; --flaky DAG has a proxy
  answer 503 to the operator's first read of each run of DAG, --change adds a run of a DAG
  changed while it runs (its task states printed), and --dags may add idlegate_e2e_branch
  (a branch whose skipped side the join must not wait for);
* the processes left after the stop (an orphan check over /proc).

    IDLEGATE_AIRFLOW_PYTHON=.venv-airflow/bin/python \\
        .venv/bin/python benchmarks/airflow_e2e.py --runs 3 [--operator] [--keep DIR]

(run from the repository root: it imports the harness from tests/). Without
IDLEGATE_AIRFLOW_PYTHON it installs Airflow into .venv-airflow first (tests/data/airflow/
requirements-e2e.txt). Exits 1 if a run or workflow did not succeed, the pool bound did
not hold, or a process outlived it; 2 if Argo's CRD is absent (--argo 0 runs without it).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from idlegate.flags import description

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # (the harness is in tests/)

from tests.airflow_e2e import AirflowE2E
from tests.argo_data import WORKFLOW_CRD
from tests.k8s.airflow_stack import BRANCH_DAG, CHANGING_DAG, E2E_DAGS


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line's options; `operator_args` is the operator's extra flags (a list,
    possibly empty) with --operator, else None."""
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--runs", type=int, default=3, help="runs of each DAG, all at once")
    parser.add_argument(
        "--dags", nargs="+", default=list(E2E_DAGS), help=f"e.g. {' '.join(E2E_DAGS)} {BRANCH_DAG}"
    )
    parser.add_argument(
        "--operator", action="store_true", help="start idlegate operator on the namespace too"
    )
    # one flag per option, never "the rest of the line": that swallowed this script's own
    # options given after --operator (--argo 0 went to the operator)
    parser.add_argument(
        "--operator-arg",
        action="append",
        default=[],
        metavar="FLAG",
        help="with --operator: a flag of the operator's command, joined by '=' "
        "(--operator-arg=--scheduler=default; repeatable)",
    )
    parser.add_argument("--pool", type=int, default=4, help="the operator's pool size")
    parser.add_argument("--workflows", type=int, default=2, help="DagWorkflows, with --operator")
    parser.add_argument("--argo", type=int, default=3, help="Argo Workflows, with --operator")
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
    parser.add_argument(
        "--flaky",
        metavar="DAG",
        help="with --operator: the operator's first read of each run of DAG is answered 503",
    )
    parser.add_argument(
        "--change",
        action="store_true",
        help=f"one run of {CHANGING_DAG} too, its DAG changed while it runs (c replaced by e)",
    )
    parser.add_argument("--keep", type=Path, help="keep the logs in this directory")
    args = parser.parse_args(argv)
    if args.flaky and not args.operator:
        parser.error("--flaky fails the operator's reads, so it needs --operator; add it")
    if args.operator_arg and not args.operator:
        parser.error("--operator-arg gives the operator a flag, so it needs --operator; add it")
    args.operator_args = args.operator_arg if args.operator else None
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    settings = dict(s.split("=", 1) for s in args.setting)
    argo = args.argo if args.operator else 0
    if argo and not WORKFLOW_CRD.exists():
        print(
            f"Argo's Workflow CRD is not at {WORKFLOW_CRD.resolve()} (../shared/data is "
            "absent): provide it, or run with --argo 0",
            file=sys.stderr,
        )
        return 2
    directory = args.keep or Path(tempfile.mkdtemp(prefix="airflow-e2e-"))
    directory.mkdir(parents=True, exist_ok=True)
    scenario = AirflowE2E(
        directory,
        settings=settings,
        operator_args=args.operator_args,
        pool=args.pool,
        workflows=args.workflows,
        argo=argo,
        gate_airflow=args.operator and not args.ungated,
        kill_operator=args.operator and not args.no_kill,
        flaky=args.flaky,
        change=args.change,
    )
    runs = {dag: args.runs for dag in args.dags} | ({CHANGING_DAG: 1} if args.change else {})
    try:
        with scenario as e2e:
            outcome = e2e.run(runs)
        outcome.leftovers = scenario.leftovers()
    finally:
        if args.keep is None:
            shutil.rmtree(directory, ignore_errors=True)
    print("\n".join(outcome.lines()))
    beside = [*outcome.workflows.values(), *outcome.argo_workflows.values()]
    bound = not outcome.gated or outcome.max_running_all <= args.pool
    ok = outcome.runs_succeeded == outcome.runs and bound and not outcome.leftovers
    ok = ok and not outcome.still_gated
    ok = ok and all(p == "Succeeded" for p in beside)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
