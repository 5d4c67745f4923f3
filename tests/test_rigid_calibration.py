"""idlegate's rigid schedulers against SchedInspector's own simulator, window by window.

The reference (``lublin_256.si-reference.json``, in ../shared/data/swf) holds what
SchedInspector's simulator gives on its 50 windows of lublin_256 (seed 1);
benchmarks/rigid_calibration.py runs idlegate on the same windows.
"""

from __future__ import annotations

import pytest

from tests.helpers import load_benchmark, need_shared

bench = load_benchmark("rigid_calibration")

pytestmark = pytest.mark.slow

DIFFERENT: dict[str, set[int]] = {
    # SchedInspector frees executors one completion at a time and backfills in between:
    # two jobs ending together free 8 then 10 executors, so a 16-executor job cannot
    # backfill there (idlegate frees both at once)
    "FCFS+bf": {35},
    # after a window's last arrival SchedInspector bounds its 600 s points by the submit
    # time of the trace's next job, outside the window
    "reject:SJF": {34},
    # a pick accepted at a 600 s point lets backfilling start there in SchedInspector;
    # the cluster asks again only at the next event (in window 29 only the wait differs)
    "reject:SJF+bf": {1, 7, 23, 24, 29, 30},
}
"""Windows known to differ, with the reason; every other window must agree."""


@pytest.fixture(scope="module")
def rows() -> dict[str, object]:
    # (where the benchmark reads them: ../shared/data/swf, or under $IDLEGATE_SHARED_DATA)
    trace = need_shared("swf", "lublin_256.swf")
    reference = bench.load_reference(need_shared("swf", "lublin_256.si-reference.json"))
    return {row.label: row for row in bench.run(trace, reference) if row.theirs}


@pytest.mark.parametrize(
    "label", ["FCFS", "SJF", "F1", "FCFS+bf", "SJF+bf", "F1+bf", "reject:SJF", "reject:SJF+bf"]
)
def test_every_window_matches_schedinspector(rows: dict, label: str) -> None:
    row = rows[label]
    for metric in ("bsld", "wait", "util"):
        if metric not in row.theirs:
            continue
        pairs = zip(row.ours[metric], row.theirs[metric], strict=True)
        differ = {
            i for i, (a, b) in enumerate(pairs) if a != pytest.approx(b, rel=bench.AGREE, abs=1e-9)
        }
        assert differ <= DIFFERENT.get(label, set()), (metric, sorted(differ))
        assert abs(row.gap(metric)) <= 0.02, (metric, row.gap(metric))
