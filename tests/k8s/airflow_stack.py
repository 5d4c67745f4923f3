"""A real Airflow 3 against the test API server: PostgreSQL, Airflow's API server, scheduler
(with the KubernetesExecutor of apache-airflow-providers-cncf-kubernetes) and DAG processor,
each a process group of this test's, all stopped when the block ends.

    with Postgres() as db, AirflowStack(tmp, api.kubeconfig, "airflow", db.url) as airflow:
        with CommandKubelet(api, "airflow", python=airflow.python, env=airflow.env, ...):
            airflow.trigger("idlegate_e2e_diamond")

* :func:`airflow_python`: Airflow's interpreter, from ``IDLEGATE_AIRFLOW_PYTHON``, else
  ``.venv-airflow`` of the repository, which it installs when missing (Airflow and its
  provider at the versions pinned in tests/data/airflow/requirements-e2e.txt; never into
  the project's own virtualenv, whose dependencies Airflow's would clash with);
* :class:`Postgres`: a throwaway cluster of the machine's PostgreSQL (``initdb``,
  ``pg_ctl``; run as the ``postgres`` user when this process is root), on a free port;
* :class:`AirflowStack`: Airflow configured by environment (:attr:`AirflowStack.env`, which
  the kubelet stand-in gives the task commands too), the DAGs of tests/data/airflow/dags,
  the executor's pods in one namespace of the API server its kubeconfig names;
* :func:`leftovers`: the processes of a stack or cluster still alive (an orphan check).

Airflow's pods carry the labels ``airflow-worker``, ``dag_id``, ``task_id``, ``run_id``
(sanitised), ``try_number``, ``kubernetes_executor=True`` and the same keys unsanitised as
annotations; a task's state comes from the execution API, not from its pod.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from idlegate.errors import IdlegateError
from idlegate.integrations.airflow import AirflowAuth, AirflowClient, AirflowError

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "tests" / "data" / "airflow" / "dags"
REQUIREMENTS = REPO / "tests" / "data" / "airflow" / "requirements-e2e.txt"
PYTHON_ENV = "IDLEGATE_AIRFLOW_PYTHON"
"""The variable that names Airflow's interpreter (a virtualenv with Airflow 3 and
apache-airflow-providers-cncf-kubernetes and psycopg2)."""
DEFAULT_VENV = REPO / ".venv-airflow"
PG_BIN_ENV = "IDLEGATE_PG_BIN"
"""The variable that names the directory of PostgreSQL's initdb and pg_ctl."""
E2E_DAGS = ("idlegate_e2e_diamond", "idlegate_e2e_mapped", "idlegate_e2e_group")
BRANCH_DAG, CHANGING_DAG = "idlegate_e2e_branch", "idlegate_e2e_changing"
"""A branch's skipped side; a DAG changed during its run (tests/airflow_e2e.py)."""
SIZED_DAG = "idlegate_e2e_sized"
"""Tasks whose pods request mixed sizes (tests/test_airflow_e2e_nodes.py)."""
USER, PASSWORD = "admin", "admin"
START_SECONDS = 300.0
"""The most a process gets to come up (Airflow's first start on two loaded cores is slow):
a safety net that turns a hang into an error, never a bound on speed."""


class HarnessError(IdlegateError):
    """The real-Airflow harness cannot start: what is missing, and how to provide it."""


