"""Where the CPU went in a live run's flood (benchmarks/live_pool.py ``--profile DIR``).

From the flood's submission on, for `SECONDS` wall seconds, in every run: every second
the CPU each party got is read from /proc: the operator's main thread (kopf's event loop), its
other threads, its children (the forecasts' replay process), this process (the test API
server, the kube-scheduler, the simulated kubelets and the recorder: one interpreter; on the
real control plane, the recorder and the submissions only), the real control plane's
processes (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, KWOK), the
CPU-bound burners, py-spy itself; with the operator main thread's time waiting on a run
queue (``/proc/PID/task/PID/schedstat``: runnable, no core free), and the same wait summed
over the threads of the operator's other threads, its children and this process. Its
summary line says how much of the window the loop ran, how much it waited for a core, each
party's share and wait; then the three heaviest processes outside the run (what "others"
were) and the loop's scheduling slice as the kernel says it.
With ``--profile DIR``, py-spy also records the operator's process there (``--threads``,
busy samples only: ``--idle`` off), and the readings go to ``cpu-PID.tsv``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from benchmarks.operator_burst import children

SECONDS = 40.0
"""Wall seconds recorded from the flood's submission on (its burst and the 10 s after)."""
PY_SPY = os.environ.get("PY_SPY", shutil.which("py-spy") or "/tmp/pyspy/bin/py-spy")
"""py-spy's executable: $PY_SPY, else the one on the PATH, else /tmp/pyspy's."""


def ticks(path: Path) -> float:
    """CPU seconds (user + system) of a /proc stat file at `path`; 0 if it is gone."""
    try:
        fields = path.read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scheduled(pid: int) -> tuple[float, int]:
    """Of the main thread of `pid`: seconds it was runnable without a core, and the times
    it was given one (schedstat's second field, ns, and third); zeros if it is gone."""
    try:
        _, wait, slices = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[:3]
    except (OSError, ValueError):
        return 0.0, 0
    return int(wait) / 1e9, int(slices)


def waited(pid: int) -> float:
    """Seconds all threads of `pid` were runnable without a core (each thread's schedstat;
    threads that ended are not counted)."""
    total = 0.0
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int((task / "schedstat").read_text().split()[1]) / 1e9
    return total


def reading(
    operator: int, burners: Sequence[int], spy: int | None, plane: Sequence[int] = ()
) -> dict[str, float]:
    """Cumulative CPU seconds of each party (module docstring; `plane` the real control
    plane's processes, none on the test API server), the loop's run-queue wait, and the
    other parties' (`WAITS`)."""
    main = ticks(Path(f"/proc/{operator}/task/{operator}/stat"))
    wait, slices = scheduled(operator)
    whole = ticks(Path(f"/proc/{operator}/stat"))
    waits = {
        "operator threads": waited(operator) - wait,
        "operator children": sum(waited(c) for c in children(operator)),
        "api server, kubelets": waited(os.getpid()),
        **({"control plane": sum(waited(p) for p in plane)} if plane else {}),
    }
    return {
        **{f"{k} waiting": v for k, v in waits.items()},
        "loop": main,
        "operator threads": whole - main,
        "operator children": sum(ticks(Path(f"/proc/{c}/stat")) for c in children(operator)),
        "api server, kubelets": ticks(Path(f"/proc/{os.getpid()}/stat")),
        **({"control plane": sum(ticks(Path(f"/proc/{p}/stat")) for p in plane)} if plane else {}),
        "burners": sum(ticks(Path(f"/proc/{b}/stat")) for b in burners),
        "py-spy": ticks(Path(f"/proc/{spy}/stat")) if spy else 0.0,
        "machine": machine(),
        "loop waiting": wait,
        "loop slices": slices,
    }


def machine() -> float:
    """CPU seconds the machine's cores spent busy, all processes (/proc/stat's first line:
    all but idle and iowait)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def slice_of(pid: int) -> str:
    """The scheduling slice of `pid`'s main thread, as the kernel says it (`sched`'s
    ``se.slice``, in ms; "?" where it does not)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/task/{pid}/sched").read_text().splitlines():
            if line.startswith("se.slice"):
                return f"{int(line.split(':')[1]) / 1e6:g} ms"
    return "?"


