"""Kueue itself beside idlegate: the same teams, the same nodes, the same arrivals, one run.

Each run starts a local control plane of its own (etcd, kube-apiserver, kube-scheduler,
kube-controller-manager, KWOK: ``make cluster``'s binaries; kube-apiserver keeps an audit
log), three KWOK Nodes of 8 CPU running each pod for its declared time over `--speed`,
then one controller:

* ``idlegate``: the operator (benchmarks/scaled_operator.py: its clock `--speed` times the
  wall's) and an ExecutorPool of queues a, b, c; each workflow a DagWorkflow;
* ``kueue``: Kueue's own manager (``make kueue``: sigs.k8s.io/kueue v0.17.0 from its Go
  module, started by idlegate.controlplane.kueue, its webhooks on loopback), a
  ResourceFlavor, three ClusterQueues in one cohort and their LocalQueues; each stage a
  suspended Job that benchmarks/kueue_driver.py creates when its parents have ended.

The scenario is benchmarks/kueue_scenario.py's: teams b and c alone (ρ's denominator), a
flood of team a beside them, and a large workflow of team a before the three teams'
streams, each shared scenario with reclaim of lent quota off and on. Each row's figures
(benchmarks/kueue_figures.py) are read from the audit log alike for both: each team's mean
JCT (the scenario's clock), the steady teams' ρ (mean JCT shared / alone, under the same
controller), Jain's index of the waiting teams' CPU over contended time, the longest wait
of a task, the tasks stopped and the work they lost (task-seconds and the share of all
work run), submission→admission and release→bind p50/p99 (wall seconds), the
controller's CPU a pod (its process and its children, from /proc, from the first
submission to the last end, over the pods created; beside it kube-controller-manager's,
whose Job controller creates the pods of Kueue's Jobs) and its peak memory (the largest sum
of its processes' RSS, sampled every `SAMPLE` s), and write requests a pod by sender (the
controller; Kueue's Jobs' pods also cost the Job controller's writes, and the benchmark's
own writes: the Jobs or DagWorkflows).

    python -m benchmarks.kueue_vs_idlegate [--scenarios flood,large] [--reclaim off,on]
        [--systems idlegate,kueue] [--flood 24] [--speed 2] [--policy default]
        [--json out/kueue.json] [--log out/kueue.log]

(run from the repository root; ``make cluster`` and ``make kueue`` first.)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from idlegate.errors import IdlegateError
from idlegate.flags import description, run_script, script_extras

with script_extras(__name__):  # (the live harness: the dev and operator extras)
    from benchmarks.kueue_driver import Driver, Tracker, submit
    from benchmarks.kueue_figures import Figures, breakdown, figures, latency, lives
    from benchmarks.kueue_scenario import (
        NODES,
        SCENARIOS,
        TEAMS,
        Arrival,
        arrivals,
        dag_workflow,
        kueue_objects,
        plan,
        pool,
    )
    from benchmarks.kueue_sim import KUEUE_LIKE, simulate, team_jcts
    from benchmarks.live_harness import DWF, RealApiServer, need_binaries
    from benchmarks.live_operator import (
        HANG,
        POOLS,
        ROOT,
        check_live_options,
        operator_process,
        prepare,
    )
    from benchmarks.live_pool import operator_cpu
    from benchmarks.operator_burst import children
    from idlegate.controlplane import kueue
    from idlegate.controlplane.launcher import AUDIT_LOG, start

SYSTEMS = ("idlegate", "kueue")
KUEUE_HOME = Path(os.environ.get("IDLEGATE_KUEUE_HOME", ROOT / "out" / "kueue"))
"""Where ``make kueue`` put the manager and its configuration."""
SAMPLE = 0.5
"""Wall seconds between two samples of the controller's memory."""
STEADY = ("b", "c")


@contextlib.contextmanager
def controller(
    system: str, api: Any, reclaim: bool, policy: str, speed: float, log: Any, tmp: Path
) -> Iterator[int]:
    """`system` running against the plane of `api` with the scenario's queues, reclaim on
    or off, until exit: its process's pid."""
    if system == "idlegate":
        flags = ["--pool-size=330"]
        namespaces = list(TEAMS.values())
        with operator_process(api, ROOT / "src", speed, time.time(), log, namespaces, flags) as (
            proc,
            _,
        ):
            api.create(POOLS, pool(policy, reclaim))
            _until(lambda: (api.get(POOLS, None, "teams") or {}).get("status"), "the pool")
            yield proc.pid
        return
    manager = kueue.start(api.plane, KUEUE_HOME, tmp / "kueue")
    try:
        for resource, namespace, body in kueue_objects(reclaim):
            api.create(resource, body, namespace)
        for team in TEAMS:
            _until(lambda t=team: _active(api, t), f"Kueue's ClusterQueue {team}")
        yield manager.pid
    finally:
        kueue.stop(manager)


