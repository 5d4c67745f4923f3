"""What the live benchmarks share: the test API server set up for a pool, the real operator in
a process of its own on a faster clock, and waits on what the API server saw.

benchmarks/live_pool.py (issue 79's scenario) and benchmarks/live_forecast.py (issue 80's
forecasts) run the same way: the test API server of tests/k8s with its CRDs, the teams'
namespaces (labelled for a pool's `namespaceSelector`) and Nodes if the pool follows them;
its simulated kubelets run pods `speed` times faster than the wall; ``idlegate operator``
(any checkout's: `src`) runs in a process of its own (benchmarks/scaled_operator.py) on a
clock `speed` times the wall's pace, from `anchor`; a :class:`~benchmarks.live_figures.
Recorder` says when the operator built the pool and when workflows ended.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.live_figures import Recorder
from benchmarks.operator_burst import fetch, free_port
from idlegate.api.crd import KINDS, render_crd
from idlegate.api.kinds import GROUP, POOL_PLURAL, VERSION
from idlegate.errors import IdlegateError
from idlegate.flags import missing_extra, one_line

ROOT = Path(__file__).resolve().parents[1]
POOLS = f"{GROUP}/{VERSION}/{POOL_PLURAL}"
HANG = 900.0
"""Wall seconds a phase may take before it is taken for a hang."""
LABEL = "live-pool"
"""The label of the benchmarks' namespaces (their pools select it)."""


def harness_missing(exc: ModuleNotFoundError, script: str) -> str:
    """The sentence a live benchmark run as `script` (``python -m <script>``) exits with when
    the test API server cannot be imported: it lives in tests/ (run from the repository root)
    and needs the dev extra (kmock), the operator its own extra. `exc` is re-raised when it
    is neither."""
    if exc.name == "tests":
        return f"Error: run it from the repository root: python -m {script}"
    error = missing_extra(exc)
    if error is None:
        raise exc
    return f"Error: {one_line(error)}"


def prepare(api: Any, namespaces: Sequence[str], nodes: Sequence[dict[str, Any]] = ()) -> None:
    """The API server `api` (a ``tests.k8s.harness.ApiServer``) with idlegate's CRDs, the
    `namespaces` labelled ``live-pool: yes`` and the Node bodies `nodes`."""
    for kind in KINDS:
        api.create("customresourcedefinitions", render_crd(kind))
    for ns in namespaces:
        api.create("namespaces", {"metadata": {"name": ns, "labels": {LABEL: "yes"}}})
    for body in nodes:
        api.create("nodes", body)


@contextlib.contextmanager
def operator_process(
    api: Any,
    src: Path,
    speed: float,
    anchor: float,
    log: Any,
    namespaces: Sequence[str],
    flags: Sequence[str] = (),
) -> Iterator[tuple[subprocess.Popen, int]]:
    """The operator (`src`'s) serving `namespaces` with `flags` besides, on a clock `speed`
    times the wall's from `anchor`, its output to `log`, until it answers /healthz: its
    process and its metrics port."""
    metrics, health = free_port(), free_port()
    argv = [
        "--standalone",
        *(f"--namespace={ns}" for ns in namespaces),
        f"--kubeconfig={api.kubeconfig}",
        "--listen-host=127.0.0.1",
        f"--metrics-port={metrics}",
        f"--health-port={health}",
        *flags,
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(src), str(ROOT)]),
        "PYTHONUNBUFFERED": "1",
        "POD_ID": "idlegate-live-pool",
    }
    command = [sys.executable, "-m", "benchmarks.scaled_operator", f"{speed:g}", f"{anchor}"]
    proc = subprocess.Popen(
        [*command, "--", *argv], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT
    )
    try:
        deadline = time.monotonic() + 120
        while not fetch(f"http://127.0.0.1:{health}/healthz"):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"the operator of {src} did not start; its log: {log.name}")
            time.sleep(0.1)
        yield proc, metrics
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_pool(recorder: Recorder, proc: subprocess.Popen) -> None:
    """Until the operator has written the pool's status (it built the pool)."""
    deadline = time.monotonic() + 120
    while not recorder.pool_seen.is_set():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the operator did not build the pool")
        time.sleep(0.05)


def wait_ended(
    recorder: Recorder, names: Sequence[tuple[str, str]], proc: subprocess.Popen, what: str
) -> None:
    """Until every DagWorkflow (namespace, name) of `names` ended with its JCT written."""
    deadline = time.monotonic() + HANG
    while not recorder.ended(names):
        if proc.poll() is not None:
            raise RuntimeError(f"the operator exited while waiting for {what}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not ended after {HANG:g} s, taken for a hang")
        time.sleep(0.1)


def check_live_options(speed: float, policies: Sequence[str], runs: int) -> None:
    """Refuse a live benchmark's options before its API server and operator start (a run
    takes minutes): a clock that does not move, a policy the operator could not build, or
    no run at all (the tables would be empty)."""
    if not speed > 0:
        raise IdlegateError(
            f"--speed is simulated seconds per wall second: give more than 0, not {speed:g}"
        )
    if runs < 1:
        raise IdlegateError(f"--runs is how many runs of each pool: give 1 or more, not {runs}")
    from idlegate.policy import make_scheduler  # (the operator's own parser of a policy)

    for policy in policies:
        try:
            make_scheduler(policy)
        except IdlegateError as exc:
            raise IdlegateError(f"the policy {policy!r}: {one_line(exc)}") from exc
