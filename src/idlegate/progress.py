"""Progress of a long command on stderr: the one helper of `simulate`, `compare`, `demo`,
`evaluate`, `advise`, `train`, `history alibaba`, `history simulate`, `forecast evaluate`,
`docs-check` and the benchmarks that take minutes.

Standard output carries the result alone (a table, ``--json``'s document), so progress
goes to stderr, and whatever standard output is: piped to a file, the result still takes
as long. On a terminal stderr it is a live line, redrawn at each step: done of total, time
elapsed and an estimate of the time left. That is the time per step so far times the
steps left (with `warmup`, so far since the first step ended: the time before it is a
pool's start, its processes and their imports, which the demo's first of 45 runs read as
9:40 left of a 25-s run); where steps differ in cost (`costs`: a portfolio's run costs some 60 of a
rule's, and the demo's dearest runs come last), the time per unit of expected cost done
times the cost left. On anything else (a log file, CI), redrawing would leave a line per
step, so it writes one line every `EVERY` seconds instead: a run shorter than that
writes none, and a longer one tells its log it is alive and when it should end, and ends
with a line of its last step (``45/45 (100 %)``), so its log does not stop at a step
before the end.

Time comes from an injected clock, so tests drive it without waiting.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TextIO

__all__ = ["EVERY", "Update", "clock_text", "status", "stderr_progress", "time_left"]

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


def time_left(elapsed: float, done: float, total: float, start: float = 0.0) -> float | None:
    """Seconds left at the pace so far: `elapsed` seconds did the `done - start` units of
    work done since `start` (those before, e.g. by a run resumed, took no time here), and
    `total - done` are left; units are steps, or their expected costs. None before any."""
    if done <= start:
        return None
    return elapsed / (done - start) * max(total - done, 0.0)


Work = tuple[float, float, float]
"""(done, total, start) in units of expected cost (`time_left`'s)."""


def status(
    done: int,
    total: int | None,
    elapsed: float,
    start: int = 0,
    work: Work | None = None,
    since: tuple[float, float] | None = None,
) -> str:
    """``12/36 (33 %), 0:19 elapsed, about 0:38 left``: the time left at the pace of the
    steps done since `start`, or with `work` of the cost done since its start (`time_left`);
    no estimate before the first step, or without a total. `since`: (elapsed, steps or cost
    done) when the pace starts being measured, instead of 0 and `start`."""
    text = f"{done}" if total is None else f"{done}/{total} ({100 * done // max(total, 1)} %)"
    text += f", {clock_text(elapsed)} elapsed"
    if total is not None:
        units, whole, begun = work or (done, total, start)
        took = elapsed
        if since is not None:
            took, begun = elapsed - since[0], since[1]
        left = time_left(took, units, whole, begun)
        if left is not None:
            text += f", about {clock_text(left)} left"
    return text


class _Costs:
    """The work of a run's steps, each at its expected cost (`costs`, by the name an update
    gives the step when it is done; a step not named costs their mean)."""

    def __init__(self, costs: Mapping[str, float], start: int) -> None:
        self.costs = costs
        self.mean = sum(costs.values()) / len(costs) if costs else 1.0
        self.last = start
        self.start = self.done = start * self.mean

    def work(self, done: int, total: int | None, what: str) -> Work | None:
        """The work after an update: `done - last` steps were done, the last `what`."""
        if done > self.last:
            self.done += self.costs.get(what, self.mean) + (done - self.last - 1) * self.mean
            self.last = done
        if total is None:
            return None
        named = sum(self.costs.values()) + max(total - len(self.costs), 0) * self.mean
        return self.done, named, self.start


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
    costs: Mapping[str, float] | None = None,
    warmup: bool = False,
) -> Iterator[Update]:
    """Progress of `description` (``simulating``) on `stream` (default stderr), as the
    module says; yields `update(done, total, what)`. `start`: steps done before this run
    (a resumed training's iterations). `enabled` False shows nothing. `every`: seconds
    between two lines off a terminal (default `EVERY`, read at the call). `costs`: each
    step's expected cost (any unit), by the `what` of the update that says it is done;
    the time left is then at the pace of the cost done, not of the steps. `warmup`: the
    time before the first step ends is a start (a pool's), not work: the pace is measured
    from that step on, and the first says no time left."""
    out = sys.stderr if stream is None else stream
    gap = EVERY if every is None else every
    began = clock()
    weighed = None if costs is None else _Costs(costs, start)

    first: list[tuple[float, float]] = []  # (elapsed, units done) when the first step ended

    def said(done: int, total_now: int | None, what: str) -> str:
        work = None if weighed is None else weighed.work(done, total_now, what)
        elapsed = clock() - began
        if warmup and not first and done > start:
            first.append((elapsed, float(done) if work is None else work[0]))
        return status(done, total_now, elapsed, start, work, first[0] if first else None)

    if not enabled:
        yield lambda done, total, what: None
    elif _is_terminal(out):
        with _live(description, total, start, out, said) as update:
            yield update
    else:
        last = began
        wrote = False
        unsaid: str | None = None  # the last step's line, when not written

        def line(done: int, total_now: int | None, what: str) -> None:
            nonlocal last, wrote, unsaid
            now = clock()
            shown = f"; {what}" if what else ""
            unsaid = f"{description}: {said(done, total_now, what)}{shown}\n"
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
    said: Callable[[int, int | None, str], str],
) -> Iterator[Update]:
    """A rich progress line on terminal `out`, its status `said(done, total, what)`: it
    keeps the lines printed meanwhile above it, and goes when done (the result follows on
    its own)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(bar_width=20),
        TextColumn("{task.fields[status]}"),
        console=Console(file=out, force_terminal=True),
        transient=True,
        auto_refresh=False,  # redrawn at each step, on the status's clock (tests: a fake one)
    ) as bar:
        task = bar.add_task(description, total=total, completed=start, status="")

        def update(done: int, total_now: int | None, what: str) -> None:
            shown = f"  {what}" if what else ""
            text = said(done, total_now, what) + shown
            bar.update(task, completed=done, total=total_now, status=text)
            bar.refresh()

        yield update
