"""``python -m idlegate.controlplane up|down|status``: the local control plane's command.

up      build nothing, start the plane from the binaries ``make cluster`` built
down    stop it
status  say whether each process runs, and where the kubeconfig is
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from idlegate.controlplane.launcher import NodeSpec, Plane, start, stop
from idlegate.errors import IdlegateError

DEFAULT_DIR = Path("out/cluster")
QUANTITY = re.compile(r"(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?")
"""A Node's capacity as Kubernetes reads it (positive; no exponent form)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m idlegate.controlplane",
        description="A local Kubernetes control plane with KWOK nodes (docs/local-cluster.md).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start the control plane and its nodes")
    up.add_argument(
        "--dir", type=Path, default=DEFAULT_DIR, help="its folder (default %(default)s)"
    )
    up.add_argument(
        "--bin",
        type=Path,
        default=None,
        help="where `make cluster` put the binaries (default DIR/bin)",
    )
    up.add_argument("--nodes", type=int, default=3, help="KWOK nodes (default %(default)s)")
    up.add_argument("--node-cpu", default="8", help="each node's CPU (default %(default)s)")
    up.add_argument(
        "--node-memory", default="32Gi", help="each node's memory (default %(default)s)"
    )
    up.add_argument(
        "--node-gpu", type=int, default=0, help="each node's nvidia.com/gpu (default 0)"
    )
    up.add_argument(
        "--time-factor",
        type=float,
        default=1.0,
        help="pods run their TASK_DURATION_SECONDS divided by this (default 1: as declared)",
    )
    for name, what in (
        ("down", "stop the control plane in DIR"),
        ("status", "say whether it runs"),
    ):
        sub = commands.add_parser(name, help=what)
        sub.add_argument(
            "--dir", type=Path, default=DEFAULT_DIR, help="its folder (default %(default)s)"
        )
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except IdlegateError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.command == "up":
        if args.nodes < 0 or args.node_gpu < 0:
            raise IdlegateError("--nodes and --node-gpu must be 0 or more.")
        for flag, value in (("--node-cpu", args.node_cpu), ("--node-memory", args.node_memory)):
            if not QUANTITY.fullmatch(value):
                raise IdlegateError(
                    f"{flag} {value!r} is not a quantity Kubernetes reads: give a positive "
                    "number with an optional suffix, e.g. 8, 500m, 32Gi."
                )
        nodes = NodeSpec(args.nodes, args.node_cpu, args.node_memory, args.node_gpu)
        plane = start(args.dir, args.bin or args.dir / "bin", [nodes], args.time_factor)
        said = f"{args.nodes} KWOK node" + ("" if args.nodes == 1 else "s")
        print(f"The control plane runs at {plane.url}, with {said}.")
        print(f"export KUBECONFIG={plane.kubeconfig}")
        return 0
    recorded = Plane.load(args.dir.resolve())
    if recorded is None:
        print(f"No control plane is recorded in {args.dir}.")
        return 0 if args.command == "down" else 1
    if args.command == "down":
        killed = stop(recorded)
        print(
            "Stopped" + (f"; killed (no exit on SIGTERM): {', '.join(killed)}." if killed else ".")
        )
        return 0
    for name, alive in recorded.alive().items():
        print(f"{name}: {'running' if alive else 'exited'} (pid {recorded.pids[name]})")
    print(f"kubeconfig: {recorded.kubeconfig}")
    return 0 if all(recorded.alive().values()) else 1


if __name__ == "__main__":
    sys.exit(main())
