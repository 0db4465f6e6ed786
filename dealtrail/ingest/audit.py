"""The embedded audit: a JSON Lines event file through the engine into the DuckDB store.

One pass, constant memory. The file is split by table between ``workers`` processes (each
table's events stay in one process, in file order, which is all the engine needs); each worker
decodes and applies its lines and stages accepted events, findings and completed rounds in
batches; the parent process is the only DuckDB writer and commits each batch in one transaction.
Every line that cannot be audited goes to the dead-letter file (and the ``dead_letters`` table)
with its line number and reason; the run goes on.

A file may continue one audited before into the same store (the next shift of the same tables):
at the end of a file, every table's engine state is stored (``table_states``), and a table
whose events here follow on from a stored state goes on from that state instead of needing a
``TableConfigured`` event (:meth:`projections.store.store.Store.state_before` says which state). A
table the store holds but that this file does not continue is refused (``does_not_continue``):
starting it anew would report the stored events as missing.
"""

from __future__ import annotations

import gc
import json
import multiprocessing as mp
import os
import shutil
import tempfile
import traceback
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, NoReturn

from dealtrail.settings import DEFAULT_MAX_RECORD_BYTES
from projections.store.event_rows import EventRowsFile, read_event_rows
from projections.store.store import BatchCounts, Store, snapshot_row
from schemas import events as ev
from schemas.chain import Chainer
from schemas.codec import TABLE_ID_IN_LINE, DecodeError, decode, encode, raw_field
from schemas.findings import Finding
from schemas.lines import IntakeCheck, Line, NotEventsError, read_lines
from streams.clock import IntakeClock, utc_now
from streams.engine import EventRejected, Plausibility, TableState, apply, check_plausible
from streams.engine.catalog import ENGINE_VERSION, RULEBOOK_REVISION
from streams.engine.engine import RECALLED
from streams.engine.reorder import WINDOW, Reorder, ReorderLimits
from streams.engine.round_rows import round_row
from streams.engine.state import dump_state, load_state
from streams.seen import SeenIndex

_NO_OFFSET = timedelta(0)
"""The UTC offset of a time already in UTC (its own date is the UTC date)."""
BATCH_LINES = 50_000
"""Events per DuckDB transaction."""
PARALLEL_MIN_BYTES = 32 * 1024 * 1024
"""Files smaller than this (bytes) are audited in-process: starting workers would cost more."""
WORKER_GC_THRESHOLD = (20_000, 20, 20)
"""The cyclic garbage collector's thresholds in an audit worker process (Python's default is
700, 10, 10). An audit makes no garbage cycles: at the default the collector ran 100 times over
20,000 events and freed no object, and about 800 times per 200,000 events, walking every held
table state each time (about 2.5 us/event); at these thresholds it ran 24 times (1 us/event).
Memory is freed by reference counting as before."""
DEAD_LETTER_BATCH = 2_000
"""Dead letters an audit worker holds at most before it hands them to the writer (which writes
them to the dead-letter file and the store at once), whatever the events in between: the audit's
memory does not grow with the rejected lines (a held dead letter keeps its raw line)."""
DEAD_LETTER_ROWS = 10_000
"""Dead letters of one partition of a file's tables (:data:`PARTITIONS`) stored one
``dead_letters`` row each in a run: its first this many in line order; its later ones are
counted instead (``dead_letter_counts``, a few rows per chunk of :data:`DEAD_LETTER_BATCH`: see
:meth:`projections.store.store.Store.write_batch`), each still a line of the dead-letter file and
of the store's dead-letter log. A ``dead_letters`` row costs DuckDB's memory about 20 bytes for
the rest of the run (measured: ``bench/bench_rejected.py``), so a flood of rejected lines would
grow it without bound; at most ``PARTITIONS * DEAD_LETTER_ROWS`` rows are stored per run. A
partition's lines are all read by one worker, in file order, whatever the number of workers:
which dead letters are rows and how the others are cut into chunks is the same in every run of
the same file, so a re-run with another ``--workers`` stores nothing twice."""
PARTITIONS = 16
"""The partitions of a file's tables (CRC-32 of the first ``"table_id"`` in a line's text,
modulo this; a line without one is in partition 0): partition ``p`` is read by worker
``p % workers``, so an audit uses at most this many workers."""
DEAD_LETTER_BATCH_BYTES = 4 * 1024 * 1024
"""Raw bytes of held dead letters at which they are handed over before :data:`DEAD_LETTER_BATCH`
(a too-large line's dead letter keeps 256 KiB of it)."""
WORKER_POLL_SECONDS = 1.0
"""How often (seconds) the writer checks that the workers it waits for are still alive."""


class AuditWorkerError(RuntimeError):
    """An audit worker process failed or died; the batches written before it stay stored."""


@dataclass
class AuditSummary:
    """What one audit run saw and wrote.

    Attributes:
        lines: non-blank lines read; events: events accepted (each once: duplicate deliveries
        not included); duplicates: duplicate deliveries skipped, exact copies of an event
        already judged (same ID and content: :mod:`streams.seen`), however far back in the
        file; dead_letters: lines rejected, by reason;
        detections: new findings (revision 0) by (game, rule_id, severity); written: rows the
        store gained; tables: tables seen; resumed: of those, tables that went on from the
        state an earlier audit stored; workers: processes used.
    """

    lines: int = 0
    events: int = 0
    duplicates: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)
    detections: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    written: BatchCounts = field(default_factory=BatchCounts)
    tables: int = 0
    resumed: int = 0
    workers: int = 1


