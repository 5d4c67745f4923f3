"""A live scenario: one flood and two steady teams on a pool that follows its nodes.

On the test API server of tests/k8s (its kube-scheduler binds pods by their requests and
node selectors, tests/k8s/scheduler.py; the simulated kubelets run them for their declared
durations), three Nodes of 8 CPU and 32 GiB and one ExecutorPool following them
(``nodeSelector: {}``) with queues ``a``, ``b`` and ``c`` of 8 CPU nominal each, each
allowed to borrow 4 CPU more, under `--policies` (``default``, the portfolio, and
``fair``). The real operator runs in a process of its own (benchmarks/scaled_operator.py,
so that its CPU is read from /proc), and it, the kubelets and the submissions run on a
clock `--speed` times the wall's pace:

1. alone: teams ``b`` and ``c`` submit one workflow every 3 s for 120 s (`STEADY`: two
   stages of one task of 2 CPU for 4 s) into their queues, the rest of the pool idle: their
   JCT alone;
2. shared: team ``a`` floods `--flood` workflows at once (`FLOOD`: a diamond of 9 tasks of
   half a CPU for 4 s), and ``b`` and ``c`` submit as in 1; ρ of a steady team = its mean
   JCT here / its mean JCT alone (the operator's ``status.jctSeconds``).

With `--planes test,real` the same scenario runs on both API servers in turn
(benchmarks/live_planes.py): the test API server above, and a real control plane (etcd,
kube-apiserver, kube-scheduler, kube-controller-manager and KWOK on loopback, ``make
cluster``'s binaries) with the same three Nodes played by KWOK, which runs each pod for its
declared duration over `--speed` as the simulated kubelets do.

Measured from the API server's side, from every write it saw (benchmarks/live_figures.py).
On the test API server: an emulator subscriber (each write when the API server told its
subscribers) and its audit of the HTTP requests, whose senders there are only the
operator's. On the real plane: kube-apiserver's audit log (benchmarks/live_audit.py), each
write at its ``stageTimestamp`` (when its response was complete) with the object after it,
the operator's requests told by their User-Agent (``kopf/…``, ``idlegate/…``), a pod's end
as KWOK's status write (user ``kwok``), a binding as kube-scheduler's ``pods/binding``;
the rest is the same on both:

* *watch lag*: from a pod's end (the kubelet's write) to the operator's next write about its
  workflow (the workflow's status, the next stage's pod), wall seconds;
* *Event lag*: from the time an Event states (``lastTimestamp``, whole seconds: refined to
  the operator's last write about the same object within that second, if any) to the API
  server's receipt of it, wall seconds;
* *release→bind*: from the operator's removal of a pod's gate to the kube-scheduler's
  binding, wall seconds;
* *requests a pod*: the operator's write requests over the pods created: all, and pods
  (creates and patches), Events, workflows' status, pools' status;
* *operator CPU a pod*: its process's CPU, its reaped children's and its live descendants'
  (the forecasts' replay process), from /proc, from the first submission to the last
  workflow's end, over the pods created; printed under each run by where it went (the main
  thread, kopf's loop; the other threads; the child processes).

The table's columns are those figures (quantiles p50/p99, the Events' max too), the run's
wall seconds and the 1-minute load average at its end. Under each run: where the
operator's CPU went; the watch and Event lags' p99 from `BURST` seconds after the flood's
submission on, with how many of the slow ones came before (the flood's admission: a
hundred workflows' Events, statuses and gated creations written at once); what its
/metrics say of its loop (`LOOP`); whose pod ends were answered over 1 s late, and by what
write (`slow_line`); and the CPU each party got in the flood's first 40 s, with how long
the operator's loop waited for a core (benchmarks/live_profile.py; ``--profile DIR``: py-spy
of the operator there too). The workflows' shapes are this script's (`STEADY`,
`FLOOD`); the rest is issue 79's scenario. The faster the clock, the
more the operator's own time weighs against the tasks' (a lag of 1 s of wall is `--speed`
seconds of the clock in a JCT); the default, 2, keeps a policy's run near 3 minutes.

With `--visibility SECONDS` the operator's visibility API (``/visibility/pendingworkflows``
on its metrics port) is asked every SECONDS wall seconds from the first submission to the
last end, and how long its answers took is printed under each run. With `--burn N`, N
CPU-bound processes run beside it all; with `--burn-nice 0,3` they run at each of those
nicenesses above the operator's in turn, started afresh for each run (a lower CFS weight:
the operator's pod requesting more CPU than each of theirs); with `--against DIR/src` the same
scenario runs with that checkout's operator too (its sources on the operator's path; the
API server, kubelets and scheduler stay this checkout's), the two in turn, `--runs` times;
with `--variant FLAGS` this checkout's operator runs it once more given FLAGS besides (e.g.
``--variant=--gated-workflows-ahead=0``), in the same turn. Under each run: the operator's
write requests in the flood's first `BURST` seconds, by what they wrote.

    python -m benchmarks.live_pool [--policies default,fair] [--planes test,real] [--flood 100] [--flood-seconds 4]
        [--speed 2] [--burn 2] [--burn-nice 0,3] [--runs 1] [--against /tmp/before68/src]
        [--visibility 4]
        [--variant=--gated-workflows-ahead=0]
        [--json out.json]

(run from the repository root: the script imports the test API server from tests/k8s).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from statistics import mean
from typing import Any

from idlegate.api.kinds import API_VERSION, POOL_KIND
from idlegate.api.visibility import PATH as VISIBILITY
from idlegate.controlplane.launcher import NodeSpec
from idlegate.errors import IdlegateError
from idlegate.flags import description, run_script, script_extras

with script_extras(__name__):  # (the live harness: the dev and operator extras)
    from benchmarks.live_figures import Figures, category, figures, quantile
    from benchmarks.live_operator import (
        POOLS,
        ROOT,
        check_live_options,
        harness_missing,
        operator_process,
        wait_ended,
        wait_pool,
    )
    from benchmarks.live_profile import profiling
    from benchmarks.operator_burst import children, fetch

try:  # (the test API server: tests/ and the dev and operator extras)
    from benchmarks.live_harness import DWF, need_binaries, stage, workflow
    from benchmarks.live_planes import PLANES, opened
except ModuleNotFoundError as exc:
    if __name__ != "__main__":
        raise
    sys.exit(harness_missing(exc, "benchmarks.live_pool"))


@dataclasses.dataclass(frozen=True)
class Shape:
    """A workflow's stages (name, tasks, the stages it depends on), each task's CPU and
    seconds."""

    stages: tuple[tuple[str, int, tuple[str, ...]], ...]
    cpu: str
    seconds: float


NODE_COUNT, NODE_CPU, NODE_MEMORY = 3, "8", "32Gi"
QUOTA_CPU, BORROW_CPU = "8", "4"
POOL_PODS = 330
"""The pool's size: the nodes' pod slots (110 each), never what binds."""
STEADY_EVERY, STEADY_FOR = 3.0, 120.0
"""Simulated seconds: a steady team submits one workflow every 3 s for 120 s."""
STEADY = Shape((("s0", 1, ()), ("s1", 1, ("s0",))), "2", 4.0)
"""A steady team's workflow: a chain of 2 stages of one task of 2 CPU and 4 s: 2 CPU for
8 s every 3 s, 5.3 CPU on average, within its queue's 8."""
FLOOD = Shape((("a", 2, ()), ("b", 3, ("a",)), ("c", 3, ("a",)), ("d", 1, ("b", "c"))), "500m", 4.0)
"""A flooding workflow: a diamond of 2, 3, 3 and 1 tasks of half a CPU and 4 s (100 of
them: 900 pods, 1,800 CPU seconds, 150 s of the 12 CPU its queue may hold)."""
TEAMS = {"a": "team-a", "b": "team-b", "c": "team-c"}
ALONE = {"b": "alone-b", "c": "alone-c"}
BURST = 30.0
"""Wall seconds after the flood's submission that its admission's burst of writes (a
hundred workflows' Events, first statuses and gated creations at once) is taken to last:
the lags after it are printed apart (`Figures.after`)."""


