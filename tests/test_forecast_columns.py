"""What ``kubectl get dwf`` prints of a forecast (issue 80): its START and FINISH columns
say what happened once it did, and the forecast, marked ``~``, before; ``status.forecast``
is cleared as the workflow finishes (its FINISH showed the forecast, not the finish). On
fake time: the operator's bridge against the fakes (tests/operator_fakes.py), the refresh
poked by hand."""

from __future__ import annotations

from typing import Any

import pytest

from idlegate.api.crd import PRINTER_COLUMNS
from idlegate.api.forecast_status import Forecast, Unavailable, columns, rfc3339
from idlegate.sim.timestamps import stamp
from tests.operator_fakes import FakeKube, Harness, forecasting, refreshed, stage

T0 = 1_717_200_000.0


def test_the_columns_are_text_what_happened_else_the_forecast_marked():
    f = Forecast(T0, T0 + 60, (T0 + 30, T0 + 120), T0 + 600, (T0 + 400, T0 + 900))
    assert columns(f, None, None) == ("~" + rfc3339(T0 + 60), "~" + rfc3339(T0 + 600))
    assert columns(f, T0 + 75, None) == (rfc3339(T0 + 75), "~" + rfc3339(T0 + 600))
    assert columns(f, T0 + 75, T0 + 500) == (rfc3339(T0 + 75), rfc3339(T0 + 500))
    assert columns(Unavailable(T0, "no history"), None, None) == ("unavailable", "unavailable")
    assert columns(None, None, None) == (None, None)
    by_name = {c["name"]: c for c in PRINTER_COLUMNS}
    # (a date column prints an age, and "<invalid>" for a time ahead)
    assert by_name["Start"]["type"] == by_name["Finish"]["type"] == "string"
    assert by_name["Start"]["jsonPath"] == ".status.startSummary"
    assert by_name["Finish"]["jsonPath"] == ".status.finishSummary"


def status(h: Harness, name: str) -> dict[str, Any]:
    return h.kube.workflows[("default", name)]["status"]


@pytest.mark.asyncio
async def test_a_finished_workflow_shows_its_finish_and_keeps_no_forecast():
    h = forecasting(FakeKube(), None, T0)
    for name in ("w0", "w1"):  # (w0 runs on the pool of one, w1 waits behind it)
        body = h.kube.add_workflow(name, {"stages": [stage("a", duration=100.0)]})
        body["metadata"]["creationTimestamp"] = stamp(h.clock.now())
        h.admit(body)
        await h.settle()
    await refreshed(h)
    waiting = status(h, "w1")
    forecast = waiting["forecast"]
    assert (waiting["startSummary"], waiting["finishSummary"]) == (
        "~" + forecast["start"],
        "~" + forecast["finish"],
    )
    assert status(h, "w0")["startSummary"] == rfc3339(T0)  # (it runs: its start happened)
    await h.finish("w0-a-0", after=100.0)
    assert h.released() == ["w1-a-0"]
    await refreshed(h)
    assert status(h, "w1")["finishSummary"] == "~" + status(h, "w1")["forecast"]["finish"]
    await h.finish("w1-a-0", after=100.0)
    await refreshed(h)
    for name in ("w0", "w1"):
        done = status(h, name)
        assert done["phase"] == "Succeeded"
        assert done.get("forecast") is None  # (the merge patch's null: cleared)
        assert done["finishSummary"] == done["completionTime"][:19] + "Z"
        assert not done["startSummary"].startswith("~")
    assert status(h, "w1")["startSummary"] == rfc3339(T0 + 100)
    assert status(h, "w1")["finishSummary"] == rfc3339(T0 + 200)
