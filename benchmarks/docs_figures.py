"""Do the figures the docs quote still come out of their commands? Reruns them, lists those
that moved.

    python benchmarks/docs_figures.py [--slow] [--fix] [FILE ...]       (make docs-check)

A figure moves whenever the policy it measures moves, so it is regenerated, not retyped.
Each figure a page quotes is marked beside its text with the command it comes from; this
script reruns every marked command once (a command written twice runs once), formats each
value as the page writes it, and lists the figures that no longer match with where they
are; `--fix` writes the new values into the pages instead. Run it before submitting a
change to a policy; it is not part of `make test` (its commands take minutes). Default
FILEs: README.md and every page under docs/.

The markers are HTML comments, which a rendered page does not show:

* ``<!-- run NAME: COMMAND -->`` names a command of the page; ``<!-- run NAME -->`` alone
  names the fenced ``sh`` block right below it (its lines run in order, stopping at the
  first that fails). ``<!-- run NAME slow ... -->`` takes more than a few minutes and runs
  only with ``--slow``. A run starts in the repository's root with the venv's ``bin``
  first on ``PATH``. A run whose data is absent is skipped, and says so with why: its
  command names a workload that reads a trace (``-w tpch``, ``-w alibaba``, ``-w mixed``
  unless ``dags=tpch-like``) or a path under ``../shared/data``, and the trace is not
  found (`data_missing`: a fresh clone has no ``../shared/data``). Its report is the ``.json`` and ``.md`` files written into the last
  ``--out`` directory it names, else its standard output (JSON when it parses as JSON).
* ``<!-- table NAME -->`` before a markdown table: each row of the page's table is the
  row of the same first cell in the first table of the run's markdown report, in the
  page's columns (found by their headers). Several such lines: a row comes from the first
  of their runs that has it (a row only a skipped slow run has is not checked).
* ``<!-- figure NAME: EXPRESSION -->TEXT<!-- /figure -->``: TEXT is what EXPRESSION gives
  on the run's report. An expression is Python over these names only: ``json`` (the JSON
  report), ``cell(row, column)`` (a cell of the markdown table, bold removed),
  ``runs(row, field)`` (that field of each seed's run in a ``compare`` report),
  ``summary(row, field)`` (its mean over the seeds), ``gaps(row, other)`` (per seed, row's
  mean JCT over other's, minus 1), ``lower_on(row, other)`` (the seeds where that is
  below 0), ``text`` (the run's standard output), ``find(pattern)`` (the first group of
  a regular expression's first match in ``text``, for a command that prints prose),
  ``number``,
  ``estimate`` and ``change`` (the compare table's own formats), ``mean``, ``head`` (a
  cell's text before its "±"), ``words`` (a count as a word), ``abs``, ``len``, ``max``,
  ``min``, ``round``, ``sorted``, ``sum`` and ``zip``.

Figures of the research record (docs/research/) are dated: a section quotes what the code
of its day measured, so only its latest figures carry markers.
"""

from __future__ import annotations

import argparse
import json as json_module
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from idlegate.errors import IdlegateError
from idlegate.evaluation.compare_report import fmt_change, fmt_estimate, fmt_number
from idlegate.flags import one_line
from idlegate.progress import stderr_progress
from idlegate.sim.alibaba import default_alibaba_dir
from idlegate.sim.datadirs import SHARED_ENV_VAR, shared_data_dir
from idlegate.sim.metrics import Estimate
from idlegate.sim.tpch import default_tpch_dir

ROOT = Path(__file__).resolve().parents[1]

RUN = re.compile(r"<!-- run ([\w.-]+)( slow)?(?:: (.*?))? -->", re.DOTALL)
FENCE = re.compile(r"\s*```(?:sh|bash|shell)\n(.*?)```", re.DOTALL)
TABLE = re.compile(r"((?:<!-- table [\w.-]+ -->\n)+)(?:(?!\|)[^\n]*\n)*?((?:\|[^\n]*\n)+)")
MARKED = re.compile(r"<!-- table ([\w.-]+) -->")
FIGURE = re.compile(r"<!-- figure ([\w.-]+): (.*?) -->(.*?)<!-- /figure -->", re.DOTALL)
OUT = re.compile(r"--out[ =](\S+)")
BESIDE = ROOT.parent / "shared" / "data"
"""What a page's command means by ``../shared/data`` (it runs in the repository's root)."""
WORKLOAD = re.compile(r"(?:-w|--workload)[ =](tpch|alibaba|mixed)\b")
SHARED = re.compile(r"\.\./shared/data/(\w+)")