def sized(name: str, shape: Shape) -> dict[str, Any]:
    """A DagWorkflow of `shape`."""
    container = {
        "name": "task",
        "image": "busybox",
        "resources": {"requests": {"cpu": shape.cpu, "memory": "1Gi"}},
    }
    template = {"spec": {"containers": [container]}}
    return workflow(
        name,
        *(stage(s, n, shape.seconds, deps, template=template) for s, n, deps in shape.stages),
    )


def pool(policy: str) -> dict[str, Any]:
    """The ExecutorPool: every node, queues a, b, c (b and c also serve their 'alone'
    namespaces)."""
    queues = [
        {
            "name": q,
            "nominal": {"cpu": QUOTA_CPU},
            "borrowingLimit": {"cpu": BORROW_CPU},
            "namespaces": [ns, *([ALONE[q]] if q in ALONE else [])],
        }
        for q, ns in TEAMS.items()
    ]
    return executor_pool("shared", policy, queues, POOL_PODS)


def executor_pool(
    name: str, policy: str, queues: list[dict[str, Any]], size: int
) -> dict[str, Any]:
    """An ExecutorPool of `size` pods on every node, serving the benchmarks' namespaces
    (labelled ``live-pool: yes``) with `queues` under `policy`."""
    return {
        "apiVersion": API_VERSION,
        "kind": POOL_KIND,
        "metadata": {"name": name},
        "spec": {
            "size": size,
            "nodeSelector": {},
            "namespaceSelector": {"matchLabels": {"live-pool": "yes"}},
            "policy": policy,
            "queues": queues,
        },
    }


