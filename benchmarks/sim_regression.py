"""Simulator speed of this tree against another git commit, side by side in one run.

Runs `sim_speed.py`'s episodes (TPC-H, 50 executors, 1 + 200 jobs, fidelity on, 25 s and
15 s interarrival, seeds 0..N-1) with the current tree and with a git worktree of REF,
alternating between the two trees round by round, each tree in a fresh interpreter
(the same one). Prints per interarrival the seconds per episode of each tree (the
fastest of the rounds per episode, median over seeds), the ratio REF / current per
episode, and whether every job's JCT is the same to the last digit in both trees.
Exits 1 when a JCT differs: a speed change must not change a result. Times are CPU
seconds of the episode's process by default (`--clock wall` for wall time): on shared
cores they move less than wall time.

    python benchmarks/sim_regression.py --against REF [--seeds 3] [--rounds 3]

REF is any commit git knows (default HEAD: the uncommitted changes against the last
commit). Older commits with the package at the repository root (before the src layout)
work too. The worktree is made in a temporary folder and removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
INTERARRIVALS = (25.0, 15.0)


def package_root(tree: Path, scratch: Path) -> Path:
    """The folder to put on PYTHONPATH so that `import idlegate` imports `tree`'s package.

    A tree in the src layout has it in src/; an older one is the package itself, so a
    folder named idlegate linking to it is made in `scratch`.
    """
    if (tree / "src" / "idlegate").is_dir():
        return tree / "src"
    if (tree / "__init__.py").is_file() and (tree / "sim").is_dir():
        root = scratch / "root"
        root.mkdir(exist_ok=True)
        (root / "idlegate").symlink_to(tree, target_is_directory=True)
        return root
    raise SystemExit(f"Error: {tree} holds no idlegate package (neither src/idlegate nor sim/)")


def worker(seeds: int, scheduler: str, where: str, clock: str) -> None:
    """Run the episodes with the idlegate on PYTHONPATH; print their times and JCTs as JSON."""
    sys.path.insert(0, str(HERE))
    from sim_speed import episode  # the one definition of an episode

    timer = time.process_time if clock == "cpu" else time.perf_counter

    episode(INTERARRIVALS[0], 0, scheduler, where)  # warm caches (trace parsing)
    out = []
    for interarrival in INTERARRIVALS:
        for seed in range(seeds):
            seconds, result = episode(interarrival, seed, scheduler, where, timer)
            jcts = [r.finish - r.arrival for r in sorted(result.records, key=lambda r: r.id)]
            out.append({"interarrival": interarrival, "seed": seed, "s": seconds, "jct": jcts})
    json.dump(out, sys.stdout)


def run_tree(root: Path, args: argparse.Namespace) -> list[dict]:
    """One round of every episode in a fresh interpreter importing idlegate from `root`."""
    command = [sys.executable, str(Path(__file__).resolve()), "--worker"]
    command += ["--seeds", str(args.seeds), "--scheduler", args.scheduler]
    command += ["--tpch-dir", args.tpch_dir, "--clock", args.clock]
    env = {**os.environ, "PYTHONPATH": str(root)}
    # a neutral cwd, so that no idlegate folder there shadows the tree's
    done = subprocess.run(
        command, env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"Error: the episodes failed with {root}:\n{done.stderr}")
    return json.loads(done.stdout)


def report(current: list[list[dict]], ref: list[list[dict]], label: str) -> bool:
    """Print the side-by-side table; True when every JCT matches."""
    print(
        f"{'interarrival':>12} {'current s/ep':>13} {label + ' s/ep':>14} "
        f"{'ratio ' + label + '/current (median, min-max)':>40} {'JCTs':>10}"
    )
    same = True
    for interarrival in INTERARRIVALS:
        idx = [i for i, e in enumerate(current[0]) if e["interarrival"] == interarrival]
        mine = [min(r[i]["s"] for r in current) for i in idx]
        theirs = [min(r[i]["s"] for r in ref) for i in idx]
        ratios = [b / a for a, b in zip(mine, theirs, strict=True)]
        match = all(r[i]["jct"] == current[0][i]["jct"] for r in current + ref for i in idx)
        same &= match
        print(
            f"{interarrival:>11.0f}s {statistics.median(mine):>13.3f} "
            f"{statistics.median(theirs):>14.3f} "
            f"{statistics.median(ratios):>27.2f} ({min(ratios):.2f}-{max(ratios):.2f}) "
            f"{'identical' if match else 'DIFFER':>10}"
        )
    return same


def main() -> int:
    # (the first paragraph, inline: this file runs against other checkouts' idlegate,
    # which may lack `idlegate.flags.description`)
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--against", default="HEAD", help="git commit to compare with")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="runs of every episode per tree")
    parser.add_argument("--scheduler", default="fair")
    parser.add_argument("--tpch-dir", default=None)
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="cpu: the process's CPU time (steadier while other work shares the cores)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.seeds, args.scheduler, args.tpch_dir, args.clock)
        return 0
    from idlegate.errors import IdlegateError
    from idlegate.sim.tpch import resolve_tpch_dir

    try:  # found once, here: an old tree would look for it beside its worktree
        args.tpch_dir = str(resolve_tpch_dir(args.tpch_dir))
    except IdlegateError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    sha = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", args.against],
        capture_output=True,
        text=True,
    )
    if sha.returncode:
        print(f"Error: git knows no commit {args.against!r}: {sha.stderr.strip()}", file=sys.stderr)
        return 1
    label = sha.stdout.strip()
    with tempfile.TemporaryDirectory(prefix="idlegate-simreg-") as scratch:
        tree = Path(scratch) / "tree"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), label],
            check=True,
            capture_output=True,
        )
        try:
            roots = {"current": REPO / "src", label: package_root(tree, Path(scratch))}
            runs: dict[str, list[list[dict]]] = {name: [] for name in roots}
            for i in range(args.rounds):
                order = list(roots) if i % 2 == 0 else list(roots)[::-1]
                for name in order:
                    runs[name].append(run_tree(roots[name], args))
        finally:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
                check=False,
                capture_output=True,
            )
    print(
        f"{args.scheduler}, TPC-H, 50 executors, 1 + 200 jobs, seeds 0-{args.seeds - 1}; "
        f"{args.clock} seconds, fastest of {args.rounds} interleaved rounds per episode"
    )
    return 0 if report(runs["current"], runs[label], label) else 1


if __name__ == "__main__":
    raise SystemExit(main())
