"""The TPC-H trace loader: real traces (skipped when absent) and malformed files (always)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from idlegate.errors import IdlegateError, SpecError
from idlegate.sim.engine import simulate
from idlegate.sim.tpch import (
    ENV_VAR,
    TpchLibrary,
    checkout_tpch_dir,
    default_tpch_dir,
    load_tpch_file,
    normalize_size,
    open_tpch_library,
    parse_tpch_query,
)
from idlegate.sim.workloads import build_workload, mean_job_work, workload_config
from tests.helpers import Scripted, fifo_rule, tpch_traces


def _trace_dir() -> Path:
    return tpch_traces()


@pytest.fixture(scope="module")
def tpch_dir() -> Path:
    return _trace_dir()


@pytest.fixture(scope="module")
def library(tpch_dir: Path) -> TpchLibrary:
    return TpchLibrary(tpch_dir)


# ---------------------------------------------------------------------------------------
# real traces


def test_all_110_files_load_and_match_their_json(library: TpchLibrary, tpch_dir: Path):
    assert library.sizes() == ("2g", "5g", "10g", "20g", "50g")
    queries = library.load_all()
    assert len(queries) == 110
    for q in queries:
        raw = json.loads((tpch_dir / q.size / f"q{q.query}.json").read_text())["stages"]
        assert 2 <= q.dag.num_stages <= 18
        assert q.dag.num_stages == len(raw) == len(q.durations.stages)
        assert q.dag.names == tuple(f"s{s['id']}" for s in raw)
        assert q.dag.tasks == tuple(s["num_tasks"] for s in raw)
        assert q.dag.parents == tuple(tuple(s["parents"]) for s in raw)
        assert q.name == f"tpch-{q.size}-q{q.query}"
        assert q.total_tasks == sum(s["num_tasks"] for s in raw)


def test_task_duration_is_the_mean_of_every_measured_duration(library: TpchLibrary):
    q = library.load("10g", 9)
    for stage, spec, waves in zip(q.dag.tasks, q.spec.stages, q.durations.stages, strict=True):
        assert stage == spec.tasks
        every = [
            d for rows in (waves.first_wave, waves.rest_wave, waves.fresh) for r in rows for d in r
        ]
        assert spec.task_duration_seconds == pytest.approx(np.mean(every))
        assert spec.task_duration_seconds == waves.mean


def test_fresh_durations_are_removed_from_the_first_wave_and_gaps_filled(
    library: TpchLibrary, tpch_dir: Path
):
    """README: fresh values are removed from first_wave; empty keys take the nearest lower key."""
    filled = 0
    for size in library.sizes():
        for query in library.queries(size):
            raw = json.loads((tpch_dir / size / f"q{query}.json").read_text())["stages"]
            waves = library.load(size, query).durations.stages
            for stage, w in zip(raw, waves, strict=True):
                assert w.keys == tuple(sorted(int(k) for k in stage["first_wave"]))
                previous: tuple[float, ...] = ()
                for key, row in zip(w.keys, w.first_wave, strict=True):
                    kept = Counter(stage["first_wave"][str(key)]) - Counter(
                        stage["fresh_durations"].get(str(key), [])
                    )
                    expected = sorted(d / 1000 for d in kept.elements())
                    if not expected and previous:
                        filled += 1
                        expected = sorted(previous)
                    assert sorted(row) == pytest.approx(expected)
                    previous = row
    assert filled > 0  # the traces do exercise the fill rule


def test_real_stage_example(library: TpchLibrary):
    """5g q9 stage 3: at 100 executors every first-wave task was fresh, so 80's row is reused."""
    w = library.load("5g", 9).durations.stages[3]
    i80, i100 = w.keys.index(80), w.keys.index(100)
    assert w.first_wave[i100] == w.first_wave[i80]
    assert w.fresh[i100]


def test_cache_returns_the_same_objects(library: TpchLibrary, tpch_dir: Path):
    assert library.load("2g", 3) is library.load("2g", 3)
    assert library.load(2, 3) is library.load("2G", 3)
    assert open_tpch_library(tpch_dir) is open_tpch_library(str(tpch_dir) + "/")


def test_mean_total_work_is_the_grid_mean(library: TpchLibrary):
    works = [q.total_work for q in library.load_all(["2g", "50g"], [1, 6])]
    assert library.mean_total_work(["2g", "50g"], [1, 6]) == pytest.approx(np.mean(works))