@contextlib.contextmanager
def burning(count: int, nice: int = 0) -> Iterator[list[int]]:
    """`count` CPU-bound processes, from enter to exit, `nice` steps nicer than this one
    (a lower CFS weight: on a node, pods requesting less CPU than the operator's): their
    pids. The niceness is set from here before they are yielded, so none burns at another."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    base = os.getpriority(os.PRIO_PROCESS, 0)
    for burner in burners:
        os.setpriority(os.PRIO_PROCESS, burner.pid, base + nice)
    try:
        yield [b.pid for b in burners]
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


@contextlib.contextmanager
def asking(port: int, every: float | None) -> Iterator[list[float]]:
    """Every `every` wall seconds (None: never), from enter to exit, the operator's
    visibility API (`VISIBILITY` on its metrics `port`) asked in a thread of its own: the
    seconds each answer took (an unanswered ask is left out, and counted by the caller
    as the asks there should have been)."""
    answers: list[float] = []
    stop = threading.Event()

    def ask() -> None:
        while not stop.wait(every):
            began = time.monotonic()
            if fetch(f"http://127.0.0.1:{port}{VISIBILITY}"):
                answers.append(time.monotonic() - began)

    thread = threading.Thread(target=ask, name="visibility", daemon=True)
    if every is not None:
        thread.start()
    try:
        yield answers
    finally:
        stop.set()
        if every is not None:
            thread.join()


def operator_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of the operator, from /proc: of its main thread (kopf's event loop), of
    its other threads (the workers: Python names no thread for the OS), of its children it
    reaped (a round's or a replay's process that ended) and of its live descendants (the
    forecasts' replay process)."""
    found: defaultdict[str, float] = defaultdict(float)
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # (a thread ended meanwhile)
            fields = _stat(task / "stat")
            which = "main thread" if task.name == str(pid) else "other threads"
            found[which] += (int(fields[11]) + int(fields[12])) / tick
    fields = _stat(Path(f"/proc/{pid}/stat"))
    found["reaped children"] += (int(fields[13]) + int(fields[14])) / tick
    for child in children(pid):
        with contextlib.suppress(OSError):  # (ended meanwhile)
            fields = _stat(Path(f"/proc/{child}/stat"))
            found["children"] += sum(int(f) for f in fields[11:15]) / tick
    return dict(found)


