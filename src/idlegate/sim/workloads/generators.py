"""The generators of the streamed workloads: synthetic, bursty, tpch, tpch-like, mixed.

(`k8s-batch`, `follow`, `push` and `recurring` have their own modules.)

Each is a pure function of (config, seed): a job source draws the jobs from one stream of
the seed, the arrival times come from the other (`base.split_streams`). `mean_job_work`
gives the mean job work of any workload config (what `load` is measured against).
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from idlegate.errors import IdlegateError
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival, Workload
from idlegate.sim.history import load_history
from idlegate.sim.workloads.alibaba import AlibabaConfig
from idlegate.sim.workloads.base import (
    SeedLike,
    _fidelity,
    as_rng,
    split_streams,
    stream_workload,
)
from idlegate.sim.workloads.file import FileConfig, _mean_work_of
from idlegate.sim.workloads.k8s_batch import K8sBatchConfig, mean_pipeline_work
from idlegate.sim.workloads.options import (
    BurstyConfig,
    MixedConfig,
    SyntheticConfig,
    TpchConfig,
    TpchLikeConfig,
)
from idlegate.sim.workloads.recurring import RecurringConfig
from idlegate.sim.workloads.sources import MixSource, TpchLikeSource
from idlegate.sim.workloads.triggered import TriggeredOptions


def synthetic_workload(config: SyntheticConfig | None = None, seed: SeedLike = 0) -> Workload:
    """The synthetic two-type workload (one-stage short/long jobs, Poisson arrivals)."""
    c = config or SyntheticConfig()
    return stream_workload(
        "synthetic", c.two_type_source(), c, _fidelity(c.moving_delay, False), seed
    )


def session_arrivals(
    rng: np.random.Generator, n: int, session_size: float, burstiness: float, mean_gap: float
) -> tuple[np.ndarray, np.ndarray]:
    """`n` arrival times of an ON/OFF Markov-modulated stream, and each arrival's session.

    In the ON state jobs arrive as a Poisson process of rate `burstiness / mean_gap`;
    after each arrival the source switches OFF with probability 1/`session_size`, and the
    next session opens with its first job after an exponential silence. Sessions thus
    hold a geometric number of jobs (≥ 1, mean `session_size`), and the silence's mean,
    `session_size·mean_gap − (session_size − 1)·mean_gap/burstiness`, makes the long-run
    mean gap exactly `mean_gap`. (A two-state Markovian arrival process; unlike an
    interrupted Poisson process no ON period is empty, so `session_size` is the mean size
    of the sessions one observes.) With `burstiness` 1 or `session_size` 1 the stream is
    plain Poisson. The stream starts silent: the first arrival opens a session.
    """
    in_session = mean_gap / burstiness
    silence = session_size * mean_gap - (session_size - 1) * in_session
    # one (switch, gap) pair of uniforms per arrival: the first n arrivals do not depend on n
    u = rng.random((n, 2))
    opens = u[:, 0] < 1.0 / session_size
    if n:
        opens[0] = True
    scale = np.where(opens, silence, in_session)
    times = np.cumsum(-np.log1p(-u[:, 1]) * scale)
    return times, np.cumsum(opens) - 1


def bursty_workload(config: BurstyConfig | None = None, seed: SeedLike = 0) -> Workload:
    """Short jobs in sessions (`session_arrivals`) merged with a Poisson stream of long jobs.

    The mean interarrival of the merged stream follows from `load` (or is given); long
    jobs arrive at `long_fraction` of that rate, short ones at the rest. Job sizes follow
    `size_distribution` around 10 s and 50 s of work. `init` jobs at t=0 are long with
    probability `long_fraction`.
    """
    c = config or BurstyConfig()
    source = c.two_type_source()
    content, arrivals = split_streams(as_rng(seed))
    short_gaps, long_gaps = split_streams(arrivals)
    gap = c.mean_interarrival(source.mean_work, c.num_executors)
    n, f = c.num_stream, c.long_fraction
    # each stream gets n candidates; the merged stream's first n never need more of either
    short = (
        session_arrivals(short_gaps, n, c.session_size, c.burstiness, gap / (1 - f))[0]
        if f < 1
        else np.empty(0)
    )
    long = np.cumsum(long_gaps.standard_exponential(n)) * (gap / f) if f > 0 else np.empty(0)
    times = np.concatenate([short, long])
    is_long = np.concatenate([np.zeros(len(short), bool), np.ones(len(long), bool)])
    first = np.argsort(times, kind="stable")[:n]
    kinds = (content.random(c.init) < f).tolist() + is_long[first].tolist()
    jobs = source.jobs(content, kinds)
    all_times = [0.0] * c.init + times[first].tolist()
    arrivals_ = tuple(
        JobArrival(t, f"{j.label}-{i}", j.dag, j.durations)
        for i, (t, j) in enumerate(zip(all_times, jobs, strict=True))
    )
    return Workload("bursty", arrivals_, c.num_executors, _fidelity(c.moving_delay, False))


def tpch_workload(config: TpchConfig | None = None, seed: SeedLike = 0) -> Workload:
    """Decima's streaming TPC-H workload (needs the traces; see `idlegate.sim.tpch`)."""
    c = config or TpchConfig()
    return stream_workload(
        "tpch", c.tpch_source(), c, _fidelity(c.moving_delay, c.wave_durations), seed
    )


def tpch_like_workload(config: TpchLikeConfig | None = None, seed: SeedLike = 0) -> Workload:
    """A stream of synthetic TPC-H-like DAGs (no data files needed)."""
    c = config or TpchLikeConfig()
    return stream_workload(
        "tpch-like", TpchLikeSource(c.shape()), c, _fidelity(c.moving_delay, False), seed
    )


def mixed_workload(config: MixedConfig | None = None, seed: SeedLike = 0) -> Workload:
    """One stream mixing synthetic two-type jobs (fraction alpha) with TPC-H(-like) DAG jobs."""
    c = config or MixedConfig()
    dags = c.dag_source_name()
    if dags == "tpch":
        fid = _fidelity(2.0 if c.moving_delay is None else c.moving_delay, c.wave_durations)
    else:
        fid = _fidelity(c.moving_delay or 0.0, False)
    source = MixSource(c.two_type_source(), c.dag_source(), c.alpha)
    return stream_workload(f"mixed-{dags}", source, c, fid, seed)


def mean_job_work(config: BaseModel) -> float:
    """Expected estimated work of one job of the workload `config` describes."""
    if isinstance(config, SyntheticConfig | BurstyConfig):
        return config.two_type_source().mean_work()
    if isinstance(config, TpchConfig):
        return config.tpch_source().mean_work()
    if isinstance(config, TpchLikeConfig):
        return TpchLikeSource(config.shape()).mean_work()
    if isinstance(config, MixedConfig):
        return MixSource(config.two_type_source(), config.dag_source(), config.alpha).mean_work()
    if isinstance(config, K8sBatchConfig):
        return mean_pipeline_work(config)
    if isinstance(config, TriggeredOptions | RecurringConfig | AlibabaConfig):
        return config.mean_job_work()
    if isinstance(config, FileConfig):
        dags = [Dag.from_spec(h.spec) for h in load_history(config.path)]
        return _mean_work_of(config.job_order(len(dags)), dags)()
    raise IdlegateError(f"no workload is configured by {type(config).__name__}")
