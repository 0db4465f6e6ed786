"""The embedded audit: a JSON Lines event file through the engine into the DuckDB store.

One pass, constant memory: lines are read, decoded and applied one by one; accepted events,
findings and completed rounds are written in batches; every line that cannot be audited goes to
the dead-letter file (and the ``dead_letters`` table) with its line number and reason.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from projections.store import BatchCounts, Store
from schemas import events as ev
from schemas.codec import DecodeError, decode
from schemas.findings import Finding
from streams.engine import EventRejected, TableState, apply
from streams.engine.state import RoundState

BATCH_LINES = 50_000
"""Events per DuckDB transaction."""


@dataclass
class AuditSummary:
    """What one audit run saw and wrote.

    Attributes:
        lines: lines read; events: events accepted by the engine; duplicates: exact duplicates
        of earlier events (absorbed); dead_letters: lines rejected, by reason.
        detections: new findings (revision 0) by (game, rule_id, severity).
        written: rows the store gained.
    """

    lines: int = 0
    events: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)
    detections: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    written: BatchCounts = field(default_factory=BatchCounts)
    tables: int = 0


def round_row(rnd: RoundState, state: TableState, event: ev.RoundCompleted) -> dict[str, Any]:
    """The ``rounds`` row of a round completed by ``event`` (``state`` is the table after it)."""
    return {
        "table_id": state.table_id,
        "round_id": rnd.round_id,
        "game": state.game.value,
        "round_no": rnd.round_no,
        "dealer_id": rnd.dealer_id,
        "dealing_method": rnd.method.value,
        "deck_id": rnd.deck_id,
        "started_at": rnd.started_at,
        "completed_at": event.occurred_at,
        "started_event_id": rnd.started_event_id,
        "completed_event_id": event.event_id,
        "exempt_from_stub_count": rnd.exempt,
        "stub_counted": rnd.stub_event_id is not None,
        "rounds_since_stub_count": state.stub_run,
        "voided": rnd.voided_all,
        "cards_dealt": rnd.cards_dealt,
        "wagers": len(rnd.active_wagers()),
    }


def dead_letter_record(source: str, line_no: int, reason: str, detail: str, raw: bytes) -> dict[str, Any]:
    """A dead-letter record: where, why, and the raw input (text, or base64 if not UTF-8)."""
    try:
        text = raw.decode("utf-8").rstrip("\r\n")
        key = "raw"
    except UnicodeDecodeError:
        text = base64.b64encode(raw).decode("ascii")
        key = "raw_base64"
    return {"source": source, "line": line_no, "reason": reason, "detail": detail, key: text}


class Auditor:
    """Applies events to per-table states and buffers what the store must receive.

    Used by :func:`audit_file`; the incident replay and tests use it directly.
    """

    def __init__(self) -> None:
        self.states: dict[str, TableState] = {}
        self.findings: list[Finding] = []
        self.rounds: list[dict[str, Any]] = []

    def apply(self, event: ev.DealingEvent) -> list[Finding]:
        """Apply one event; buffer its findings and, at ``RoundCompleted``, the round row.

        Raises:
            EventRejected: see :func:`streams.engine.apply`.
        """
        before = self.states.get(event.table_id)
        state, found = apply(before, event)
        self.states[event.table_id] = state
        if found:
            self.findings.extend(found)
        applied = state.last_event_id == event.event_id  # not an ignored duplicate
        if isinstance(event, ev.RoundCompleted) and applied and before is not None and before.round is not None:
            self.rounds.append(round_row(before.round, state, event))
        return found


def audit_file(
    path: Path,
    store: Store,
    dead_letter: IO[str] | None = None,
    progress: Callable[[int], None] | None = None,
    batch_lines: int = BATCH_LINES,
) -> AuditSummary:
    """Audit one JSON Lines event file into ``store``.

    Args:
        path: the event file (one event per line; blank lines are skipped).
        store: the DuckDB writer.
        dead_letter: a text stream receiving one JSON object per rejected line
            (``source``, ``line``, ``reason``, ``detail``, ``raw`` or ``raw_base64``).
        progress: called with the bytes read since the last call.
        batch_lines: events per store transaction.

    Returns:
        The run's :class:`AuditSummary`.

    Raises:
        OSError: the file cannot be read.
    """
    summary = AuditSummary()
    auditor = Auditor()
    raw_batch: list[bytes] = []
    dead_batch: list[dict[str, Any]] = []
    source = str(path)
    pending_bytes = 0

    def flush() -> None:
        nonlocal pending_bytes
        summary.written.add(store.write_batch(raw_batch, auditor.findings, auditor.rounds, dead_batch))
        for f in auditor.findings:
            if f.revision == 0:
                summary.detections[(f.game.value, f.rule_id, f.severity.value)] += 1
        raw_batch.clear()
        dead_batch.clear()
        auditor.findings.clear()
        auditor.rounds.clear()
        if progress is not None:
            progress(pending_bytes)
            pending_bytes = 0

    def reject(line_no: int, reason: str, detail: str, raw: bytes) -> None:
        rec = dead_letter_record(source, line_no, reason, detail, raw)
        summary.dead_letters[reason] += 1
        if dead_letter is not None:
            dead_letter.write(json.dumps(rec, ensure_ascii=False) + "\n")
        dead_batch.append(
            {
                "source": source,
                "position": f"line {line_no}",
                "reason": reason,
                "detail": detail,
                "raw": rec.get("raw", rec.get("raw_base64", "")),
            }
        )

    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, 1):
            pending_bytes += len(raw)
            if not raw.strip():
                continue
            summary.lines += 1
            try:
                event = decode(raw)
            except DecodeError as exc:
                reject(line_no, exc.reason, exc.detail, raw)
                continue
            try:
                auditor.apply(event)
            except EventRejected as exc:
                reject(line_no, exc.reason, exc.detail, raw)
                continue
            except Exception as exc:
                reject(line_no, "engine_error", f"{type(exc).__name__}: {exc}"[:500], raw)
                continue
            summary.events += 1
            raw_batch.append(raw)
            if len(raw_batch) >= batch_lines:
                flush()
    flush()
    summary.tables = len(auditor.states)
    return summary


def latest_statuses(store: Store) -> Counter[str]:
    """Count the latest status of every finding in the store."""
    rows = store.con.execute("SELECT status, count(*) FROM dim_findings GROUP BY status").fetchall()
    return Counter({str(s): int(n) for s, n in rows})