def _stat(path: Path) -> list[str]:
    """A /proc stat file's fields after the command's name (fields[11] is utime)."""
    return path.read_text().rsplit(")", 1)[1].split()


def submit_steady(api: Any, namespaces: dict[str, str], speed: float) -> list[tuple[str, str]]:
    """Each team (queue -> namespace) submits one workflow every STEADY_EVERY seconds of
    the clock for STEADY_FOR seconds; their (namespace, name)."""
    out, start = [], time.monotonic()
    for i in range(round(STEADY_FOR / STEADY_EVERY)):
        due = start + i * STEADY_EVERY / speed
        time.sleep(max(0.0, due - time.monotonic()))
        for ns in namespaces.values():
            api.create(DWF, sized(f"s{i:03d}", STEADY), ns)
            out.append((ns, f"s{i:03d}"))
    return out


def run(
    policy: str,
    src: Path,
    speed: float,
    flood: int,
    log: Any,
    flood_seconds: float = 4.0,
    visibility: float | None = None,
    extra: tuple[str, ...] = (),
    profile: Path | None = None,
    burners: tuple[int, ...] = (),
    plane: str = "test",
) -> dict[str, Any]:
    """One run of the scenario (the module docstring) on `plane` (live_planes.PLANES) under
    `policy` with `src`'s operator given the flags `extra` besides, the flood's tasks
    `flood_seconds` long, its visibility API asked every `visibility` wall seconds (None:
    never), the flood's first seconds profiled into `profile` (None: not; `burners` the
    CPU-bound processes' pids, live_profile.py): its figures."""
    served = [*TEAMS.values(), *ALONE.values()]
    nodes = NodeSpec(NODE_COUNT, NODE_CPU, NODE_MEMORY, prefix="node")
    with opened(plane, speed, served, nodes) as (api, recorder, pids):
        anchor = time.time()
        try:
            with contextlib.ExitStack() as stack:
                flags = [f"--pool-size={POOL_PODS}", *extra]
                proc, port = stack.enter_context(
                    operator_process(api, src, speed, anchor, log, served, flags)
                )
                api.create(POOLS, pool(policy))
                wait_pool(recorder, proc)
                began, before = time.monotonic(), operator_cpu(proc.pid)
                loop_before = loop_figures(fetch(f"http://127.0.0.1:{port}/metrics"))
                answers = stack.enter_context(asking(port, visibility))
                alone = submit_steady(api, ALONE, speed)
                wait_ended(recorder, alone, proc, "the steady teams alone")
                floods = [(TEAMS["a"], f"f{i:03d}") for i in range(flood)]
                flooding = dataclasses.replace(FLOOD, seconds=flood_seconds)
                flooded = time.time()
                profiled = stack.enter_context(profiling(profile, proc.pid, burners, pids))
                for ns, name in floods:
                    api.create(DWF, sized(name, flooding), ns)
                shared = submit_steady(api, {q: TEAMS[q] for q in ALONE}, speed)
                wait_ended(recorder, [*shared, *floods], proc, "the flood and the steady teams")
                after = operator_cpu(proc.pid)
                loop_after = loop_figures(fetch(f"http://127.0.0.1:{port}/metrics"))
                cpu = {k: after[k] - before.get(k, 0.0) for k in after}
                wall = time.monotonic() - began
        finally:
            entries, writes, jcts = recorder.close()
    found = figures(entries, writes)
    jct = {  # a steady team's mean JCT (s of the clock): alone, shared
        q: tuple(mean(jcts[k] for k in keys if k[0] == ns) for keys, ns in pair)
        for q, pair in {q: ((alone, ALONE[q]), (shared, TEAMS[q])) for q in ALONE}.items()
    }
    return {
        "policy": policy,
        "plane": plane,
        "rho": {q: shared_jct / alone_jct for q, (alone_jct, shared_jct) in jct.items()},
        "jct": jct,
        "figures": found,
        "cpu_ms_per_pod": sum(cpu.values()) * 1000 / max(found.pods, 1),
        "cpu_seconds": sum(cpu.values()),
        "cpu_by_thread": {k: round(v, 2) for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])},
        "wall_seconds": wall,
        "load": os.getloadavg()[0],
        "flooded": flooded,
        "burst": burst_requests(writes, flooded),
        "loop": {k: loop_after[k] - loop_before.get(k, 0.0) for k in loop_after},
        "visibility": answers,
        "visibility_asks": 0 if visibility is None else int(wall // visibility),
        "profile": profiled,
    }