def airflow_python() -> str:
    """Airflow's interpreter: ``$IDLEGATE_AIRFLOW_PYTHON``, else ``.venv-airflow``'s,
    installed first if it is not yet (a few minutes, once)."""
    configured = os.environ.get(PYTHON_ENV)
    if configured:
        if not os.access(configured, os.X_OK):
            raise HarnessError(
                f"{PYTHON_ENV}={configured} is no executable; name the python of a virtualenv "
                f"with Airflow (pip install -r {REQUIREMENTS}), or unset it to have "
                f"{DEFAULT_VENV} installed"
            )
        return str(Path(configured).absolute())  # the services run in their own directory
    python = DEFAULT_VENV / "bin" / "python"
    marker = DEFAULT_VENV / ".installed"
    if not marker.exists() or marker.stat().st_mtime < REQUIREMENTS.stat().st_mtime:
        subprocess.run([sys.executable, "-m", "venv", str(DEFAULT_VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, "-r", str(REQUIREMENTS)], check=True)
        marker.touch()
    return str(python)


def pg_bin() -> Path:
    """The directory of PostgreSQL's server programs."""
    configured = os.environ.get(PG_BIN_ENV)
    candidates = [Path(configured)] if configured else []
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    if shutil.which("initdb"):
        candidates.append(Path(shutil.which("initdb") or "").parent)
    for directory in candidates:
        if (directory / "initdb").exists() and (directory / "pg_ctl").exists():
            return directory
    raise HarnessError(
        "PostgreSQL's initdb and pg_ctl are not found; install PostgreSQL "
        f"(apt-get install postgresql) or set {PG_BIN_ENV} to the directory that holds them"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """A PostgreSQL cluster in a fresh directory, with a database ``airflow`` (:attr:`url`),
    from enter to exit (``pg_ctl stop -m fast``, then the directory is removed)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.bin = pg_bin()
        # its own directory, not the test's: the postgres user must be able to enter it
        self.directory = Path(tempfile.mkdtemp(prefix="idlegate-pg-"))
        self.data = self.directory / "data"
        self.url = f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/airflow"
        self._user = "postgres" if os.geteuid() == 0 else None

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), *args]
        result = subprocess.run(
            command, user=self._user, capture_output=True, text=True, timeout=START_SECONDS
        )
        if result.returncode != 0:
            raise HarnessError(f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}")

    def __enter__(self) -> Self:
        self.directory.chmod(0o755)
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        log = self.directory / "postgres.log"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(log), "-o", options, "-w", "start")
        try:
            self._run(
                "createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "airflow"
            )
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(HarnessError):
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.directory, ignore_errors=True)


class AirflowStack:
    """Airflow's API server, scheduler and DAG processor with the KubernetesExecutor, its
    pods in `namespace` of the API server `kubeconfig` names, its metadata in `db_url`
    (see the module docstring). `settings` add ``AIRFLOW__*`` variables or replace ours."""

    SERVICES = ("api-server", "scheduler", "dag-processor")

    def __init__(
        self,
        directory: Path,
        kubeconfig: Path,
        namespace: str,
        db_url: str,
        *,
        python: str | None = None,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.home = self.directory / "airflow-home"
        self.dags = self.directory / "dags"
        """A copy of tests/data/airflow/dags, which a scenario may change (`change_dag`)."""
        self.python = python or airflow_python()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.namespace = namespace
        self.env = self._environment(kubeconfig, db_url, settings or {})
        """The environment of every Airflow process, the task commands' included."""
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._client: AirflowClient | None = None

    def _environment(
        self, kubeconfig: Path, db_url: str, settings: Mapping[str, str]
    ) -> dict[str, str]:
        keep = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")
        env = {k: v for k, v in os.environ.items() if k in keep}
        passwords = self.home / "passwords.json"
        ours = {
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__EXECUTOR": "KubernetesExecutor",
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__PARALLELISM": "8",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__CORE__AUTH_MANAGER": (
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
            ),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API__SECRET_KEY": "idlegate-e2e-only",
            "AIRFLOW__API_AUTH__JWT_SECRET": "idlegate-e2e-only-not-a-secret",
            "AIRFLOW__API_AUTH__JWT_ISSUER": "airflow",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "600",
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            "AIRFLOW__KUBERNETES_EXECUTOR__NAMESPACE": self.namespace,
            "AIRFLOW__KUBERNETES_EXECUTOR__IN_CLUSTER": "False",
            "AIRFLOW__KUBERNETES_EXECUTOR__CONFIG_FILE": str(kubeconfig),
            "AIRFLOW__KUBERNETES_EXECUTOR__WORKER_CONTAINER_REPOSITORY": "apache/airflow",
            "AIRFLOW__KUBERNETES_EXECUTOR__WORKER_CONTAINER_TAG": "3.1.3",
            "AIRFLOW__KUBERNETES_EXECUTOR__WORKER_PODS_CREATION_BATCH_SIZE": "8",
            "AIRFLOW__KUBERNETES_EXECUTOR__DELETE_WORKER_PODS": "True",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.home / "logs"),
        }
        return {**env, **ours, **settings}

    # -- start and stop ---------------------------------------------------------------------

    def __enter__(self) -> Self:
        self.home.mkdir(parents=True, exist_ok=True)
        shutil.copytree(DAGS, self.dags, ignore=shutil.ignore_patterns("__pycache__"))
        (self.home / "passwords.json").write_text(json.dumps({USER: PASSWORD}))
        try:
            self._airflow("migrate", ["db", "migrate"]).wait(START_SECONDS)
            if self.processes.pop("migrate").returncode != 0:
                raise HarnessError(f"airflow db migrate failed:\n{self.tail('migrate')}")
            for service in self.SERVICES:
                self._airflow(service, [service])
            self._wait(self._serving, "Airflow's API server to answer")
            self._wait(self._parsed, f"Airflow to parse the DAGs {', '.join(E2E_DAGS)}")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        """SIGTERM each service's process group (the scheduler stops its executor and the
        watcher it forked), then SIGKILL whatever of the group is left."""
        for process in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(60)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        self.processes.clear()

    def _airflow(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        with (self.home / f"{name}.log").open("wb") as out:
            process = subprocess.Popen(
                [self.python, "-m", "airflow", *args],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.home,
            )
        self.processes[name] = process
        return process

    def tail(self, name: str, chars: int = 3000) -> str:
        """The end of a service's log (``migrate``, ``api-server``, ``scheduler``, ...)."""
        path = self.home / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def _wait(self, ready: Any, what: str) -> None:
        deadline = time.monotonic() + START_SECONDS
        while not ready():
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise HarnessError(
                        f"airflow {name} exited while waiting for {what}:\n{self.tail(name)}"
                    )
            if time.monotonic() > deadline:
                raise HarnessError(f"no {what} after {START_SECONDS} s")
            time.sleep(0.5)

    def _serving(self) -> bool:
        try:
            self.client.get("monitor/health")
        except (AirflowError, OSError):
            self._client = None  # the token exchange may have failed before it listened
            return False
        return True

    def _parsed(self) -> bool:
        found = {dag["dag_id"] for dag in self.client.pages("dags", "dags", {})}
        return {*E2E_DAGS, BRANCH_DAG, CHANGING_DAG, SIZED_DAG} <= found

    # -- the REST API -----------------------------------------------------------------------

    @property
    def client(self) -> AirflowClient:
        """idlegate's own Airflow client, logged in to this Airflow."""
        if self._client is None:
            self._client = AirflowClient(self.url, AirflowAuth(username=USER, password=PASSWORD))
        return self._client

    def _send(self, method: str, path: str, body: Any) -> Any:
        client = self.client
        headers = {**client.headers(), "Content-Type": "application/json"}
        url = f"{client.url}/api/{client.api}/{path}"
        answer = client.transport(method, url, json.dumps(body).encode(), headers)
        if answer.status >= 300:
            raise HarnessError(f"{method} {path}: {answer.status} {answer.body[:500]!r}")
        return json.loads(answer.body or b"null")

    def change_dag(self, dag_id: str, old: str, new: str, task: str) -> None:
        """Replace `old` by `new` in the file of `dag_id` (the copy), have Airflow parse it
        again (``PUT /parseDagFile``), wait until its tasks have `task`, and make the
        marker ``dag-changed`` in ``AIRFLOW_HOME`` (what the DAG's run waits for)."""
        path = self.dags / f"{dag_id}.py"
        path.write_text(path.read_text().replace(old, new))
        token = self.client.dag_details(dag_id)["file_token"]
        self._send("PUT", f"parseDagFile/{token}", {})
        tasks = lambda: {t["task_id"] for t in self.client.dag_tasks(dag_id)}  # noqa: E731
        self._wait(lambda: task in tasks(), f"{dag_id} parsed again, with task {task}")
        (self.home / "dag-changed").touch()

    def trigger(self, dag_id: str) -> str:
        """Unpause `dag_id` and start a run of it; its run_id."""
        self._send("PATCH", f"dags/{dag_id}", {"is_paused": False})
        return self._send("POST", f"dags/{dag_id}/dagRuns", {"logical_date": None})["dag_run_id"]

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return list(self.client.pages(f"dags/{dag_id}/dagRuns", "dag_runs", {}))

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        path = f"dags/{dag_id}/dagRuns/{run_id}/taskInstances"
        return list(self.client.pages(path, "task_instances", {}))


def leftovers(*markers: str) -> list[str]:
    """``pid command`` of every live process whose environment or command line holds one of
    `markers` (an AIRFLOW_HOME, a PostgreSQL data directory): what a clean stop leaves none of."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            stat = (proc / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue  # a zombie: ended, its parent not yet told
            seen = (proc / "environ").read_bytes() + (proc / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if any(marker.encode() in seen for marker in markers):
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{proc.name} {command[:160]}")
    return found
