"""benchmarks/kopf_floor.py's ``one-each-writes``: the minimal operator's own writes, a
pod's creation and its release, through idlegate's API client (the figures:
deploy/README.md, "At scale")."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")
pytest.importorskip("kmock", reason="the dev extra (kmock) is not installed")


@pytest.mark.asyncio
async def test_the_floors_writer_creates_every_pod_releases_room_and_then_one_a_call(
    api: Any, ns: str, tmp_path: Path
) -> None:
    from benchmarks.kopf_floor import Writer
    from idlegate.kubeconfig import load_configuration
    from tests.k8s.apiserver import PODS

    writer = Writer(load_configuration(api.kubeconfig), ns, pods=3, room=2)

    async def settle() -> dict[str, bool]:
        """Each pod's name: whether it is still gated, once every write was answered."""
        while writer.tasks:
            await asyncio.wait(set(writer.tasks))
        pods = api.call(api.emulator.list, PODS, ns)
        return {p["metadata"]["name"]: bool(p["spec"].get("schedulingGates")) for p in pods}

    go = tmp_path / "go"
    writer.start(go)
    await asyncio.sleep(0.2)  # (a wrong writer would write in it; a slow one proves nothing)
    assert api.call(api.emulator.list, PODS, ns) == []  # (it waits for its go)
    go.touch()
    gated = await settle()
    assert len(gated) == 3 and sorted(gated.values()) == [False, False, True]
    writer.release_next()
    assert not any((await settle()).values())
    writer.release_next()  # (none left: nothing more is written)
    assert not writer.tasks
    writer.kube.close()
