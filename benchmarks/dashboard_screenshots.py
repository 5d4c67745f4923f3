"""The dashboard's screenshots in docs/dashboard.md (docs/img/dashboard-queues.png and
docs/img/dashboard-workflow.png), taken in Debian's chromium (Playwright) of the page the
browser tests check: the real operator on the test API server running ExecutorPool
``shared`` with two queues, one workflow running, two waiting (one with a forecast set on
its status), a finished diamond (tests/dashboard_helpers.py, ``demo_cluster``), and a minute
of short workflows in queue ``b`` for its chart (about a minute in all).

    .venv/bin/python -m benchmarks.dashboard_screenshots          # writes out/dashboard-*.png
    .venv/bin/python -m benchmarks.dashboard_screenshots --docs   # redraws docs/img's copies

(run from the repository root: the script imports the test API server from tests/k8s). By
default the PNGs go to out/ (untracked), as every command a user copies from the docs
writes there; ``--docs`` is for the maintainer who changes the page and redraws the
tracked pictures, ``--out DIR`` for anywhere else.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from idlegate.api.forecast_status import Forecast, dump_forecast
from idlegate.flags import description, script_extras

with script_extras(__name__):  # (a browser, and the test harness: the dev extra)
    from playwright.sync_api import expect, sync_playwright

    from tests.dashboard_helpers import (
        CHROMIUM_ARGS,
        DashboardThread,
        chromium,
        demo_cluster,
    )
    from tests.e2e import DWF, stage, workflow
    from tests.k8s.harness import serving_crd

OUT = Path("out")
"""Where the PNGs go by default (untracked)."""
DOCS = Path("docs/img")
"""The docs' tracked copies (``--docs``)."""


def folder(argv: list[str] | None = None) -> Path:
    """The folder the two PNGs go to, from the command line `argv`."""
    parser = argparse.ArgumentParser(description=description(__doc__))
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--out", type=Path, default=OUT, help="the folder the two PNGs go to (default: out)"
    )
    where.add_argument(
        "--docs",
        action="store_true",
        help="write docs/img's tracked copies, which docs/dashboard.md shows (maintainers)",
    )
    args = parser.parse_args(argv)
    return DOCS if args.docs else Path(args.out)


def main() -> None:
    out = folder()
    browser_path = chromium()
    if browser_path is None:
        sys.exit("Error: Debian's chromium is not installed; run `make chromium`")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for api in serving_crd(Path(tmp)):
            with demo_cluster(api, scale=30) as cluster:
                now = time.time()
                forecast = Forecast(
                    now, now + 250, (now + 130, now + 420), now + 560, (now + 400, now + 900)
                )
                status = {"status": {"forecast": dump_forecast(forecast)}}
                api.patch(DWF, cluster.pooled, "waiter", status, subresource="status")
                with (
                    DashboardThread(
                        api.kubeconfig, namespaces=[], visibility=cluster.visibility
                    ) as board,
                    sync_playwright() as p,
                ):
                    browser = p.chromium.launch(executable_path=browser_path, args=CHROMIUM_ARGS)
                    page = browser.new_page(viewport={"width": 1200, "height": 820})
                    # queue b's use over 50 s: a workflow of one 60 s task every 5 s of the wall
                    # (the clock runs 20 times the wall's: a task ends in 3 s), for the chart
                    for i in range(10):
                        one = workflow(f"b-{i}", stage("s", 1, 60))
                        one["spec"]["queueName"] = "b"
                        api.create(DWF, one, namespace=cluster.pooled)
                        time.sleep(5)
                    page.goto(board.url)
                    expect(page.locator("#waiting .fc-ok")).to_have_count(1)
                    # (a few samples in the chart: the page polls, each poll redraws it)
                    polls = page.locator("svg.spark polyline.use[points*=' ']")
                    expect(polls.first).to_be_attached()
                    page.screenshot(path=str(out / "dashboard-queues.png"), full_page=True)
                    page.goto(f"{board.url}/workflow/{cluster.plain}/diamond")
                    expect(page.locator("svg.gantt rect.bar")).to_have_count(6)
                    page.screenshot(path=str(out / "dashboard-workflow.png"), full_page=True)
                    browser.close()
    print(f"Wrote {out / 'dashboard-queues.png'} and {out / 'dashboard-workflow.png'}")


if __name__ == "__main__":
    main()
