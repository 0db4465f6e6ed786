"""Re-audit: the stored events re-applied with the engine in force, as a new generation of
findings (``dealtrail reaudit``).

Event sourcing rebuilds its read models from the stored events when the logic changes; so does
dealtrail after a rule change. The events are never altered. The new generation is complete for
the whole store: the tables (and the part of their trail) re-applied get the findings the
engine raises now, everything else is carried over from the previous generation unchanged.
Earlier generations stay stored and queryable (``report --generation N``); the views read the
latest. The writer process exports each worker's tables' events to Parquet files of about
:data:`SORT_ROWS` events, cut at seq quantiles of the events exported (no other process may
open the store while it writes); the workers apply them in parallel, each its files in turn
(every table's events in arrival order across them, through the reorder window), and hand their findings back as Parquet
files, which the writer appends in one transaction with the new ``generations`` row.

Rounds (what was dealt) are not re-derived: they are kept as stored.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import os
import shutil
import tempfile
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from projections.models.generations import RuleDiff, generation_diff, generation_revisions
from projections.store import summaries
from projections.store.store import FINDINGS_SCHEMA, Store, finding_row
from schemas.codec import DecodeError, decode, encode
from streams.engine import EventRejected, Plausibility, TableState, apply, check_plausible
from streams.engine.catalog import ENGINE_VERSION, RULEBOOK_REVISION
from streams.engine.reorder import WINDOW, Reorder, ReorderLimits
from streams.engine.state import load_state
from streams.seen import SeenIndex

EXPORT_ROWS = 20_000
"""Events per Parquet row group of a worker's export (and per batch a worker reads)."""
SORT_ROWS = 50_000
"""Events per export file at most (about): each file is one sort of its events' payloads by
table and arrival, and DuckDB's sort of long strings ran out of a 200MB memory limit on some
150,000 events. A worker's share is cut into files by arrival ranges of about this many events
(quantiles of arrival), applied one after the other: every table's events still in arrival order."""


class ReauditError(ValueError):
    """The re-audit cannot run: no such table, nothing stored in the period."""


@dataclass
class ReauditResult:
    """What one re-audit did.

    Attributes:
        generation / previous: the generation written and the one it was compared with.
        engine_version / rulebook_revision: the engine that wrote it.
        tables / events: tables and stored events re-applied.
        rejected: stored events the engine refused now (event ID, reason).
        diff: per rule, the change against the previous generation (rules with no finding in
            either generation are absent).
        previous_revisions: the rulebook revisions that judged the previous generation (a store
            judged under revision 2 and re-audited under 3: the diff is what 3 adds and withdraws).
        duplicates: stored events skipped as exact copies of one already judged (same ID and
            content, :mod:`streams.seen`): a store written before they were skipped at intake.
    """

    generation: int
    previous: int
    engine_version: str
    rulebook_revision: int
    tables: int
    events: int
    rejected: list[tuple[str, str]]
    diff: list[RuleDiff]
    previous_revisions: list[int]
    duplicates: int = 0

    @property
    def no_change(self) -> bool:
        """True if the new generation holds the same finding revisions as the previous one."""
        return not any(d.added or d.withdrawn or d.changed for d in self.diff)


_EXPORT = pa.schema([("table_id", pa.string()), ("payload", pa.string())])


