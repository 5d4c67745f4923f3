"""benchmarks/docs_figures.py (`make docs-check`): the figures the docs quote, checked against
their commands; here with a fake run, and the real pages' markers read without running."""

from __future__ import annotations

from pathlib import Path

import pytest

from idlegate.errors import IdlegateError
from tests.helpers import load_benchmark

docs_figures = load_benchmark("docs_figures")

PAGE = """# A page

<!-- run cmp -->
```sh
idlegate compare --schedulers a,b --seeds 2 --first-seed 0 --out out/cmp
```

<!-- table cmp -->
<!-- table long -->
| scheduler | avg JCT (s) | avg JCT vs b |
|:---|---:|---:|
| a | 10.0 ± 1.0 | -50.0 % ± 1.0 |
| trained | 9.0 | -55.0 % |

`a` is <!-- figure cmp: cell("a", "avg JCT vs b") -->-10.0 % ± 9.0<!-- /figure --> against
`b`, lower on <!-- figure cmp: words(lower_on("a", "b")) -->two<!-- /figure --> seeds, of
<!-- figure cmp: number(summary("b", "avg_jct")) -->20.0<!-- /figure --> s.

<!-- run long slow: idlegate train --out out/t && idlegate advise h.jsonl --out out/adv -->
"""

REPORT = docs_figures.Report(
    json={
        "schedulers": {
            "a": {"runs": [{"avg_jct": 8.0}, {"avg_jct": 24.0}]},
            "b": {
                "runs": [{"avg_jct": 16.0}, {"avg_jct": 20.0}],
                "summary": {"avg_jct": {"mean": 18.0}},
            },
        }
    },
    table=[
        ["scheduler", "avg JCT (s)", "p95 JCT (s)", "avg JCT vs b"],
        [":---", "---:", "---:", "---:"],
        ["**a**", "**16.0 ± 8.0**", "**30.0**", "**-10.0 % ± 9.0**"],
        ["b", "18.0 ± 2.0", "31.0", "baseline"],
    ],
)


def _fake(reports: dict[str, object], ran: list[str]):
    def run(r, tick):
        ran.append(r.name)
        return reports[r.name]

    return run


def test_the_figures_that_moved_are_listed_and_fixed(tmp_path: Path, capsys) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    ran: list[str] = []
    assert docs_figures.main([str(page)], run=_fake({"cmp": REPORT}, ran)) == 1
    out = capsys.readouterr().out
    # the row and two figures moved (a is lower on one seed, b's mean is 18); the slow
    # run's row is not checked without --slow, and the command ran once for four figures
    assert ran == ["cmp"]
    assert "page.md:12: documented '| a | 10.0 ± 1.0 | -50.0 % ± 1.0 |', now " in out
    assert "now '| **a** | **16.0 ± 8.0** | **-10.0 % ± 9.0** |'" in out
    assert "documented 'two', now 'one'" in out and "documented '20.0', now '18.0'" in out
    assert "1 of 4 figures match; 3 moved; slow runs skipped (--slow): long" in out
    assert page.read_text() == PAGE

    assert docs_figures.main([str(page), "--fix"], run=_fake({"cmp": REPORT}, [])) == 0
    fixed = page.read_text()
    assert "| **a** | **16.0 ± 8.0** | **-10.0 % ± 9.0** |\n| trained | 9.0 |" in fixed
    assert "-->one<!--" in fixed and "-->18.0<!--" in fixed
    assert docs_figures.main([str(page)], run=_fake({"cmp": REPORT}, [])) == 0


def test_a_slow_run_runs_with_slow_and_a_failed_run_is_not_checked(tmp_path, capsys) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    failed = docs_figures.Report(error="it failed (exit 1): Error: no such file")
    ran: list[str] = []
    assert (
        docs_figures.main([str(page), "--slow"], run=_fake({"cmp": REPORT, "long": failed}, ran))
        == 1
    )
    assert ran == ["cmp", "long"]
    out = capsys.readouterr().out
    assert "page.md:8: 'the table' not checked: run long: it failed (exit 1)" in out
    # the row only the failed run would have had is named too
    assert "'| trained | 9.0 | -55.0 % |' not checked: no run of the table has row 'trained'" in out


def test_a_figure_of_a_run_the_page_does_not_mark_is_an_error(tmp_path, capsys) -> None:
    page = tmp_path / "page.md"
    page.write_text("x <!-- figure nope: 1 -->1<!-- /figure -->\n")
    with pytest.raises(SystemExit) as stop:
        docs_figures.main([str(page)], run=_fake({}, []))
    assert stop.value.code == 1
    assert capsys.readouterr().err == (
        f"Error: {page}:1: no run 'nope' in this page; mark its command\n"
    )