TRACES: dict[str, tuple[str, Callable[[], Path | None], str]] = {
    "tpch": ("TPC-H's traces", default_tpch_dir, "IDLEGATE_TPCH_DIR"),
    "alibaba": ("Alibaba's trace", default_alibaba_dir, "IDLEGATE_ALIBABA_DIR"),
}
"""The data sets a workload reads: what they are, where the simulator finds them, and the
variable that names them."""

WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
]
"""Counts as the pages write them in prose ("on ten of the ten seeds")."""


@dataclass
class Report:
    """What one run of a command reported: its JSON, its markdown table, or its failure."""

    json: Any = None
    table: list[list[str]] = field(default_factory=list)
    error: str | None = None
    text: str = ""
    """Its standard output."""

    def row(self, name: str) -> list[str]:
        for cells in self.table[2:]:
            if _plain(cells[0]) == name:
                return cells
        raise IdlegateError(f"the run's table has no row {name!r}; its rows: {self.rows()}")

    def row_names(self) -> list[str]:
        return [_plain(cells[0]) for cells in self.table[2:]]

    def rows(self) -> str:
        return ", ".join(self.row_names())

    def column(self, header: str) -> int:
        headers = self.table[0] if self.table else []
        if header not in headers:
            raise IdlegateError(f"the run's table has no column {header!r}; its columns: {headers}")
        return headers.index(header)


@dataclass
class Run:
    """A command of a page, named by a ``run`` marker."""

    name: str
    command: str
    slow: bool


@dataclass
class Finding:
    """A figure whose text differs from what its command gives now (or that could not be
    checked: `now` is None and `why` says why)."""

    where: str
    documented: str
    now: str | None
    why: str = ""

    def __str__(self) -> str:
        if self.now is None:
            return f"{self.where}: {self.documented!r} not checked: {self.why}"
        return f"{self.where}: documented {self.documented!r}, now {self.now!r}"


def data_missing(command: str) -> str | None:
    """Why `command` cannot run here for want of its data (None: it has what it needs)."""
    # mixed takes TPC-H's DAGs when it finds them, and other figures when it does not
    tpch_like = "dags=tpch-like" in command or "dags tpch-like" in command
    needed = {
        "tpch" if w == "mixed" else w
        for w in WORKLOAD.findall(command)
        if not (w == "mixed" and tpch_like)
    }
    for name in sorted(needed):
        what, find, variable = TRACES[name]
        if find() is None:
            where = shared_data_dir(name) or Path("../shared/data", name)
            return f"needs {what}, not found ({where} is absent; set {variable})"
    for name in sorted(set(SHARED.findall(command))):
        # the command's own path, and hidden as every test's is ($IDLEGATE_SHARED_DATA)
        own, seen = BESIDE / name, shared_data_dir(name)
        if not own.is_dir() or seen is None or not seen.is_dir():
            hidden = f" or hidden by {SHARED_ENV_VAR}" if own.is_dir() else ""
            return f"needs ../shared/data/{name}, absent{hidden}"
    return None


def _plain(cell: str) -> str:
    return cell.strip().strip("*").strip()


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def runs_of(path: Path, text: str) -> dict[str, Run]:
    """The ``run`` markers of a page, by name."""
    found: dict[str, Run] = {}
    for m in RUN.finditer(text):
        command = m[3]
        if command is None:
            fence = FENCE.match(text, m.end())
            if fence is None:
                where = f"{path}:{_line(text, m.start())}"
                raise IdlegateError(
                    f"{where}: run {m[1]!r} gives no command and no ```sh block follows it; "
                    "write the command after a colon or put the block right below"
                )
            command = fence[1]
        command = command.replace("\\\n", " ").strip()
        found[m[1]] = Run(m[1], command, bool(m[2]))
    return found


