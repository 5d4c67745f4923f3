"""CPU seconds the light commands of ``idlegate`` cost, start to exit, for one or more
source trees side by side (issue 93, item 7: target at most 0.3 s for ``--help``,
``visibility`` and ``lint``).

Each command runs as a child process, in turn for each tree, `--repeats` times; its CPU
(user + system) is read from ``resource.getrusage(RUSAGE_CHILDREN)`` before and after,
and the median is printed. ``visibility`` asks a port where nothing listens, so it
measures the start and one refused connection.

    python benchmarks/cli_start.py [--src DIR ...] [--repeats 7]

e.g. ``--src /path/to/main/src --src src`` for the tree before a change and this one.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from idlegate.errors import IdlegateError
from idlegate.flags import description

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "deploy" / "samples" / "diamond.yaml"
COMMANDS: dict[str, list[str]] = {
    "--help": ["--help"],
    "version": ["version"],
    "lint --help": ["lint", "--help"],
    f"lint {SAMPLE.relative_to(ROOT)}": ["lint", str(SAMPLE)],
    "visibility (refused)": ["visibility", "--url", "http://127.0.0.1:9"],
}
"""What is measured, by the name printed."""


def cpu_of(src: Path, args: list[str]) -> float:
    """CPU seconds of one ``python -m idlegate ARGS`` with `src` first on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(ROOT)])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, "-m", "idlegate", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument(
        "--src",
        type=Path,
        action="append",
        help="A source tree's src directory (repeatable; default: this tree's src).",
    )
    parser.add_argument(
        "--repeats", type=int, default=7, help="Runs of each command per tree (default: 7)."
    )
    args = parser.parse_args(argv)
    try:
        srcs = [p.resolve() for p in (args.src or [ROOT / "src"])]
        for src in srcs:
            if not (src / "idlegate" / "__init__.py").is_file():
                raise IdlegateError(f"--src {src}: no idlegate package there; give a src directory")
        if args.repeats < 1:
            raise IdlegateError(f"--repeats must be at least 1, got {args.repeats}")
    except IdlegateError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        sys.exit(1)
    width = max(map(len, COMMANDS))
    print(f"median CPU seconds of {args.repeats} runs (user + system)")
    print(" " * width + "".join(f"  {s!s:>24.24}" for s in srcs))
    for name, command in COMMANDS.items():
        runs: dict[Path, list[float]] = {s: [] for s in srcs}
        for _ in range(args.repeats):  # (interleaved: a slow moment falls on every tree)
            for src in srcs:
                runs[src].append(cpu_of(src, command))
        print(f"{name:<{width}}" + "".join(f"  {statistics.median(runs[s]):>24.2f}" for s in srcs))


if __name__ == "__main__":
    main()
