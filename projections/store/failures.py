"""What a writer says when the store cannot be written: a full disk, a read-only or vanished
store, a lost lock.

Every write of the store is one transaction (a batch with its Kafka offsets, a re-audit's
generation, an archive's deletion with its manifest rows), so a write that fails leaves the
store as the last commit before it left it: a re-run of the same command completes it (the
writes skip rows already stored). What is left to say is what the store kept, per table its last
stored event, read back from the file afterwards (:func:`kept`), and why the write failed
(:func:`write_failure`). The command line turns both into one line and its exit code.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import duckdb

from projections.display.timefmt import iso_utc

STORE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOENT, errno.EFBIG, errno.EIO}
)
"""The operating system's errors by which a store cannot be written."""

_CAUSES = (
    ("No space left on device", "no space left on device"),
    ("Disk quota exceeded", "disk quota exceeded"),
    ("File too large", "file too large (file-size limit)"),
    ("Read-only file system", "read-only file system"),
    ("Permission denied", "permission denied"),
    ("No such file or directory", "the store's file or folder is gone"),
    ("Input/output error", "input/output error"),
    ("database has been invalidated", "the database stopped after a failed write"),
)
"""DuckDB's messages of a failed write (it names the operating system's error in its text), and
the cause each is reported as."""

MAX_TABLES = 24
"""How many tables :func:`kept` names one by one; the rest are counted."""


class StoreLostError(OSError):
    """The path of the store no longer names the file this writer holds (removed or replaced
    while it wrote): its file lock no longer keeps another writer from the path, and what it
    writes lands in a file no one can open again."""


def file_identity(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of the file at ``path``, or None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def write_failure(exc: BaseException, path: Path) -> str | None:
    """Why a write of the store at ``path`` failed, in a few words, when ``exc`` is such a
    failure: the file system is full, read-only or gone, the file was removed or replaced, or
    DuckDB stopped after one of those. None for any other error (bad data, a store another
    process holds, another file than the store's, a bug), which the caller raises as before.

    Args:
        exc: the error a write (or the open of a writer) raised; its causes are looked at too.
        path: the store file; an operating-system error counts only for it, its write-ahead
            log, its spill folder or its folder (DuckDB's own messages name the file).
    """
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, StoreLostError):
            return str(seen)
        if isinstance(seen, OSError) and seen.errno in STORE_ERRNOS and _about(seen, path):
            return (seen.strerror or os.strerror(seen.errno or 0)).lower()
        if isinstance(seen, duckdb.Error):
            text = str(seen)
            if "Conflicting lock" in text:
                return None  # another process holds the store: busy, not a failed write
            for needle, cause in _CAUSES:
                if needle in text and (path.name in text or needle == "database has been invalidated"):
                    return cause
        seen = seen.__cause__ or seen.__context__
    return None


def _about(exc: OSError, path: Path) -> bool:
    """Whether the operating system's error names the store's file, one beside it that starts
    with its name (its log, its spill folder), or its folder."""
    if exc.filename is None:
        return False
    named = Path(os.fsdecode(exc.filename)).absolute()
    store = path.absolute()
    return named == store.parent or (named.parent == store.parent and named.name.startswith(store.name))


def kept(path: Path) -> str:
    """What the store at ``path`` holds, read back read-only after a failed write: per table its
    last stored event (seq and time, UTC), ``nothing stored``, or why it cannot be read.

    Call it once the writer's connection is closed (DuckDB opens a file once per process).
    """
    if not path.exists():
        return f"no file at {path} any more: nothing of it is kept there"
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        return f"the store could not be read back ({str(exc).splitlines()[0]})"
    try:
        con.execute("SET TimeZone = 'UTC'")
        rows = con.execute(
            """SELECT table_id, max(seq), arg_max(occurred_at, (seq, arrival)), count(*)
               FROM events GROUP BY table_id ORDER BY table_id"""
        ).fetchall()
    except duckdb.Error as exc:
        return f"the store could not be read back ({str(exc).splitlines()[0]})"
    finally:
        con.close()
    if not rows:
        return "nothing stored"
    named = [f"{t} seq {seq} ({iso_utc(at.replace(microsecond=0))})" for t, seq, at, _ in rows[:MAX_TABLES]]
    more = len(rows) - MAX_TABLES
    events = sum(int(n) for *_, n in rows)
    return (
        f"kept {events:,} events, the last per table: "
        + ", ".join(named)
        + (f" and {more} more tables" if more > 0 else "")
    )


def latest_generation(path: Path) -> int | None:
    """The latest generation of findings of the store at ``path``, read back read-only (None when
    it cannot be read)."""
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return None
    try:
        rows = con.execute("SELECT coalesce(max(generation), 1) FROM generations").fetchall()
    except duckdb.Error:
        return None
    finally:
        con.close()
    return int(rows[0][0])