def _apply_part(
    events_paths: list[str],
    out_path: str,
    starts: dict[str, str],
    period: tuple[datetime | None, datetime | None],
    snapshot_every: int | None = None,
    reorder: ReorderLimits = WINDOW,
    limits: Plausibility | None = None,
) -> tuple[int, list[tuple[str, str]], list[dict[str, Any]], int]:
    """Re-apply one worker's share: the tables' events of ``events_paths`` (files one after the
    other in arrival; each in table and arrival order) from the states in ``starts`` (table ->
    state JSON; a table absent starts at its first event), each table's events through its
    reorder window (bounds ``reorder``) as the audit and the worker apply them; write the
    findings observed in ``period`` to ``out_path`` (Parquet).

    An event at or below its table's last seq that is the same fact as one judged before (an
    exact copy, however far back: :class:`streams.seen.SeenIndex`) is skipped, as the audit and
    the worker skip it at intake.

    Returns:
        Events applied, events refused (event ID, reason), the snapshots of this engine
        taken on the way (every ``snapshot_every`` events of a table, see
        :class:`dealtrail.ingest.audit.Snapshots`), and the exact copies skipped.
    """
    from dealtrail.ingest.audit import Snapshots

    snaps = Snapshots(snapshot_every) if snapshot_every else None
    taken: list[dict[str, Any]] = []
    lo, hi = period
    states: dict[str, TableState | None] = {}
    rows: list[dict[str, Any]] = []
    rejected: list[tuple[str, str]] = []
    applied = 0
    windows: Reorder[tuple[str, str]] = Reorder(reorder)
    seen = SeenIndex()
    duplicates = 0

    def release(table_id: str, payload: str) -> None:
        nonlocal applied, duplicates
        before = states[table_id]
        try:
            event = decode(payload)
            data = encode(event)
            if before is not None and event.seq <= before.last_seq and seen.is_copy(event, data):
                duplicates += 1
                return
            state, found = apply(before, event, data, limits=limits)
        except (DecodeError, EventRejected) as exc:
            rejected.append((_event_id(payload), f"{exc.reason}: {exc.detail}"))
            return
        states[table_id] = state
        windows.windows[table_id].last = state.last_seq  # the engine's word on where the table is
        if state is before and not found:
            duplicates += 1  # an exact copy the engine recognised
            return
        seen.note(event, data, applied=before is None or event.seq > before.last_seq)
        if snaps is not None:
            snaps.seen(event, before, state, found)
        applied += 1
        for f in found:
            if (lo is None or f.observed_at >= lo) and (hi is None or f.observed_at < hi):
                rows.append(finding_row(f))

    writer = pq.ParquetWriter(out_path, FINDINGS_SCHEMA)

    def hand_over() -> None:
        """Write the findings rows held so far and keep the snapshots taken."""
        nonlocal rows
        if rows:
            writer.write_table(pa.Table.from_pylist(rows, schema=FINDINGS_SCHEMA))
            rows = []
        if snaps is not None:
            taken.extend(snaps.take())

    try:
        for batch in (b for p in events_paths for b in pq.ParquetFile(p).iter_batches(batch_size=EXPORT_ROWS)):
            for table_id, seq, at, payload in zip(
                batch.column("table_id").to_pylist(),
                batch.column("seq").to_pylist(),
                batch.column("occurred_at").to_pylist(),
                batch.column("payload").to_pylist(),
                strict=True,
            ):
                if table_id not in states:
                    start = starts.get(table_id)
                    states[table_id] = st = load_state(start) if start is not None else None
                    windows.window(table_id, st.last_seq if st is not None else None)
                window = windows.windows[table_id]
                if limits is not None and window.last is not None and seq - window.last > limits.max_seq_jump:
                    # judged on arrival, as the audit and the worker judge it (rulebook 10.3.4)
                    try:
                        check_plausible(window.last, decode(payload), limits)
                    except (DecodeError, EventRejected) as exc:
                        rejected.append((_event_id(payload), f"{exc.reason}: {exc.detail}"))
                        continue
                for held in window.push(seq, at, (table_id, payload)):
                    release(*held)
            hand_over()
        for held in windows.flush():
            release(*held)
        hand_over()
    finally:
        writer.close()
        seen.close()
    return applied, rejected, taken, duplicates


def _event_id(payload: str) -> str:
    import json

    try:
        return str(json.loads(payload).get("event_id", "?"))
    except (ValueError, AttributeError):
        return "?"


def _plan(counts: Sequence[tuple[str, int]], workers: int) -> list[list[str]]:
    """Tables per worker: the largest first, each to the least loaded worker."""
    shares: list[list[str]] = [[] for _ in range(workers)]
    load = [0] * workers
    for table_id, n in sorted(counts, key=lambda c: (-c[1], c[0])):
        k = load.index(min(load))
        shares[k].append(table_id)
        load[k] += n
    return [s for s in shares if s]


