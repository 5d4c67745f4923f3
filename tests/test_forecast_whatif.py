"""A what-if's answer (idlegate.operator.forecasting.whatif, issue 80): its replays stop at its own
workflow's finish and within a budget of the wall clock, the replay under way too (a
person waits on it; an answer took 16 s on a busy node), and it says how sure it is: its
replays and how often the pool's intervals held. The clock is a fake, never the wall's;
what the budget gives on a live pool's state is benchmarks/what_if.py's."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from idlegate.api.forecast_ask import WHAT_IF_PATH, sureness
from idlegate.api.forecast_status import Forecast, Unavailable, dump_forecast
from idlegate.api.task_pods import Owner
from idlegate.operator.forecasting.request import compute
from idlegate.operator.forecasting.whatif import answer, what_if
from idlegate.policy import make_scheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.durations import MeasuredDurations
from idlegate.sim.forecast import BUDGET
from tests.helpers import chain
from tests.test_forecast_refresh import Held

T0 = 1_800_000_000.0
SMALL = {"metadata": {"name": "small"}, "spec": {"stages": [{"name": "a", "tasks": 1,
                                                              "taskDurationSeconds": 10}]}}  # fmt: skip


def long_queue(n: int = 30) -> Cluster:
    """One executor under srpt, `n` workflows of 100 s waiting behind a running one."""
    cluster = Cluster(1)
    cluster.advance(T0)
    rule = make_scheduler("srpt")
    for i in range(n):
        owner = Owner("t", f"w{i}", f"uid-{i}", "DagWorkflow")
        cluster.add_job(chain(100.0), T0, f"w{i}", Held(owner, MeasuredDurations([100.0])))
    while cluster.decide_once(rule, T0) is not None:
        pass
    return cluster


def ticking(step: float) -> Iterator[float]:
    """A fake clock: each reading `step` seconds after the last."""
    t = 0.0
    while True:
        yield t
        t += step


def test_a_what_if_is_replayed_only_until_its_own_finish():
    # srpt starts the 10 s workflow next: the 29 behind it are not replayed to their end
    snap, job_id = what_if(long_queue(), make_scheduler("srpt"), SMALL, 0, 0, T0)
    whole, _ = compute(snap, 1, BUDGET)
    until, _ = compute(snap, 1, BUDGET, watch=(job_id,))
    assert until.of(job_id) == whole.of(job_id)  # (the same replay, up to its finish)
    assert [e.job_id for e in until.workflows] == [job_id]
    assert until.events * 5 < whole.events


def test_a_what_if_answers_within_its_budget_of_the_clock_the_first_replay_too():
    snap, job_id = what_if(long_queue(), make_scheduler("fifo"), SMALL, 0, 0, T0)
    # FIFO puts it last: each event a tenth of a second, its one replay is cut at 0.9 s
    clock = ticking(0.1)
    cut, replays = answer(snap, job_id, seconds=0.5, cut=0.9, clock=lambda: next(clock))
    assert replays == 0 and isinstance(cut, Unavailable)
    assert cut.reason == (
        "its replay of the pool did not end within the 0.9 s an answer may take; ask again "
        "when fewer workflows wait"
    )
    # events of no cost: every replay fits, and the answer is the one without a budget
    free, replays = answer(snap, job_id, seconds=0.5, cut=0.9, clock=lambda: 0.0)
    assert replays == 20 and isinstance(free, Forecast)
    assert free == answer(snap, job_id, seconds=1e9, cut=1e9)[0]
    # each replay about a fifth of the 0.5 s: no replay starts that would end past it
    clock = ticking(0.1 / 60)
    _, replays = answer(snap, job_id, seconds=0.5, cut=0.9, clock=lambda: next(clock))
    assert 1 <= replays < 20


def test_the_answer_says_how_sure_it_is():
    assert sureness(1, {"start": (17, 37), "finish": (14, 30)}) == (
        "80 % intervals from 1 replay; this pool's last forecasts held 17 of 37 starts (46 %) "
        "and 14 of 30 finishes (47 %) inside their intervals."
    )
    assert sureness(20, {"start": (0, 0), "finish": (0, 0)}) == (
        "80 % intervals from 20 replays; none of this pool's forecasts has resolved yet, so "
        "how often they hold here is not measured."
    )
    assert "no finishes yet" in sureness(3, {"start": [4, 5], "finish": [0, 0]})


@pytest.fixture
def operator() -> Iterator[str]:
    """An operator's what-if route as the CLI reaches it, answering one forecast."""
    f = Forecast(T0, T0 + 240, (T0 + 120, T0 + 420), T0 + 900, (T0 + 660, T0 + 1260), 24)
    doc = {"pool": "shared", "queue": "b", "forecast": dump_forecast(f), "replays": 1,
           "held": {"start": [17, 37], "finish": [14, 30]}}  # fmt: skip

    class Operator(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200 if self.path == WHAT_IF_PATH else 404)
            self.end_headers()
            self.wfile.write(json.dumps(doc).encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Operator)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_idlegate_forecast_says_how_sure_its_answer_is(operator: str, tmp_path: Path):
    from idlegate.cli import app

    file = tmp_path / "etl.yaml"
    file.write_text(json.dumps({"kind": "DagWorkflow", **SMALL}))
    said = CliRunner().invoke(app, ["forecast", str(file), "--url", operator])
    assert said.exit_code == 0, said.output
    first, second = said.output.splitlines()
    assert first.startswith("etl.yaml (pool shared, queue b): start ")
    assert second == (
        "80 % intervals from 1 replay; this pool's last forecasts held 17 of 37 starts (46 %) "
        "and 14 of 30 finishes (47 %) inside their intervals."
    )


def test_options_may_come_before_the_file_of_idlegate_forecast(operator: str, tmp_path: Path):
    # docs/forecast.md gives `idlegate forecast FILE` as short for `what-if FILE`; its
    # options are what-if's wherever they stand
    from idlegate.cli import app

    file = tmp_path / "etl.yaml"
    file.write_text(json.dumps({"kind": "DagWorkflow", **SMALL}))
    said = CliRunner().invoke(app, ["forecast", "--json", "--url", operator, str(file)])
    assert said.exit_code == 0, said.output
    assert json.loads(said.output)["held"] == {"start": [17, 37], "finish": [14, 30]}
    helped = CliRunner().invoke(app, ["forecast", "--help"])
    assert helped.exit_code == 0 and "what-if" in helped.output  # (the group's own help)


def test_a_bad_or_unreachable_url_is_said_as_the_user_gave_it(tmp_path: Path):
    from idlegate.cli import app

    file = tmp_path / "etl.yaml"
    file.write_text(json.dumps({"kind": "DagWorkflow", **SMALL}))
    bad = CliRunner().invoke(app, ["forecast", str(file), "--url", "notaurl"])
    assert bad.exit_code == 1
    assert bad.output.startswith("Error: --url notaurl is not an http:// URL with a host;")
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    closed = f"http://127.0.0.1:{server.server_address[1]}"
    server.server_close()  # (nothing listens there now)
    gone = CliRunner().invoke(app, ["forecast", str(file), "--url", closed])
    assert gone.exit_code == 1
    assert "(Connection refused)" in gone.output and "urlopen" not in gone.output