def burst_requests(writes: list[Any], flooded: float) -> dict[str, int]:
    """The operator's write requests by what they wrote (`category`) in the `BURST` wall
    seconds from the flood's submission (`flooded`, epoch) on."""
    found = Counter(category(w) for w in writes if flooded <= w.t < flooded + BURST)
    return dict(sorted(found.items()))


def burst_line(result: dict[str, Any]) -> str:
    """The operator's write requests in the flood's first `BURST` seconds, a pod (of the
    run's pods created) and in all, by what they wrote."""
    burst, pods = result["burst"], max(result["figures"].pods, 1)
    kinds = ("pod creates", "pod patches", "events", "status", "pool status")
    said = ", ".join(f"{k} {burst.get(k, 0)}" for k in kinds)
    return (
        f"first {BURST:g} s after the flood: {sum(burst.values()) / pods:.2f} requests a pod "
        f"({said})"
    )


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


HEADER = (
    f"{'policy':8} {'code':14} {'plane':5} {'rho b / c':>11} {'watch p50/p99':>14} {'event p50/p99/max':>18} "
    f"{'bind p50/p99':>13} {'req/pod':>7} {'(pods ev st pool)':>19} {'CPU ms/pod':>10} "
    f"{'wall':>5} {'load':>4}"
)


def row(code: str, result: dict[str, Any]) -> str:
    """One run's line of the table (HEADER's columns)."""
    f: Figures = result["figures"]
    q = quantile
    rho = f"{result['rho']['b']:.2f} / {result['rho']['c']:.2f}"
    watch = f"{seconds(q(f.watch_lags, 0.5))}/{seconds(q(f.watch_lags, 0.99))}"
    events = "/".join(seconds(q(f.event_lags, p)) for p in (0.5, 0.99, 1.0))
    binds = f"{seconds(q(f.binds, 0.5))}/{seconds(q(f.binds, 0.99))}"
    kinds = " ".join(
        f"{f.per_pod(*c):.2f}"
        for c in (("pod creates", "pod patches"), ("events",), ("status",), ("pool status",))
    )
    return (
        f"{result['policy']:8} {code:14} {result['plane']:5} {rho:>11} {watch:>14} {events:>18} {binds:>13} "
        f"{f.per_pod():7.2f} {kinds:>19} {result['cpu_ms_per_pod']:10.1f} "
        f"{result['wall_seconds']:5.0f} {result['load']:4.1f}"
    )


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    return run_script(parser(), measure, argv)


