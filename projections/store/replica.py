"""The read replica: a read-only copy of the store that other processes open while the writer
(the projector, an audit) holds the store itself.

DuckDB lets one process write a file and no other process open it meanwhile, not even to read.
The writer therefore copies its file now and then (:func:`write_replica`): a ``CHECKPOINT``
and a plain file copy by a child process (with the write-ahead log, should the checkpoint leave
any; a child, so that the writer's lock on the store stays: see :func:`_private_copy`) while it holds
its write lock, so that no batch commits during the copy, then, without the lock, a small
``replica_meta`` table in the copy (when and from which store it was copied) and an
``os.replace`` over the previous replica. The copy holds no credential: sessions, one-time-code
secrets, API tokens and password hashes are taken out before it replaces the previous one
(:func:`strip_credentials`). A reader that has the old replica open keeps reading
the old file (POSIX keeps its inode until it closes); a reader that opens the path gets either
the old or the new copy, never half of one. The copy is owner-only, as the store is.

Measured on the demo store (733,000 events, 134 MB): the part under the lock (checkpoint and
copy) takes about 0.05 s when the file is in the page cache (see docs/performance.md); an
``ATTACH ... COPY FROM DATABASE`` took 3.6 s and was not chosen.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from projections.store.private import make_private_dirs

CREDENTIAL_TABLES = ("console_sessions", "console_totp", "api_tokens")
"""The store's credential tables, which a replica does not hold (sessions, one-time-code secrets,
API tokens); ``console_users`` keeps its names and roles without ``password_hash``."""

META_TABLE = "replica_meta"
"""The table of a replica that says when and from which store it was copied (one row)."""


@dataclass(frozen=True)
class ReplicaCopy:
    """One copy of the store to its replica.

    Attributes:
        path: the replica written.
        copied_at: when the copy was taken (UTC): the replica holds what was committed then.
        locked_seconds: how long the writer was held (checkpoint and file copy; seconds).
        total_seconds: the whole copy, metadata and replace included (seconds).
        size: the replica's size (bytes).
    """

    path: Path
    copied_at: datetime
    locked_seconds: float
    total_seconds: float
    size: int


@dataclass(frozen=True)
class ReplicaInfo:
    """What a replica says about itself (its ``replica_meta`` row).

    Attributes:
        copied_at: when the copy was taken (UTC).
        source: the store it is a copy of.
    """

    copied_at: datetime
    source: str


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)?\s*$")


def parse_every(text: str) -> float:
    """A ``--replica-every`` duration in seconds: ``90``, ``90s``, ``5m``, ``1h``.

    Raises:
        ValueError: not a duration, or under 1 second.
    """
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"--replica-every must be a duration such as 30s, 5m or 1h; got {text!r}")
    seconds = float(m.group(1)) * {"m": 60, "min": 60, "h": 3600}.get(m.group(2) or "s", 1)
    if seconds < 1:
        raise ValueError(f"--replica-every must be at least 1 s; got {text!r}")
    return seconds


def check_replica_path(replica: Path, store: Path) -> None:
    """Refuse a replica path that is the store itself, a folder, or lies under a file.

    Raises:
        ValueError: one sentence saying why.
    """
    if replica.resolve() == store.resolve():
        raise ValueError(f"--replica {replica} is the store itself; give another file name")
    if replica.is_dir():
        raise ValueError(f"--replica {replica} is a folder; give a file name")
    for parent in replica.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"--replica {replica}: {parent} is a file, not a folder")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise ValueError(f"--replica {replica}: the folder {parent} is not writable")
            break


def write_replica(
    con: duckdb.DuckDBPyConnection,
    source: Path,
    target: Path,
    lock: contextlib.AbstractContextManager[Any] | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> ReplicaCopy:
    """Copy the store ``source`` (open for writing on ``con``) to the replica ``target``, atomically.

    Args:
        con: the writer's connection to ``source``.
        source: the store file.
        target: the replica file; replaced by ``os.replace`` (a temporary file in its folder
            first, so the replace never crosses file systems).
        lock: held while the file is checkpointed and copied (the projector's write lock);
            None: the caller's thread is the only writer.
        clock: the time the copy is stamped with (tests pass their own).

    Returns:
        What was copied and how long the writer was held.

    Raises:
        OSError: the replica's folder cannot be written (the store is untouched).
        duckdb.Error: the checkpoint failed.
    """
    started = time.monotonic()
    make_private_dirs(target.parent)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp_wal = tmp.with_name(tmp.name + ".wal")
    clean = target.with_name(f".{target.name}.{os.getpid()}.clean.tmp")
    wal = source.with_name(source.name + ".wal")
    try:
        with lock if lock is not None else contextlib.nullcontext():
            con.execute("CHECKPOINT")
            _private_copy(source, tmp)
            if wal.exists() and wal.stat().st_size > 0:  # a checkpoint held back by a reader
                _private_copy(wal, tmp_wal)
            copied_at = clock()
        locked = time.monotonic() - started
        clean.unlink(missing_ok=True)
        umask = os.umask(0o077)  # DuckDB makes the fresh file: owner-only from the start
        try:
            _copy_without_credentials(tmp, clean, copied_at, source)
        finally:
            os.umask(umask)
        tmp.unlink(missing_ok=True)
        tmp_wal.unlink(missing_ok=True)
        clean.with_name(clean.name + ".wal").unlink(missing_ok=True)
        clean.chmod(0o600)
        os.replace(clean, target)
    except BaseException:
        for leftover in (tmp, tmp_wal, clean, clean.with_name(clean.name + ".wal")):
            leftover.unlink(missing_ok=True)
        raise
    return ReplicaCopy(target, copied_at, locked, time.monotonic() - started, target.stat().st_size)


def _copy_without_credentials(tmp: Path, clean: Path, copied_at: datetime, source: Path) -> None:
    """Copy the store's copy ``tmp`` without its credentials (:func:`strip_credentials`) to the
    new file ``clean``, with the ``replica_meta`` row."""
    with duckdb.connect(str(tmp)) as r:  # replays a copied log, then checkpoints on close
        r.execute("SET TimeZone = 'UTC'")
        strip_credentials(r)
        # a fresh file: the dropped credentials' blocks stay in the copied file's free space
        r.execute("ATTACH ? AS replica_clean", [str(clean)])
        source_db = r.execute("SELECT current_database()").fetchall()[0][0]
        r.execute(f'COPY FROM DATABASE "{source_db}" TO replica_clean')
        r.execute(
            f"CREATE OR REPLACE TABLE replica_clean.{META_TABLE} "
            "(copied_at TIMESTAMPTZ NOT NULL, source VARCHAR NOT NULL)"
        )
        r.execute(f"INSERT INTO replica_clean.{META_TABLE} VALUES (?, ?)", [copied_at, str(source.resolve())])
        r.execute("DETACH replica_clean")


def strip_credentials(con: duckdb.DuckDBPyConnection) -> None:
    """Take the credentials out of a replica being made (open on ``con``): drop
    :data:`CREDENTIAL_TABLES` and the view over the tokens, drop ``console_users.password_hash``
    (:func:`write_replica` then copies what is left to a fresh file, so that the dropped rows do
    not linger in the free blocks of the copied one). A replica is for reading
    findings and events (a BI tool, a notebook): it must not give anyone a way to sign in or to
    attack a password hash offline."""
    con.execute("DROP VIEW IF EXISTS dim_api_tokens")
    for table in CREDENTIAL_TABLES:
        con.execute(f"DROP TABLE IF EXISTS {table}")
    columns = {
        str(r[0])
        for r in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'console_users'"
        ).fetchall()
    }
    if "password_hash" in columns:
        con.execute("DROP VIEW IF EXISTS dim_users")
        con.execute("ALTER TABLE console_users DROP COLUMN password_hash")
        con.execute(
            """CREATE VIEW dim_users AS
               SELECT * EXCLUDE (rn) FROM (
                   SELECT u.*, row_number() OVER (PARTITION BY name ORDER BY changed_at DESC, rowid DESC) AS rn
                   FROM console_users u
               ) WHERE rn = 1"""
        )


def _private_copy(src: Path, dst: Path) -> None:
    """Copy ``src`` to a new owner-only file ``dst`` (never readable by others, not even briefly).

    The copy runs in a child process (``cp``): DuckDB holds the store's lock as a POSIX record
    lock, which the kernel drops for the whole process as soon as the process closes *any*
    descriptor of that file; a copy that opened and closed the store in this process would leave
    it unlocked, open to a second writer.

    Raises:
        OSError: the copy failed.
    """
    dst.unlink(missing_ok=True)
    os.close(os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    done = subprocess.run(  # into the owner-only file: cp keeps an existing file's mode
        ["cp", "--", str(src), str(dst)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise OSError(f"cp {src} {dst} failed: {done.stderr.strip()}")


def replica_info(con: duckdb.DuckDBPyConnection) -> ReplicaInfo | None:
    """The ``replica_meta`` row of the database open on ``con``; None if it is not a replica."""
    try:
        row = con.execute(f"SELECT copied_at, source FROM {META_TABLE} ORDER BY copied_at DESC LIMIT 1").fetchone()
    except duckdb.CatalogException:
        return None
    return None if row is None else ReplicaInfo(row[0], str(row[1]))


def describe_copy(path: Path, info: ReplicaInfo | None, now: datetime) -> str:
    """The line a reading command prints on stderr: which copy it reads and how old it is.

    Args:
        path: the file the command opened.
        info: its replica row (None: the store itself).
        now: the current time (UTC).
    """
    if info is None:
        return f"reading store {path} (the live file)"
    age = max(0.0, (now - info.copied_at).total_seconds())
    if age < 120:
        ago = f"{age:.0f} s ago"
    elif age < 2 * 3600:
        ago = f"{age / 60:.0f} min ago"
    else:
        ago = f"{age / 3600:.1f} h ago"
    stamp = info.copied_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"reading replica {path}, copied {ago} at {stamp} from {info.source}"


class ReplicaTimer:
    """When the writer copies its store to the replica: every ``every`` seconds (monotonic).

    Args:
        path: the replica file.
        every: seconds between two copies.
        say: where a copy's one-line account goes (its time under the lock included).
        wait_first: the first copy is due after ``every`` seconds (an audit, which copies at its
            end anyway); False: at the first look (the projector: a replica as soon as it runs).
    """

    def __init__(self, path: Path, every: float, say: Callable[[str], None], wait_first: bool = False) -> None:
        self.path, self.every, self.say = path, every, say
        self.next_copy = time.monotonic() + every if wait_first else 0.0
        self.copies = 0

    def due(self) -> bool:
        """True if a copy is due now."""
        return time.monotonic() >= self.next_copy

    def copy(
        self,
        con: duckdb.DuckDBPyConnection,
        source: Path,
        lock: contextlib.AbstractContextManager[Any] | None = None,
    ) -> ReplicaCopy | None:
        """Copy now (and set the next time); a copy that fails is said in one line and retried
        at the next period, never ends the writer. Returns the copy, or None if it failed."""
        self.next_copy = time.monotonic() + self.every
        try:
            done = write_replica(con, source, self.path, lock)
        except (OSError, duckdb.Error) as exc:
            self.say(f"replica {self.path} not written: {type(exc).__name__}: {exc}")
            return None
        self.copies += 1
        self.say(
            f"replica {done.path} copied at {done.copied_at:%Y-%m-%dT%H:%M:%SZ}: {done.size / 1e6:.1f} MB, "
            f"writer held {done.locked_seconds:.2f} s, {done.total_seconds:.2f} s in all"
        )
        return done
