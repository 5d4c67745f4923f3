"""What `idlegate compare` and `idlegate evaluate` print: rich tables, their progress on
stderr (`idlegate.progress`), and `run_cli`, evaluate's run-print-write sequence.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from idlegate.evaluation.compare_report import (
    caption,
    fmt_number,
    followed_lines,
    source_line,
    table_headers,
    table_rows,
    write_reports,
)
from idlegate.evaluation.comparison import CompareConfig, Comparison, run_comparison
from idlegate.evaluation.evaluation_report import headline_rows, idle_rows, write_evaluation
from idlegate.evaluation.files import check_out_dir
from idlegate.evaluation.headlines import HEADLINES
from idlegate.evaluation.pool import open_runs_pool
from idlegate.evaluation.running import Evaluation, planned_runs, run_evaluation
from idlegate.evaluation.suites import EvaluateConfig
from idlegate.policy.account import sentence, shares, shares_text
from idlegate.progress import stderr_progress
from idlegate.sim.metrics import RunMetrics

if TYPE_CHECKING:
    from rich.console import Console, JustifyMethod
    from rich.table import Table

__all__ = [
    "add_folding",
    "headline_table",
    "idle_table",
    "print_compare",
    "render_comparison_table",
    "render_followed",
    "render_run_table",
    "run_cli",
    "run_compare",
    "stdout_console",
]


def stdout_console(piped: int = 120) -> Console:
    """The console results are printed on: the terminal's width; piped, the width
    ``COLUMNS`` gives when it is set (``COLUMNS=80 idlegate simulate ... | less`` asks for
    80, and got 120: issue 80), else `piped` columns (no 80-column wrap of a log's
    tables). The one place a command's output width is read."""
    from rich.console import Console

    console = Console()  # (rich reads COLUMNS, and the terminal's size without it)
    if console.is_terminal or os.environ.get("COLUMNS", "").strip().isdigit():
        return console
    return Console(width=piped)


def render_comparison_table(cmp: Comparison, width: int | None = None) -> Table:
    """A rich Table: one row per scheduler, mean ± CI, the best average JCT in bold.

    Compact, so that the demo's eight columns fit 100 (98 wide): no outer edge or column
    padding, one space between columns, each header over two lines. Its rows then fit on
    one line: a cell broken over two ("-12.4 % ±" above "4.0") read as two rows and did
    not look like the README's table, whose rows these are (compare.md has them as
    Markdown). On a console `width` columns wide that this does not fit (a terminal of
    80), each figure's CI goes on a line of its own below it (``± 16.4``), every row then
    two lines, and the demo's table 79 wide: the same cells, none cut (a scheduler's name
    too long for the rest folds onto its row's second line, not cutting the headers).
    """
    from rich.console import Console

    table = _comparison_table(cmp, stacked=False)
    # (measured unbounded: a console's measure is capped at its own width)
    if width is not None and Console(width=10_000).measure(table).maximum > width:
        return _comparison_table(cmp, stacked=True)
    return table


def _comparison_table(cmp: Comparison, *, stacked: bool) -> Table:
    from rich import box
    from rich.table import Table

    table = Table(
        title="Scheduler comparison",
        caption=caption(cmp),
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=0,
    )
    for i, h in enumerate(table_headers(cmp)):
        # (stacked, a row is two lines: a name too long for the rest to fit folds onto the
        # second, as does the baseline's in its header, where they cut headers, "makesp…")
        table.add_column(
            _two_lines(h) if i else h,
            justify="left" if i == 0 else "right",
            no_wrap=i == 0 and not stacked,
            overflow="fold" if stacked else "ellipsis",
        )
    best = cmp.best.name
    for r, cells in zip(cmp.results, table_rows(cmp), strict=True):
        shown = [c.replace(" ± ", "\n± ") for c in cells] if stacked else cells
        table.add_row(*shown, style="bold green" if r.name == best else None)
    return table