def parser() -> argparse.ArgumentParser:
    """The script's options."""
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument(
        "--policies",
        default="default,fair",
        help="the pool's scheduler specs, in turn (default default,fair)",
    )
    parser.add_argument(
        "--planes",
        default="test",
        help="the API servers it runs on, in turn, comma-separated: test (tests/k8s's, in "
        "this process) and real (kube-apiserver with etcd, kube-scheduler and KWOK: `make "
        "cluster`'s binaries, from IDLEGATE_CLUSTER_BIN or out/cluster/bin) (default test)",
    )
    parser.add_argument(
        "--flood", type=int, default=100, help="workflows team a floods (default 100)"
    )
    parser.add_argument(
        "--flood-seconds",
        type=float,
        default=FLOOD.seconds,
        help=f"seconds of a flood's task (default {FLOOD.seconds:g})",
    )
    parser.add_argument(
        "--speed", type=float, default=2.0, help="simulated seconds per wall second (default 2)"
    )
    parser.add_argument(
        "--burn", type=int, default=0, help="CPU-bound processes beside it (default 0)"
    )
    parser.add_argument(
        "--burn-nice",
        default="0",
        help="the burners' niceness above the operator's, comma-separated values each run in "
        "turn with burners started afresh (default 0: one weight for all). It emulates the "
        "operator's pod requesting more CPU than each burning pod, a node dividing a busy "
        "CPU by the pods' requests: nice 3 is about half the operator's weight, nice 5 a "
        "third, nice 10 a tenth",
    )
    parser.add_argument(
        "--runs", type=int, default=1, help="runs of each policy and code (default 1)"
    )
    parser.add_argument(
        "--against",
        type=Path,
        action="append",
        default=[],
        help="another checkout's src directory: its operator runs the same scenario, in turn "
        "(default: none)",
    )
    parser.add_argument(
        "--visibility",
        type=float,
        help="ask the operator's visibility API every so many wall seconds (default: never)",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="operator flags (one string) this checkout also runs with, in turn, e.g. "
        "'--gated-workflows-ahead=0' (default: none)",
    )
    parser.add_argument(
        "--json", type=Path, help="write every run's figures there (default: not written)"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="py-spy the operator over the flood's first 40 s, and keep each party's CPU "
        "then, in this directory (benchmarks/live_profile.py; default: not profiled)",
    )
    parser.add_argument("--log", type=Path, help="the operators' output (default: discarded)")
    return parser


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the scenario as `args` say and print its rows (the options are checked before
    anything starts)."""
    check_live_options(args.speed, args.policies.split(","), args.runs)
    planes = check_planes(args.planes)
    try:
        nices = [int(n) for n in args.burn_nice.split(",")]
    except ValueError:
        nices = [-1]
    if min(nices) < 0 or max(nices) > 19:
        raise IdlegateError(
            f"--burn-nice {args.burn_nice!r} is not a list of nicenesses: give whole "
            "numbers from 0 to 19, comma-separated (e.g. 0,3)"
        )
    if args.burn < 0:
        raise IdlegateError(
            f"--burn {args.burn} is negative: give how many CPU-bound processes run beside it (0: none)"
        )
    if args.burn == 0 and nices != [0]:
        raise IdlegateError(
            f"--burn-nice {args.burn_nice} sets the burners' niceness, but --burn is 0: give --burn N too"
        )
    for name in ("flood", "flood_seconds", "visibility"):
        if getattr(args, name) is not None and getattr(args, name) <= 0:
            raise IdlegateError(
                f"--{name.replace('_', '-')} {getattr(args, name)} is not above 0: give a positive number"
            )
    sources = [ROOT / "src", *(p.resolve() for p in args.against)]
    for src in sources:
        if not (src / "idlegate" / "__init__.py").exists():
            sys.exit(f"Error: {src} holds no idlegate package: give a checkout's src directory")
    command = [
        "python -m benchmarks.live_pool",
        f"--policies {args.policies}",
        *([f"--planes {args.planes}"] if args.planes != "test" else []),
        f"--flood {args.flood}",
        f"--flood-seconds {args.flood_seconds:g}",
        f"--speed {args.speed:g}",
        f"--burn {args.burn}",
        *([f"--burn-nice {args.burn_nice}"] if args.burn_nice != "0" else []),
        f"--runs {args.runs}",
        *([f"--visibility {args.visibility:g}"] if args.visibility else []),
        *(f"--variant={shlex.quote(v)}" for v in args.variant),
        *(f"--against {shlex.quote(str(p))}" for p in sources[1:]),
        *(
            f"--{k} {shlex.quote(str(v))}"
            for k, v in (("json", args.json), ("log", args.log), ("profile", args.profile))
            if v
        ),
    ]
    print(" ".join(command), flush=True)
    print(HEADER, flush=True)
    codes = [
        (sources[0], "this", ()),
        *((sources[0], v, tuple(shlex.split(v))) for v in args.variant),
        *((src, src.parent.name, ()) for src in sources[1:]),
    ]
    results = []
    log = open(args.log, "ab") if args.log else open(os.devnull, "wb")  # noqa: SIM115
    with log:
        for policy in args.policies.split(","):
            runs = itertools.product(range(args.runs), nices, codes, planes)
            for _, nice, (src, code, extra), plane in runs:
                with burning(args.burn, nice) as burners:
                    try:
                        result = run(
                            policy,
                            src,
                            args.speed,
                            args.flood,
                            log,
                            args.flood_seconds,
                            args.visibility,
                            extra,
                            args.profile,
                            tuple(burners),
                            plane,
                        )
                    except (RuntimeError, TimeoutError) as exc:
                        sys.exit(f"Error: {exc} (the operators' output: --log FILE)")
                label = f"{code} nice {nice}" if len(nices) > 1 or nice else code
                print_run(label, result, bool(args.visibility))
                results.append(
                    {**result, "code": str(src), "flags": list(extra), "burn_nice": nice}
                )
    if args.json:
        args.json.write_text(json.dumps([jsonable(r) for r in results], indent=1))
    print("rerun: " + " ".join(command))
    return results


def check_planes(text: str) -> list[str]:
    """The planes `--planes` names, refused before anything starts if one is unknown or the
    real plane's binaries are not built."""
    planes = text.split(",")
    if unknown := [p for p in planes if p not in PLANES]:
        raise IdlegateError(
            f"--planes {text}: no plane {', '.join(map(repr, unknown))}: give "
            f"{' or '.join(PLANES)}, comma-separated (e.g. test,real)"
        )
    if "real" in planes:
        need_binaries()  # (its IdlegateError says to run make cluster)
    return planes