def reaudit(
    store: Store,
    table: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    workers: int | None = None,
    snapshot_every: int | None = None,
    reorder: ReorderLimits = WINDOW,
    limits: Plausibility | None = None,
) -> ReauditResult:
    """Write a new generation of findings: the stored events re-applied with the engine in force.

    Args:
        store: the writer (this process alone holds the file).
        table: re-apply this table only (the others are carried over).
        start: re-evaluate the findings observed from this instant only (timezone-aware); the
            tables' events are applied from their first one, or from a checked snapshot of this
            engine before the period.
        end: ... and before this instant only; events are applied up to the last one before it.
        workers: processes applying events; None: one per core.
        snapshot_every: keep snapshots of this engine every this many events of a table (so
            that replays under the new rules start near their window); None keeps none.
        reorder: the bounds of the reorder window (the ``reorder`` settings). A table's events
            are re-applied in the order they were stored (``arrival``: the audit's file lines,
            the projector's Kafka offsets) through the same window as the audit and the worker
            applied them, so an event that came later than the window is judged as a late
            arrival here too, and the same trail gives the same findings.
        limits: the plausibility limits of rulebook 10.3.4 (``settings.plausibility``), as
            the audit and the worker apply them; an event beyond them is refused (listed with
            its reason) and leaves its table as it was. None checks none.

    Returns:
        The :class:`ReauditResult`, with the per-rule diff against the previous generation.

    Raises:
        ReauditError: ``table`` has no stored event, or no stored event falls in the period.
    """
    from dealtrail.investigate.replay import Window, snapshot_start

    con = store.con
    counts = [
        (str(t), int(n))
        for t, n in con.execute(
            """SELECT table_id, count(*) FROM events
               WHERE ($t::VARCHAR IS NULL OR table_id = $t)
                 AND ($lo::TIMESTAMPTZ IS NULL OR occurred_at >= $lo)
                 AND ($hi::TIMESTAMPTZ IS NULL OR occurred_at < $hi)
               GROUP BY table_id ORDER BY table_id""",
            {"t": table, "lo": start, "hi": end},
        ).fetchall()
    ]
    if not counts:
        where = f"table {table!r}" if table else "the store"
        raise ReauditError(f"no stored event of {where}" + (" in the period" if start or end else ""))
    previous = store.generation
    generation = previous + 1
    previous_revisions = generation_revisions(con, previous)
    # per table: the seq span to apply (after a checked snapshot of this engine, up to the period's end)
    spans: dict[str, tuple[int, int]] = {}
    starts: dict[str, str] = {}
    for table_id, _ in counts:
        last = con.execute(
            "SELECT max(seq) FROM events WHERE table_id = ? AND (?::TIMESTAMPTZ IS NULL OR occurred_at < ?)",
            [table_id, end, end],
        ).fetchall()
        after = 0
        if start is not None:
            begin = snapshot_start(con, table_id, Window(start=start, end=end))
            if begin.state is not None:
                from streams.engine.state import dump_state

                after, starts[table_id] = begin.last_seq, dump_state(begin.state)
        spans[table_id] = (after, int(last[0][0]) if last and last[0][0] is not None else 0)
    shares = _plan(counts, workers or os.cpu_count() or 1)
    stage = Path(tempfile.mkdtemp(prefix="dealtrail-reaudit-"))
    try:
        jobs = []
        for k, share in enumerate(shares):
            con.register(
                "span_batch",
                pa.table(
                    {
                        "table_id": share,
                        "after": [spans[t][0] for t in share],
                        "upto": [spans[t][1] for t in share],
                    }
                ),
            )
            paths = _export(con, stage, k)
            con.unregister("span_batch")
            jobs.append((paths, str(stage / f"findings-{k}.parquet"), {t: starts[t] for t in share if t in starts}))
        if len(jobs) == 1:
            results = [_apply_part(*jobs[0], (start, end), snapshot_every, reorder, limits)]
        else:
            with ProcessPoolExecutor(len(jobs), mp_context=mp.get_context("spawn")) as pool:
                results = list(
                    pool.map(
                        _apply_part,
                        *zip(*jobs, strict=True),
                        [(start, end)] * len(jobs),
                        [snapshot_every] * len(jobs),
                        [reorder] * len(jobs),
                        [limits] * len(jobs),
                    )
                )
        events = sum(r[0] for r in results)
        rejected = [x for r in results for x in r[1]]
        found = [job[1] for job in jobs]
        _write_generation(store, generation, previous, [t for t, _ in counts], table, start, end, found, events)
        snapshots = [x for r in results for x in r[2]]
        if snapshots:  # an optimisation beside the generation: kept in a transaction of its own
            store.write_batch((), snapshots=snapshots)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    store.generation = generation
    return ReauditResult(
        generation,
        previous,
        ENGINE_VERSION,
        RULEBOOK_REVISION,
        len(counts),
        events,
        rejected,
        generation_diff(con, generation, previous),
        previous_revisions,
        sum(r[3] for r in results),
    )


