"""Decima's TPC-H traces: load `<dir>/<size>/q<N>.json` into workflows, DAGs and wave models.

The traces (Mao et al., SIGCOMM 2019, converted from numpy pickles to JSON) are data,
never part of the repository: the user gives their directory (`--tpch-dir` or the
`IDLEGATE_TPCH_DIR` environment variable). Each file describes one query plan at one
input size; per stage it has `num_tasks`, `parents` and measured task durations in
milliseconds keyed by the executor count they ran with (`first_wave`, `rest_wave`,
`fresh_durations`).

A loaded query becomes

* a `WorkflowSpec` with stages `s0`, `s1`, … whose `taskDurationSeconds` is the mean of
  every measured duration of the stage (Decima's "rough duration": what a scheduler
  sees), and `dependsOn` from `parents`;
* its compiled `Dag`, shared by every job running that query;
* a `WaveDurations` model (what the simulator samples real task durations from).

Files are parsed once per library and cached per (size, query).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from idlegate.errors import IdlegateError, SpecError
from idlegate.sim.dag import Dag
from idlegate.sim.datadirs import checkout_data_dir, default_data_dir, resolve_data_dir
from idlegate.sim.durations import StageWaves, WaveDurations
from idlegate.sim.spec import WorkflowSpec, parse_workflow

ENV_VAR = "IDLEGATE_TPCH_DIR"
"""Environment variable naming the TPC-H trace directory (the one holding `2g/`, `5g/`, …)."""
TPCH_SIZES = ("2g", "5g", "10g", "20g", "50g")
"""Input sizes of Decima's traces."""
TPCH_QUERIES = tuple(range(1, 23))
"""TPC-H query numbers."""
DURATION_UNIT = "ms"
WAVE_KEYS = ("first_wave", "rest_wave", "fresh_durations")

_HINT = "pass --tpch-dir or set IDLEGATE_TPCH_DIR"
_SIZE_RE = re.compile(r"^(\d+)g$")
_QUERY_RE = re.compile(r"^q(\d+)\.json$")


@dataclass(frozen=True, eq=False)
class TpchQuery:
    """One TPC-H query plan at one input size, ready for the simulator."""

    name: str
    """E.g. `tpch-2g-q1`."""
    query: int
    size: str
    spec: WorkflowSpec
    dag: Dag
    durations: WaveDurations

    @property
    def total_tasks(self) -> int:
        return sum(self.dag.tasks)

    @property
    def total_work(self) -> float:
        """Estimated executor-seconds (tasks × mean duration, summed over stages)."""
        return self.dag.total_work


# ---------------------------------------------------------------------------------------
# locating the traces


def default_tpch_dir() -> Path | None:
    """`$IDLEGATE_TPCH_DIR` if set, else the checkout's traces (:func:`checkout_tpch_dir`),
    else None: never a guess from the working directory."""
    return default_data_dir(ENV_VAR, "tpch")


def checkout_tpch_dir(module: Path = Path(__file__)) -> Path | None:
    """``<checkout>/../shared/data/tpch`` if this package runs from a checkout and that
    directory exists, else None (`sim.datadirs.checkout_data_dir`): an installed package
    has no default; give ``--tpch-dir`` or ``IDLEGATE_TPCH_DIR``."""
    return checkout_data_dir("tpch", module)


def resolve_tpch_dir(directory: str | Path | None = None) -> Path:
    """`directory`, else `default_tpch_dir()`; raises IdlegateError if that is missing."""
    default = None if directory is not None else default_tpch_dir()
    holding = "the directory holding 2g/q1.json, …"
    return resolve_data_dir(directory, default, "TPC-H", _HINT, holding)


def normalize_size(size: str | int) -> str:
    """`"2g"`, `"2G"` and `2` all mean the 2 GB input: returns `"2g"`."""
    text = str(size).strip().lower()
    if text.isdigit():
        text += "g"
    if not _SIZE_RE.match(text):
        raise IdlegateError(
            f"TPC-H input size {size!r} is not like '2g' (sizes: {', '.join(TPCH_SIZES)})"
        )
    return text


def _size_gb(size: str) -> int:
    return int(size[:-1])


# ---------------------------------------------------------------------------------------
# parsing one file