def print_run(label: str, result: dict[str, Any], visibility: bool) -> None:
    """A run's row and the lines under it."""
    print(row(label, result), flush=True)
    spent = ", ".join(f"{k} {v:.1f}" for k, v in result["cpu_by_thread"].items() if v >= 0.05)
    print(f"{'':24}operator CPU s: {spent}", flush=True)
    for line in [
        after_burst(result),
        burst_line(result),
        loop_line(result),
        *([visibility_line(result)] if visibility else []),
        slow_line(result),
        *result["profile"],
    ]:
        print(f"{'':24}{line}", flush=True)


LOOP = {
    "decisions": ("idlegate_decision_cpu_seconds_count", ""),
    "decision CPU": ("idlegate_decision_cpu_seconds_sum", ""),
    "beats": ("idlegate_loop_stall_seconds_count", ""),
    "beats on time": ("idlegate_loop_stall_seconds_bucket", 'le="0.25"'),
}
"""What the operator's /metrics say of its event loop (`loop_figures`), each a series and
a label it must carry: its policy's decisions (how many, their CPU seconds) and its
heartbeat (beats, those late by 0.25 s at most)."""


def loop_figures(text: str) -> dict[str, float]:
    """`LOOP`'s figures in the /metrics `text`, summed over pools (those absent left out:
    an older operator's)."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        key, _, value = line.rpartition(" ")
        name, _, labels = key.partition("{")
        for figure, (series, label) in LOOP.items():
            if not line.startswith("#") and name == series and label in labels:
                found[figure] = found.get(figure, 0.0) + float(value)
    return found


def loop_line(result: dict[str, Any]) -> str:
    """How the operator's loop did in a run: its policy's decisions' CPU, its heartbeat."""
    loop = result["loop"]
    if "decisions" not in loop or "beats" not in loop:
        return "loop: no such metrics (an older operator)"
    late = loop["beats"] - loop.get("beats on time", 0.0)
    return (
        f"loop: {loop['decision CPU']:.1f} s of CPU in {loop['decisions']:.0f} decisions; "
        f"heartbeat late by over 0.25 s {late:.0f} times of {loop['beats']:.0f} (1 s beats)"
    )


