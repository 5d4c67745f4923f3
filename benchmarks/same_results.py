"""Do two checkouts print the same results? Runs a list of `idlegate` commands in each and
says, per command, "identical" or where the outputs first part.

    python benchmarks/same_results.py --before DIR --after DIR [-j 1] [--only TEXT]

Each DIR is a checkout with its own venv (`make .venv/.dev` there, or a link to another
checkout's); a command runs as ``DIR/.venv/bin/idlegate ...`` with DIR as its working
directory, so that each checkout finds the traces beside itself as usual, and with
``DIR/src`` first on ``PYTHONPATH``, so that each runs its own source even where the venv's
editable install points at another checkout (it is checked before the first command). Written for the queues work (issues 59 and 61,
docs/queues.md): with no queue given the results must not move by a byte.

The commands (:data:`COMMANDS`; the project names no suite of compare commands, so these
stand for one): ``compare --json`` on every generated workload at small sizes (and on
TPC-H's and Alibaba's traces) with fifo, srpt, fair, sjf-cp, learned:default and default;
on pools of resources (one bin, and ``--nodes 3``) with the pods-gate variants; two seeds
each; and ``idlegate demo`` (it has no size flags: the full demo, with ``-j 1``; its report
files are compared). Then the commands of :data:`CHANGED`, whose outputs a documented fix
of issue 60 changed: they must differ. A command's outputs are the same when its exit code
(and its error, when it fails), its standard output (but for its one wall-clock figure,
:data:`WALL_CLOCK`) and the files it writes are the same bytes; where a JSON output
differs the first differing path is printed
(``$.schedulers.fifo.runs[0].avg_jct: 31.2 != 30.9``). Progress goes to standard error.
Exits 1 when any command of COMMANDS differs or one of CHANGED does not.

`-j` runs that many commands at once (each with its own ``-j 1``); on a shared 2-core
machine keep it at 1. `--only TEXT` runs the commands containing TEXT (to bisect one).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEDULERS = "fifo,srpt,fair,sjf-cp,learned:default,default"
SMALL = "--seeds 2 --first-seed 1000 --json"
GENERATED = (
    "synthetic",
    "tpch-like",
    "mixed",
    "bursty",
    "k8s-batch",
    "argo-shapes",
    "airflow-shapes",
    "follow",
    "push",
    "recurring",
    "shift",
    "lublin",
)
"""The workloads `compare` generates without data files (mixed takes TPC-H's traces when
they are found beside the checkout, else generated DAGs: the same in both checkouts)."""

_SIZE = {"shift": "-o first_jobs=15 -o second_jobs=15"}
"""A generated workload whose size is not `--jobs-count` (shift's two phases; it refuses
that flag, and two refusals would compare equal)."""

TRACES = ("tpch", "alibaba")
"""Workloads read from the traces beside the checkout (../shared/data), at 20 jobs."""

POOLS = "-w k8s-batch -o requests=true -o interarrival=240 --jobs-count 30"
GATED = "default,pods-gate:default,srpt,pods-gate:srpt,fair,pods-gate:fair"

COMMANDS: tuple[str, ...] = (
    *(
        f"compare -w {w} {_SIZE.get(w, '--jobs-count 30')} --schedulers {SCHEDULERS} {SMALL}"
        for w in GENERATED
    ),
    *(f"compare -w {w} --jobs-count 20 --schedulers {SCHEDULERS} {SMALL}" for w in TRACES),
    f"compare {POOLS} --resources cpu=24,memory=96Gi,nvidia.com/gpu=2 -k 330 "
    f"--schedulers {GATED} {SMALL}",
    f"compare {POOLS} --nodes 3 --resources cpu=8,memory=32Gi,nvidia.com/gpu=1 -k 330 "
    f"--schedulers {GATED} {SMALL}",
    # (the full stream on nodes: a fork of a gated pool that kept its subclass moved seed
    # 1000 here, and not at 30 jobs)
    f"compare {POOLS.replace(' --jobs-count 30', '')} --nodes 3 --resources "
    "cpu=8,memory=32Gi,nvidia.com/gpu=1 -k 330 --schedulers pods-gate:default --seeds 1 "
    "--first-seed 1000 --json",
    "demo -j 1 --out {out}",
)
"""`idlegate` command lines; ``{out}`` is a fresh folder per run, whose files are compared."""

NODES_PROBE = "-w k8s-batch -o requests=true --jobs-count 5 --schedulers fifo --seeds 1 --json"
CHANGED: dict[str, str] = {
    f"compare {NODES_PROBE} --resources cpu=24,memory=96Gi,nvidia.com/gpu=2.5 -k 330": (
        "issue 60: a fraction of nvidia.com/gpu refused (sim/resources.py)"
    ),
}
"""Commands whose output a documented fix changed since the queues work began, each with
its fix: they must differ (run after :data:`COMMANDS`; the check can tell a change)."""

WALL_CLOCK = re.compile(rb"(\d+ runs in )\d+(?:\.\d+)? s\b")
"""The one wall-clock figure the commands print (the console report's "45 runs in 62.3 s"):
not a result, so it is masked before the bytes are compared."""


def masked(stdout: bytes) -> bytes:
    """`stdout` with its wall-clock figure (:data:`WALL_CLOCK`) written as ``X``."""
    return WALL_CLOCK.sub(rb"\1X s", stdout)


@dataclass(frozen=True)
class Output:
    """What one command left: exit code, standard output, first line of standard error, and
    the files it wrote into its ``{out}`` folder (name -> bytes)."""

    code: int
    stdout: bytes
    error: str
    files: dict[str, bytes]


def first_difference(before: Any, after: Any, path: str = "$") -> str | None:
    """The first JSON path where two parsed JSON values differ, with both values there;
    None when they are equal. Keys are walked in `before`'s order, then `after`'s extra
    ones; a value present on one side only is shown as ``(missing)``."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in [*before, *(k for k in after if k not in before)]:
            if key not in after or key not in before:
                mine = json.dumps(before[key]) if key in before else "(missing)"
                theirs = json.dumps(after[key]) if key in after else "(missing)"
                return f"{path}.{key}: {short(mine)} != {short(theirs)}"
            found = first_difference(before[key], after[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(before, list) and isinstance(after, list):
        for i, (mine, theirs) in enumerate(zip(before, after, strict=False)):
            found = first_difference(mine, theirs, f"{path}[{i}]")
            if found:
                return found
        if len(before) != len(after):
            return f"{path}: {len(before)} items != {len(after)} items"
        return None
    # 1 == 1.0 == True in Python, not in the printed bytes
    if type(before) is not type(after) or before != after:
        return f"{path}: {short(json.dumps(before))} != {short(json.dumps(after))}"
    return None


def short(text: str, limit: int = 80) -> str:
    """`text` cut to `limit` characters, marked where cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def bytes_difference(name: str, before: bytes, after: bytes) -> str | None:
    """None when the bytes are equal; else the first JSON path where they differ when both
    parse as JSON, else the first differing line."""
    if before == after:
        return None
    try:
        found = first_difference(json.loads(before), json.loads(after))
    except ValueError:  # not JSON: the first line that differs
        lines = zip(
            before.decode(errors="replace").splitlines(),
            after.decode(errors="replace").splitlines(),
            strict=False,
        )
        for number, (mine, theirs) in enumerate(lines, 1):
            if mine != theirs:
                return f"{name} line {number}: {short(mine)!r} != {short(theirs)!r}"
        return f"{name}: one is longer ({len(before)} != {len(after)} bytes)"
    return f"{name} {found}" if found else f"{name}: same JSON, other bytes (formatting)"


def difference(before: Output, after: Output) -> str | None:
    """None when the two runs left the same bytes; else the first difference found."""
    if before.code != after.code:
        return f"exit code {before.code} != {after.code} ({before.error or after.error})"
    if before.code and before.error != after.error:  # both refused: for the same reason?
        return f"error {short(before.error)!r} != {short(after.error)!r}"
    found = bytes_difference("stdout", before.stdout, after.stdout)
    if found:
        return found
    for name in sorted(before.files.keys() | after.files.keys()):
        if name not in before.files or name not in after.files:
            return f"{name} written by one checkout only"
        found = bytes_difference(name, before.files[name], after.files[name])
        if found:
            return found
    return None


def own(checkout: Path) -> dict[str, str]:
    """The environment that runs `checkout`'s own source: its ``src`` first on the path,
    whatever checkout its venv's editable install points at (worktrees share one venv)."""
    return {**os.environ, "PYTHONPATH": str(checkout / "src")}


def source_of(checkout: Path) -> Path:
    """Where `checkout`'s idlegate is imported from when it runs a command."""
    python = checkout / ".venv/bin/python"
    code = "import idlegate; print(idlegate.__file__)"
    done = subprocess.run(
        [str(python), "-c", code], cwd=checkout, env=own(checkout), capture_output=True,
        text=True, check=True,
    )  # fmt: skip
    return Path(done.stdout.strip()).resolve().parent


def run(checkout: Path, command: str, out: Path) -> Output:
    """`command` run by `checkout`'s own idlegate, in `checkout`, writing into `out` (emptied
    first: both checkouts get the same path, which a command may print)."""
    shutil.rmtree(out, ignore_errors=True)
    args = [str(checkout / ".venv/bin/idlegate"), *shlex.split(command.format(out=out))]
    done = subprocess.run(args, cwd=checkout, env=own(checkout), capture_output=True, check=False)
    files = {}
    if out.is_dir():
        files = {
            str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()
        }
    errors = done.stderr.decode(errors="replace").strip().splitlines()
    return Output(done.returncode, masked(done.stdout), errors[-1] if errors else "", files)


def compare(
    before: Path, after: Path, commands: list[str], jobs: int
) -> Iterator[tuple[str, str | None]]:
    """Each command with its first difference (None: identical), in the list's order."""

    def both(command: str) -> tuple[str, str | None]:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="same-results-") as scratch:
            out = Path(scratch) / "out"
            found = difference(run(before, command, out), run(after, command, out))
        seconds = time.monotonic() - started
        print(f"  done in {seconds:.0f} s: idlegate {command}", file=sys.stderr, flush=True)
        return command, found

    with ThreadPoolExecutor(jobs) as pool:
        yield from pool.map(both, commands)


def as_expected(command: str, found: str | None) -> bool:
    """Whether `command`'s outcome (its first difference, None: identical) is the expected
    one: identical, unless a documented fix changed it (:data:`CHANGED`)."""
    return (found is not None) == (command in CHANGED)


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--before", type=Path, required=True, help="checkout with its .venv")
    parser.add_argument("--after", type=Path, required=True, help="checkout with its .venv")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="commands run at once")
    parser.add_argument("--only", default="", help="run only the commands containing this")
    parser.add_argument(
        "--no-changed",
        action="store_true",
        help="leave out CHANGED: the before checkout already has those fixes",
    )
    args = parser.parse_args()
    for checkout in (args.before, args.after):
        if not (checkout / ".venv/bin/idlegate").is_file():
            print(
                f"Error: {checkout} has no .venv/bin/idlegate: run `make .venv/.dev` there.",
                file=sys.stderr,
            )
            return 1
    for checkout in (args.before, args.after):
        found = source_of(checkout.resolve())
        if found != (checkout.resolve() / "src" / "idlegate"):
            print(
                f"Error: {checkout}'s idlegate runs from {found}, not its own src/; "
                "give a checkout with a src/idlegate package.",
                file=sys.stderr,
            )
            return 1
        print(f"{checkout} runs {found}", file=sys.stderr)
    changed = () if args.no_changed else tuple(CHANGED)
    commands = [c for c in (*COMMANDS, *changed) if args.only in c]
    if not commands:
        print(
            f"Error: no command contains {args.only!r}: give a part of one of COMMANDS.",
            file=sys.stderr,
        )
        return 1
    print(f"{len(commands)} commands, each in {args.before} then {args.after}", file=sys.stderr)
    wrong = 0
    found_each = compare(args.before.resolve(), args.after.resolve(), commands, args.jobs)
    for number, (command, found) in enumerate(found_each, 1):
        verdict = found or "identical"
        if command in CHANGED:
            verdict += f" (expected to differ: {CHANGED[command]})"
        wrong += not as_expected(command, found)
        print(f"[{number}/{len(commands)}] idlegate {command}: {verdict}", flush=True)
    print(f"{len(commands) - wrong} as expected, {wrong} not")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