def processes() -> dict[int, tuple[str, float]]:
    """Every process's command line (shortened) and cumulative CPU seconds, by pid."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:60]
                found[int(entry.name)] = (line.strip(), ticks(entry / "stat"))
    return found


def heaviest(
    first: dict[int, tuple[str, float]], last: dict[int, tuple[str, float]], known: set[int]
) -> str:
    """The three processes outside `known` that took the most CPU between two
    `processes` readings (the "others" of `summary`), each with its seconds."""
    spent = [
        (cpu - first.get(pid, ("", 0.0))[1], line)
        for pid, (line, cpu) in last.items()
        if pid not in known
    ]
    return "; ".join(f"{line or '?'} {cpu:.1f}" for cpu, line in sorted(spent, reverse=True)[:3])


def summary(first: dict[str, float], last: dict[str, float], wall: float) -> str:
    """One line: each party's CPU seconds over `wall` wall seconds between two readings."""
    spent = {k: last[k] - first.get(k, 0.0) for k in last}
    loop = ("loop waiting", "loop slices", "machine")
    parties = {k: v for k, v in spent.items() if k not in loop and not k.endswith(" waiting")}
    waits = ", ".join(
        f"{k.removesuffix(' waiting')} {v:.1f}"
        for k, v in spent.items()
        if k.endswith(" waiting") and k != "loop waiting"
    )
    parties["others"] = spent["machine"] - sum(parties.values())
    parts = ", ".join(f"{k} {v:.1f}" for k, v in parties.items())
    ran, queued = spent["loop"], spent["loop waiting"]
    return (
        f"profile, {wall:.0f} s from the flood on (the machine busy {spent['machine']:.1f} "
        f"CPU s of {os.cpu_count()} cores' {(os.cpu_count() or 1) * wall:.0f}): {parts}; "
        f"the loop ran {ran / wall:.0%} of the wall and waited for a core {queued / wall:.0%}, "
        f"given a core {spent['loop slices']:.0f} times ({queued / max(spent['loop slices'], 1) * 1e3:.2f} ms "
        f"waited each); seconds others waited for a core: {waits}"
    )


@contextlib.contextmanager
def profiling(
    directory: Path | None, operator: int, burners: Sequence[int], plane: Sequence[int] = ()
) -> Iterator[list[str]]:
    """From enter on (`plane`: the real control plane's processes, reading), for `SECONDS`, a reading of each party's CPU each second (into
    ``cpu-PID.tsv`` in `directory` if given) and, with a `directory`, py-spy on `operator`
    there; the summary line is appended to the list yielded once the window ended (or at
    exit)."""
    said: list[str] = []
    spy = None
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        out = directory / f"operator-{operator}.txt"
        spy = subprocess.Popen(
            [PY_SPY, "record", "--pid", str(operator), "--duration", f"{SECONDS:g}", "--rate",
             "100", "--format", "raw", "--threads", "--nonblocking", "-o", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    stop = threading.Event()
    spied = spy.pid if spy is not None else None

    def sample() -> None:
        began, rows, before = time.monotonic(), [], processes()
        first = reading(operator, burners, spied, plane)
        while not stop.wait(1.0) and time.monotonic() - began < SECONDS:
            rows.append((time.monotonic() - began, reading(operator, burners, spied, plane)))
        if rows:
            known = {operator, os.getpid(), *burners, *plane, *children(operator), spied or 0}
            said.append(summary(first, rows[-1][1], rows[-1][0]))
            said.append("the others' heaviest: " + heaviest(before, processes(), known))
            said.append(f"the loop's scheduling slice: {slice_of(operator)}")
        if rows and directory is not None:
            lines = ["t\t" + "\t".join(first)]
            lines += [f"{t:.1f}\t" + "\t".join(f"{v:.2f}" for v in r.values()) for t, r in rows]
            (directory / f"cpu-{operator}.tsv").write_text("\n".join(lines) + "\n")

    thread = threading.Thread(target=sample, name="profile", daemon=True)
    thread.start()
    try:
        yield said
    finally:
        stop.set()
        thread.join()
        if spy is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                spy.wait(5)
            if spy.poll() is None:
                spy.kill()
                spy.wait()