Stamps = list[tuple[int, str | None, str]]
"""A table's last hash-chain stamps, ``(seq, prev_hash, hash)`` (:meth:`schemas.chain.Chainer.stamps`)."""
Resume = Callable[[str, int], tuple[TableState, Stamps] | str | None]
"""``resume(table_id, seq)``: the stored state (and the chain stamps) a table whose first
event in the file has ``seq`` goes on from (see :meth:`projections.store.store.Store.state_before`);
else why none of its stored states fits (a sentence), or None if it has none."""


def stored_resume(store: Store, table_id: str, seq: int) -> tuple[str, str] | str | None:
    """What the store holds for ``resume(table_id, seq)`` (see :data:`Resume`), still as JSON
    texts: the writer's side (a worker gets it through a queue and decodes it)."""
    fits = store.state_before(table_id, seq, RECALLED)
    if fits is not None:
        return fits
    reach = store.state_reach(table_id, seq)
    if reach is None:
        return None
    last, source = reach
    if last >= seq:
        return (
            f"the store holds this table up to seq {last} (audited from {source}), {last - seq + 1} events into "
            f"this file, and an audit recognises at most {RECALLED} repeated events: audit the events after "
            f"seq {last} only"
        )
    return (
        f"the store holds this table up to seq {last} (audited from {source}), {seq - 1 - last} events before "
        f"this file takes it up: audit the file in between first, then this one again (if those events are "
        f"lost, audit the file before together with this one, and the gap is reported)"
    )


def load_resume(stored: tuple[str, str] | str | None) -> tuple[TableState, Stamps] | str | None:
    """Decode what :func:`stored_resume` returned."""
    if stored is None or isinstance(stored, str):
        return stored
    state, stamps = stored
    return load_state(state), [(int(seq), prev, str(h)) for seq, prev, h in json.loads(stamps)]


@dataclass
class Batch:
    """What one worker hands the writer: its events as an Arrow IPC stage file of ``events``
    rows (:class:`projections.store.event_rows.EventRowsFile`), the rest as rows."""

    shard: int
    events_file: Path | None
    findings: list[Finding]
    rounds: list[dict[str, Any]]
    dead: list[dict[str, Any]]
    bytes_read: int
    lines: int
    events: int
    duplicates: int = 0
    tables: int = 0
    resumed: int = 0
    states: list[dict[str, Any]] = field(default_factory=list)
    snapshots: list[dict[str, Any]] = field(default_factory=list)
    final: bool = False
    chunks: list[tuple[int, int] | None] = field(default_factory=list)
    """Per dead letter of ``dead``: None for one stored as a row, else the (partition, chunk
    number) it is counted in (see :data:`DEAD_LETTER_ROWS`)."""
    closed: list[tuple[int, int]] = field(default_factory=list)
    """Chunks complete once this batch's dead letters are in: the writer counts them now."""


def dead_letter_record(
    source: str,
    line_no: int,
    reason: str,
    detail: str,
    raw: bytes,
    offset: int | None = None,
    length: int | None = None,
) -> dict[str, Any]:
    """A dead-letter record: where (line number; ``offset``: the line's first byte in the file,
    ``length``: its bytes without the line end, when known), why, and the raw input (text, or
    base64 if not UTF-8)."""
    where: dict[str, Any] = (
        {} if offset is None else {"offset": offset, "length": len(raw) if length is None else length}
    )
    return {"source": source, "line": line_no, **where, "reason": reason, "detail": detail, **raw_field(raw)}


def refusal_record(source: str, line_no: int, raw: bytes, exc: Exception, offset: int | None = None) -> dict[str, Any]:
    """THE dead-letter record of a line the audit refuses, at intake or at release from the reorder
    window: a refusal's own reason and detail for an undecodable or rejected event, else
    ``engine_error`` with the exception's type and message (at most 500 characters).

    Args:
        source: the file audited.
        line_no: the line's number (1-based).
        raw: the line's bytes.
        exc: what refused it.
        offset: the line's first byte in the file, when known.

    Returns:
        The record (:func:`dead_letter_record`)."""
    if isinstance(exc, DecodeError | EventRejected):
        return dead_letter_record(source, line_no, exc.reason, exc.detail, raw, offset)
    return dead_letter_record(source, line_no, "engine_error", f"{type(exc).__name__}: {exc}"[:500], raw, offset)


class Auditor:
    """Applies events to per-table states and buffers what the store must receive.

    Used by the audit workers; the incident replay and tests use it directly.
    """

    def __init__(self, limits: Plausibility | None = None) -> None:
        self.limits = limits
        """The plausibility limits of rulebook 10.3.4 (None: none checked)."""
        self.states: dict[str, TableState] = {}
        """The state of each table seen, by table ID (a stored state may be put in before)."""
        self.findings: list[Finding] = []
        self.rounds: list[dict[str, Any]] = []
        self.duplicates = 0
        """Exact copies of an applied event that the engine ignored (events)."""

    def apply(self, event: ev.DealingEvent, raw: bytes | None = None) -> list[Finding]:
        """Apply one event; buffer its findings and, at ``RoundCompleted``, the round row.

        Raises:
            EventRejected: see :func:`streams.engine.apply`.
        """
        before = self.states.get(event.table_id)
        state, found = apply(before, event, raw, self.limits)
        self.states[event.table_id] = state
        if found:
            self.findings.extend(found)
        elif state is before:  # the engine keeps the state object for an exact duplicate
            self.duplicates += 1
        applied = state is not before  # an ignored copy leaves the very same state
        if type(event) is ev.RoundCompleted and applied and before is not None and before.round is not None:
            self.rounds.append(round_row(before.round, state, event))
        return found


