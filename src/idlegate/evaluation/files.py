"""Writing report files: directories created on demand, OS errors as sentences."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from idlegate.errors import IdlegateError
from idlegate.textfiles import check_out_dir

__all__ = ["check_out_dir", "write_file", "write_text"]  # (check_out_dir: textfiles')


def write_file(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Create `path`'s directory, call `write(path)`; OSError becomes an IdlegateError."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise IdlegateError(f"cannot create directory {p.parent}: {e.strerror}") from e
    try:
        write(p)
    except OSError as e:
        raise IdlegateError(f"cannot write {p}: {e.strerror}") from e
    return p


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` (UTF-8) to `path` through `write_file`."""
    return write_file(path, lambda p: p.write_text(text, encoding="utf-8"))
