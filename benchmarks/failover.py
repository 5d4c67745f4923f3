"""Failover of two operator replicas (issues 42 and 51): the leader stopped mid-burst, how
long until a replica releases pods again, and what the failover left behind.

Each run is one of tests/failover.py's scenarios: two ``idlegate operator
--leader-election`` processes (pool `--pool`, fair) against the test API server of
tests/k8s and its simulated kubelet, `--workflows` workflows of two stages (2 + 1 tasks of
0.5 wall seconds) created at once, the leader stopped once `--kill-at` of them have
finished:

* ``kill``: killed -9;
* ``term``: SIGTERM;
* ``term-both``: SIGTERM, and 0.3 s later SIGTERM to the standby; then a third replica
  starts (the Deployment's next Pod);
* ``same-name``: both replicas run under one POD_NAME; the leader is killed -9 and started
  again under it.

Measured on the emulator's clock, where the writes land: *stop to Lease*, from the stop to
the next holder's write of itself into the Lease; *stop to release*, to the first gate
removal after it (the new leader's rebuild of the state lies between the two); and on the
wall clock, *longest /metrics*, the slowest answer of the new leader's /metrics (asked
every 0.1 s) in the 10 s after it took the Lease (its loop's stall at the takeover), and
*SIGTERM to exit* of each replica sent one (the worst). Checked: every
workflow Succeeded, no pod created twice, no write by a replica that did not hold the
Lease, the finished workflows whose status changed after they finished, the writes (kopf's
too) to workflows finished before the stop and the Events posted again (refused, 409)
from the new leader's taking of the Lease on, the last leader's
``idlegate_workflows_finished_total`` against the workflows it finished, the workflows
recorded twice across the replicas' history files, the Lease taken by a replica after its
SIGTERM, and the most pods running at once against the pool. The lease settings of `--leases` (duration / renew deadline / retry
period, seconds) run side by side, `--runs` times each.

    python -m benchmarks.failover [--runs 3] [--scenarios kill,term,term-both,same-name]
        [--leases 15/10/2] [--workflows 200] [--pool 8] [--kill-at 0.3]

(run from the repository root: the script imports the test API server from tests/k8s).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from idlegate.flags import description
from tests.failover import SCENARIOS, failover
from tests.k8s.harness import serving_crd

TARGET = 20.0
"""Seconds from the leader's kill to the standby's first release (issue 42)."""
EXIT_TARGET = 1.0
"""Seconds from a SIGTERM to the replica's exit (issue 51)."""


def lease_settings(text: str) -> list[tuple[int, float, float]]:
    """ "15/10/2,8/6/1" -> [(15, 10.0, 2.0), (8, 6.0, 1.0)]."""
    found = []
    for item in text.split(","):
        duration, deadline, retry = item.split("/")
        found.append((int(duration), float(deadline), float(retry)))
    return found


def scenarios(text: str) -> list[str]:
    found = text.split(",")
    if unknown := [s for s in found if s not in SCENARIOS]:
        raise argparse.ArgumentTypeError(f"unknown {unknown}; known: {', '.join(SCENARIOS)}")
    return found


def table(rows: list[dict[str, Any]]) -> str:
    """One line per run, then one per scenario and lease setting (mean and worst)."""
    lines = [
        "| scenario | lease | run | stop to Lease | stop to release | longest /metrics | "
        "SIGTERM to exit | Succeeded | pods created twice | second writers | "
        "finished rewritten | writes to finished | Events posted again | "
        "finished counted / by it | recorded twice | taken after SIGTERM | most running / pool |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        exit_ = f"{r['exit']:.2f} s" if r["exit"] is not None else "-"
        lines.append(
            f"| {r['scenario']} | {r['lease']} | {r['run']} | {r['to_lease']:.1f} s | "
            f"{r['to_release']:.1f} s | {r['stall']:.2f} s | {exit_} | {r['succeeded']} / {r['workflows']} | "
            f"{r['duplicates']} | {r['second_writers']} | {r['rewritten']} | "
            f"{r['finished_writes']} | {r['events_again']} | {r['counted']:g} / {r['by_it']} | {r['recorded_twice']} | {r['taken']} | "
            f"{r['max_running']} / {r['pool']} |"
        )
    lines += [
        "",
        "| scenario | lease | stop to release: mean | worst | SIGTERM to exit: worst |",
        "|---|---|---|---|---|",
    ]
    for key in dict.fromkeys((r["scenario"], r["lease"]) for r in rows):
        runs = [r for r in rows if (r["scenario"], r["lease"]) == key]
        times = [r["to_release"] for r in runs]
        exits = [r["exit"] for r in runs if r["exit"] is not None]
        worst = f"{max(exits):.2f} s" if exits else "-"
        lines.append(
            f"| {key[0]} | {key[1]} | {statistics.mean(times):.1f} s | {max(times):.1f} s | "
            f"{worst} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scenarios", type=scenarios, default=list(SCENARIOS))
    parser.add_argument("--leases", type=lease_settings, default=lease_settings("15/10/2"))
    parser.add_argument("--workflows", type=int, default=200)
    parser.add_argument("--pool", type=int, default=8)
    parser.add_argument("--kill-at", type=float, default=0.3)
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    directory = Path(tempfile.mkdtemp(prefix="failover-"))
    for api in serving_crd(directory):
        for run in range(1, args.runs + 1):
            for scenario in args.scenarios:
                for lease in args.leases:
                    result = failover(
                        api,
                        directory,
                        workflows=args.workflows,
                        pool=args.pool,
                        lease=lease,
                        kill_after=round(args.kill_at * args.workflows),
                        scenario=scenario,
                    )
                    rows.append(
                        {
                            "scenario": scenario,
                            "lease": f"{lease[0]} / {lease[1]:g} / {lease[2]:g} s",
                            "run": run,
                            "to_lease": result.to_lease,
                            "to_release": result.to_release,
                            "stall": result.stall,
                            "exit": max(result.exits) if result.exits else None,
                            "succeeded": sum(p == "Succeeded" for p in result.finished.values()),
                            "workflows": args.workflows,
                            "duplicates": len(result.duplicates),
                            "second_writers": len(result.second_writers),
                            "rewritten": len(result.rewritten),
                            "finished_writes": len(result.finished_writes),
                            "events_again": result.events_again,
                            "counted": result.counted[0],
                            "by_it": result.counted[1],
                            "recorded_twice": len(result.recorded_twice),
                            "taken": len(result.taken_when_told_to_stop),
                            "max_running": result.max_running,
                            "pool": args.pool,
                        }
                    )
                    print(rows[-1], file=sys.stderr, flush=True)
    print(table(rows))
    return rows


if __name__ == "__main__":
    main()