class Snapshots:
    """The snapshot policy of one audit worker: a table's engine state is kept after every
    ``every`` of its events and at the end of each UTC day it dealt in (``table_snapshots``).

    A snapshot must equal the state a replay of the stored trail (in seq order) reaches at its
    last event. So a table whose events come out of seq order in the file (an event older than
    one applied before it) gets no more snapshots in this file, and a snapshot still waiting in
    the batch is dropped when another event with a seq up to its own follows (a conflicting
    copy): the replay would apply that event before the snapshot's point. An event with such a
    seq in a later batch or file is caught by the replay (``events_through`` no longer matches).

    Args:
        every: events of a table between two snapshots (``settings.snapshot_every``).
        engine_version / rulebook_revision: the engine that makes the states.
    """

    def __init__(self, every: int, engine_version: str = ENGINE_VERSION, rulebook_revision: int = RULEBOOK_REVISION):
        self.every = every
        self.engine_version = engine_version
        self.rulebook_revision = rulebook_revision
        self.since: dict[str, int] = {}  # table -> events applied since its last snapshot
        self.last_at: dict[str, datetime] = {}  # table -> occurred_at of its last applied event
        self.last_day: dict[str, int] = {}  # table -> its UTC date (proleptic ordinal)
        self.unfit: set[str] = set()  # tables whose events came out of seq order
        self.pending: list[dict[str, Any]] = []  # rows for the batch being built

    def seen(self, event: ev.DealingEvent, before: TableState | None, after: TableState, found: list[Finding]) -> None:
        """Note one applied event (``before`` / ``after``: the table's state around it)."""
        t = event.table_id
        if before is not None and after is before and not found:
            return  # an exact copy the engine ignored: the store keeps one, the replay ignores it too
        if before is not None and event.seq <= before.last_seq:
            self.pending = [p for p in self.pending if p["table_id"] != t or p["last_seq"] < event.seq]
            if event.seq < before.last_seq:
                self.unfit.add(t)
            return
        if t in self.unfit:
            return
        at = event.occurred_at
        day = at.toordinal() if at.utcoffset() == _NO_OFFSET else at.astimezone(UTC).toordinal()  # UTC day
        prev_at = self.last_at.get(t)
        prev_day = self.last_day.get(t)
        self.last_at[t] = at
        self.last_day[t] = day
        since = self.since.get(t, 0)
        if before is not None and prev_at is not None and since > 0 and prev_day != day:
            self.pending.append(snapshot_row(before, prev_at, self.engine_version, self.rulebook_revision))
            since = 0
        since += 1
        if since >= self.every:
            self.pending.append(snapshot_row(after, at, self.engine_version, self.rulebook_revision))
            since = 0
        self.since[t] = since

    def take(self) -> list[dict[str, Any]]:
        """The snapshots of the batch being handed over (and start a new batch)."""
        out, self.pending = self.pending, []
        return out


def partition_of(table_id: bytes | None) -> int:
    """The partition (0 .. :data:`PARTITIONS` - 1) of a table: CRC-32 of its ID (as in the line's
    text, still JSON-escaped), modulo :data:`PARTITIONS`; None (no table named) is partition 0."""
    return zlib.crc32(table_id) % PARTITIONS if table_id is not None else 0


def line_partition(raw: bytes) -> int:
    """The partition of a line: that of the first ``"table_id"`` in its text (:func:`partition_of`)."""
    match = TABLE_ID_IN_LINE.search(raw)
    return partition_of(match.group(1) if match else None)


def shard_of(table_id: bytes, shards: int) -> int:
    """The worker (0 .. shards-1) that owns a table: its partition (:func:`partition_of`) modulo
    ``shards``."""
    return partition_of(table_id) % shards if shards > 1 else 0


@dataclass(frozen=True)
class ScanOptions:
    """How :func:`scan` audits a file, the same in one process and in each worker of a parallel
    audit (handed to a worker whole, so it pickles).

    Attributes:
        batch_lines: events staged per batch handed over.
        chain: stamp each event into its table's hash chain.
        max_record_bytes: a longer line is dead-lettered ``too_large`` (bytes).
        snapshot_every: take a table-state snapshot every so many events of a table (None: never).
        reorder: the reorder window's limits.
        arrival: the store's last arrival number; this file's events follow it.
        limits: plausibility limits checked on arrival (None: no check).
        clock: the intake's clock (UTC instants).
    """

    batch_lines: int
    chain: bool = True
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    snapshot_every: int | None = None
    reorder: ReorderLimits = WINDOW
    arrival: int = 0
    limits: Plausibility | None = None
    clock: Callable[[], datetime] = utc_now

    def scan(
        self, path: Path, shard: int, shards: int, stage_dir: Path, emit: Callable[[Batch], None], resume: Resume | None
    ) -> None:
        """:func:`scan` with these options (the arguments as there)."""
        scan(
            path,
            shard,
            shards,
            stage_dir,
            self.batch_lines,
            emit,
            self.chain,
            resume,
            self.max_record_bytes,
            self.snapshot_every,
            self.reorder,
            self.arrival,
            self.limits,
            self.clock,
        )