def test_a_report_is_what_the_command_just_wrote_into_its_out(tmp_path: Path) -> None:
    (tmp_path / "compare.json").write_text('{"best": "a"}')
    (tmp_path / "compare.md").write_text("# t\n\n| s | x |\n|:---|---:|\n| a | 1 |\n\nmore\n")
    report = docs_figures._report("", tmp_path, started=0.0)
    assert report.json == {"best": "a"} and report.row_names() == ["a"]
    stale = docs_figures._report(
        "", tmp_path, started=(tmp_path / "compare.md").stat().st_mtime + 5
    )
    assert stale.error == f"it wrote no .json or .md into {tmp_path}"
    assert docs_figures._report('{"avg_jct": 3.5}', None, 0.0).json == {"avg_jct": 3.5}


@pytest.mark.parametrize("page", docs_figures.pages([]), ids=lambda p: p.name)
def test_every_figure_of_the_pages_is_checked_against_its_run(page: Path) -> None:
    # every run is asked for (with --slow), and every figure and table is compared with
    # its run's report: here each run fails, so each figure is named as not checked
    text = page.read_text(encoding="utf-8")
    asked: list[str] = []

    def failing(run):
        asked.append(run.name)
        return docs_figures.Report(error="not run here")

    _, findings, _ = docs_figures.check_page(page, text, failing)
    for _, expression, _ in docs_figures.FIGURE.findall(text):
        compile(expression, str(page), "eval")
    opened = text.count("<!-- figure ")
    assert opened == len(docs_figures.FIGURE.findall(text)), "a figure without its <!-- /figure -->"
    figures = {
        f"{page}:{docs_figures._line(text, m.start())}" for m in docs_figures.FIGURE.finditer(text)
    }
    tables = {
        f"{page}:{docs_figures._line(text, m.start())}" for m in docs_figures.TABLE.finditer(text)
    }
    assert figures | tables <= {f.where for f in findings if "not run here" in f.why}
    used = set(docs_figures.MARKED.findall(text)) | {
        m[1] for m in docs_figures.FIGURE.finditer(text)
    }
    assert used <= set(asked)


def test_a_marked_figure_is_rerun_and_a_changed_number_is_moved(tmp_path: Path, capsys) -> None:
    # the real runner: the page's command runs (from the repository's root) and its report
    # is compared with the text; 3.4 is not what it prints
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- run n: echo '{\"x\": 3.46}' -->\n"
        'x is <!-- figure n: number(json["x"]) -->3.4<!-- /figure --> and '
        '<!-- figure n: number(json["x"], 2) -->3.46<!-- /figure -->.\n'
    )
    assert docs_figures.main([str(page)]) == 1
    out = capsys.readouterr().out
    assert f"{page}:2: documented '3.4', now '3.5'" in out
    assert "1 of 2 figures match; 1 moved" in out
    assert docs_figures.main([str(page), "--fix"]) == 0
    assert "-->3.5<!--" in page.read_text()
    assert docs_figures.main([str(page)]) == 0
    assert "2 of 2 figures match" in capsys.readouterr().out


def test_a_failing_command_is_named_with_its_last_line(tmp_path: Path, capsys) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- run n: echo 'Error: no such workload' >&2; exit 3 -->\n"
        'x <!-- figure n: number(json["x"]) -->3.4<!-- /figure -->\n'
    )
    assert docs_figures.main([str(page)]) == 1
    assert "not checked: run n: it failed (exit 3): Error: no such workload" in (
        capsys.readouterr().out
    )


