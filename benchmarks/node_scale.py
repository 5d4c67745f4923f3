"""The simulator's time against its number of nodes (issue 61): the same 100 workflows
on 30, 300 and 3,000 nodes, side by side.

    python benchmarks/node_scale.py [--nodes 30,300,3000] [--runs 5] [--json]

Each size runs ``idlegate simulate -w k8s-batch -o requests=true --resources
cpu=8,memory=32Gi --nodes N -k N -s fifo`` as a whole process (import and setup
included: what a user waits for), the sizes in turn round after round (30, 300, 3000,
30, ...) after one warm-up round, so that a machine's drift falls on all of them. It
prints each size's median wall and CPU seconds (user + sys of the process) over the
rounds, and the ratio of the largest size to the smallest, taken round by round and its
median quoted: placement and room grow with the nodes' shapes, not with their count
(`idlegate.sim.nodeset`), so it stays near 1 (docs/resources.md quotes it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from idlegate.flags import description

COMMAND = (
    "simulate -w k8s-batch -o requests=true --resources cpu=8,memory=32Gi "
    "--nodes {n} -k {n} -s fifo"
)
"""The command timed, `{n}` the nodes (and pods: one a node)."""


def timed(nodes: int) -> tuple[float, float]:
    """Wall and CPU seconds of one run of `COMMAND` on `nodes` nodes (a failure stops)."""
    args = [sys.executable, "-m", "idlegate", *COMMAND.format(n=nodes).split()]
    before = os.times()
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = os.times()
    if done.returncode != 0:
        raise SystemExit(f"Error: {' '.join(args[1:])} failed: {done.stderr.strip()}")
    user = after.children_user - before.children_user
    return wall, user + after.children_system - before.children_system


def rounds(sizes: list[int], runs: int) -> dict[int, list[tuple[float, float]]]:
    """`runs` rounds of every size in turn, after one round not counted."""
    for n in sizes:
        timed(n)
    found: dict[int, list[tuple[float, float]]] = {n: [] for n in sizes}
    for _ in range(runs):
        for n in sizes:
            found[n].append(timed(n))
    return found


def summary(found: dict[int, list[tuple[float, float]]]) -> dict[str, object]:
    """Each size's median wall and CPU seconds and the largest size's over the smallest's,
    round by round (the median of the ratios)."""
    small, large = min(found), max(found)
    pairs = list(zip(found[large], found[small], strict=True))
    return {
        "command": "idlegate " + COMMAND.format(n="N"),
        "wall_s": {n: statistics.median(w for w, _ in runs) for n, runs in found.items()},
        "cpu_s": {n: statistics.median(c for _, c in runs) for n, runs in found.items()},
        "ratio": f"{large}/{small}",
        "wall_ratio": statistics.median(a[0] / b[0] for a, b in pairs),
        "cpu_ratio": statistics.median(a[1] / b[1] for a, b in pairs),
        "runs": len(found[small]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--nodes", default="30,300,3000", help="sizes, comma-separated")
    parser.add_argument("--runs", type=int, default=5, help="counted rounds (after a warm-up)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        sizes = sorted({int(n) for n in args.nodes.split(",") if n.strip()})
    except ValueError:
        print(f"Error: --nodes {args.nodes!r}: give node counts, e.g. 30,300,3000", file=sys.stderr)
        return 1
    if len(sizes) < 2 or sizes[0] < 1 or args.runs < 1:
        print("Error: give two node counts or more (>= 1) and --runs 1 or more", file=sys.stderr)
        return 1
    result = summary(rounds(sizes, args.runs))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"idlegate {COMMAND.format(n='N')}, median of {result['runs']} rounds (after a warm-up)")
    print(f"{'nodes':>8} {'wall s':>8} {'cpu s':>8}")
    wall, cpu = result["wall_s"], result["cpu_s"]
    assert isinstance(wall, dict) and isinstance(cpu, dict)
    for n in sizes:
        print(f"{n:>8} {wall[n]:>8.2f} {cpu[n]:>8.2f}")
    print(
        f"{result['ratio']}: wall x{result['wall_ratio']:.2f}, cpu x{result['cpu_ratio']:.2f} "
        "(median of the rounds' ratios)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
