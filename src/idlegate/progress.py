"""Progress of a long command on stderr: the one helper of `simulate`, `compare`, `demo`,
`evaluate`, `advise`, `train`, `history alibaba`, `history simulate`, `forecast evaluate`,
`docs-check` and the benchmarks that take minutes.

Standard output carries the result alone (a table, ``--json``'s document), so progress
goes to stderr, and whatever standard output is: piped to a file, the result still takes
as long. On a terminal stderr it is a live line, redrawn at each step: done of total, time
elapsed and an estimate of the time left. On anything else (a log file, CI), redrawing
would leave a line per step, so it writes one line every `EVERY` seconds instead: a run
shorter than that writes none, and a longer one tells its log it is alive and when it
should end, and ends with a line of its last step (``45/45 (100 %)``), so its log does
not stop at a step before the end.

Time comes from an injected clock, so tests drive it without waiting.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["EVERY", "Update", "clock_text", "status", "stderr_progress"]

EVERY = 30.0
"""Seconds between two lines when stderr is no terminal."""

Update = Callable[[int, int | None, str], None]
"""`update(done, total, what)`: `done` steps of `total` (None: not known yet) are done,
`what` the last one."""


def clock_text(seconds: float) -> str:
    """Seconds as ``m:ss`` (``h:mm:ss`` from an hour on), as a clock shows them."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def status(done: int, total: int | None, elapsed: float, start: int = 0) -> str:
    """``12/36 (33 %), 0:19 elapsed, about 0:38 left``: the time left at the pace of the
    steps done since `start` (those done before, e.g. by a run resumed, took no time
    here); no estimate before the first step, or without a total."""
    text = f"{done}" if total is None else f"{done}/{total} ({100 * done // max(total, 1)} %)"
    text += f", {clock_text(elapsed)} elapsed"
    if total is not None and done > start:
        left = elapsed / (done - start) * max(total - done, 0)
        text += f", about {clock_text(left)} left"
    return text


def _is_terminal(stream: TextIO) -> bool:
    """`stream` is a terminal, as rich sees it: its ``isatty``, or ``TTY_COMPATIBLE=1``
    / ``FORCE_COLOR`` saying so where it is not one (a CI log that renders escapes)."""
    from rich.console import Console

    return Console(file=stream).is_terminal


@contextmanager
def stderr_progress(
    description: str,
    total: int | None = None,
    *,
    start: int = 0,
    enabled: bool = True,
    stream: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
    every: float | None = None,
) -> Iterator[Update]:
    """Progress of `description` (``simulating``) on `stream` (default stderr), as the
    module says; yields `update(done, total, what)`. `start`: steps done before this run
    (a resumed training's iterations). `enabled` False shows nothing. `every`: seconds
    between two lines off a terminal (default `EVERY`, read at the call)."""
    out = sys.stderr if stream is None else stream
    gap = EVERY if every is None else every
    began = clock()
    if not enabled:
        yield lambda done, total, what: None
    elif _is_terminal(out):
        with _live(description, total, start, out, clock, began) as update:
            yield update
    else:
        last = began
        wrote = False
        unsaid: str | None = None  # the last step's line, when not written

        def line(done: int, total_now: int | None, what: str) -> None:
            nonlocal last, wrote, unsaid
            now = clock()
            shown = f"; {what}" if what else ""
            unsaid = f"{description}: {status(done, total_now, now - began, start)}{shown}\n"
            if now - last >= gap:
                last, wrote = now, True
                out.write(unsaid)
                out.flush()
                unsaid = None

        yield line
        if wrote and unsaid is not None:  # (a run that wrote none stays silent)
            out.write(unsaid)
            out.flush()


@contextmanager
def _live(
    description: str,
    total: int | None,
    start: int,
    out: TextIO,
    clock: Callable[[], float],
    began: float,
) -> Iterator[Update]:
    """A rich progress line on terminal `out`: it keeps the lines printed meanwhile above
    it, and goes when done (the result follows on its own)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(bar_width=20),
        TextColumn("{task.fields[status]}"),
        console=Console(file=out, force_terminal=True),
        transient=True,
        auto_refresh=False,  # redrawn at each step, on `clock`'s time (tests: a fake one)
        get_time=clock,
    ) as bar:
        task = bar.add_task(description, total=total, completed=start, status="")

        def update(done: int, total_now: int | None, what: str) -> None:
            shown = f"  {what}" if what else ""
            text = status(done, total_now, clock() - began, start) + shown
            bar.update(task, completed=done, total=total_now, status=text)
            bar.refresh()

        yield update