def test_unknown_size_and_query_are_named(library: TpchLibrary):
    with pytest.raises(IdlegateError, match=r"size '7g' is not in .*available: 2g, 5g"):
        library.load("7g", 1)
    with pytest.raises(IdlegateError, match=r"query 23 is not in .*available: 1-22"):
        library.load("2g", 23)


def test_small_tpch_workload_simulates_to_completion(tpch_dir: Path):
    w = build_workload("tpch", seed=1, tpch_dir=tpch_dir, num_jobs=5, num_executors=50)
    assert len(w.jobs) == 5 and w.num_executors == 50
    assert w.fidelity.moving_delay == 2.0 and w.fidelity.wave_durations
    assert all(j.durations is not None for j in w.jobs)
    result = simulate(w, Scripted(fifo_rule), seed=1)
    assert result.unfinished == 0
    assert len(result.records) == 5
    assert all(r.jct > 0 for r in result.records)


def test_tpch_workload_shares_dags_and_is_deterministic(tpch_dir: Path):
    a = build_workload("tpch", seed=4, tpch_dir=tpch_dir, num_stream=60, sizes="2g")
    b = build_workload("tpch", seed=4, tpch_dir=tpch_dir, num_stream=60, sizes="2g")
    assert [(j.time, j.name) for j in a.jobs] == [(j.time, j.name) for j in b.jobs]
    assert all(x.dag is y.dag for x, y in zip(a.jobs, b.jobs, strict=True))
    by_query: dict[str, set[int]] = {}
    for j in a.jobs:
        by_query.setdefault(j.name.rsplit("-", 1)[0], set()).add(id(j.dag))
    assert all(len(ids) == 1 for ids in by_query.values())
    assert all(j.name.startswith("tpch-2g-q") for j in a.jobs)


def test_tpch_target_load_and_mixed_use_the_grid_mean(library: TpchLibrary, tpch_dir: Path):
    mean = library.mean_total_work(["2g"])
    assert mean_job_work(workload_config("tpch", tpch_dir=tpch_dir, sizes="2g")) == pytest.approx(
        mean
    )
    by_load = build_workload("tpch", 2, tpch_dir=tpch_dir, sizes="2g", num_stream=10, load=0.5)
    by_gap = build_workload(
        "tpch", 2, tpch_dir=tpch_dir, sizes="2g", num_stream=10, interarrival=mean / (0.5 * 50)
    )
    np.testing.assert_allclose([j.time for j in by_load.jobs], [j.time for j in by_gap.jobs])
    mixed = build_workload("mixed", 2, tpch_dir=tpch_dir, alpha=0.5, num_jobs=40)
    assert mixed.name == "mixed-tpch" and mixed.fidelity.moving_delay == 2.0
    assert {j.name.split("-")[0] for j in mixed.jobs} == {"short", "long", "tpch"}


def test_default_dir_prefers_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert default_tpch_dir() == tmp_path
    monkeypatch.delenv(ENV_VAR)
    found = default_tpch_dir()
    assert found is None or found.is_dir()


def test_the_default_dir_is_a_checkouts_only(tmp_path: Path):
    """Found beside a checkout (src/idlegate/sim/tpch.py next to pyproject.toml), never
    guessed for an installed package, however its directories happen to be named."""
    traces = tmp_path / "shared" / "data" / "tpch"
    traces.mkdir(parents=True)
    module = Path("src/idlegate/sim/tpch.py")
    assert checkout_tpch_dir(tmp_path / "repo" / module) is None  # no pyproject.toml
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "pyproject.toml").touch()
    assert checkout_tpch_dir(tmp_path / "repo" / module) == traces
    site = tmp_path / "lib" / "site-packages" / "idlegate" / "sim" / "tpch.py"
    assert checkout_tpch_dir(site) is None
    traces.rmdir()
    assert checkout_tpch_dir(tmp_path / "repo" / module) is None


# ---------------------------------------------------------------------------------------
# malformed input (no real traces needed)


def _stage(i: int, parents: list[int], tasks: int = 2) -> dict:
    return {
        "id": i,
        "num_tasks": tasks,
        "parents": parents,
        "first_wave": {"2": [1000, 3000], "5": [2000]},
        "rest_wave": {"2": [500]},
        "fresh_durations": {"2": [3000]},
    }


