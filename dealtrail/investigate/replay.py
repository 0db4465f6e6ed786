"""After-the-fact incident replay: rebuild one table's exact state at any moment from the stored
trail (the DuckDB ``events`` table, or the Kafka events topic) with the same engine, and check
that the replayed findings equal the stored ones.

A difference means a changed rule or a tampered store; the replay lists each difference with
the event it starts at.

A replay from the store starts from the latest snapshot of the table (``table_snapshots``,
same engine version and rulebook revision) that ends before the first event it must show, after
checking it against the stored trail (:func:`snapshot_start`); a snapshot that does not check
out is skipped, and said. Without a usable one it starts at the table's first event.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from projections.store import summaries
from schemas import events as ev
from schemas.codec import DecodeError, decode
from schemas.findings import Finding
from streams.engine import EventRejected, Plausibility, TableState, apply
from streams.engine.catalog import ENGINE_VERSION, RULEBOOK_REVISION, RULES_BY_ID, Remedy
from streams.engine.state import DeckState, load_state

if TYPE_CHECKING:
    import duckdb

    from dealtrail.settings import Settings


class ReplayError(ValueError):
    """The replay cannot run: unknown table, empty window, bad ``--at``."""


@dataclass(frozen=True)
class Window:
    """Which part of the table's trail to show: a round, a time span [start, end), or all.

    ``near`` (optional, with a round): a moment of the round, such as a finding's detection; the
    round's first and last stored events are then looked for within :data:`ROUND_NEAR` of it
    first (the store keeps its batches of events in arrival order, so a time bound reads those hours' row
    groups, not the history), and in the whole history only if none is there."""

    round_id: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    near: datetime | None = None

    def shows(self, event: ev.DealingEvent) -> bool:
        """True if ``event`` is inside the window: of its round, if it names one, and within
        [start, end) where those are set (a round with a span: the round's events in it)."""
        if self.round_id is not None and event.round_id != self.round_id:
            return False
        if self.start is not None and event.occurred_at < self.start:
            return False
        return not (self.end is not None and event.occurred_at >= self.end)


@dataclass
class Step:
    """One replayed event: the event, the table state after it and the findings it raised."""

    event: ev.DealingEvent
    state: TableState
    findings: list[Finding]


@dataclass
class Difference:
    """A finding revision present on one side only: ``side`` is ``"replay only"`` or ``"stored only"``."""

    side: str
    finding_id: str
    revision: int
    status: str
    rule_id: str
    trigger_event_id: str
    round_id: str | None


@dataclass
class ReplayResult:
    """The replay of one table.

    Attributes:
        table_id: the table.
        steps: the replayed events inside the window, in seq order.
        state_at: the state as of ``--at`` (None without it); at_event: the event it is as of.
        replayed / stored: finding revisions of the window, as replayed and as stored.
        differences: revisions on one side only (empty when replay == store).
        unreadable: stored events that no longer decode (event ID and reason).
        cards: event ID -> card face of every ``CardDealt`` replayed (for layouts).
        removed_before: the decks already removed from the table before the window's first
            event, with their state then (a table changes decks every shift or so: after a month
            its state names hundreds of removed decks; a view of the window leaves out each while
            its state is still that one, so a deck brought back inside the window is shown).
        conflicts: the table's stored records that claim an event ID of the window with other
            content than the record the trail keeps (:mod:`projections.models.conflicts`), as
            JSON: both records' seqs and arrivals, the fields that differ; filled from the
            store by the caller (the replay itself reads only the trail).
    """

    table_id: str
    steps: list[Step] = field(default_factory=list)
    state_at: TableState | None = None
    at_event: ev.DealingEvent | None = None
    replayed: list[Finding] = field(default_factory=list)
    stored: list[Finding] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    cards: dict[str, tuple[str, str]] = field(default_factory=dict)
    events_total: int = 0
    compared: bool = False
    start: SnapshotStart | None = None
    removed_before: Mapping[str, DeckState] = field(default_factory=dict)
    conflicts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def matches(self) -> bool:
        """True if the replayed findings equal the stored ones and every event decoded."""
        return not self.differences and not self.unreadable

    def first_difference_event(self) -> str | None:
        """The earliest trigger event among the differences."""
        order = {s.event.event_id: i for i, s in enumerate(self.steps)}
        ids = sorted((order.get(d.trigger_event_id, 10**12), d.trigger_event_id) for d in self.differences)
        return ids[0][1] if ids else None


@dataclass
class SnapshotStart:
    """Where a replay from the store starts.

    Attributes:
        state: the snapshot's state (None: the table's first event).
        last_seq: the seq of the snapshot's last event (0 without one): the replay applies the
            stored events after it.
        last_event_id: that event's ID (None without a snapshot).
        skipped: one sentence per snapshot that was tried and did not check out.
    """

    state: TableState | None = None
    last_seq: int = 0
    last_event_id: str | None = None
    skipped: list[str] = field(default_factory=list)


ROUND_NEAR = timedelta(hours=12)
"""How far from :attr:`Window.near` a round's events are looked for first (a round lasts minutes)."""


def round_seqs(
    con: duckdb.DuckDBPyConnection, table_id: str, round_id: str, near: datetime | None = None
) -> tuple[int, int] | None:
    """The first and last seq of the round's stored events, in one read (None: none stored); with
    ``near``, looked for within :data:`ROUND_NEAR` of it first, then in the whole history."""
    sql = "SELECT min(seq), max(seq) FROM events WHERE table_id = $t AND round_id = $r"
    params: dict[str, Any] = {"t": table_id, "r": round_id}
    if near is not None:
        row = con.execute(
            sql + " AND occurred_at BETWEEN $lo AND $hi", {**params, "lo": near - ROUND_NEAR, "hi": near + ROUND_NEAR}
        ).fetchone()
        if row and row[0] is not None:
            return int(row[0]), int(row[1])
    row = con.execute(sql, params).fetchone()
    return None if not row or row[0] is None else (int(row[0]), int(row[1]))


def _first_seq_needed(
    con: duckdb.DuckDBPyConnection,
    table_id: str,
    window: Window,
    at: str | None,
    round_bounds: tuple[int, int] | None = None,
) -> int | None:
    """The lowest seq the replay must apply to show ``window`` and the state ``at`` (with the
    whole round in progress then, for its layout); None when it must start at the first event
    (no window and no ``at``, or a window or ``at`` that names no stored event: the replay from
    the start says so). ``round_bounds``: the window's round's :func:`round_seqs`, when the
    caller has read them."""
    bounds: list[int | None] = []

    def one(sql: str, params: list[Any]) -> int | None:
        rows = con.execute(sql, params).fetchall()
        return None if not rows or rows[0][0] is None else int(rows[0][0])

    def round_start(seq: int | None, round_id: str | None) -> int | None:
        if seq is None or round_id is None:
            return seq
        first = one("SELECT min(seq) FROM events WHERE table_id = ? AND round_id = ?", [table_id, round_id])
        return min(seq, first) if first is not None else seq

    if window.round_id is not None:
        seqs = round_bounds or round_seqs(con, table_id, window.round_id, window.near)
        bounds.append(seqs[0] if seqs else None)
    elif window.start is not None or window.end is not None:
        bounds.append(
            one(
                """SELECT min(seq) FROM events WHERE table_id = ?
                   AND (?::TIMESTAMPTZ IS NULL OR occurred_at >= ?) AND (?::TIMESTAMPTZ IS NULL OR occurred_at < ?)""",
                [table_id, window.start, window.start, window.end, window.end],
            )
        )
    matcher = _at_matcher(at)
    if matcher is not None:
        kind, value = matcher
        if kind == "id":
            row = con.execute(
                "SELECT seq, round_id FROM events WHERE table_id = ? AND event_id = ? ORDER BY seq, arrival LIMIT 1",
                [table_id, value],
            ).fetchall()
        else:
            row = con.execute(
                """SELECT seq, round_id FROM events WHERE table_id = ? AND occurred_at <= ?
                   ORDER BY seq DESC, arrival DESC LIMIT 1""",
                [table_id, value],
            ).fetchall()
        bounds.append(round_start(int(row[0][0]), row[0][1]) if row else None)
    if not bounds or any(b is None for b in bounds):
        return None
    return min(b for b in bounds if b is not None)


def snapshot_start(
    con: duckdb.DuckDBPyConnection,
    table_id: str,
    window: Window = Window(),
    at: str | None = None,
    engine_version: str = ENGINE_VERSION,
    rulebook_revision: int = RULEBOOK_REVISION,
    round_bounds: tuple[int, int] | None = None,
) -> SnapshotStart:
    """The latest stored snapshot of ``table_id`` that a replay of ``window`` (and ``at``) can
    start from, checked against the stored trail.

    Only snapshots of this engine version and rulebook revision that end before the first
    event to show are candidates, latest first. One is used if its state's SHA-256 is the one
    stored with it, the stored trail holds its last event (same seq, event ID and chain hash),
    the table has as many stored events up to that seq as when it was written (no event with
    such a seq came later), and the state loads and names that event. Each one that fails is
    skipped, with a sentence in ``skipped``, and the next earlier one tried. ``round_bounds``:
    the first and last seq of the window's round (:func:`round_seqs`) when the caller has read
    them (read here otherwise).

    Returns:
        The :class:`SnapshotStart` (an empty one: start at the first event).
    """
    out = SnapshotStart()
    need = _first_seq_needed(con, table_id, window, at, round_bounds)
    if need is None:
        return out
    # the late record is trusted only while it holds every late event of the store (else: counting)
    late = summaries.late_record_current(con)
    candidates = con.execute(
        f"""SELECT last_seq, last_event_id, last_hash, events_through, state_sha256,
                   {"late_through" if late else "NULL::BIGINT"}, last_occurred_at
            FROM table_snapshots
            WHERE table_id = ? AND engine_version = ? AND rulebook_revision = ? AND last_seq < ?
            ORDER BY last_seq DESC, last_occurred_at DESC""",
        [table_id, engine_version, rulebook_revision, need],
    ).fetchall()
    for last_seq, last_event_id, last_hash, events_through, sha, late_through, last_at in candidates:
        why = _snapshot_problem(
            con, table_id, int(last_seq), str(last_event_id), last_hash, int(events_through), late_through, last_at
        )
        state = None
        if why is None:
            rows = con.execute(
                """SELECT state::VARCHAR FROM table_snapshots WHERE table_id = ? AND last_seq = ? AND last_event_id = ?
                   AND engine_version = ? AND state_sha256 = ?""",
                [table_id, last_seq, last_event_id, engine_version, sha],
            ).fetchall()
            text = str(rows[0][0]) if rows else ""
            if hashlib.sha256(text.encode()).hexdigest() != sha:
                why = "its state does not match its SHA-256"
            else:
                try:
                    state = load_state(text)
                except ValueError as exc:
                    why = f"its state does not load ({type(exc).__name__})"
        if state is not None and (
            state.table_id != table_id or state.last_seq != last_seq or state.last_event_id != last_event_id
        ):
            why, state = "its state is not the one of its last event", None
        if state is None:
            out.skipped.append(f"snapshot of {table_id} at seq {last_seq} ({last_event_id}) skipped: {why}")
            continue
        out.state, out.last_seq, out.last_event_id = state, int(last_seq), str(last_event_id)
        return out
    return out


def _snapshot_problem(
    con: duckdb.DuckDBPyConnection,
    table_id: str,
    seq: int,
    event_id: str,
    chain_hash: str | None,
    through: int,
    late_through: int | None,
    at: datetime | None = None,
) -> str | None:
    """Why the snapshot of ``table_id`` after ``seq`` (``event_id``, ``chain_hash``) cannot start
    a replay, or None: the stored trail must hold that event, and no event with a seq at or
    below ``seq`` may have been stored after the snapshot (it would be applied before the
    snapshot's end by a replay from the first event). The second holds if the table's late
    events up to ``seq`` (``sum_late_events``) are as many as when the snapshot was written
    (``late_through``: every event stored after it with such a seq is late); otherwise, or
    without ``late_through``, the table's events up to ``seq`` are counted and compared with
    ``through``, the count when it was written. ``at``: the snapshot's ``last_occurred_at``,
    the time of its last event, where that event is looked for first (the store's zone maps then
    read a few row groups, not the table's history); elsewhere only if it is not there."""
    last = """SELECT count(*) FROM events WHERE table_id = $t AND seq = $seq AND event_id = $id
              AND ($hash IS NULL OR payload->>'hash' = $hash)"""
    params: dict[str, Any] = {"seq": seq, "id": event_id, "hash": chain_hash, "t": table_id}
    found = 0
    if at is not None:
        found = con.execute(last + " AND occurred_at = $at", {**params, "at": at}).fetchall()[0][0]
    if not found:
        found = con.execute(last, params).fetchall()[0][0]
    if not found:
        return "the stored trail has no such last event"
    if late_through is not None:
        late = con.execute(
            "SELECT count(*) FROM sum_late_events WHERE table_id = ? AND seq <= ?", [table_id, seq]
        ).fetchall()[0][0]
        if late == late_through:
            return None
    # the count reads two narrow columns of the table's whole history
    total_row = con.execute("SELECT count(*) FROM events WHERE table_id = ? AND seq <= ?", [table_id, seq]).fetchall()
    total = int(total_row[0][0]) if total_row else 0
    if total != through:
        return f"the stored trail has {total} events up to its seq, it was made after {through}"
    return None


def stored_events(con: duckdb.DuckDBPyConnection, table_id: str, after_seq: int = 0) -> Iterator[tuple[str, str]]:
    """The table's stored events as ``(event_id, payload JSON)`` in seq order (arrival order within a seq:
    the file line or Kafka offset they came from); with ``after_seq``, only those after that seq."""
    cur = con.execute(
        "SELECT event_id, payload::VARCHAR FROM events WHERE table_id = ? AND seq > ? ORDER BY seq, arrival",
        [table_id, after_seq],
    )
    while rows := cur.fetchmany(10_000):
        for event_id, payload in rows:
            yield str(event_id), str(payload)


def stored_findings(con: duckdb.DuckDBPyConnection, table_id: str, after_seq: int = 0) -> list[Finding]:
    """Every stored finding revision of the table in the latest generation (the one named by
    ``SET VARIABLE dealtrail_generation``, if any); with ``after_seq``, only those raised by an
    event after that seq."""
    cols = [
        "finding_id", "revision", "rule_id", "citation", "game", "severity", "provisional", "table_id",
        "round_id", "evidence_event_ids", "required_remedy", "status", "message", "trigger_event_id",
        "observed_at", "remedy_event_ids", "remedy_delay_seconds", "late",
    ]  # fmt: skip
    rows = con.execute(
        f"""SELECT {", ".join(cols)} FROM findings_generation WHERE table_id = ?
            AND (? = 0 OR trigger_event_id IN (SELECT event_id FROM events WHERE table_id = ? AND seq > ?))""",
        [table_id, after_seq, table_id, after_seq],
    ).fetchall()
    out = []
    for row in rows:
        rec = dict(zip(cols, row, strict=True))
        rec["evidence_event_ids"] = tuple(rec["evidence_event_ids"])
        rec["remedy_event_ids"] = tuple(rec["remedy_event_ids"])
        out.append(Finding.model_validate(rec))
    return out


def kafka_events(
    settings: Settings, table_id: str, note: Callable[[str], None] | None = None
) -> Iterator[tuple[str, str]]:
    """The table's events read from the events topic (its partition, from the beginning).

    The table's partition is found from the data, whatever partitioner its producer used
    (:func:`streams.kafka.read_table`); ``note`` is told which partition was read, and which were
    searched first. Only records keyed by the table whose event is the table's are part of its
    trail, as in the worker and the projector (:func:`streams.kafka.key_mismatch`).

    Raises:
        ReplayError: the events topic does not exist.
        TimeoutError: a partition could not be read in 60 seconds.
    """
    from kafka import KafkaConsumer

    from streams.kafka import consumer_config, key_mismatch, read_table

    topic = settings.topics.events.name
    consumer = KafkaConsumer(
        **consumer_config(settings.kafka, "dealtrail-replay", one_shot=True), enable_auto_commit=False
    )
    try:
        parts = consumer.partitions_for_topic(topic)
    finally:
        consumer.close()
    if not parts:
        raise ReplayError(f"no topic {topic} at {settings.kafka.bootstrap}")
    key = table_id.encode()
    found = read_table(settings.kafka, topic, len(parts), key, one_shot=True)
    if note is not None:
        if found.partition is None:
            note(f"no record keyed {table_id!r} in any of the {len(parts)} partitions of {topic}")
        else:
            before = ", ".join(str(p) for p in found.searched[:-1])
            note(
                f"table {table_id}: read {topic}[{found.partition}], {len(found.records):,} record(s) keyed by it"
                + (f" (partitions {before} read first hold none)" if before else "")
            )
        for bad in found.unreadable:
            note(f"{bad.position} cannot be read ({bad.error[:200]}): passed over as an unreadable batch")
    for r in found.records:
        if not r.value:
            continue
        # headers are read and ignored (the producer contract): the event ID is the event's own;
        # only an event that does not decode is named by an ``event_id`` header, if it has one
        event_id = dict(r.headers or []).get("event_id", b"").decode("utf-8", "replace")
        try:
            event = decode(r.value)
            if key_mismatch(r.key, event) is not None:
                continue  # keyed as this table, but another table's event: not part of this trail
            event_id = event.event_id
        except DecodeError:
            pass  # kept: the replay lists it as unreadable
        yield event_id, r.value.decode("utf-8", "replace")


def _at_matcher(at: str | None) -> tuple[str, Any] | None:
    if at is None:
        return None
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        return ("id", at)
    if when.tzinfo is None:
        raise ReplayError(f"--at time needs a time zone: {at!r}")
    return ("time", when)


def replay(
    table_id: str,
    trail: Iterable[tuple[str, str]],
    stored: list[Finding] | None,
    window: Window = Window(),
    at: str | None = None,
    start: SnapshotStart | None = None,
    limits: Plausibility | None = None,
) -> ReplayResult:
    """Re-apply a table's stored events through the engine.

    Args:
        table_id: the table.
        trail: ``(event_id, payload JSON)`` in seq order (see :func:`stored_events`).
        stored: the stored finding revisions of the table to compare with (None: no comparison).
        window: which events to keep as steps and which findings to compare.
        at: an event ID or an ISO 8601 instant: ``state_at`` is the state as of it; without a
            window, the steps (and the findings compared) stop there too.
        start: the snapshot to start from (:func:`snapshot_start`); ``trail`` then holds the
            events after it only. None: ``trail`` is the whole trail.
        limits: the plausibility limits of rulebook 10.3.4 (``settings.plausibility``), as the
            audit applied them: a refused event is listed as unreadable. None checks none.

    Returns:
        The :class:`ReplayResult`.

    Raises:
        ReplayError: the trail is empty, ``at`` names no event of the trail, or the window's
            round has no event.
    """
    result = ReplayResult(table_id, start=start)
    matcher = _at_matcher(at)
    state: TableState | None = start.state if start is not None else None
    for event_id, payload in trail:
        result.events_total += 1
        try:
            event = decode(payload)
        except DecodeError as exc:
            result.unreadable.append((event_id, f"{exc.reason}: {exc.detail}"))
            continue
        before = state
        try:
            state, found = apply(state, event, limits=limits)
        except EventRejected as exc:
            result.unreadable.append((event.event_id, f"{exc.reason}: {exc.detail}"))
            continue
        if isinstance(event, ev.CardDealt):
            result.cards[event.event_id] = (event.card, event.face.value)
        if matcher is not None:
            kind, value = matcher
            if (kind == "id" and result.at_event is None and event.event_id == value) or (
                kind == "time" and event.occurred_at <= value
            ):
                result.state_at, result.at_event = state, event
        if window.shows(event):
            if not result.steps and before is not None:
                result.removed_before = {k: d for k, d in before.decks.items() if d.removed}
            result.steps.append(Step(event, state, found))
            result.replayed.extend(found)
    if result.events_total == 0:
        raise ReplayError(f"no stored event for table {table_id!r}")
    if matcher is not None and result.at_event is None:
        raise ReplayError(f"--at {at!r} matches no event of table {table_id!r}")
    if window.round_id is not None and not result.steps:
        raise ReplayError(f"no stored event of round {window.round_id!r} at table {table_id!r}")
    if result.at_event is not None and window == Window():
        # no window asked for: show the trail up to the --at point, not past it
        last = next(i for i, s in enumerate(result.steps) if s.event is result.at_event)
        del result.steps[last + 1 :]
        kept = {s.event.event_id for s in result.steps}
        result.replayed = [f for f in result.replayed if f.trigger_event_id in kept]
    if stored is not None:
        result.compared = True
        in_window = {s.event.event_id for s in result.steps}
        result.stored = [f for f in stored if f.trigger_event_id in in_window]
        _compare(result)
    return result


def _compare(result: ReplayResult) -> None:
    def key(f: Finding) -> tuple[str, int, str]:
        return (f.finding_id, f.revision, f.status.value)

    replayed = {key(f): f for f in result.replayed}
    stored = {key(f): f for f in result.stored}
    for side, mine, other in (("replay only", replayed, stored), ("stored only", stored, replayed)):
        for k in sorted(set(mine) - set(other)):
            f = mine[k]
            result.differences.append(
                Difference(side, f.finding_id, f.revision, f.status.value, f.rule_id, f.trigger_event_id, f.round_id)
            )


def layout(state: TableState, cards: dict[str, tuple[str, str]]) -> list[dict[str, Any]]:
    """The round in progress as rows: layout area, cards in deal order with their face."""
    rnd = state.round
    if rnd is None:
        return []
    return [
        {"area": area, "cards": [(eid, *cards.get(eid, ("UNKNOWN", "DOWN"))) for eid in ids]}
        for area, ids in sorted(rnd.cards.items())
    ]


def describe_state(state: TableState) -> dict[str, Any]:
    """What an investigator needs of a state: round, stub window, devices, open remedies."""
    rnd = state.round
    return {
        "round_id": rnd.round_id if rnd else None,
        "dealer_id": rnd.dealer_id if rnd else None,
        "cards_dealt": rnd.cards_dealt if rnd else 0,
        "burns": len(rnd.cards.get("BURN", ())) if rnd else 0,
        "community": sum(
            len(v) for k, v in rnd.cards.items() if k.startswith("COMMUNITY") or k.startswith("PAIR_BONUS_C")
        )
        if rnd
        else 0,
        "stub_count": rnd.stub_count if rnd else None,
        "rounds_since_stub_count": state.stub_run,
        "stub_window": state.config.stub_count_window,
        "exempt_round": rnd.exempt if rnd else None,
        "devices": {
            k: (
                "out of service"
                if d.out_of_service
                else "faulted"
                if k in state.unusable or k in state.faults
                else "in service"
            )
            for k, d in sorted(state.devices.items())
        },
        "open_remedies": [
            {
                "rule_id": ob.finding.rule_id,
                "round_id": ob.round_id,
                "pending": [Remedy(p).value for p in ob.pending],
                "overdue": ob.deadline_passed,
            }
            for ob in state.obligations
        ],
    }


def rule_summary(rule_id: str) -> str:
    """The rule's paraphrase from the catalogue (empty for an unknown ID)."""
    spec = RULES_BY_ID.get(rule_id)
    return spec.summary if spec else ""


def shown_rounds(round_ids: Sequence[str | None]) -> list[str]:
    """The round each replayed event is shown under, one per event: its own round; an event
    between rounds (``None``, such as a shuffle) that lies between two events of the same round
    is shown inside that round, so a round is never split in two around it; any other event
    between rounds is shown under ``"between rounds"``.

    Args:
        round_ids: the events' ``round_id`` in replay order.
    """
    after: list[str | None] = [None] * len(round_ids)  # the next event's round, from the right
    nxt: str | None = None
    for i in range(len(round_ids) - 1, -1, -1):
        after[i] = nxt
        nxt = round_ids[i] if round_ids[i] is not None else nxt
    shown: list[str] = []
    before: str | None = None
    for i, rid in enumerate(round_ids):
        if rid is not None:
            shown.append(rid)
            before = rid
        else:
            shown.append(before if before is not None and before == after[i] else "between rounds")
    return shown