def scan(
    path: Path,
    shard: int,
    shards: int,
    stage_dir: Path,
    batch_lines: int,
    emit: Callable[[Batch], None],
    chain: bool = True,
    resume: Resume | None = None,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    snapshot_every: int | None = None,
    reorder: ReorderLimits = WINDOW,
    arrival: int = 0,
    limits: Plausibility | None = None,
    clock: Callable[[], datetime] = utc_now,
) -> None:
    """Audit the lines of ``path`` owned by ``shard`` and hand over batches through ``emit``.

    Lines are read with :func:`schemas.lines.read_lines`: a line over ``max_record_bytes``
    (bytes) is dead-lettered as ``too_large`` without ever being held whole; a byte-order mark
    at the start of any line is skipped; LF, CRLF and a lone CR end a line. Every shard reads
    the whole file and checks its start the same way (:class:`schemas.lines.IntakeCheck`), so
    a file that is not an event file is refused by each (:class:`NotEventsError`) before
    anything is handed over.

    A line belongs to the partition of the first ``"table_id"`` in its text (:func:`line_partition`;
    a line without one to partition 0, which dead-letters it), read by shard ``partition %
    shards``. A line whose decoded ``table_id`` is in another partition is dead-lettered as
    ``ambiguous_table_id`` with any number of shards (only a hostile line can do that). Each
    dead letter says (``Batch.chunks``) whether it is stored as a row or counted in a chunk of
    its partition (:data:`DEAD_LETTER_ROWS`). With
    ``chain``, an event without ``hash`` is stamped into its table's hash chain before it is
    applied and stored (:meth:`schemas.chain.Chainer.stamp`). At a table's first valid event,
    ``resume`` is asked for a stored state to go on from (its hash becomes the chain's head);
    if the store holds the table but no state fits, every event of the table in this file is
    dead-lettered as ``does_not_continue``, with the reason. The final batch carries the state
    of every table seen, to be stored for the next file. With ``snapshot_every``, batches carry
    the tables' snapshots (:class:`Snapshots`). With ``limits``, an implausible event
    (rulebook 10.3.4, :func:`streams.engine.check_plausible`) is dead-lettered before it is
    chained, so the chain and the table's state go on as if it had not arrived; so is, with
    ``limits``, an event recorded more than ``max_clock_skew`` after ``clock`` (the intake's
    clock, timezone-aware: :class:`streams.clock.IntakeClock`), as ``recorded_in_future``.
    Rejected lines are handed over as they come, at most :data:`DEAD_LETTER_BATCH` at once,
    whatever the events in between.

    Each table's events pass through its reorder window (:mod:`streams.engine.reorder`,
    bounds ``reorder``) before they are stamped, applied and staged: they are applied in seq
    order within the window (rulebook decision 10.1.2), and the windows are emptied at the end
    of the file, before the final batch carries the tables' states. An event is staged with
    ``arrival`` + its line number as its ``arrival`` (the re-audit replays a table's stored
    events in that order through the same window).

    Raises:
        NotEventsError: the file is not an event file (see :class:`schemas.lines.IntakeCheck`).
        OSError: the file cannot be read.
    """
    source = str(path)
    auditor = Auditor(limits)
    intake = IntakeClock(limits, clock) if limits is not None else None
    snaps = Snapshots(snapshot_every) if snapshot_every else None
    chainer = Chainer() if chain else None
    first_seq: dict[str, int] = {}  # table -> seq of its first valid event in the file
    unfit: dict[str, str] = {}  # table -> why none of its stored states fits: its events are refused
    resumed = 0
    dead: list[dict[str, Any]] = []
    dead_bytes = 0  # raw bytes held in ``dead``
    chunks: list[tuple[int, int] | None] = []  # per held dead letter: None (a row) or its chunk
    closed: list[tuple[int, int]] = []  # chunks complete with the held dead letters
    ranks: Counter[int] = Counter()  # dead letters of each partition so far, in line order
    chunk_no: Counter[int] = Counter()  # each partition's open chunk
    chunk_lines: Counter[int] = Counter()  # and its lines and raw bytes so far
    chunk_bytes: Counter[int] = Counter()
    staged = 0
    batch_no = 0
    lines = events = bytes_read = 0
    position = 0  # bytes of the file before the line being read (its offset)
    out = EventRowsFile(stage_dir / f"w{shard}-{batch_no}.arrow")

    def flush(final: bool) -> None:
        nonlocal out, staged, batch_no, lines, events, bytes_read, dead, dead_bytes, chunks, closed
        out.close()
        states = []
        if final:
            states = [
                {
                    "table_id": table_id,
                    "first_seq": first_seq[table_id],
                    "last_seq": st.last_seq,
                    "last_event_id": st.last_event_id or "",
                    "source": source,
                    "state": dump_state(st),
                    "stamps": json.dumps(chainer.stamps(table_id) if chainer is not None else []),
                }
                for table_id, st in auditor.states.items()
            ]
        emit(
            Batch(
                shard=shard,
                events_file=out.path if out.rows else None,
                findings=auditor.findings,
                rounds=auditor.rounds,
                dead=dead,
                bytes_read=bytes_read,
                lines=lines,
                events=events,
                duplicates=auditor.duplicates,
                tables=len(auditor.states) if final else 0,
                resumed=resumed if final else 0,
                states=states,
                snapshots=snaps.take() if snaps is not None else [],
                final=final,
                chunks=chunks,
                # at the end, every partition's last chunk is complete
                closed=closed + ([(p, chunk_no[p]) for p in sorted(chunk_lines) if chunk_lines[p]] if final else []),
            )
        )
        if not out.rows:
            out.path.unlink(missing_ok=True)
        auditor.findings, auditor.rounds, dead = [], [], []
        chunks, closed = [], []
        dead_bytes = 0
        auditor.duplicates = 0
        staged = lines = events = bytes_read = 0
        batch_no += 1
        if not final:
            out = EventRowsFile(stage_dir / f"w{shard}-{batch_no}.arrow")

    def reject(record: dict[str, Any], partition: int) -> None:
        """Hold one dead letter of a line of ``partition``; hand the held ones over once there are
        enough of them. Past the partition's first :data:`DEAD_LETTER_ROWS`, it is counted in the
        partition's open chunk, which is complete at :data:`DEAD_LETTER_BATCH` lines or
        :data:`DEAD_LETTER_BATCH_BYTES` of raw input (or at the end of the file): all of it
        decided by the partition's own lines, so the same with any number of workers."""
        nonlocal dead, dead_bytes, lines, bytes_read, chunks, closed
        size = len(record.get("raw") or record.get("raw_base64") or "")
        dead.append(record)
        dead_bytes += size
        if ranks[partition] < DEAD_LETTER_ROWS:
            chunks.append(None)
        else:
            chunks.append((partition, chunk_no[partition]))
            chunk_lines[partition] += 1
            chunk_bytes[partition] += size
            if chunk_lines[partition] >= DEAD_LETTER_BATCH or chunk_bytes[partition] >= DEAD_LETTER_BATCH_BYTES:
                closed.append((partition, chunk_no[partition]))
                chunk_no[partition] += 1
                chunk_lines[partition] = chunk_bytes[partition] = 0
        ranks[partition] += 1
        if len(dead) < DEAD_LETTER_BATCH and dead_bytes < DEAD_LETTER_BATCH_BYTES:
            return
        # only the dead letters (and the lines read so far): the events staged go on to the
        # end of their batch, so a flood of bad lines does not cut the events' transactions short
        emit(
            Batch(
                shard=shard,
                events_file=None,
                findings=[],
                rounds=[],
                dead=dead,
                bytes_read=bytes_read,
                lines=lines,
                events=0,
                chunks=chunks,
                closed=closed,
            )
        )
        dead, dead_bytes = [], 0
        chunks, closed = [], []
        lines = bytes_read = 0

    windows: Reorder[tuple[int, int, bytes, ev.DealingEvent]] = Reorder(reorder)
    seen = SeenIndex(stage_dir)  # every applied event's copy key, to skip exact copies however far back

    def release(line_no: int, offset: int, raw: bytes, event: ev.DealingEvent) -> None:
        """Apply one event the reorder window let through, and stage it."""
        nonlocal events, staged
        try:
            if limits is not None:  # before the chain: a refused event must not become its head
                last = auditor.states.get(event.table_id)
                check_plausible(None if last is None else last.last_seq, event, limits)
            before = auditor.states.get(event.table_id)
            if before is not None and event.seq <= before.last_seq and seen.is_copy(event):
                auditor.duplicates += 1  # the same fact again, however far back: nothing changes
                return
            data = None  # the canonical bytes of a stamped event
            if chainer is not None:
                # stamped in the order applied (seq order within the window), so that the chain
                # links each event to the one the engine applied before it; an event that
                # carries its hash keeps it (and becomes its table's head)
                event, data = chainer.stamp_encoded(event)
            if data is None:
                # the store keeps the validated event in its canonical form (lax input, a
                # Unix time for a timestamp or "7" for a number, must not reach the SQL casts
                # as written), and the engine tells copies apart by the same bytes: a copy
                # written with other spacing or key order is the same event
                data = encode(event)
            found = auditor.apply(event, data)
            after = auditor.states[event.table_id]
            if after is before and not found:
                return  # an exact copy the engine recognised (Auditor.duplicates): stored once already
            seen.note(event, data, applied=before is None or event.seq > before.last_seq)  # its copies are known
            if snaps is not None:
                snaps.seen(event, before, after, found)
        except Exception as exc:
            reject(refusal_record(source, line_no, raw, exc, offset), line_partition(raw))
            return
        finally:
            st = auditor.states.get(event.table_id)
            if st is not None:
                windows.windows[event.table_id].last = st.last_seq  # the engine's word on where the table is
        events += 1
        out.add(arrival + line_no, event, data)  # an in-batch copy of an event is left out here
        staged += 1
        if staged >= batch_lines:
            flush(final=False)

    check = IntakeCheck(source)
    try:
        with path.open("rb") as fh:
            check.head(fh.peek(64)[:64])
            for line in read_lines(fh, max_record_bytes):
                line_no, raw = line.number, line.data
                offset = position
                position += line.read
                bytes_read += line.read
                if not raw.strip():
                    continue
                if not check.done:
                    check.line(line, *_verdict(line, max_record_bytes))
                part = line_partition(raw)
                if part % shards != shard:
                    continue
                lines += 1
                if line.too_large:
                    reject(too_large_record(source, line, max_record_bytes, offset), part)
                    continue
                try:
                    event = decode(raw)
                    # with any number of workers (a partition, not a worker: the same in every run)
                    if partition_of(event.table_id.encode()) != part:
                        raise EventRejected("ambiguous_table_id", "the line names more than one table_id")
                    if event.table_id not in first_seq:
                        first_seq[event.table_id] = event.seq
                        earlier = resume(event.table_id, event.seq) if resume is not None else None
                        if isinstance(earlier, str):
                            unfit[event.table_id] = earlier
                        elif earlier is not None:
                            st, stamps = earlier
                            auditor.states[event.table_id] = st
                            resumed += 1
                            if chainer is not None and st.last_hash is not None:
                                chainer.take_over(event.table_id, (st.last_seq, st.last_hash), stamps)
                    if event.table_id in unfit:
                        raise EventRejected("does_not_continue", unfit[event.table_id])
                except Exception as exc:
                    reject(refusal_record(source, line_no, raw, exc, offset), part)
                    continue
                window = windows.windows.get(event.table_id)
                if window is None:
                    st0 = auditor.states.get(event.table_id)
                    window = windows.window(event.table_id, st0.last_seq if st0 is not None else None)
                if limits is not None and intake is not None:  # judged on arrival: a seq far ahead
                    try:  # must not wait in the window, nor a time that cannot be true
                        intake.check(event)
                        check_plausible(window.last, event, limits)
                    except EventRejected as exc:
                        reject(refusal_record(source, line_no, raw, exc, offset), part)
                        continue
                for held in window.push(event.seq, event.occurred_at, (line_no, offset, raw, event)):
                    release(*held)
            for table_windows in windows.windows.values():
                for held in table_windows.flush():
                    release(*held)
            check.end()
    except BaseException:  # a refused file, a read error: the stage file goes too
        out.discard()
        seen.close()
        raise
    seen.close()
    flush(final=True)


