"""The dropped variants of docs/research/brain-results.md stay reproducible: each patch of
benchmarks/variants/ applies to the present code."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATCHES = sorted((ROOT / "benchmarks" / "variants").glob("*.patch"))


def test_every_patch_is_listed_in_the_variants_readme() -> None:
    readme = (ROOT / "benchmarks" / "variants" / "README.md").read_text()
    assert PATCHES and all(f"`{p.name}`" in readme for p in PATCHES)


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.stem)
def test_a_variant_patch_applies_to_the_present_code(patch: Path) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout (git apply --check)")
    done = subprocess.run(
        ["git", "apply", "--check", str(patch)], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, (
        f"{patch.name} no longer applies ({done.stderr.strip()}): redo it on the present "
        "code and rerun its row of docs/research/brain-results.md, or drop both"
    )
