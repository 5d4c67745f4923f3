"""How long a what-if takes to answer (``idlegate forecast FILE``; docs/research/forecasts.md,
"What if"), on the state of issue 80's live run: a pool that follows three nodes of 8 CPU and
32 GiB (330 pods), a burst of `k8s-batch` workflows with their pods' requests waiting
under the pool's scheduler, and one more asked about.

    python -m benchmarks.what_if [--waiting 48] [--scheduler default] [--busy 0] [--no-rival]
        [--repeat 5]

The what-if's replays run as the operator's route runs them, in a worker thread of the
process, while another thread spins (the event loop, and a portfolio's rounds, holding
the interpreter's lock; ``--no-rival``: none) and `--busy` CPU-bound processes run beside
it (a busy node). Timed in the thread's CPU seconds (the median) and wall seconds (the
median and the worst of `--repeat`):

* ``before``: the answer before the budget (`compute` with the refresh's budget of
  `BUDGET` events and `SECONDS` of the thread's CPU: every workflow present replayed to
  its end, the first replay always whole);
* ``now``: `operator.forecasting.whatif.answer` (replays until the asked workflow's finish, none
  started that would end past `forecast_whatif.SECONDS` of the wall clock, none going on
  past its `CUT`).

Then the CLI's own share: ``idlegate forecast FILE --url`` in a child process against a
local operator that answers at once (the median of `--repeat`), beside the same load, as it
starts (`idlegate.launch`: the what-if's modules alone) and with the whole command line
imported first (as it started before), the two in turn. An answer is within 2 s
when the CLI's share and ``now``'s worst add up to at most 2.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from statistics import median
from typing import Any, ClassVar

from benchmarks.forecast import overloaded, told
from idlegate.api.forecast_ask import WHAT_IF_PATH
from idlegate.api.forecast_status import Forecast, dump_forecast, relative
from idlegate.flags import description
from idlegate.operator.forecasting.book import REPLAYS, as_shown
from idlegate.operator.forecasting.request import compute, scheduler_copy
from idlegate.operator.forecasting.whatif import CUT, answer, what_if
from idlegate.operator.forecasting.whatif import SECONDS as WHAT_IF_SECONDS
from idlegate.sim import forecast as sim_forecast
from idlegate.sim.cluster import Cluster
from idlegate.sim.forecast_calibration import calibrations

NODES, PODS = 3, 330
ASKED = {
    "kind": "DagWorkflow",
    "metadata": {"name": "asked"},
    "spec": {
        "stages": [
            {"name": "extract", "tasks": 4, "taskDurationSeconds": 60,
             "resources": {"cpu": "2", "memory": "4Gi"}},
            {"name": "transform", "tasks": 2, "taskDurationSeconds": 120, "dependsOn": ["extract"],
             "resources": {"cpu": "4", "memory": "8Gi"}},
            {"name": "load", "tasks": 1, "taskDurationSeconds": 30, "dependsOn": ["transform"]},
        ]
    },
}  # fmt: skip
"""The workflow asked about."""


def state(waiting: int, scheduler: str) -> tuple[Cluster, Any]:
    """The pool once `waiting` workflows wait (told nodes, as the operator's), and its
    scheduler (a portfolio: the one whose followed candidate is replayed)."""
    cluster, policy = overloaded(waiting, scheduler, NODES)
    return told(cluster, NODES, PODS), policy


def spin(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(1000))


def burn() -> None:
    while True:
        sum(range(1000))


@contextmanager
def busy(processes: int, rival: bool) -> Iterator[None]:
    """A thread spinning beside the answer's in the interpreter (`rival`), and `processes`
    CPU-bound processes."""
    stop = threading.Event()
    spinning = threading.Thread(target=spin, args=(stop,), daemon=True)
    if rival:
        spinning.start()
    others = [multiprocessing.Process(target=burn, daemon=True) for _ in range(processes)]
    for p in others:
        p.start()
    try:
        yield
    finally:
        stop.set()
        if rival:
            spinning.join()
        for p in others:
            p.terminate()
            p.join()


def timed(run: Callable[[], tuple[Any, int]], repeat: int) -> dict[str, Any]:
    """Wall seconds of `run` in a worker thread (as the route's `asyncio.to_thread`), and
    that thread's CPU seconds (medians, and the worst wall)."""
    walls, cpus, out = [], [], None
    result: list[Any] = []

    def work() -> None:
        began = time.thread_time()
        result.append(run())
        cpus.append(time.thread_time() - began)

    for _ in range(repeat):
        began = time.perf_counter()
        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
        walls.append(time.perf_counter() - began)
    out = result[-1]
    shown, replays = out
    return {
        "median": median(walls),
        "worst": max(walls),
        "cpu": median(cpus),
        "replays": replays,
        "shown": shown,
    }


def said(shown: Any, now: float) -> str:
    if isinstance(shown, Forecast):
        return f"start {relative(shown.start, now)}, finish {relative(shown.finish, now)}"
    return f"unavailable: {shown.reason}"


class Answering(BaseHTTPRequestHandler):
    """An operator whose what-if route answers at once."""

    doc: ClassVar[dict[str, Any]] = {}

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200 if self.path == WHAT_IF_PATH else 404)
        self.end_headers()
        self.wfile.write(json.dumps(self.doc).encode())

    def log_message(self, *args: Any) -> None:
        pass


WHOLE = "import sys; from idlegate.cli import main; main(sys.argv[1:])"
"""The command as it started before `idlegate.launch`: the whole command line imported."""


def cli_seconds(shown: Forecast, repeat: int) -> dict[str, float]:
    """The median wall seconds of ``idlegate forecast FILE --url`` against `Answering`:
    ``now``, as the command starts (`idlegate.launch`), and ``whole``, with every
    command's modules imported first; the two in turn."""
    Answering.doc = {"pool": "default", "queue": "", "forecast": dump_forecast(shown),
                     "replays": 1, "held": {}}  # fmt: skip
    server = ThreadingHTTPServer(("127.0.0.1", 0), Answering)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    walls: dict[str, list[float]] = {"now": [], "whole": []}
    starts = {"now": [sys.executable, "-m", "idlegate"], "whole": [sys.executable, "-c", WHOLE]}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            file = Path(tmp) / "asked.yaml"
            file.write_text(json.dumps(ASKED))
            url = f"http://127.0.0.1:{server.server_address[1]}"
            for _ in range(repeat):
                for name, start in starts.items():
                    began = time.perf_counter()
                    command = [*start, "forecast", str(file), "--url", url]
                    subprocess.run(command, check=True, capture_output=True)
                    walls[name].append(time.perf_counter() - began)
    finally:
        server.shutdown()
        server.server_close()
    return {name: median(w) for name, w in walls.items()}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--waiting", type=int, default=48)
    parser.add_argument("--scheduler", default="default", help="the pool's (default: default)")
    parser.add_argument("--busy", type=int, default=0, help="CPU-bound processes beside it")
    parser.add_argument(
        "--rival",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a thread spinning beside the answer's (the event loop, a portfolio's rounds)",
    )
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    cluster, policy = state(args.waiting, args.scheduler)
    learns = policy if hasattr(policy, "following") else None
    replayed = scheduler_copy(policy, args.scheduler, learns)
    now = cluster.now
    snap, job_id = what_if(cluster, replayed, ASKED, 0, 0, now)
    position = sum(j.first_start is None for j in snap.fork.jobs)

    def before() -> tuple[Any, int]:
        result, _ = compute(snap, REPLAYS, sim_forecast.BUDGET, sim_forecast.SECONDS)
        return as_shown(result.of(job_id), result.now, calibrations()), result.replays

    def after() -> tuple[Any, int]:
        return answer(snap, job_id)

    with busy(args.busy, args.rival):
        rows = {"before": timed(before, args.repeat), "now": timed(after, args.repeat)}
        starts = cli_seconds(
            next(r["shown"] for r in rows.values() if isinstance(r["shown"], Forecast)),
            args.repeat,
        )
    cli = starts["now"]
    print(
        f"what-if on {NODES} nodes of 8 CPU, {args.waiting} waiting under {args.scheduler} "
        f"(replays {getattr(policy, 'following', args.scheduler)}), asked at position "
        f"{position}; {'a thread spinning beside, ' if args.rival else ''}{args.busy} busy "
        f"processes; budget {WHAT_IF_SECONDS:g} s, cut {CUT:g} s"
    )
    print("| answer | CPU | wall median | wall worst | replays | its answer |")
    print("|---|---:|---:|---:|---:|---|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['cpu']:.2f} s | {r['median']:.2f} s | {r['worst']:.2f} s | "
            f"{r['replays']} | {said(r['shown'], now)} |"
        )
    total = cli + rows["now"]["worst"]
    print(
        f"the CLI's own share: {cli:.2f} s (the whole command line first: "
        f"{starts['whole']:.2f} s, × {starts['whole'] / cli:.1f}); with now's worst: {total:.2f} s"
    )
    return {"rows": {k: {**v, "shown": said(v["shown"], now)} for k, v in rows.items()},
            "cli": cli, "cli_whole": starts["whole"], "total": total,
            "position": position}  # fmt: skip


if __name__ == "__main__":
    main()