def parse_tpch_query(
    data: Any, source: str = "TPC-H query", size: str | None = None, query: int | None = None
) -> TpchQuery:
    """Validate one trace document (parsed JSON) into a TpchQuery; errors name `source`.

    `size`/`query`, when given (from the file's path), must agree with the document's own
    `input_size`/`query` fields, which catches misplaced files.
    """
    if not isinstance(data, dict):
        raise SpecError(
            f"{source}: expected a JSON object with 'stages', got {type(data).__name__}"
        )
    unit = data.get("duration_unit")
    if unit is None:
        raise SpecError(f"{source}: no duration_unit field; expected {DURATION_UNIT!r}")
    if unit != DURATION_UNIT:
        raise SpecError(
            f"{source}: duration_unit is {unit!r}, but the loader expects {DURATION_UNIT!r} "
            "(Decima's traces converted to JSON keep milliseconds); convert the durations to ms"
        )
    size = _check_field(data, "input_size", size, source, normalize_size)
    query = _check_field(data, "query", query, source, _as_query)
    raw_stages = data.get("stages")
    if not isinstance(raw_stages, list) or not raw_stages:
        raise SpecError(f"{source}: 'stages' must be a non-empty list of stage objects")
    stages = _order_stages(raw_stages, source)
    specs, waves = [], []
    for stage in stages:
        w = _stage_waves(stage, source)
        if not w.mean > 0:
            raise SpecError(f"{source}: stage {stage['id']} has no positive task duration")
        waves.append(w)
        specs.append(
            {
                "name": f"s{stage['id']}",
                "tasks": stage["num_tasks"],
                "taskDurationSeconds": w.mean,
                "dependsOn": [f"s{p}" for p in stage["parents"]],
            }
        )
    spec = parse_workflow({"stages": specs}, source)
    name = data.get("name")
    if not isinstance(name, str) or not name:
        name = f"tpch-{size}-q{query}"
    return TpchQuery(name, query, size, spec, Dag.from_spec(spec), WaveDurations(tuple(waves)))


