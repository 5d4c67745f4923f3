"""Fixtures shared by several test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """Tiny tensors: torch's thread pool only adds contention (badly so on a busy machine).

    Torch modules apply it with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``;
    torch is imported here only when such a module runs.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