def _report(stdout: str, out_dir: Path | None, started: float) -> Report:
    """A finished run's report: the files it just wrote into `out_dir`, else `stdout`."""
    if out_dir is not None:
        fresh = sorted(p for p in out_dir.glob("*") if p.is_file() and p.stat().st_mtime >= started)
        jsons = [p for p in fresh if p.suffix == ".json"]
        mds = [p for p in fresh if p.suffix == ".md"]
        if not jsons and not mds:
            return Report(error=f"it wrote no .json or .md into {out_dir}")
        data = json_module.loads(jsons[0].read_text()) if jsons else None
        return Report(json=data, table=table_of(mds[0].read_text()) if mds else [], text=stdout)
    try:
        return Report(json=json_module.loads(stdout), text=stdout)
    except ValueError:
        return Report(table=table_of(stdout), text=stdout)


def table_of(markdown: str) -> list[list[str]]:
    """The first markdown table of `markdown`: header, alignment row, rows (cells)."""
    lines = markdown.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), len(lines))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [_cells(line) for line in lines[start:end]]


HEARTBEAT = 5.0
"""Seconds between two calls of a run's `tick` while its command runs: the progress then
tells a log it is alive every `idlegate.progress.EVERY` seconds of a long run (the demo
took minutes, and the check said nothing meanwhile)."""