@pytest.fixture()
def no_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The data hidden, as on a fresh clone (an empty IDLEGATE_SHARED_DATA)."""
    monkeypatch.delenv("IDLEGATE_TPCH_DIR", raising=False)
    monkeypatch.delenv("IDLEGATE_ALIBABA_DIR", raising=False)
    monkeypatch.setenv("IDLEGATE_SHARED_DATA", str(tmp_path / "none"))
    return tmp_path / "none"


def test_a_run_whose_data_is_absent_is_skipped_with_why(no_data: Path, tmp_path, capsys) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- run ali: idlegate simulate -w alibaba --jobs-count 100 --json -->\n"
        '<!-- figure ali: number(json["avg_jct"], 0) -->10,550<!-- /figure -->\n'
        "<!-- run n: echo '{\"x\": 3.4}' -->\n"
        '<!-- figure n: number(json["x"]) -->3.4<!-- /figure -->\n'
    )
    assert docs_figures.main([str(page)]) == 0  # passes on what it could run
    out = capsys.readouterr().out
    assert (
        "run ali skipped, its figures not checked: needs Alibaba's trace, not found "
        f"({no_data / 'alibaba'} is absent; set IDLEGATE_ALIBABA_DIR)"
    ) in out
    assert "1 of 1 figures match; runs skipped, data absent: ali" in out


def test_which_commands_need_data(no_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = docs_figures.data_missing
    assert missing("idlegate compare -w k8s-batch --seeds 2") is None
    assert "needs TPC-H's traces" in (missing("idlegate simulate --workload tpch") or "")
    assert "needs TPC-H's traces" in (missing("idlegate compare -w mixed") or "")
    assert missing("idlegate compare -w mixed -o dags=tpch-like") is None
    assert missing("idlegate compare -w swf --file ../shared/data/swf/lublin_256.swf") == (
        "needs ../shared/data/swf, absent or hidden by IDLEGATE_SHARED_DATA"
        if (docs_figures.BESIDE / "swf").is_dir()
        else "needs ../shared/data/swf, absent"
    )
    (no_data / "tpch").mkdir(parents=True)
    assert missing("idlegate simulate -w tpch") is None
    monkeypatch.setenv("IDLEGATE_ALIBABA_DIR", str(no_data / "tpch"))
    assert missing("idlegate simulate -w alibaba") is None


def test_the_checked_pages_quote_the_figures_of_issue_60() -> None:
    # the figures that went stale once (issue 60, item 22) are among those checked
    root = docs_figures.ROOT
    marked = {
        "README.md": "<!-- table demo -->",
        "docs/resources.md": "<!-- table resources -->",
        "docs/advise.md": "<!-- figure advise: ",
        "docs/operations.md": "<!-- figure advise: ",
    }
    missing = [name for name, marker in marked.items() if marker not in (root / name).read_text()]
    assert missing == []
    with pytest.raises(IdlegateError, match="no command and no"):
        docs_figures.runs_of(Path("p.md"), "<!-- run x -->\ntext\n")


# -- the forecasts' page and its record (issue 81, item 6) ---------------------------------

FORECAST_FIGURES = {
    "forecast-alibaba": 8,
    "forecast-k8s": 8,
    "forecast-k8s-10": 8,
    "forecast-k8s-30": 2,
    "forecast-k8s-30-median": 1,
    "forecast-k8s-measured": 3,
    "forecast-k8s-median": 2,
    "forecast-k8s-poisson": 3,
    "forecast-teams": 5,
    "forecast-teams-0": 2,
    "forecast-teams-0-oracle": 3,
    "forecast-teams-0-queues": 2,
    "forecast-teams-queues": 7,
    "forecast-teams-queues-3": 11,
    "forecast-teams-queues-every": 12,
    "forecast-teams-queues-every-3": 13,
    "forecast-tpch": 5,
    "forecast-tpch-poisson": 7,
}
"""The figures docs/forecast.md marked, by run, before its record moved apart (102, and the
tables of eight of these runs): docs/research/forecasts.md keeps every one of them."""
FORECAST_TABLES = {
    "forecast-alibaba",
    "forecast-k8s",
    "forecast-k8s-10",
    "forecast-teams",
    "forecast-teams-queues",
    "forecast-teams-queues-every",
    "forecast-tpch",
    "forecast-tpch-poisson",
}


def test_the_forecasts_record_keeps_every_figure_and_the_page_quotes_its_figures() -> None:
    root = docs_figures.ROOT
    page_path, record_path = (
        root / "docs" / "forecast.md",
        root / "docs" / "research" / "forecasts.md",
    )
    page, record = page_path.read_text(), record_path.read_text()
    runs = docs_figures.runs_of(record_path, record)
    figures = [(m[1], m[2], m[3]) for m in docs_figures.FIGURE.finditer(record)]
    counted = {name: sum(f[0] == name for f in figures) for name in FORECAST_FIGURES}
    assert {n: c for n, c in counted.items() if c < FORECAST_FIGURES[n]} == {}
    assert set(FORECAST_FIGURES) <= set(runs)
    tables = {
        n for m in docs_figures.TABLE.finditer(record) for n in docs_figures.MARKED.findall(m[1])
    }
    assert tables >= FORECAST_TABLES
    # the user's page quotes figures of the record, with the record's commands: `make
    # docs-check` runs each once and moves both pages' copies alike
    quoted = [(m[1], m[2], m[3]) for m in docs_figures.FIGURE.finditer(page)]
    assert quoted and set(quoted) <= set(figures)
    page_runs = docs_figures.runs_of(page_path, page)
    assert {n: r.command for n, r in page_runs.items()} == {n: runs[n].command for n in page_runs}


# -- the queues' page and its record (issue 94, item 5) ------------------------------------

QUEUES_FIGURES = {
    "bound300": 4,
    "nob": 4,
    "reclaim-b120": 1,
    "reclaim-forecast": 1,
    "reclaim-large": 10,
    "reclaim-rules": 2,
}
"""The figures docs/queues.md marked, by run, before its record moved apart (22):
docs/queues.md and docs/research/queues.md keep every one of them."""


def test_the_queues_page_and_its_record_keep_every_figure() -> None:
    root = docs_figures.ROOT
    pages = [root / "docs" / "queues.md", root / "docs" / "research" / "queues.md"]
    texts = [p.read_text() for p in pages]
    figures = [m[1] for text in texts for m in docs_figures.FIGURE.finditer(text)]
    counted = {name: figures.count(name) for name in QUEUES_FIGURES}
    assert {n: c for n, c in counted.items() if c < QUEUES_FIGURES[n]} == {}
    # every figure names a run of its own page (the check raises otherwise; nothing runs)
    for path, text in zip(pages, texts, strict=True):
        docs_figures.check_page(path, text, lambda run: None)
    # a run marked on both pages is one command: docs-check runs it once, both copies alike
    page_runs, record_runs = (docs_figures.runs_of(p, t) for p, t in zip(pages, texts, strict=True))
    both = set(page_runs) & set(record_runs)
    assert both >= {"reclaim-rules", "reclaim-forecast", "reclaim-large"}
    assert {n: page_runs[n].command for n in both} == {n: record_runs[n].command for n in both}


# -- its progress counts runs and says so while one runs (issue 80, item 12) -------------

TWO_PAGES = (
    "<!-- run a: idlegate compare --out out/a -->\n"
    "<!-- figure a: 1 -->1<!-- /figure --> <!-- figure a: 1 -->1<!-- /figure -->\n"
    "<!-- run b: echo b -->\n<!-- figure b: 1 -->1<!-- /figure -->\n"
    "<!-- run s slow: echo s -->\n<!-- figure s: 1 -->1<!-- /figure -->\n"
    "<!-- run unused: echo u -->\n",
    "<!-- run a2: idlegate compare --out out/a -->\n<!-- figure a2: 1 -->1<!-- /figure -->\n"
    "<!-- run c: echo c -->\n<!-- table c -->\n| x |\n|---|\n| 1 |\n",
)


def _pages(tmp_path: Path) -> list[Path]:
    out = []
    for i, text in enumerate(TWO_PAGES):
        out.append(tmp_path / f"p{i}.md")
        out[-1].write_text(text)
    return out


def test_the_plan_counts_the_runs_the_figures_need_each_command_once(tmp_path: Path) -> None:
    # (docs-check counted pages: its first estimate after the README's demo was hours)
    files = _pages(tmp_path)
    assert [r.name for r in docs_figures.planned(files, slow=False).values()] == ["a", "b", "c"]
    assert len(docs_figures.planned(files, slow=True)) == 4


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_long_run_is_reported_every_30_seconds_with_the_runs_kept_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import functools
    import io
    import json

    from idlegate import progress

    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    clock, err = _Clock(), io.StringIO()
    shown = functools.partial(progress.stderr_progress, clock=clock, stream=err)
    monkeypatch.setattr(docs_figures, "stderr_progress", shown)
    files = _pages(tmp_path)
    a, b, c = (r.command for r in docs_figures.planned(files, slow=False).values())
    kept = tmp_path / "seconds.json"
    kept.write_text(json.dumps({a: 60.0, b: 15.0, c: 45.0}))
    lengths = {"a": 6, "b": 4, "c": 0}  # (heartbeats of 10 s each)

    def run(r, tick):
        for _ in range(lengths[r.name]):
            clock.now += 10.0
            tick()
        return docs_figures.Report(json={}, table=[["x"], ["---"], ["1"]])

    assert docs_figures.main([str(p) for p in files], run=run, seconds=kept) == 0
    lines = err.getvalue().splitlines()
    said = [line for line in lines if line.startswith("running the pages' commands")]
    assert said == [
        # a's run: alive at 30 s and 60 s, no estimate before a run is done
        "running the pages' commands: 0/3 (0 %), 0:30 elapsed; running a",
        "running the pages' commands: 0/3 (0 %), 1:00 elapsed; running a",
        # a done, 60 of the 120 s kept: at that pace 1:30 left, not 3:00 as runs counted
        "running the pages' commands: 1/3 (33 %), 1:30 elapsed, about 1:30 left; running b",
        f"running the pages' commands: 3/3 (100 %), 1:40 elapsed, about 0:00 left; {c}",
    ]
    assert set(json.loads(kept.read_text())) == {a, b, c}  # (this check's, for the next)


def test_a_runs_tick_comes_while_its_command_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the command ends only once a tick came: it waits for the file the tick writes
    go = tmp_path / "go"
    command = f"while [ ! -e {go} ]; do sleep 0.01; done; echo '{{\"x\": 1}}'"
    ticks: list[int] = []

    def tick() -> None:
        ticks.append(1)
        go.touch()

    monkeypatch.setattr(docs_figures, "HEARTBEAT", 0.01)
    report = docs_figures.run_command(docs_figures.Run("n", command, False), tick)
    assert ticks and report.json == {"x": 1}