def _as_query(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise IdlegateError(f"query must be a positive whole number, got {value!r}")
    return value


def _check_field(data: dict, key: str, expected: Any, source: str, norm: Any) -> Any:
    """The document's `key`, normalised, checked against the value from the path."""
    if key not in data:
        if expected is None:
            raise SpecError(f"{source}: missing field {key!r}")
        return expected
    try:
        value = norm(data[key])
    except IdlegateError as exc:
        raise SpecError(f"{source}: field {key!r}: {exc}") from None
    if expected is not None and value != expected:
        raise SpecError(
            f"{source}: the file says {key} {value!r} but its path says {expected!r}; "
            "the file is probably misplaced"
        )
    return value


def _order_stages(raw: list, source: str) -> list[dict]:
    """Stages sorted by id, with ids exactly 0..n-1 and well-formed fields."""
    for i, stage in enumerate(raw):
        if not isinstance(stage, dict):
            raise SpecError(f"{source}: stages[{i}] is a {type(stage).__name__}, not an object")
        for key in ("id", "num_tasks", "parents", *WAVE_KEYS):
            if key not in stage:
                raise SpecError(f"{source}: stages[{i}] has no {key!r} field")
        if not _is_int(stage["id"]):
            raise SpecError(f"{source}: stages[{i}].id must be a whole number, got {stage['id']!r}")
        if not _is_int(stage["num_tasks"]) or stage["num_tasks"] < 1:
            raise SpecError(
                f"{source}: stage {stage['id']}: num_tasks must be a whole number >= 1, "
                f"got {stage['num_tasks']!r}"
            )
        parents = stage["parents"]
        if not isinstance(parents, list) or not all(_is_int(p) for p in parents):
            raise SpecError(f"{source}: stage {stage['id']}: parents must be a list of stage ids")
    ordered = sorted(raw, key=lambda s: s["id"])
    ids = [s["id"] for s in ordered]
    if ids != list(range(len(ordered))):
        raise SpecError(
            f"{source}: stage ids must be 0..{len(ordered) - 1} without gaps, got {ids}"
        )
    for stage in ordered:
        unknown = [p for p in stage["parents"] if not 0 <= p < len(ordered)]
        if unknown:
            raise SpecError(f"{source}: stage {stage['id']} has unknown parent(s) {unknown}")
    return ordered


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _stage_waves(stage: dict, source: str) -> StageWaves:
    maps = [_duration_map(stage[key], key, stage["id"], source) for key in WAVE_KEYS]
    if not maps[0]:
        raise SpecError(f"{source}: stage {stage['id']}: first_wave has no executor count")
    return StageWaves.from_ms(*maps)


def _duration_map(raw: Any, key: str, stage_id: int, source: str) -> Mapping[int, Sequence[float]]:
    where = f"{source}: stage {stage_id}: {key}"
    if not isinstance(raw, dict):
        raise SpecError(f"{where} must map executor counts to lists of durations in ms")
    out: dict[int, Sequence[float]] = {}
    for k, values in raw.items():
        try:
            executors = int(k)
        except ValueError:
            raise SpecError(f"{where}: key {k!r} is not an executor count") from None
        if executors < 1:
            raise SpecError(f"{where}: key {k!r} is not an executor count >= 1")
        if not isinstance(values, list):
            raise SpecError(f"{where}[{k}] must be a list of durations in ms")
        if values and not _all_durations(values):
            bad = next(v for v in values if not _all_durations([v]))
            raise SpecError(f"{where}[{k}] holds {bad!r}; durations must be numbers of ms >= 0")
        out[executors] = values
    return out


def _all_durations(values: list) -> bool:
    """True if every value is a finite number >= 0 (C-speed checks: files hold ~10^5 values)."""
    try:
        total = math.fsum(values)
    except TypeError:
        return False
    return math.isfinite(total) and min(values) >= 0


def load_tpch_file(
    path: str | Path, size: str | None = None, query: int | None = None
) -> TpchQuery:
    """Read and parse one trace file."""
    p = Path(path)
    try:
        text = p.read_bytes()
    except FileNotFoundError:
        raise IdlegateError(f"TPC-H trace file {p} does not exist; {_HINT}") from None
    except OSError as exc:
        raise IdlegateError(f"cannot read TPC-H trace file {p}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(
            f"{p} is not valid JSON ({exc}); re-create it from Decima's traces"
        ) from None
    return parse_tpch_query(data, str(p), size, query)


# ---------------------------------------------------------------------------------------
# the library of a directory


class TpchLibrary:
    """The traces in one directory: lists sizes and queries, loads each file once."""

    def __init__(self, directory: str | Path | None = None) -> None:
        """`directory` holds `<size>/q<N>.json`; None uses `default_tpch_dir()`."""
        self.directory = resolve_tpch_dir(directory)
        self._cache: dict[tuple[str, int], TpchQuery] = {}
        self._index: dict[str, tuple[int, ...]] | None = None
        self._mean_work: dict[tuple[tuple[str, ...], tuple[int, ...]], float] = {}

    def __repr__(self) -> str:
        return f"TpchLibrary({str(self.directory)!r})"

    @property
    def index(self) -> dict[str, tuple[int, ...]]:
        """Size → available query numbers, sizes in increasing order (scanned once)."""
        if self._index is None:
            found: dict[str, tuple[int, ...]] = {}
            for sub in self.directory.iterdir():
                if sub.is_dir() and _SIZE_RE.match(sub.name):
                    qs = sorted(
                        int(m.group(1)) for f in sub.iterdir() if (m := _QUERY_RE.match(f.name))
                    )
                    if qs:
                        found[sub.name] = tuple(qs)
            if not found:
                raise IdlegateError(
                    f"{self.directory} holds no TPC-H traces (expected <size>/q<N>.json such as "
                    f"2g/q1.json); {_HINT}"
                )
            self._index = {s: found[s] for s in sorted(found, key=_size_gb)}
        return self._index

    def sizes(self) -> tuple[str, ...]:
        """Available input sizes, smallest first."""
        return tuple(self.index)

    def queries(self, size: str | int) -> tuple[int, ...]:
        """Available query numbers of one size."""
        return self.index[self._check_size(size)]

    def _check_size(self, size: str | int) -> str:
        s = normalize_size(size)
        if s not in self.index:
            raise IdlegateError(
                f"TPC-H size {s!r} is not in {self.directory} (available: {', '.join(self.index)})"
            )
        return s

    def load(self, size: str | int, query: int) -> TpchQuery:
        """The query plan `query` at input size `size` (parsed once, then cached)."""
        s = self._check_size(size)
        key = (s, query)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if query not in self.index[s]:
            raise IdlegateError(
                f"TPC-H query {query!r} is not in {self.directory / s} "
                f"(available: {_ranges(self.index[s])})"
            )
        q = load_tpch_file(self.directory / s / f"q{query}.json", s, query)
        self._cache[key] = q
        return q

    def load_all(
        self, sizes: Iterable[str | int] | None = None, queries: Iterable[int] | None = None
    ) -> list[TpchQuery]:
        """Every (size, query) pair of the selection; None selects all available."""
        out: list[TpchQuery] = []
        for s in self.select_sizes(sizes):
            wanted = self.index[s] if queries is None else tuple(queries)
            out.extend(self.load(s, q) for q in wanted)
        return out

    def select_sizes(self, sizes: Iterable[str | int] | None) -> tuple[str, ...]:
        """Normalised, checked sizes (None: all available)."""
        if sizes is None:
            return self.sizes()
        chosen = tuple(dict.fromkeys(self._check_size(s) for s in sizes))
        if not chosen:
            raise IdlegateError("select at least one TPC-H size")
        return chosen

    def mean_total_work(
        self, sizes: Iterable[str | int] | None = None, queries: Iterable[int] | None = None
    ) -> float:
        """Mean estimated work per job when size and query are drawn uniformly (cached)."""
        key = (self.select_sizes(sizes), tuple(queries) if queries is not None else ())
        if key not in self._mean_work:
            works = [q.total_work for q in self.load_all(key[0], queries)]
            self._mean_work[key] = float(np.mean(works))
        return self._mean_work[key]


def _ranges(values: Sequence[int]) -> str:
    if list(values) == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}-{values[-1]}"
    return ", ".join(map(str, values))


_LIBRARIES: dict[Path, TpchLibrary] = {}


def open_tpch_library(directory: str | Path | None = None) -> TpchLibrary:
    """A process-wide shared TpchLibrary per directory, so files are parsed once per process."""
    path = resolve_tpch_dir(directory).resolve()
    lib = _LIBRARIES.get(path)
    if lib is None:
        lib = _LIBRARIES[path] = TpchLibrary(path)
    return lib