def _export(con: Any, stage: Path, k: int) -> list[str]:
    """Export the events of the tables in the registered ``span_batch`` (table, seq after, seq
    up to) to Parquet files of about :data:`SORT_ROWS` events, cut at ``arrival`` quantiles;
    each file is in table and arrival order (seq within an arrival), and the files follow each
    other in arrival.

    Args:
        con: the writer's connection.
        stage: the folder of the files.
        k: the worker the files are for (in their names).

    Returns:
        The files' paths, in the order they are to be applied.
    """
    join = """FROM events e JOIN span_batch s
                ON e.table_id = s.table_id AND e.seq > s.after AND e.seq <= s.upto"""
    # the events exported, not those of the period: without a snapshot of this engine before
    # it, a table's whole trail is applied
    counted = con.execute(f"SELECT count(*) {join}").fetchone()
    rows = int(counted[0]) if counted else 0
    pieces = -(-rows // SORT_ROWS)
    cuts: list[int] = []
    if pieces > 1:
        found = con.execute(
            f"SELECT quantile_disc(e.arrival, $q) {join}", {"q": [i / pieces for i in range(1, pieces)]}
        ).fetchone()
        cuts = sorted({int(c) for c in (found[0] if found and found[0] else [])})
    edges = [None, *cuts, None]
    paths = []
    for i, (lo, hi) in enumerate(itertools.pairwise(edges)):
        where = " AND ".join(
            [
                *([f"e.arrival > {int(lo)}"] if lo is not None else []),
                *([f"e.arrival <= {int(hi)}"] if hi is not None else []),
            ]
        )
        path = stage / f"events-{k}-{i:05d}.parquet"
        con.execute(
            f"""COPY (SELECT e.table_id, e.seq, e.occurred_at, e.payload::VARCHAR AS payload {join}
                      {"WHERE " + where if where else ""}
                      ORDER BY e.table_id, e.arrival, e.seq)
                TO '{_quoted(path)}' (FORMAT parquet, ROW_GROUP_SIZE {EXPORT_ROWS})"""
        )
        paths.append(str(path))
    return paths


def _quoted(path: Path) -> str:
    if "'" in str(path):
        raise ValueError(f"staging path must not contain a quote: {path}")
    return str(path)


def _write_generation(
    store: Store,
    generation: int,
    previous: int,
    tables: list[str],
    table: str | None,
    start: datetime | None,
    end: datetime | None,
    findings_files: list[str],
    events: int,
) -> None:
    scope = f"table {table}" if table else "all tables"
    if start or end:
        scope += f", findings observed from {start.isoformat() if start else 'the first event'}"
        scope += f" to {end.isoformat() if end else 'the last event'}"
    con = store.con
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(
            "INSERT INTO generations VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [generation, datetime.now(UTC), previous, RULEBOOK_REVISION, ENGINE_VERSION, scope, len(tables), events],
        )
        files = ", ".join(f"'{_quoted(Path(p))}'" for p in findings_files)
        con.execute(
            f"""INSERT INTO findings BY NAME
                SELECT *, $g AS generation FROM read_parquet([{files}])
                QUALIFY row_number() OVER (PARTITION BY finding_id, revision) = 1""",
            {"g": generation},
        )
        con.register("reaudited", pa.table({"table_id": tables}))
        # what was not re-applied: other tables, and findings observed outside the period
        con.execute(
            """INSERT INTO findings BY NAME
               SELECT * REPLACE ($g AS generation) FROM findings f
               WHERE generation = $p
                 AND NOT (table_id IN (SELECT table_id FROM reaudited)
                          AND ($lo::TIMESTAMPTZ IS NULL OR observed_at >= $lo)
                          AND ($hi::TIMESTAMPTZ IS NULL OR observed_at < $hi))""",
            {"g": generation, "p": previous, "lo": start, "hi": end},
        )
        summaries.build_findings(con, generation)  # the console's summary of the new generation
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    finally:
        con.unregister("reaudited")