def _verdict(line: Line, max_record_bytes: int) -> tuple[str | None, str]:
    """Whether a line is a dealing event: (None, "") if so, else (reason, detail)."""
    if line.too_large:
        return "too_large", f"{line.size:,} bytes, over the limit of {max_record_bytes:,}"
    try:
        decode(line.data)
    except DecodeError as exc:
        return exc.reason, exc.detail
    return None, ""


def too_large_record(source: str, line: Line, max_record_bytes: int, offset: int | None = None) -> dict[str, Any]:
    """The dead-letter record of a line over the record limit: its first bytes
    (:data:`schemas.lines.RAW_KEEP`), its whole length (``raw_bytes``) and SHA-256 (``raw_sha256``);
    ``offset``: the line's first byte in the file (bytes), when known."""
    detail = (
        f"the line is {line.size:,} bytes, over the record limit of {max_record_bytes:,} "
        f"(DEALTRAIL_MAX_RECORD_BYTES); its first {len(line.data):,} bytes are kept here, "
        f"with its length and SHA-256 {line.sha256}"
    )
    return {
        **dead_letter_record(source, line.number, "too_large", detail, line.data, offset, line.size),
        "raw_bytes": line.size,
        "raw_sha256": line.sha256,
    }


def _worker(
    path: str,
    shard: int,
    shards: int,
    stage_dir: str,
    conn: Any,
    options: ScanOptions,
) -> None:
    parent = mp.parent_process()
    gc.freeze()  # what the imports made is kept for the process's life: no collection walks it again
    gc.set_threshold(*WORKER_GC_THRESHOLD)

    def orphaned() -> bool:
        return parent is not None and not parent.is_alive()

    def give_up() -> NoReturn:
        # the writer was killed: nobody will read another batch
        shutil.rmtree(stage_dir, ignore_errors=True)
        os._exit(3)

    def send(item: object) -> None:
        # this worker's own pipe to the writer: a send blocks while the writer has not read the
        # one before (the pipe's buffer), and fails once the writer is gone
        if orphaned():
            give_up()
        try:
            conn.send(item)
        except OSError:  # a broken pipe: the writer died
            give_up()

    def resume(table_id: str, seq: int) -> tuple[TableState, Stamps] | str | None:
        # only the writer may read the store: ask it, and wait for its answer
        send(("state", shard, table_id, seq))
        while True:
            if orphaned():
                give_up()
            try:
                if conn.poll(WORKER_POLL_SECONDS):
                    return load_resume(conn.recv())
            except (EOFError, OSError):  # the writer died, maybe in the middle of its answer
                give_up()

    try:
        options.scan(Path(path), shard, shards, Path(stage_dir), send, resume)
    except NotEventsError as exc:
        send(("refused", shard, str(exc)))
    except BaseException:
        send(("error", shard, traceback.format_exc()))
    if orphaned():
        give_up()


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system tells it, else the
    machine's core count); at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform
        return max(1, os.cpu_count() or 1)