def _doc(**changes: object) -> dict:
    doc = {
        "name": "tpch-2g-q1",
        "query": 1,
        "input_size": "2g",
        "duration_unit": "ms",
        "stages": [_stage(0, []), _stage(1, [0])],
    }
    doc.update(changes)
    return doc


def _write(root: Path, doc: object, size: str = "2g", query: int = 1) -> Path:
    (root / size).mkdir(parents=True, exist_ok=True)
    path = root / size / f"q{query}.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def test_a_tiny_valid_document():
    q = parse_tpch_query(_doc())
    assert q.dag.names == ("s0", "s1")
    assert q.dag.parents == ((), (0,))
    waves = q.durations.stages[0]
    assert waves.first_wave == ((1.0,), (2.0,))  # the fresh 3000 ms was removed
    # mean of first (1, 2) + rest (0.5) + fresh (3) seconds
    assert q.spec.stages[0].task_duration_seconds == pytest.approx((1 + 2 + 0.5 + 3) / 4)


def test_missing_directory_says_how_to_fix(tmp_path: Path):
    with pytest.raises(
        IdlegateError, match="does not exist; pass --tpch-dir or set IDLEGATE_TPCH_DIR"
    ):
        TpchLibrary(tmp_path / "nowhere")
    (tmp_path / "a-file").write_text("")  # said as a file, not as missing
    with pytest.raises(IdlegateError, match="a-file is a file, not a directory; pass --tpch-dir"):
        TpchLibrary(tmp_path / "a-file")


def test_directory_without_traces(tmp_path: Path):
    with pytest.raises(IdlegateError, match="holds no TPC-H traces"):
        TpchLibrary(tmp_path).sizes()


def test_malformed_json_names_the_file(tmp_path: Path):
    _write(tmp_path, "{not json")
    with pytest.raises(SpecError, match=r"q1\.json is not valid JSON"):
        TpchLibrary(tmp_path).load("2g", 1)


def test_missing_file(tmp_path: Path):
    with pytest.raises(IdlegateError, match="does not exist"):
        load_tpch_file(tmp_path / "2g" / "q1.json")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (_doc(duration_unit="s"), "duration_unit is 's', but the loader expects 'ms'"),
        ({k: v for k, v in _doc().items() if k != "duration_unit"}, "no duration_unit field"),
        (_doc(query=2), "the file says query 2 but its path says 1"),
        (_doc(input_size="5g"), "the file says input_size '5g' but its path says '2g'"),
        (_doc(stages=[]), "'stages' must be a non-empty list"),
        (_doc(stages=[_stage(0, []), _stage(2, [0])]), "stage ids must be 0..1"),
        (_doc(stages=[_stage(0, []), _stage(1, [7])]), r"unknown parent\(s\) \[7\]"),
        (_doc(stages=[_stage(0, [1]), _stage(1, [0])]), "form a cycle"),
        (_doc(stages=[_stage(0, [], tasks=0)]), "num_tasks must be a whole number >= 1"),
        (_doc(stages=[{**_stage(0, []), "first_wave": {"x": [1]}}]), "key 'x' is not an executor"),
        (_doc(stages=[{**_stage(0, []), "rest_wave": {"2": ["1"]}}]), "durations must be numbers"),
        (_doc(stages=[{**_stage(0, []), "rest_wave": {"2": [-1]}}]), "durations must be numbers"),
        (_doc(stages=[{**_stage(0, []), "first_wave": {}}]), "first_wave has no executor count"),
        (
            _doc(
                stages=[
                    {
                        **_stage(0, []),
                        "first_wave": {"2": [0]},
                        "rest_wave": {},
                        "fresh_durations": {},
                    }
                ]
            ),
            "no positive task duration",
        ),
        (_doc(stages=[{"id": 0, "num_tasks": 1}]), "has no 'parents' field"),
    ],
)
def test_bad_documents_are_rejected_with_a_sentence(tmp_path: Path, doc: dict, message: str):
    _write(tmp_path, doc)
    with pytest.raises(SpecError, match=message):
        TpchLibrary(tmp_path).load("2g", 1)


def test_normalize_size():
    assert normalize_size("10G") == normalize_size(10) == "10g"
    with pytest.raises(IdlegateError, match="is not like '2g'"):
        normalize_size("big")