def run_command(run: Run, tick: Callable[[], None] = lambda: None) -> Report:
    """Run `run`'s command from the repository's root, calling `tick` every `HEARTBEAT`
    seconds until it ends; its report."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    outs = OUT.findall(run.command)
    out_dir = ROOT / outs[-1] if outs else None
    started = time.time() - 1  # (a file system's coarse mtime)
    with subprocess.Popen(
        ["bash", "-ec", run.command],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        while True:
            try:
                stdout, stderr = proc.communicate(timeout=HEARTBEAT)
                break
            except subprocess.TimeoutExpired:  # (still running: it keeps its output so far)
                tick()
    if proc.returncode != 0:
        last = (stderr.strip().splitlines() or ["no output"])[-1]
        return Report(error=f"it failed (exit {proc.returncode}): {last}")
    return _report(stdout, out_dir, started)


def _namespace(report: Report) -> dict[str, Any]:
    """The names an expression may use on `report` (the module docstring's list)."""

    def cell(row: str, column: str) -> str:
        return _plain(report.row(row)[report.column(column)])

    def runs(row: str, key: str) -> list[Any]:
        return [r[key] for r in report.json["schedulers"][row]["runs"]]

    def summary(row: str, key: str) -> float:
        return float(report.json["schedulers"][row]["summary"][key]["mean"])

    def gaps(row: str, other: str) -> list[float]:
        pairs = zip(runs(row, "avg_jct"), runs(other, "avg_jct"), strict=True)
        return [a / b - 1 for a, b in pairs]

    def lower_on(row: str, other: str) -> int:
        return sum(g < 0 for g in gaps(row, other))

    def find(pattern: str) -> str:
        found = re.search(pattern, report.text)
        if found is None:
            raise IdlegateError(f"the run's output has no match of {pattern!r}")
        return found[1] if found.groups() else found[0]

    def estimate(d: dict[str, Any], digits: int = 1, scale: float = 1.0) -> str:
        return fmt_estimate(_estimate(d), digits, scale)

    return {
        "__builtins__": {},
        "json": report.json,
        "cell": cell,
        "runs": runs,
        "summary": summary,
        "gaps": gaps,
        "lower_on": lower_on,
        "text": report.text,
        "find": find,
        "number": fmt_number,
        "estimate": estimate,
        "change": lambda d: fmt_change(_estimate(d)),
        "mean": lambda xs: sum(xs) / len(xs),
        "head": lambda text: text.split("±")[0].strip(),
        "words": lambda n: WORDS[n] if 0 <= n < len(WORDS) else fmt_number(n, 0),
        **{f.__name__: f for f in (abs, len, max, min, round, sorted, sum, zip)},
    }


def _estimate(d: dict[str, Any]) -> Estimate:
    return Estimate(d["mean"], d["low"], d["high"], d["n"], d["confidence"])


def evaluate(expression: str, report: Report) -> str:
    """`expression`'s value on `report`, as text."""
    try:
        # (the repository's own pages, over a namespace without builtins)
        value = eval(expression, _namespace(report))
    except IdlegateError:
        raise
    except Exception as exc:
        raise IdlegateError(f"{expression!r} fails: {type(exc).__name__}: {exc}") from exc
    return value if isinstance(value, str) else str(value)


def check_page(
    path: Path,
    text: str,
    report_of: Callable[[Run], Report | None],
) -> tuple[str, list[Finding], int]:
    """(`text` with every figure as its command gives it now, the figures that differ or
    could not be checked, how many figures were checked). `report_of` gives a run's
    report, or None for a run skipped (slow)."""
    runs = runs_of(path, text)
    findings: list[Finding] = []
    checked = 0

    def report(name: str, offset: int) -> tuple[Report | None, str]:
        where = f"{path}:{_line(text, offset)}"
        if name not in runs:
            raise IdlegateError(f"{where}: no run {name!r} in this page; mark its command")
        return report_of(runs[name]), where

    def figure(m: re.Match[str]) -> str:
        nonlocal checked
        found, where = report(m[1], m.start())
        if found is None:
            return m[0]
        if found.error is not None:
            findings.append(Finding(where, m[3], None, f"run {m[1]}: {found.error}"))
            return m[0]
        try:
            now = evaluate(m[2], found)
        except IdlegateError as exc:
            findings.append(Finding(where, m[3], None, one_line(exc)))
            return m[0]
        checked += 1
        if now != m[3]:
            findings.append(Finding(where, m[3], now))
        return m[0].replace(f"-->{m[3]}<!--", f"-->{now}<!--")

    def table(m: re.Match[str]) -> str:
        nonlocal checked
        lines = m[2].splitlines()
        headers = _cells(lines[0])
        sources = []  # (name, where, report) of each run that reported
        skipped = False
        for name in MARKED.findall(m[1]):
            found, where = report(name, m.start())
            if found is None:
                skipped = True
            elif found.error is not None:
                findings.append(Finding(where, "the table", None, f"run {name}: {found.error}"))
            else:
                sources.append((name, where, found))
        new = lines[:2]
        for offset, line in enumerate(lines[2:], start=2):
            row_where = f"{path}:{_line(text, m.start(2)) + offset}"
            name = _plain(_cells(line)[0])
            found = next((f for _, _, f in sources if name in f.row_names()), None)
            if found is None:
                if not skipped:
                    why = f"no run of the table has row {name!r}"
                    findings.append(Finding(row_where, line, None, why))
                new.append(line)
                continue
            try:
                columns = [found.column(h) for h in headers]
            except IdlegateError as exc:
                findings.append(Finding(row_where, line, None, one_line(exc)))
                new.append(line)
                continue
            cells = found.row(name)
            now = "| " + " | ".join(cells[c] for c in columns) + " |"
            checked += 1
            if now != line:
                findings.append(Finding(row_where, line, now))
            new.append(now)
        return m[0][: m.start(2) - m.start()] + "\n".join(new) + "\n"

    fixed = FIGURE.sub(figure, TABLE.sub(table, text))
    return fixed, findings, checked


def pages(names: Sequence[str]) -> list[Path]:
    if names:
        return [Path(n) for n in names]
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def planned(files: Sequence[Path], slow: bool) -> dict[str, Run]:
    """The runs the pages' figures and tables will run, by command (a command written twice
    runs once), in page order: the steps of the progress. A slow run counts with `slow`
    only, one whose data is absent not at all."""
    out: dict[str, Run] = {}
    for path in files:
        text = path.read_text(encoding="utf-8")
        runs = runs_of(path, text)
        tables = [name for m in TABLE.finditer(text) for name in MARKED.findall(m[1])]
        for name in [m[1] for m in FIGURE.finditer(text)] + tables:
            r = runs.get(name)
            if r is not None and (slow or not r.slow) and data_missing(r.command) is None:
                out.setdefault(r.command, r)
    return out


SECONDS = ROOT / "out" / "docs-check" / "run-seconds.json"
"""Each command's seconds at its last run (`make docs-check` keeps them here): the weights
of the next check's time left, as its runs take from a second to the demo's minutes."""


def _seconds(path: Path | None) -> dict[str, float]:
    """The seconds `path` keeps of each command (none: nothing kept, or unreadable)."""
    try:
        kept = json_module.loads(path.read_text(encoding="utf-8")) if path else {}
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in kept.items()} if isinstance(kept, dict) else {}