def default_workers(path: Path) -> int:
    """Worker processes for a file: 1 for a file under :data:`PARALLEL_MIN_BYTES` (bytes), else
    one per usable core (:func:`usable_cores`); the writer is this process."""
    if path.stat().st_size < PARALLEL_MIN_BYTES:
        return 1
    return usable_cores()


def audit_file(
    path: Path,
    store: Store,
    dead_letter: IO[str] | None = None,
    progress: Callable[[int], None] | None = None,
    batch_lines: int = BATCH_LINES,
    workers: int | None = None,
    chain: bool = True,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    snapshot_every: int | None = None,
    reorder: ReorderLimits = WINDOW,
    limits: Plausibility | None = None,
    clock: Callable[[], datetime] = utc_now,
) -> AuditSummary:
    """Audit one JSON Lines event file into ``store``.

    A table whose first event here follows on from the state an earlier audit stored for it
    (:meth:`projections.store.store.Store.state_before`) goes on from that state; the others start
    from their ``TableConfigured`` event. Every table's final state is stored for the next file.

    Args:
        path: the event file (one event per line; blank lines are skipped).
        store: the DuckDB writer (only this process writes).
        dead_letter: a text stream receiving one JSON object per rejected line
            (``source``, ``line``, ``reason``, ``detail``, ``raw`` or ``raw_base64``), in line
            order within each worker's share of the tables.
        progress: called with the bytes read since the last call.
        batch_lines: events per worker batch.
        workers: processes that decode and apply events; None picks by file size; at most
            :data:`PARTITIONS` are used.
        chain: stamp the per-table hash chain (``prev_hash``, ``hash``) on events that carry
            none, before they are applied and stored; events that carry one keep it. The
            stamps are deterministic, so auditing the same file again stores nothing twice.
        max_record_bytes: the longest line taken as an event (bytes, the setting
            ``max_record_bytes``); a longer one is dead-lettered as ``too_large`` with its first
            256 KiB, its length and SHA-256, and never held whole.
        snapshot_every: keep each table's engine state every this many of its events and at
            each UTC day boundary (``table_snapshots``, see :class:`Snapshots`); None keeps none.
        reorder: the bounds of each table's reorder window (the ``reorder`` settings): events
            are applied in seq order within it (see :func:`scan`).
        limits: the plausibility limits of rulebook 10.3.4 (``settings.plausibility``): an
            event beyond them is dead-lettered with its reason (``implausible_seq_jump``,
            ``implausible_clock_skew``, and ``recorded_in_future``: see ``clock``) and leaves
            its table as it was; None checks none.
        clock: this intake's clock (timezone-aware UTC; the system clock by default; picklable,
            it is passed to the worker processes: :class:`streams.clock.FixedClock` for a fixed
            time). With ``limits``, an event recorded more than ``max_clock_skew`` after it is
            dead-lettered as ``recorded_in_future`` before it is chained or applied; an old
            file audited later is not affected.

    Returns:
        The run's :class:`AuditSummary`.

    Raises:
        OSError: the file cannot be read.
        NotEventsError: the file is not an event file (a database, an image, compressed data,
            a CSV ...: see :class:`schemas.lines.IntakeCheck`); nothing was written.
        AuditWorkerError: a worker process failed (its traceback is in the message), or died without
            a word (killed by a signal or for lack of memory).
    """
    shards = min(workers if workers is not None else default_workers(path), PARTITIONS)
    summary = AuditSummary(workers=shards)
    stage_dir = Path(tempfile.mkdtemp(prefix="dealtrail-audit-"))

    # a file whose source the store holds no dead letter of: its dead letters are appended
    # without a look at the stored ones (see Store.write_batch)
    held = store.con.execute("SELECT count(*) FROM dead_letters WHERE source = ?", [str(path)]).fetchone()
    new_source = held is not None and held[0] == 0
    spool = _ChunkSpool(stage_dir)  # the counted dead letters of each open chunk, on disk

    def write(batch: Batch) -> None:
        chunks = batch.chunks or [None] * len(batch.dead)
        for d, chunk in zip(batch.dead, chunks, strict=True):
            if chunk is not None:
                spool.add(chunk, _dead_row(d))
        written, refused = store.write_batch_isolating(
            raw_events=(),
            findings=batch.findings,
            rounds=batch.rounds,
            dead_letters=[_dead_row(d) for d, chunk in zip(batch.dead, chunks, strict=True) if chunk is None],
            table_states=batch.states,
            snapshots=batch.snapshots,
            event_rows=read_event_rows(batch.events_file) if batch.events_file is not None else None,
            dead_letters_new=new_source,
        )
        for chunk in batch.closed:  # a whole chunk, the same in every run: counted once
            rows = spool.take(chunk)
            if rows:
                written.add(store.write_batch((), dead_letters=rows, dead_letters_counted=True))
        summary.written.add(written)
        if refused:  # rows the store could not hold: dead letters, and the run goes on
            stored = [_store_refusal(str(path), kind, row, error) for kind, row, error in refused]
            summary.written.add(store.write_batch((), dead_letters=[_dead_row(d) for d in stored]))
            batch.dead += stored
        if batch.events_file is not None:
            batch.events_file.unlink(missing_ok=True)
        for d in batch.dead:
            summary.dead_letters[d["reason"]] += 1
            if dead_letter is not None:
                dead_letter.write(json.dumps(d) + "\n")
        for f in batch.findings:
            if f.revision == 0:
                summary.detections[(f.game.value, f.rule_id, f.severity.value)] += 1
        summary.lines += batch.lines
        summary.events += batch.events
        summary.duplicates += batch.duplicates
        summary.tables += batch.tables
        summary.resumed += batch.resumed
        if progress is not None:
            progress(batch.bytes_read // shards)

    def resume(table_id: str, seq: int) -> tuple[TableState, Stamps] | str | None:
        return load_resume(stored_resume(store, table_id, seq))

    # a table's stored events keep the order they arrived in across files: this file's lines
    # come after every event the store holds (the re-audit replays them in that order)
    base = store.con.execute("SELECT coalesce(max(arrival), 0) FROM events").fetchone()
    arrival = int(base[0]) if base is not None else 0
    try:
        options = ScanOptions(batch_lines, chain, max_record_bytes, snapshot_every, reorder, arrival, limits, clock)
        if shards == 1:
            options.scan(path, 0, 1, stage_dir, write, resume)
        else:
            _parallel(path, shards, stage_dir, write, lambda t, q: stored_resume(store, t, q), options)
    finally:
        spool.close()
        shutil.rmtree(stage_dir, ignore_errors=True)
    return summary


def _parallel(
    path: Path,
    shards: int,
    stage_dir: Path,
    write: Callable[[Batch], None],
    stored: Callable[[str, int], tuple[str, str] | str | None],
    options: ScanOptions,
) -> None:
    """Run ``shards`` worker processes over the file and write what they hand over.

    Each worker has a pipe of its own to the writer (its batches one way, the answers to its
    state questions the other), and the writer holds no copy of the workers' ends: a worker
    that dies at any moment, even in the middle of writing a message, closes its pipe, and the
    writer's read ends there (end of file) instead of waiting for the rest of the message. A
    shared queue let a worker killed mid-write leave half a message that the writer waited on
    for ever.

    Raises:
        AuditWorkerError: a worker failed (its traceback is in the message) or died before it
            handed over its last batch (its exit code is in the message).
        NotEventsError: a worker found the file is not events.
    """
    from multiprocessing.connection import wait

    ctx = mp.get_context("spawn")
    pipes = [ctx.Pipe(duplex=True) for _ in range(shards)]
    procs = [
        ctx.Process(
            target=_worker,
            args=(str(path), k, shards, str(stage_dir), pipes[k][1], options),
            daemon=True,
        )
        for k in range(shards)
    ]
    for p in procs:
        p.start()
    for _, theirs in pipes:
        theirs.close()  # the worker's end lives in the worker only: its death closes the pipe
    ours: dict[Any, int] = {pipes[k][0]: k for k in range(shards)}
    finished: set[int] = set()

    def died(k: int) -> AuditWorkerError:
        procs[k].join(timeout=10)
        code = procs[k].exitcode
        return AuditWorkerError(
            f"audit worker {k} died (exit code {code if code is not None else 'unknown'}) before it finished its share"
        )

    try:
        while len(finished) < shards:
            waiting = [c for c, k in ours.items() if k not in finished]
            ready: list[Any] = wait(waiting, timeout=WORKER_POLL_SECONDS)
            for conn in ready:
                k = ours[conn]
                try:
                    item = conn.recv()
                except (EOFError, OSError):  # gone, maybe in the middle of a message
                    raise died(k) from None
                if isinstance(item, tuple) and item[0] == "state":
                    _, _, table_id, seq = item
                    try:
                        conn.send(stored(table_id, seq))
                    except OSError:
                        raise died(k) from None
                    continue
                if isinstance(item, tuple) and item[0] == "refused":
                    raise NotEventsError(item[2])
                if isinstance(item, tuple):
                    raise AuditWorkerError(f"audit worker {item[1]} failed:\n{item[2]}")
                write(item)
                if item.final:
                    finished.add(item.shard)
    finally:
        for conn in ours:
            conn.close()
        for p in procs:
            if p.is_alive() and len(finished) < shards:
                p.terminate()
            p.join(timeout=10)


class _ChunkSpool:
    """The counted dead letters of each chunk not yet complete, held in a file of ``stage_dir``
    each (one JSON line per ``dead_letters`` row), not in memory: a partition has one open chunk
    at a time, so at most :data:`PARTITIONS` files are open."""

    def __init__(self, stage_dir: Path) -> None:
        self.stage_dir = stage_dir
        self.files: dict[tuple[int, int], IO[str]] = {}

    def add(self, chunk: tuple[int, int], row: dict[str, Any]) -> None:
        """Hold ``row`` in ``chunk``."""
        fh = self.files.get(chunk)
        if fh is None:
            fh = self.files[chunk] = (self.stage_dir / f"chunk-{chunk[0]}-{chunk[1]}.jsonl").open("w")
        fh.write(json.dumps(row) + "\n")

    def take(self, chunk: tuple[int, int]) -> list[dict[str, Any]]:
        """The rows held in ``chunk``, in the order added (none if it holds none); the chunk is
        forgotten."""
        fh = self.files.pop(chunk, None)
        if fh is None:
            return []
        fh.close()
        path = Path(fh.name)
        with path.open() as text:
            rows = [json.loads(line) for line in text]
        path.unlink()
        return rows

    def close(self) -> None:
        """Close the files of the chunks still open (a run that stopped before their end)."""
        for fh in self.files.values():
            fh.close()
        self.files.clear()


def _dead_row(d: dict[str, Any]) -> dict[str, Any]:
    """The ``dead_letters`` row of a dead-letter record, stored ``compact``: its raw input goes to
    the store's dead-letter log, not into DuckDB (see :meth:`projections.store.Store.write_batch`)."""
    return {
        "source": d["source"],
        "position": f"line {d['line']}",
        "reason": d["reason"],
        "detail": d["detail"],
        "raw": d.get("raw", d.get("raw_base64", "")),
        "byte_offset": d.get("offset"),
        "byte_length": d.get("length"),
        "compact": True,
    }


def _store_refusal(source: str, kind: str, row: Any, error: str) -> dict[str, Any]:
    """The dead-letter record (reason ``store_error``) of a row the store refused
    (:meth:`projections.store.store.Store.write_batch_isolating`): an event with its line, else the
    row (a finding, a round, a state ...) as JSON, at line 0."""
    if kind == "event_rows":
        raw, line = str(row["payload"]).encode(), int(row["arrival"])
    else:
        doc = row.model_dump(mode="json") if isinstance(row, Finding) else row
        raw, line = json.dumps(doc, default=str).encode(), 0
    detail = f"the store refused this {kind.removesuffix('s').replace('_row', '')}: {error}"
    return dead_letter_record(source, line, "store_error", detail, raw)
