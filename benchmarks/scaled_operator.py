"""``idlegate operator`` in a process of its own, on a clock `SPEED` times the wall's pace.

benchmarks/live_pool.py runs the operator so, beside the test API server's kubelets, which
run pods `SPEED` times faster than the wall (as tests/e2e.py's operator in a thread does):
a process of its own, so that its CPU is read from /proc, and of any checkout, since it
builds the operator with that checkout's own command line (its flags, its Settings) and
only swaps the clock (tests/clocks.py's ScaledClock, from `ANCHOR`, epoch seconds).

    PYTHONPATH=CHECKOUT/src:. python -m benchmarks.scaled_operator SPEED ANCHOR -- FLAGS...

FLAGS are ``idlegate operator``'s.
"""

from __future__ import annotations

import sys
from typing import Any


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[2] != "--":
        sys.exit("Error: give SPEED ANCHOR -- and the operator's flags, e.g. 5 1700000000 -- -v")
    speed, anchor, flags = float(argv[0]), float(argv[1]), argv[3:]

    import idlegate.operator.main as operator_main
    from idlegate.cli import main as cli
    from tests.clocks import ScaledClock

    run = operator_main.run

    def scaled(settings: Any, **kwargs: Any) -> None:
        # (the command imports `run` as it runs, so this one is what it calls)
        clock = ScaledClock(speed, anchor)
        run(settings.model_copy(update={"clock": clock}), **kwargs)

    operator_main.run = scaled
    cli(["operator", *flags])


if __name__ == "__main__":
    main(sys.argv[1:])