def main(
    argv: list[str] | None = None,
    run: Callable[[Run, Callable[[], None]], Report] = run_command,
    seconds: Path | None = None,
) -> int:
    """The check (the module's docstring); `seconds`: the file of each command's seconds
    (`SECONDS`), read for the progress's weights and written with this check's."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="pages (default: README.md and docs/)")
    parser.add_argument("--slow", action="store_true", help="also the runs marked slow")
    parser.add_argument("--fix", action="store_true", help="write the new figures in")
    args = parser.parse_args(argv)
    cache: dict[str, Report] = {}
    skipped: set[str] = set()
    absent: dict[str, str] = {}  # run name → why its data is absent
    took = _seconds(seconds)
    steps: dict[str, Run] = {}  # (the plan, and `bar` its progress: both set below)

    def report_of(r: Run) -> Report | None:
        if r.slow and not args.slow:
            skipped.add(r.name)
            return None
        why = data_missing(r.command)
        if why is not None:
            absent[r.name] = why
            return None
        if r.command not in cache:
            print(f"running {r.name}: {r.command}", file=sys.stderr, flush=True)
            done, began = len(cache), time.monotonic()
            cache[r.command] = run(r, lambda: bar(done, len(steps), f"running {r.name}"))
            took[r.command] = time.monotonic() - began
            bar(len(cache), len(steps), r.command)
        return cache[r.command]

    findings: list[Finding] = []
    checked = 0
    files = list(pages(args.files))
    try:
        steps = planned(files, args.slow)
        # (each run at its seconds last time, where kept: else they count alike)
        costs = {c: took[c] for c in steps if c in took} or None
        with stderr_progress("running the pages' commands", len(steps), costs=costs) as bar:
            for path in files:
                text = path.read_text(encoding="utf-8")
                shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                fixed, found, n = check_page(shown, text, report_of)
                findings += found
                checked += n
                if args.fix and fixed != text:
                    path.write_text(fixed, encoding="utf-8")
    except IdlegateError as exc:
        parser.exit(1, f"Error: {one_line(exc)}\n")
    if seconds is not None and cache:
        try:
            seconds.parent.mkdir(parents=True, exist_ok=True)
            seconds.write_text(json_module.dumps(took, indent=1) + "\n", encoding="utf-8")
        except OSError as exc:  # (the figures are checked: only the next estimate is worse)
            print(f"cannot keep the runs' seconds in {seconds}: {exc}", file=sys.stderr)
    for f in findings:
        print(f)
    for name, why in sorted(absent.items()):
        print(f"run {name} skipped, its figures not checked: {why}")
    moved = sum(f.now is not None for f in findings)
    print(
        f"{checked - moved} of {checked} figures match"
        + (f"; {moved} moved" + (" (written in)" if args.fix else "") if moved else "")
        + (f"; {len(findings) - moved} not checked" if len(findings) > moved else "")
        + (f"; slow runs skipped (--slow): {', '.join(sorted(skipped))}" if skipped else "")
        + (f"; runs skipped, data absent: {', '.join(sorted(absent))}" if absent else "")
    )
    return 1 if findings and not (args.fix and all(f.now is not None for f in findings)) else 0


if __name__ == "__main__":
    sys.exit(main(seconds=SECONDS))
