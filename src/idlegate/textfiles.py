"""Reading a user's text file: one reader for every file a command takes (queues, workflow
and history files, lint's inputs, configs), so that a file that is missing, unreadable
or not UTF-8 (latin-1, binary) is one sentence naming it, never a traceback; and the one
check of a directory a command writes into (``--out``), made before its work starts
(`check_out_dir`)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TextIO

from idlegate.errors import IdlegateError

__all__ = [
    "check_out_dir",
    "check_out_file",
    "check_writable_dir",
    "discard_empty_dirs",
    "make_dirs",
    "not_utf8",
    "read_stdin",
    "read_text",
]


def not_utf8(exc: UnicodeDecodeError) -> str:
    """Why a file did not decode, as the rest of a sentence that starts with its name: the
    first byte that is not UTF-8 and where it is (a latin-1 accent, a binary file)."""
    byte = exc.object[exc.start] if exc.start < len(exc.object) else None
    shown = "" if byte is None else f"byte 0x{byte:02x} "
    return f"is not UTF-8 text ({shown}at offset {exc.start}); save it as UTF-8"


def read_text(
    path: str | Path, what: str, fix: str, error: type[IdlegateError] = IdlegateError
) -> str:
    """The text of the file at `path`, decoded as UTF-8. IdlegateError, one sentence
    naming the file as the `what` it should be (``"queues file"``) and ending with `fix`
    (what to give instead), when it does not exist, cannot be read or is not UTF-8 (as
    `error`, a subclass such as SpecError where the caller's callers catch that)."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"cannot read the {what} {p}: it does not exist; {fix}") from None
    except IsADirectoryError:
        raise error(f"cannot read the {what} {p}: it is a directory; {fix}") from None
    except UnicodeDecodeError as exc:
        raise error(f"the {what} {p} {not_utf8(exc)}, or {fix}") from None
    except OSError as exc:
        raise error(f"cannot read the {what} {p} ({exc.strerror or exc}); {fix}") from None


def read_stdin(stream: TextIO, what: str = "") -> str:
    """The text of standard input `stream`, decoded as UTF-8 from its bytes where it has
    them (Python's own decoding would let a byte that is not UTF-8 through as a surrogate,
    for a parser to trip over); IdlegateError `not_utf8` for one, after `what` (the start
    of the sentence: ``"standard input"``)."""
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # (a text stream with no bytes under it: a test's StringIO)
        return stream.read()
    try:
        return bytes(buffer.read()).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise IdlegateError(f"{what} {not_utf8(exc)}".strip()) from None


def check_writable_dir(path: str | Path, what: str = "reports") -> Path:
    """`path`, unless it cannot be a directory to write `what` into: IdlegateError (one
    sentence) when it, or a folder above it, is a file. Creates nothing; called before a
    command's work, which would otherwise fail only when it writes, minutes later."""
    out = Path(path)
    for p in (out, *out.parents):
        if p.exists():
            if not p.is_dir():
                named = "it" if p == out else str(p)
                raise IdlegateError(
                    f"cannot write {what} to {out}: {named} is a file, not a directory; "
                    "give --out a directory (a new one is made)"
                )
            break
    return out


def check_out_dir(out_dir: str | Path, what: str = "reports") -> Path:
    """Raise IdlegateError unless `out_dir` is a directory or can become one to write
    `what` into (`check_writable_dir`; it is made now: a folder that cannot be made, under
    a read-only or missing mount, fails the command before its runs, not after)."""
    out = check_writable_dir(out_dir, what)
    try:
        make_dirs(out)
    except OSError as e:
        raise IdlegateError(f"cannot create directory {out}: {e.strerror}") from None
    return out


def check_out_file(path: str | Path, what: str, suffixes: tuple[str, ...] = ()) -> Path:
    """`path`, unless it cannot be the file a command writes `what` into: IdlegateError
    (one sentence) for a directory, a folder above it that is a file, or a name whose
    suffix is none of `suffixes` (when given: what the writer makes of it, e.g. ``.png``;
    an ``--out x.txt`` was matplotlib's ValueError, an existing file of any name was
    overwritten). Creates nothing; called before the command's work."""
    out = Path(path)
    if out.is_dir():
        raise IdlegateError(
            f"cannot write {what} to {out}: it is a directory; give a file name, e.g. "
            f"{out / ('out' + (suffixes[0] if suffixes else ''))}"
        )
    check_writable_dir(out.parent, what)
    if suffixes and out.suffix.lower() not in suffixes:
        raise IdlegateError(
            f"cannot write {what} to {out}: it is written as {' or '.join(suffixes)}, so give "
            f"a name ending so, e.g. {out.with_suffix(suffixes[0])}"
        )
    return out


_MADE: list[Path] = []
"""The folders `make_dirs` made in this process, each after those above it."""


def make_dirs(path: Path) -> None:
    """Make folder `path` and those above it that are missing, and remember them: a
    command that fails after making its ``--out`` leaves no empty folder behind
    (`discard_empty_dirs`, called where its error is said: `flags.user_errors`)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(parents=True, exist_ok=True)
    _MADE.extend(reversed(missing))


def discard_empty_dirs() -> None:
    """Remove the folders `make_dirs` made that are still empty, the deepest first (one a
    command wrote into stays, as do those above it)."""
    for p in reversed(_MADE):
        with contextlib.suppress(OSError):  # (not empty, or gone)
            p.rmdir()
    _MADE.clear()