def _two_lines(header: str) -> str:
    """`header` over two lines, broken at its last space ("avg JCT vs" over "fair"): a
    header is wider than its column's figures, and two lines keep the column narrow."""
    head, _, tail = header.rpartition(" ")
    return f"{head}\n{tail}" if head else header


def render_run_table(m: RunMetrics) -> Table:
    """A rich Table of one run's metrics."""
    from rich.table import Table

    table = Table(
        title=f"{m.scheduler} on {m.workload}",
        caption=f"seed {m.seed}, {m.num_executors} executors",
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("jobs finished", str(m.jobs)),
        ("jobs unfinished", str(m.unfinished)),
        ("average JCT (s)", fmt_number(m.avg_jct, 2)),
        ("median JCT (s)", fmt_number(m.median_jct, 2)),
        ("p95 JCT (s)", fmt_number(m.p95_jct, 2)),
        ("p99 JCT (s)", fmt_number(m.p99_jct, 2)),
        ("max JCT (s)", fmt_number(m.max_jct, 2)),
        ("makespan (s)", fmt_number(m.makespan, 2)),
        ("utilisation: running tasks (%)", fmt_number(m.utilisation * 100, 1)),
        *(
            (f"utilisation: {name} requested (%)", fmt_number(share * 100, 1))
            for name, share in (m.utilisation_by_resource or {}).items()
        ),
        *(
            []
            if m.pods_pended is None
            else [
                ("pods pended (released, not fitting)", str(m.pods_pended)),
                ("pending: seconds summed", fmt_number(m.pending_seconds or 0.0, 1)),
            ]
        ),
        *(
            [
                ("tasks preempted (each ran again)", str(m.preempted)),
                ("work lost to preemption (s)", fmt_number(m.lost_seconds, 1)),
                ("work lost / executor-seconds run (%)", fmt_number(m.lost_share * 100, 2)),
            ]
            if m.preempted
            else []
        ),
        *([] if m.verdicts is None else [(VERDICTS_ROW, verdicts_text(m.verdicts))]),
        ("overhead: moving delay (%)", fmt_number(m.overhead * 100, 1)),
        ("mean jobs in system", fmt_number(m.mean_jobs_in_system, 2)),
        ("idle inserted (s)", fmt_number(m.idle_inserted, 2)),
        ("avg JCT lower bound (s)", fmt_number(m.lb_avg_jct, 2)),
        ("avg JCT / lower bound", fmt_number(m.lb_ratio, 3)),
        ("scheduling decisions", str(m.decisions)),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


VERDICTS_ROW = "forecast's verdicts: bound / pays; declined; cut"
"""The run table's row of the forecast judge's verdicts (``decide: Forecast``: the stops
that went ahead by ``bound`` or ``pays``; those declined; those cut, decided by the
rules), as benchmarks/queues.py's tables head theirs (docs/queues.md)."""


def verdicts_text(verdicts: Mapping[str, int]) -> str:
    """``"3 / 5; 2; 0"``: the verdicts by case (`VERDICTS_ROW`)."""
    return f"{verdicts['bound']} / {verdicts['pays']}; {verdicts['declined']}; {verdicts['cut']}"


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


LOOKUPS = frozenset({"prior", "unlike", "change"})
"""The reasons of a `Choice` that looked the prior up rather than replayed a window."""
STARTS = frozenset({"prior", "unlike", "prior history"})
"""The reasons of a first `Choice` made at the first decision: the run's start."""


NARROW = 100
"""Console columns below which a table of many columns folds its last ones into a cell
(`add_folding`): the rounds table's six columns at 80 wrapped every sentence a few words
a line, and the queues table's eight cut its headers ("workfl…", issue 80)."""


def add_folding(
    table: Table,
    columns: Sequence[tuple[str, JustifyMethod]],
    rows: Iterable[Sequence[str]],
    *,
    width: int,
    keep: int,
    under: int = 0,
    sep: str = " · ",
    per_line: int = 0,
    stack: bool = False,
) -> None:
    """Add `columns` (each its header and justification) and `rows` to `table`. Below
    :data:`NARROW` columns of `width` only the first `keep` columns are columns: a row's
    other figures go dim under its cell of column `under`, each after its header and
    apart by `sep` ("window 40 · its replay (s) 32.4"; a blank cell left out; ``"\\n"``: a
    line each, for a narrow cell), so that no header or figure is cut, however narrow the
    terminal, and a row stays one row. A header over two lines is one line where folded;
    `per_line` figures a line (0: all on one, wrapped by the cell, which may part a figure
    from its header). With `stack`, the other columns are groups instead, each header
    its group's word and the figure's ("start med s", "finish med s"), every group the
    same figures: below NARROW they become a column of the group words and a column of
    each figure, a row a line per group (`stacked`)."""
    narrow = width < NARROW
    if narrow and stack:
        stacked(table, columns, rows, keep)
        return
    for head, justify in columns[:keep] if narrow else columns:
        table.add_column(head, justify=justify)
    heads = [head.replace("\n", " ") for head, _ in columns[keep:]]  # (a folded one: a line)
    for row in rows:
        if not narrow:
            table.add_row(*row)
            continue
        cells = list(row[:keep])
        folded = [f"{h} {f}" for h, f in zip(heads, row[keep:], strict=True) if f]
        per = per_line or len(folded) or 1
        text = "\n".join(sep.join(folded[i : i + per]) for i in range(0, len(folded), per))
        cells[under] += f"\n[dim]{text}[/]"
        table.add_row(*cells)


def stacked(
    table: Table,
    columns: Sequence[tuple[str, JustifyMethod]],
    rows: Iterable[Sequence[str]],
    keep: int,
) -> None:
    """`add_folding`'s stack: the columns after the first `keep`, headed "GROUP FIGURE",
    as a column of the groups and one of each figure, a row's groups a line each under
    one another (``start 9 44.4`` over ``finish 300 95.7``), so that the figures a reader
    compares share a column (issue 82: folded under the method, the finish's and the
    start's ran together). ValueError if the groups' figures differ."""
    groups: dict[str, list[tuple[int, str, JustifyMethod]]] = {}
    for i, (head, justify) in enumerate(columns[keep:], keep):
        group, _, figure = head.replace("\n", " ").partition(" ")
        groups.setdefault(group, []).append((i, figure, justify))
    first, *others = groups.values()
    if any([f for _, f, _ in g] != [f for _, f, _ in first] for g in others):
        raise ValueError(f"the stacked groups differ: {list(groups)}")
    for head, justify in columns[:keep]:
        table.add_column(head, justify=justify)
    table.add_column("")
    for _, figure, justify in first:
        table.add_column(figure, justify=justify)
    for row in rows:
        lines = [[row[i] for i, _, _ in g] for g in groups.values()]
        figures = ["\n".join(line[j] for line in lines) for j in range(len(first))]
        table.add_row(*row[:keep], "\n".join(groups), *figures)


def render_followed(account: Mapping[str, Any], width: int = 120) -> Table:
    """A rich Table of what a self-tuning scheduler followed and why
    (`PortfolioScheduler.account`): the cold start's candidate (unless the first decision
    looked the prior up or replayed a prior history), then one row per round, each saying
    its outcome in words (`Choice.why`); the share of the run each candidate was followed
    in the caption. The title's switches are the changes of the candidate followed from
    the start on, lookups included. Below :data:`NARROW` columns of `width` a round's
    figures (window, replay, runner-up, left out) go on a line under its sentence
    (`add_folding`)."""
    from rich.table import Table

    parts = shares_text(shares(account["time_followed"]))
    rows = list(account["rounds"])
    # (the prior's lookup or a prior history at the first decision is the start itself)
    started = bool(rows) and rows[0]["reason"] in STARTS
    followed = [r["candidate"] for r in rows]
    if not started:
        followed.insert(0, account["start"])
    switches = sum(a != b for a, b in itertools.pairwise(followed))
    rounds = len(rows)
    # (a lookup of the shipped prior is a row, not a replay: counted apart)
    lookups = sum(r["reason"] in LOOKUPS for r in rows)
    title = f"Followed: {account['start']}, no round ran"
    if rounds:
        looked = f"{_count(lookups, 'lookup', 'lookups')} of the prior, " if lookups else ""
        title = (
            f"Followed: {_count(rounds - lookups, 'round')}, {looked}"
            f"{_count(switches, 'switch', 'switches')}"
        )
    table = Table(title=title, caption=f"share of the run: {parts}")
    cells = [] if started else [_round_cells(None, account["start"])]
    cells += [_round_cells(r, None) for r in account["rounds"]]
    columns = [(h, "left" if i == 1 else "right") for i, h in enumerate(FOLLOWED_HEADERS)]
    add_folding(table, columns, cells, width=width, keep=2, under=1)
    return table


FOLLOWED_HEADERS = (
    "at (s)",
    "what it did, and why",
    "window",
    "its replay (s)",
    "runner-up (s)",
    "left out",
)
"""The rounds table's columns (:func:`render_followed`)."""


def _round_cells(r: Mapping[str, Any] | None, start: str | None) -> tuple[str, ...]:
    """One row of the rounds table: the round `r`'s, or the cold start's on `start`."""
    if r is None:
        return ("0", sentence({"reason": "cold start", "candidate": start}), "—", "—", "—", "—")
    runner = "—"
    if r["runner_up"] is not None:
        score = r["runner_up_score"]
        runner = f"{r['runner_up']} {'failed' if score is None else fmt_number(score, 1)}"
    window = str(r["workflows"]) if r["workflows"] else "—"  # (the prior's: none)
    notes = [f"{r[k]} {k}" for k in ("running", "trimmed") if r.get(k)]
    if notes:
        window += f" ({', '.join(notes)})"
    return (
        fmt_number(r["at"], 0),
        (r.get("why") or sentence(r)) + _left(r),  # (an account from before the sentences)
        window,
        "—" if r["score"] is None else fmt_number(r["score"], 1),  # (none, or failed)
        runner,
        str(len(r["left_out"])),
    )


def _left(round_: Mapping[str, Any]) -> str:
    """What a round did not replay, and why, in words: the learned policies the window is
    outside the training range of, and the candidates whose standing trails; and the
    workflows still running it replayed for their work (`PortfolioConfig.heavy`)."""
    out = ""
    heavy = int(round_.get("heavy") or 0)
    if heavy:
        out += (
            f"; replayed {_count(heavy, 'workflow')} still running, heavier than every "
            "finished one of the window"
        )
    trimmed = int(round_.get("trimmed") or 0)
    if trimmed:
        out += f"; left {_count(trimmed, 'workflow')} out of the window to fit its budget"
    untrained = list(round_.get("untrained") or ())
    if untrained:
        out += f"; not replayed: {', '.join(untrained)}, outside the range it was trained on"
    left = list(round_.get("left_out") or ())
    if left:
        out += f"; left out: {', '.join(left)}, whose standing trails the leader's"
    return out


def headline_table(ev: Evaluation) -> Table:
    """The headline deltas as a rich Table."""
    from rich.table import Table

    table = Table(title="Headline deltas (average JCT, paired per seed)")
    table.add_column("workload", no_wrap=True)
    for h in HEADLINES:
        table.add_column(h.title, justify="right")
    for row in headline_rows(ev):
        table.add_row(*row)
    return table


def idle_table(ev: Evaluation) -> Table | None:
    """Where idle slots fired, as a rich Table (None when no scheduler idled anywhere)."""
    from rich.table import Table

    headers, rows = idle_rows(ev)
    if len(headers) == 1:
        return None
    table = Table(title="Idle slots fired (jobs delayed / finished, idle seconds; all seeds)")
    for i, h in enumerate(headers):
        table.add_column(h, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for row in rows:
        table.add_row(*row)
    return table


def run_cli(config: EvaluateConfig, out: Path | None, ray: str | None = None) -> Evaluation:
    """`idlegate evaluate`: run with a progress bar on stderr, print tables, write reports.

    `ray` (``auto`` or a cluster address) runs the simulations on Ray instead of
    ``config.jobs`` local processes.
    """

    if out is not None:
        check_out_dir(out)  # fail before the runs, not after
    start = time.perf_counter()
    with (
        open_runs_pool(config.jobs, ray) as pool,
        stderr_progress("evaluating", None, warmup=True) as update,
    ):
        ev = run_evaluation(config, update, pool)
    elapsed = time.perf_counter() - start
    console = stdout_console(piped=140)
    for c in ev.cases:
        if c.comparison is None:
            console.print(f"[yellow]{c.case.title}: {c.case.skip_reason}[/]", highlight=False)
            continue
        table = render_comparison_table(c.comparison, console.width)
        table.title = c.case.title
        console.print(table)
        for line in followed_lines(c.comparison):
            console.print(line, highlight=False)
    console.print(headline_table(ev))
    idle = idle_table(ev)
    console.print(idle if idle is not None else "No scheduler inserted an idle slot.")
    runs = planned_runs(
        config,
        [c.case for c in ev.cases],
        len(ev.sweep.points) * len(config.seed_list) if ev.sweep else 0,
    )
    console.print(f"{runs} runs in {elapsed:.1f} s")
    if out is not None:
        for p in write_evaluation(ev, out).values():
            console.print(f"wrote {p}", highlight=False)
    return ev


def run_compare(
    config: CompareConfig, out: Path | None, ray: str | None = None
) -> tuple[Comparison, dict[str, Path], float]:
    """`idlegate compare`'s runs, with their progress on stderr (`stderr_progress`, with
    --json too: stdout keeps the result alone); the reports written to `out` (None: none). Returns the
    comparison, the written paths and the wall seconds (Ray's start-up included). `ray`
    (``auto`` or a cluster address) runs the simulations on Ray instead of
    ``config.jobs`` local processes."""
    if out is not None:
        check_out_dir(out)  # fail before the runs, not after
    start = time.perf_counter()
    runs = len(config.schedulers) * config.seeds
    pool = open_runs_pool(min(config.jobs, runs), ray)
    # (each run weighed by its scheduler's cost: the demo's portfolio runs, its last, cost
    # some 60 of a rule's each, so a time left that counted runs alike was 4 times short)
    costs = {f"{s.title} seed {n}": s.run_cost for s in config.schedulers for n in config.seed_list}
    with pool, stderr_progress("simulating", runs, costs=costs, warmup=True) as update:
        cmp = run_comparison(
            config,
            lambda done, total, name, seed: update(done, total, f"{name} seed {seed}"),
            pool,
        )
    elapsed = time.perf_counter() - start
    paths = write_reports(cmp, out) if out is not None else {}
    return cmp, paths, elapsed


def print_compare(
    console: Console, cmp: Comparison, paths: Mapping[str, Path], elapsed: float
) -> None:
    """Print the comparison table, where the jobs came from, the run count and time, and
    the files written."""
    console.print(render_comparison_table(cmp, console.width))
    if any(r.queues_per_seed for r in cmp.results):
        console.print(render_compare_queues(cmp, console.width))
    for line in followed_lines(cmp):
        console.print(line, highlight=False)
    source = source_line(cmp)
    if source:
        console.print(source, highlight=False)
    runs = len(cmp.config.schedulers) * cmp.config.seeds
    console.print(f"{runs} runs in {elapsed:.1f} s; best average JCT: [bold]{cmp.best.name}[/]")
    for p in paths.values():
        console.print(f"wrote {p}", highlight=False)


def render_compare_queues(cmp: Comparison, width: int = 120) -> Table:
    """A rich Table of each scheduler's per-queue figures over the seeds: the mean of the
    seeds' mean JCT and ρ, the worst wait of any seed, the starts past the bound summed.
    Below :data:`NARROW` columns of `width` Jain's index, the worst wait and the starts
    past the bound go under the queue, a line each (`add_folding`)."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="queues, over the seeds", caption=QUEUE_CAPTION)
    rows: list[tuple[str, ...]] = []
    for r in cmp.results:
        seeds = r.queues_per_seed
        if not seeds:
            continue
        jains = [s["jain"] for s in seeds if s.get("jain") is not None]
        jain = fmt_number(float(np.mean(jains)), 3) if jains else "—"
        for i, name in enumerate(q["queue"] for q in seeds[0]["queues"]):
            runs = [s["queues"][i] for s in seeds]
            rhos = [q["rho"] for q in runs if q["rho"] is not None]
            jcts = [q["mean_jct"] for q in runs if q["workflows"]]
            rows.append(
                (
                    escape(r.name) if i == 0 else "",
                    escape(name),
                    fmt_number(float(np.mean(jcts)), 1) if jcts else "—",
                    fmt_number(float(np.mean(rhos)), 2) if rhos else "—",
                    jain if i == 0 else "",
                    fmt_number(max(q["worst_wait"] for q in runs), 0),
                    f"{sum(q['overdue'] for q in runs)} ({sum(q['beyond_allowed'] for q in runs)})",
                )
            )
    heads = ("scheduler", "queue", "mean JCT (s)", "ρ", "Jain", "worst wait (s)", "past bound")
    columns = [
        (_two_lines(h) if i < 4 else h, "left" if i < 2 else "right") for i, h in enumerate(heads)
    ]
    add_folding(table, columns, rows, width=width, keep=4, under=1, sep="\n")
    return table


QUEUE_CAPTION = (
    "ρ: mean JCT shared ÷ alone on its quota; Jain's index over contended time; "
    "past bound: starts past the wait bound (beyond the allowed overshoot)"
)


def render_queues(figures: dict[str, Any], width: int = 120) -> Table:
    """A rich Table of a run's per-queue figures (`idlegate.sim.queue_metrics`). Below
    :data:`NARROW` columns of `width` the waits, the starts past the bound and the pods
    borrowed go under the queue, a line each (`add_folding`)."""
    from rich.markup import escape
    from rich.table import Table

    jain = figures.get("jain")
    table = Table(
        title="queues",
        caption="Jain's index over contended time: "
        + ("—" if jain is None else fmt_number(jain, 3))
        + "; ρ: mean JCT shared ÷ alone on its quota",
    )
    rows: list[tuple[str, ...]] = []
    for q in figures["queues"]:
        jcts = (fmt_number(q["mean_jct"], 1), fmt_number(q["p95_jct"], 1))
        rows.append(
            (
                escape(q["queue"]),
                str(q["workflows"]),
                *(jcts if q["workflows"] else ("—", "—")),  # (a queue no workflow joined)
                "—" if q["rho"] is None else fmt_number(q["rho"], 2),
                f"{fmt_number(q['worst_wait'], 0)} / {fmt_number(q['p999_wait'], 0)}",
                f"{q['overdue']} ({q['beyond_allowed']})",
                fmt_number(q["borrowed"].get("pods", 0.0), 0),
            )
        )
    # (the figures' headers over two lines: the room goes to the queue's cell)
    columns = [(_two_lines(h), "right") for h in QUEUE_HEADERS[:5]]
    columns = [("queue", "left"), *columns[1:], *((h, "right") for h in QUEUE_HEADERS[5:])]
    add_folding(table, columns, rows, width=width, keep=5, under=0, sep="\n")
    return table


QUEUE_HEADERS = (
    *("queue", "workflows", "mean JCT (s)", "p95 JCT (s)", "ρ"),
    *("worst / p99.9 wait (s)", "past bound (beyond allowed)", "borrowed pod-s"),
)
"""A run's queues table's columns (:func:`render_queues`)."""