def after_burst(result: dict[str, Any]) -> str:
    """The watch and Event lags' p99 from `BURST` seconds after the flood's submission on,
    and how many of the lags above 1 s (watch) and 2 s (Events) came before."""
    f: Figures = result["figures"]
    since = result["flooded"] + BURST
    watch, events = f.after(since)
    early_watch = sum(1 for lag in f.watch_lags if lag > 1.0) - sum(1 for w in watch if w > 1.0)
    early_events = sum(1 for lag in f.event_lags if lag > 2.0) - sum(1 for e in events if e > 2.0)
    return (
        f"from {BURST:g} s after the flood on: watch p99 {seconds(quantile(watch, 0.99))}, "
        f"Event p99 {seconds(quantile(events, 0.99))}; before: {early_watch} of "
        f"{sum(1 for lag in f.watch_lags if lag > 1.0)} watch lags over 1 s, {early_events} of "
        f"{sum(1 for lag in f.event_lags if lag > 2.0)} Event lags over 2 s"
    )


def slow_line(result: dict[str, Any]) -> str:
    """Whose pod ends were answered over 1 s late, in the flood's first `BURST` seconds and
    after (the flood's, team a, or the steady teams'), and by writes of what (``pods``, a
    creation or release; ``dagworkflows``, the workflow's status)."""
    f: Figures = result["figures"]
    since = result["flooded"] + BURST
    found: Counter[tuple[str, str]] = Counter()
    by: Counter[str] = Counter()
    for lag, at, ns, kind in zip(f.watch_lags, f.watch_at, f.watch_ns, f.watch_by, strict=True):
        if lag > 1.0:
            found[
                "flood" if ns == TEAMS["a"] else "steady", "first" if at < since else "after"
            ] += 1
            by[kind] += 1
    said = "; ".join(
        f"{who}'s {found[who, 'first']} in the first {BURST:g} s, {found[who, 'after']} after"
        for who in ("flood", "steady")
    )
    answers = ", ".join(f"{k} {v}" for k, v in sorted(by.items())) or "none"
    return f"watch lags over 1 s: {said} (answered by writes of {answers})"


def visibility_line(result: dict[str, Any]) -> str:
    """How the visibility API answered in a run (`asking`)."""
    answers = result["visibility"]
    if not answers:
        return f"visibility API: no answer of {result['visibility_asks']} asks"
    p50, p99 = quantile(answers, 0.5), quantile(answers, 0.99)
    return (
        f"visibility API: {len(answers)} answers of {result['visibility_asks']} asks, "
        f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {max(answers) * 1000:.0f} ms"
    )


def jsonable(result: dict[str, Any]) -> dict[str, Any]:
    f: Figures = result["figures"]
    return {
        **{k: v for k, v in result.items() if k != "figures"},
        "pods": f.pods,
        "watch_lags": f.watch_lags,
        "watch_at": f.watch_at,
        "watch_ns": f.watch_ns,
        "watch_by": f.watch_by,
        "unanswered": f.unanswered,
        "event_lags": f.event_lags,
        "event_at": f.event_at,
        "binds": f.binds,
        "requests": dict(f.requests),
    }


if __name__ == "__main__":
    main()
