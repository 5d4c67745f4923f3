"""Failover of two operator replicas (issue 42): the leader killed -9 mid-burst, how long
until the standby releases pods again.

Each run is tests/failover.py's scenario: two ``idlegate operator --leader-election``
processes (pool `--pool`, fair) against the test API server of tests/k8s and its simulated
kubelet, `--workflows` workflows of two stages (2 + 1 tasks of 0.5 wall seconds) created at
once, the leader killed -9 once `--kill-after` of them have finished. Measured on the
emulator's clock, where the writes land:

* *kill to Lease*: from the kill to the standby's write of itself into the Lease;
* *kill to release*: from the kill to the first gate removal after that write (the new
  leader's first release; its rebuild of the state lies between the two);

and checked: every workflow finished Succeeded, no pod created twice, the most pods
running at once against the pool. The lease settings given by `--leases` (duration /
renew deadline / retry period, seconds) run side by side, `--runs` times each.

    python -m benchmarks.failover [--runs 3] [--leases 15/10/2,8/6/1] [--workflows 200]

(run from the repository root: the script imports the test API server from tests/k8s).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.failover import failover
from tests.k8s.harness import serving_crd

TARGET = 20.0
"""Seconds from the leader's kill to the standby's first release (issue 42)."""


def lease_settings(text: str) -> list[tuple[int, float, float]]:
    """ "15/10/2,8/6/1" -> [(15, 10.0, 2.0), (8, 6.0, 1.0)]."""
    found = []
    for item in text.split(","):
        duration, deadline, retry = item.split("/")
        found.append((int(duration), float(deadline), float(retry)))
    return found


def table(rows: list[dict[str, Any]]) -> str:
    """One line per run, then one per lease setting (mean and worst)."""
    lines = [
        "| lease (duration / deadline / retry) | run | kill to Lease | kill to release | "
        "Succeeded | duplicates | most running / pool |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['lease']} | {r['run']} | {r['to_lease']:.1f} s | {r['to_release']:.1f} s | "
            f"{r['succeeded']} / {r['workflows']} | {r['duplicates']} | "
            f"{r['max_running']} / {r['pool']} |"
        )
    lines += ["", "| lease | kill to release: mean | worst | target |", "|---|---|---|---|"]
    for lease in dict.fromkeys(r["lease"] for r in rows):
        times = [r["to_release"] for r in rows if r["lease"] == lease]
        lines.append(
            f"| {lease} | {statistics.mean(times):.1f} s | {max(times):.1f} s | {TARGET:g} s |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--leases", type=lease_settings, default=lease_settings("15/10/2,8/6/1"))
    parser.add_argument("--workflows", type=int, default=200)
    parser.add_argument("--pool", type=int, default=8)
    parser.add_argument("--kill-after", type=int, default=40)
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    directory = Path(tempfile.mkdtemp(prefix="failover-"))
    for api in serving_crd(directory):
        for run in range(1, args.runs + 1):
            for lease in args.leases:
                result = failover(
                    api,
                    directory,
                    workflows=args.workflows,
                    pool=args.pool,
                    lease=lease,
                    kill_after=args.kill_after,
                )
                rows.append(
                    {
                        "lease": f"{lease[0]} / {lease[1]:g} / {lease[2]:g} s",
                        "run": run,
                        "to_lease": result.to_lease,
                        "to_release": result.to_release,
                        "succeeded": sum(p == "Succeeded" for p in result.finished.values()),
                        "workflows": args.workflows,
                        "duplicates": len(result.duplicates),
                        "max_running": result.max_running,
                        "pool": args.pool,
                    }
                )
                print(rows[-1], file=sys.stderr, flush=True)
    print(table(rows))
    return rows


if __name__ == "__main__":
    main()
