"""The ``idlegate`` command's door.

``idlegate forecast FILE`` (a what-if) is a question a person waits on, 2 s at most for
the answer (docs/research/forecasts.md, "What if"), and the operator's replay takes up to 0.9 s of
it: so it starts with its own few modules (`idlegate.cli_whatif`), not the command line's
group. Every other command goes to `idlegate.cli`, which imports a heavy command's module
only when that command runs (`idlegate.cli_lazy`)."""

from __future__ import annotations

import sys

NOT_A_FILE = frozenset({"evaluate", "--help", "-h"})
"""What may follow ``forecast`` and is no what-if: the group's other command and its help."""


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``idlegate``, ``python -m idlegate``)."""
    args = sys.argv[1:] if argv is None else argv
    if asks_what_if(args):
        from idlegate.cli_whatif import run_alone

        run_alone(args[1:])
        return
    from idlegate.cli import main as whole

    whole(args)


def asks_what_if(args: list[str]) -> bool:
    """True for ``forecast what-if ...`` and ``forecast FILE ...`` (as the forecast group
    reads its first argument: `cli_whatif.FileOrCommand`)."""
    return len(args) > 1 and args[0] == "forecast" and args[1] not in NOT_A_FILE
