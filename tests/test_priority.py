"""The operator's share of a node's cores (`idlegate.priority`): its loop asks for a short
scheduling slice, so that beside CPU-bound processes a wake takes a core at once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from idlegate.api.settings import Settings
from idlegate.priority import SLICE, prompt
from tests.operator_fakes import FakeClock, FakeKube


def thread_slice() -> int | None:
    """The calling thread's scheduling slice, ns (None where the kernel does not say)."""
    for line in Path("/proc/thread-self/sched").read_text().splitlines():
        if line.startswith("se.slice"):
            return int(line.split(":")[1])
    return None


def in_a_thread(work):
    """`work()`'s answer, run in a thread of its own (a slice asked is that thread's)."""
    answer = []
    thread = threading.Thread(target=lambda: answer.append(work()))
    thread.start()
    thread.join()
    return answer[0]


def test_prompt_asks_the_kernel_for_a_short_slice_for_its_thread() -> None:
    if not Path("/proc/thread-self/sched").exists() or in_a_thread(thread_slice) is None:
        pytest.skip("the kernel does not say a thread's slice here")
    default = in_a_thread(thread_slice)
    asked = in_a_thread(lambda: (prompt(), thread_slice()))
    assert asked == (True, round(SLICE * 1e9))
    assert default != asked[1]  # (the thread's default slice is not the one asked)


@pytest.mark.asyncio
async def test_the_operators_loop_asks_for_the_short_slice_as_it_starts(monkeypatch) -> None:
    from idlegate.operator import main

    asked: list[str] = []
    monkeypatch.setattr(main, "prompt", lambda: asked.append(threading.current_thread().name))
    settings = Settings(pool_size=1, metrics_port=None, health_port=None, clock=FakeClock())
    operator = main.Operator(settings, kube=FakeKube())
    await operator.start()
    try:
        assert asked == [threading.current_thread().name]  # (the loop's own thread)
    finally:
        await operator.stop()