def _active(api: Any, queue: str) -> bool:
    found = api.get("kueue.x-k8s.io/v1beta2/clusterqueues", None, queue) or {}
    conditions = (found.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)


def _until(predicate: Any, what: str, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} was not ready after {seconds:g} s")
        time.sleep(0.1)


class Sampler:
    """The peak of a process's and its children's summed RSS (MiB), sampled every
    `SAMPLE` s in a thread of its own from enter to exit."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="rss", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while True:
            total = 0.0
            for pid in (self.pid, *children(self.pid)):
                with contextlib.suppress(OSError):
                    status = Path(f"/proc/{pid}/status").read_text()
                    kb = next(line for line in status.splitlines() if line.startswith("VmRSS"))
                    total += int(kb.split()[1]) / 1024
            self.peak = max(self.peak, total)
            if self._stop.wait(SAMPLE):
                return


def run(
    system: str, scenario: str, reclaim: bool, args: argparse.Namespace, log: Any
) -> dict[str, Any]:
    """One run (the module's docstring): its figures and the controller's costs."""
    found = arrivals(scenario, args.flood)
    with contextlib.ExitStack() as stack:
        if args.keep is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory())
        else:
            tmp = str(args.keep / f"{system}-{scenario}-{'on' if reclaim else 'off'}")
            shutil.rmtree(tmp, ignore_errors=True)
        plane = start(Path(tmp), need_binaries(), [NODES], args.speed, audit=True)
        with RealApiServer(plane) as api:
            prepare(api, list(TEAMS.values()))
            for ns in TEAMS.values():
                api.namespace_ready(ns)
            with controller(system, api, reclaim, args.policy, args.speed, log, Path(tmp)) as pid:
                costs = _drive(system, api, found, args.speed, pid, plane.pids)
            api.assert_no_internal_errors()
            with (plane.directory / AUDIT_LOG).open() as lines:
                life = lives(lines)
    teams = {ns: team for team, ns in TEAMS.items()}
    return {
        "system": system,
        "scenario": scenario,
        "reclaim": reclaim,
        "figures": figures(life, plan(found), teams, args.speed),
        **costs,
    }


def _drive(
    system: str, api: Any, found: list[Arrival], speed: float, pid: int, pids: dict[str, int]
) -> dict[str, Any]:
    """Submit the arrivals and wait for every stage's end, measuring the controller."""
    client = api.client
    if system == "kueue":
        driver = Driver(client, found)
        tracker, create = driver.tracker, driver.start
    else:
        tracker = Tracker(client, plan(found))

        def create(arrival: Arrival) -> None:
            api.create(DWF, dag_workflow(arrival), arrival.namespace)

    began, before = time.monotonic(), operator_cpu(pid)
    kcm = operator_cpu(pids["kube-controller-manager"])
    try:
        with Sampler(pid) as sampler:
            submit(found, speed, create)
            tracker.wait(HANG, f"{system}'s workflows")
    finally:
        tracker.close()
    after = operator_cpu(pid)
    kcm_after = operator_cpu(pids["kube-controller-manager"])
    return {
        "cpu_seconds": sum(after.values()) - sum(before.values()),
        "kcm_cpu_seconds": sum(kcm_after.values()) - sum(kcm.values()),
        "peak_mib": sampler.peak,
        "wall_seconds": time.monotonic() - began,
    }


HEADER = (
    f"{'system':8} {'scenario':8} {'reclaim':7} {'mean JCT a/b/c':>17} {'rho b/c':>9} "
    f"{'Jain':>5} {'worst wait':>10} {'stopped/lost s (%)':>19} {'sub>adm p50/p99':>15} "
    f"{'rel>bind p50/p99':>16} {'CPU ms/pod +kcm':>15} {'MiB':>4} {'writes/pod ctl+job+drv':>22} "
    f"{'wall':>5}"
)


def row(result: dict[str, Any], alone: dict[str, float]) -> str:
    """One run's line of the table (`HEADER`'s columns)."""
    f: Figures = result["figures"]
    jct = "/".join(_num(f.mean_jct(t), 0) for t in TEAMS)
    rho = "/".join(_num(_rho(f, alone, t), 2) for t in STEADY)
    share = 100 * f.lost / f.work if f.work else 0.0
    controller = "idlegate" if result["system"] == "idlegate" else "kueue"
    pods = max(f.pods, 1)
    cpu = f"{result['cpu_seconds'] * 1000 / pods:.1f}+{result['kcm_cpu_seconds'] * 1000 / pods:.1f}"
    writes = "+".join(f"{f.per_pod(who):.2f}" for who in (controller, "job-controller", "driver"))
    return (
        f"{result['system']:8} {result['scenario']:8} {'on' if result['reclaim'] else 'off':7} "
        f"{jct:>17} {rho:>9} {_num(f.jain, 3):>5} {f.worst_wait:10.0f} "
        f"{f'{f.stopped}/{f.lost:.0f} ({share:.1f})':>19} {latency(f.admission):>15} "
        f"{latency(f.binds):>16} {cpu:>15} "
        f"{result['peak_mib']:4.0f} {writes:>22} {result['wall_seconds']:5.0f}"
    )


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _rho(f: Figures, alone: dict[str, float], team: str) -> float | None:
    shared = f.mean_jct(team)
    return None if shared is None or not alone.get(team) else shared / alone[team]


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    return run_script(parser(), measure, argv)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument(
        "--scenarios", default="flood,large", help="the shared scenarios (default flood,large)"
    )
    parser.add_argument(
        "--reclaim", default="off,on", help="reclaim of lent quota, in turn (default off,on)"
    )
    parser.add_argument(
        "--systems", default="idlegate,kueue", help="the controllers (default idlegate,kueue)"
    )
    parser.add_argument(
        "--flood", type=int, default=24, help="workflows team a floods (default 24)"
    )
    parser.add_argument(
        "--speed", type=float, default=2.0, help="scenario seconds per wall second (default 2)"
    )
    parser.add_argument(
        "--policy", default="default", help="idlegate's pool policy (default: default)"
    )
    parser.add_argument("--json", type=Path, help="write every run's figures there")
    parser.add_argument("--log", type=Path, help="the controllers' output (default: discarded)")
    parser.add_argument(
        "--breakdown",
        type=Path,
        nargs="+",
        help="run nothing: print where the stages' time went in these folders kept by "
        "--keep (give the --flood and --speed they ran with)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep each run's plane folder (its components' logs, the audit log) in "
        "KEEP/<system>-<scenario>-<reclaim> (default: a temporary folder, removed)",
    )
    return parser


def _choices(text: str, known: tuple[str, ...], flag: str) -> list[str]:
    chosen = text.split(",")
    if unknown := [c for c in chosen if c not in known]:
        raise IdlegateError(
            f"{flag} {text}: no {', '.join(map(repr, unknown))}: give {', '.join(known)}, "
            "comma-separated"
        )
    return chosen


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run every controller alone, then on each shared scenario with reclaim as `args` say,
    and print the table (the options are checked before anything starts); with
    `--breakdown`, only read the kept runs."""
    if args.breakdown:
        for kept in args.breakdown:
            print_breakdown(kept, args.flood, args.speed)
        return []
    check_live_options(args.speed, [args.policy], 1)
    scenarios = _choices(args.scenarios, SCENARIOS[1:], "--scenarios")
    reclaims = [r == "on" for r in _choices(args.reclaim, ("off", "on"), "--reclaim")]
    systems = _choices(args.systems, SYSTEMS, "--systems")
    if args.flood < 1:
        raise IdlegateError(f"--flood {args.flood}: give 1 or more workflows")
    need_binaries()
    if "kueue" in systems:
        kueue.binary(KUEUE_HOME)
    command = (
        f"python -m benchmarks.kueue_vs_idlegate --scenarios {args.scenarios} --reclaim "
        f"{args.reclaim} --systems {args.systems} --flood {args.flood} --speed {args.speed:g} "
        f"--policy {args.policy}"
    )
    print(command, flush=True)
    print(HEADER, flush=True)
    results, alone = [], {}
    log = open(args.log, "ab") if args.log else open(os.devnull, "wb")  # noqa: SIM115
    with log:
        for system in systems:
            first = _one(system, "alone", False, args, log)
            alone[system] = {t: first["figures"].mean_jct(t) for t in STEADY}
            print(row(first, alone[system]), flush=True)
            results.append(first)
        for scenario in scenarios:
            for reclaim in reclaims:
                for system in systems:
                    result = _one(system, scenario, reclaim, args, log)
                    print(row(result, alone[system]), flush=True)
                    results.append(result)
    simulated = simulations(scenarios, reclaims, args)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        every = [jsonable(r) for r in results] + simulated
        args.json.write_text(json.dumps(every, indent=1))
    print("rerun: " + command)
    return results


SIM_HEADER = (
    f"{'simulator':14} {'scenario':8} {'reclaim':7} {'mean JCT a/b/c':>17} {'rho b/c':>9} "
    f"{'Jain':>5} {'worst wait':>10} {'stopped/lost s (%)':>19}"
)


def simulations(
    scenarios: list[str], reclaims: list[bool], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """The same scenarios in idlegate's simulator (benchmarks/kueue_sim.py), under the
    pool's policy and the Kueue-like baseline: their rows printed, their figures."""
    print("the same arrivals, queues and nodes in idlegate's simulator (no controller's latency):")
    print(SIM_HEADER, flush=True)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        alone = {  # (nobody borrows alone: reclaim changes nothing there)
            name: team_jcts(simulate(arrivals("alone", args.flood), False, spec, Path(tmp)))
            for name, spec in (("idlegate", args.policy), ("kueue-like", KUEUE_LIKE[False]))
        }
        for reclaim in reclaims:
            specs = {"idlegate": args.policy, "kueue-like": KUEUE_LIKE[reclaim]}
            for name, spec in specs.items():
                for scenario in scenarios:
                    found = arrivals(scenario, args.flood)
                    result = simulate(found, reclaim, spec, Path(tmp))
                    print(sim_row(name, scenario, reclaim, result, alone[name], found), flush=True)
                    out.append({"simulator": name, "spec": spec, "scenario": scenario,
                                "reclaim": reclaim, "alone": alone[name], **result})  # fmt: skip
    return out


def sim_row(
    name: str,
    scenario: str,
    reclaim: bool,
    result: dict[str, Any],
    alone: dict[str, float],
    found: list[Arrival],
) -> str:
    """A simulation's line (`SIM_HEADER`'s columns)."""
    jcts = team_jcts(result)
    jct = "/".join(_num(jcts.get(t), 0) for t in TEAMS)
    rho = "/".join(
        _num(jcts[t] / alone[t] if t in jcts and t in alone else None, 2) for t in STEADY
    )
    worst = max((q["worst_wait"] for q in result.get("queues") or []), default=0.0)
    lost = float(result.get("lost_seconds") or 0.0)
    work = sum(n * a.shape.seconds for a in found for _, n, _ in a.shape.stages) + lost
    stopped = f"{result.get('preempted') or 0}/{lost:.0f} ({100 * lost / work:.1f})"
    return (
        f"{name:14} {scenario:8} {'on' if reclaim else 'off':7} {jct:>17} {rho:>9} "
        f"{_num(result.get('jain'), 3):>5} {worst:10.0f} {stopped:>19}"
    )


def _one(
    system: str, scenario: str, reclaim: bool, args: argparse.Namespace, log: Any
) -> dict[str, Any]:
    try:
        return run(system, scenario, reclaim, args, log)
    except (RuntimeError, TimeoutError, subprocess.SubprocessError) as exc:
        sys.exit(f"Error: {system} on {scenario}: {exc} (the controllers' output: --log FILE)")


def print_breakdown(kept: Path, flood: int, speed: float) -> None:
    """Where the stages' time went in a run kept by `--keep` (its folder's name says its
    scenario): each step's p50/p99, wall seconds (kueue_figures.breakdown)."""
    scenario = kept.name.split("-")[1] if kept.name.count("-") == 2 else ""
    if scenario not in SCENARIOS or not (kept / AUDIT_LOG).exists():
        raise IdlegateError(
            f"--breakdown {kept}: not a run kept by --keep (a folder <system>-<scenario>-"
            "<reclaim> with logs/audit.log): give one of those folders"
        )
    found = arrivals(scenario, flood)
    seconds = {
        (a.namespace, a.name, st): a.shape.seconds / speed
        for a in found
        for st, _, _ in a.shape.stages
    }
    with (kept / AUDIT_LOG).open() as lines:
        life = lives(lines)
    for teams in (tuple(TEAMS), ("a",), STEADY):
        planned = {k: v for k, v in plan(found).items() if k[0] in {TEAMS[t] for t in teams}}
        steps = breakdown(life, planned, seconds)
        said = ", ".join(
            f"{step} {latency(values)} ({len(values)})" for step, values in steps.items()
        )
        print(f"{kept.name}, teams {'+'.join(teams)}: {said}", flush=True)


def jsonable(result: dict[str, Any]) -> dict[str, Any]:
    """A run's result with its figures' fields in it (shallow: their lists and counts as
    they are)."""
    f = result["figures"]
    figures_of = {field.name: getattr(f, field.name) for field in dataclasses.fields(f)}
    return {**{k: v for k, v in result.items() if k != "figures"}, **figures_of}


if __name__ == "__main__":
    main()
