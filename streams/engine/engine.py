"""The pure core: ``apply(state, event) -> (state, findings)``.

The embedded audit, the incident replay and the Faust worker all call :func:`apply`; nothing
here does I/O, reads the clock or draws random numbers, so the same events always give the same
findings (stream = replay).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from schemas import events as ev
from schemas.base import Envelope, Game
from schemas.codec import encode
from schemas.findings import Finding
from streams.engine import remedies
from streams.engine.context import Step
from streams.engine.reducer import Draft, reduce, round_deck_id
from streams.engine.rules import chapter_691, integrity, pai_gow_poker, three_card_prime
from streams.engine.state import DeckState, TableState

GAP = "DT-sequence-gap"
CHAIN = "DT-chain-broken"
CHUNK = 64
"""Sequence-log entries per chunk of ``TableState.recent``."""
CHUNKS = 4
"""Chunks kept: duplicates are recognised up to CHUNK x CHUNKS = 256 events back per table.

The window is part of every table state (the worker writes it to its changelog), so it is kept
small; Kafka redeliveries never reach it (the worker skips messages at or below the offset its
state already holds), it catches duplicates in the source itself."""
RECALLED = CHUNK * (CHUNKS - 1) + 1
"""Exact copies of a table's last RECALLED events (at least) are always recognised: the window
holds between CHUNK x (CHUNKS - 1) + 1 and CHUNK x CHUNKS of them."""

GAME_RULES: dict[Game, tuple[Callable[[Step], list[Finding]], ...]] = {
    Game.TCP: (three_card_prime.check, integrity.check),
    Game.C691: (chapter_691.check, integrity.check),
    Game.PGP: (pai_gow_poker.check, integrity.check),
}
"""The rule modules each game runs, in order."""


class EventRejected(ValueError):
    """The event cannot be applied to this table; ``reason`` is a dead-letter reason code
    (``unconfigured_table``, ``game_mismatch``, ``table_mismatch``, ``implausible_seq_jump``,
    ``implausible_clock_skew``)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Plausibility:
    """The setting-dependent limits of rulebook 10.3.4, resolved by the caller from the settings
    (``DEALTRAIL_MAX_SEQ_JUMP``, ``DEALTRAIL_MAX_CLOCK_SKEW``).

    Attributes:
        max_seq_jump: how far (seqs) an event may be ahead of its table's last seq.
        max_clock_skew: how long an event's ``occurred_at`` may be after its own
            ``recorded_at``. The time between two events is never a limit: a table idle for
            weeks is normal.
        remedy_window: how long (event time) an owed remedy is awaited after its round ended
            (rulebook 10.3.5, ``DEALTRAIL_REMEDY_WINDOW``): the obligation then leaves the
            table's state and its finding stays overdue. None awaits remedies for ever (tests of
            the rules alone). It travels with these limits because every caller that applies
            events passes them.
    """

    max_seq_jump: int
    max_clock_skew: timedelta
    remedy_window: timedelta | None = None


def check_plausible(last_seq: int | None, event: Envelope, limits: Plausibility) -> None:
    """Refuse a record whose values no real trail holds (rulebook 10.3.4).

    Args:
        last_seq: the seq of the table's last applied event, or None when the table has no state
            (its trail starts at seq 1, so a first event is judged against 0).
        event: the event about to be applied (or chained).
        limits: the limits in force.

    Raises:
        EventRejected: ``implausible_seq_jump`` (the seq is more than ``max_seq_jump`` ahead
            of ``last_seq``) or ``implausible_clock_skew`` (``occurred_at`` more than
            ``max_clock_skew`` after ``recorded_at``). The table's state is left as it was: the
            next event is judged as if this one had not arrived.
    """
    last = 0 if last_seq is None else last_seq  # a table's trail starts at seq 1
    if event.seq - last > limits.max_seq_jump:
        raise EventRejected(
            "implausible_seq_jump",
            f"seq {event.seq} is {event.seq - last:,} ahead of the table's last seq {last} "
            f"(at most {limits.max_seq_jump:,}: DEALTRAIL_MAX_SEQ_JUMP)",
        )
    skew = event.occurred_at - event.recorded_at
    if skew > limits.max_clock_skew:
        raise EventRejected(
            "implausible_clock_skew",
            f"occurred_at {event.occurred_at.isoformat()} is {skew} after its recorded_at "
            f"{event.recorded_at.isoformat()} (at most {limits.max_clock_skew}: DEALTRAIL_MAX_CLOCK_SKEW)",
        )


def check_recorded(event: Envelope, now: datetime, limits: Plausibility, against: str = "this intake's clock") -> None:
    """Refuse a record stamped later than the intake that received it can have seen it.

    No capture system records an event after the moment it reaches dealtrail: an event whose
    ``recorded_at`` is more than ``max_clock_skew`` after the intake's own clock (a wrong clock,
    a year typed wrong) cannot be true, and stored it would move the store's newest event past
    every open period, making their reports final (issue 32). The intake (the audit, the
    publisher, the worker, the projector) reads its clock at the edge and passes it here: the
    engine reads none. An old file audited later is fine: only a time after ``now`` counts.

    Args:
        event: the event as received.
        now: the intake's clock (timezone-aware), read by the caller.
        limits: the limits in force (``max_clock_skew``).
        against: what ``now`` is, as the refusal names it (the stream passes the Kafka record's
            timestamp: every reader of the record then decides alike, whatever its own clock).

    Raises:
        EventRejected: ``recorded_in_future`` (``recorded_at`` more than ``max_clock_skew``
            after ``now``); the event is to be dead-lettered before it is chained or applied.
    """
    ahead = event.recorded_at - now
    if ahead > limits.max_clock_skew:
        raise EventRejected(
            "recorded_in_future",
            f"recorded_at {event.recorded_at.isoformat()} is {ahead} after {against} "
            f"({now.isoformat()}; at most {limits.max_clock_skew}: DEALTRAIL_MAX_CLOCK_SKEW)",
        )


def event_digest(event: ev.DealingEvent, raw: bytes | None = None) -> int:
    """CRC-32 of the event's bytes: tells an exact duplicate from a
    conflicting event with the same seq (it is only ever compared for one seq of one table).

    Args:
        event: the event.
        raw: the bytes it was decoded from (a file line, a Kafka message value); when None,
            the canonical JSON of :func:`schemas.codec.encode` is hashed.
    """
    data = encode(event) if raw is None else raw.rstrip(b"\r\n")
    return zlib.crc32(data)


def _lookup(recent: tuple[tuple[tuple[int, str, int], ...], ...], seq: int) -> tuple[int, str, int] | None:
    for chunk in reversed(recent):
        if chunk and chunk[0][0] <= seq:
            for entry in chunk:
                if entry[0] == seq:
                    return entry
    return None


def _remember(
    recent: tuple[tuple[tuple[int, str, int], ...], ...], entry: tuple[int, str, int]
) -> tuple[tuple[tuple[int, str, int], ...], ...]:
    if recent and len(recent[-1]) < CHUNK:
        return (*recent[:-1], (*recent[-1], entry))
    return (*recent[-(CHUNKS - 1) :], (entry,))


def apply(
    state: TableState | None, event: ev.DealingEvent, raw: bytes | None = None, limits: Plausibility | None = None
) -> tuple[TableState, list[Finding]]:
    """Apply one event of a table and return the new state and the findings it raises.

    Args:
        state: the table's state, or None if no event of the table was seen yet.
        event: a validated dealing event (see :func:`schemas.codec.decode`).
        raw: the bytes ``event`` was decoded from, if at hand: hashing them is cheaper than
            re-encoding the event to tell duplicates apart. Callers must be consistent per
            source (the simulator, the publisher and the audit all use the canonical encoding).
        limits: the plausibility limits of rulebook 10.3.4 (:func:`check_plausible`) and the
            remedy window of 10.3.5, from the settings; None checks none and awaits remedies for
            ever (tests and benchmarks of the rules alone).

    Returns:
        ``(new_state, findings)``. Findings are new findings (revision 0) and new revisions of
        earlier ones (remedied / overdue, an obligation past the remedy window, a further trigger
        on a suspect deck: rulebook 10.3.3 and 10.3.5). An exact duplicate of an applied event returns the
        state unchanged and no finding; a conflicting event with an old seq returns the state
        unchanged and a DT-sequence-gap finding; a seq jump raises DT-sequence-gap and the
        event is applied. In a chained trail, an event whose ``prev_hash`` is not the ``hash``
        of the table's previous event raises DT-chain-broken (the content hashes themselves are
        recomputed by ``dealtrail verify``).

    Raises:
        EventRejected: the table was never configured (its first event is not
            ``TableConfigured``), the event names another game or table than the state, or
            it is implausible (:func:`check_plausible`); the state is then unchanged.
    """
    if limits is not None:
        check_plausible(None if state is None else state.last_seq, event, limits)
    if state is None:
        if not isinstance(event, ev.TableConfigured):
            raise EventRejected(
                "unconfigured_table", f"table {event.table_id!r} has no TableConfigured event before this {event.type}"
            )
        if event.config.game != event.game:
            raise EventRejected("game_mismatch", f"TableConfigured for {event.config.game} in an event of {event.game}")
        state = TableState(table_id=event.table_id, game=event.game, config=event.config)
    elif event.table_id != state.table_id:
        raise EventRejected("table_mismatch", f"event of {event.table_id!r} applied to {state.table_id!r}")
    elif event.game != state.game or (type(event) is ev.TableConfigured and event.config.game != state.game):
        raise EventRejected("game_mismatch", f"table {state.table_id!r} deals {state.game}, event says {event.game}")

    digest = zlib.crc32(encode(event) if raw is None else raw.rstrip(b"\r\n"))  # as event_digest
    findings: list[Finding] = []
    seq = event.seq
    if seq <= state.last_seq:
        prior = _lookup(state.recent, seq)
        if prior is not None and prior[1] == event.event_id and prior[2] == digest:
            return state, []
        step = Step(state, state, event)
        what = "different content" if prior is not None and prior[1] == event.event_id else "another event"
        if prior is None:
            what = "an event too old to compare"
        findings.append(
            step.finding(
                GAP,
                (prior[1] if prior else None, event.event_id),
                f"seq {seq} arrived again with {what}; the trail is contradictory here.",
            )
        )
        return state, findings
    if seq != state.last_seq + 1:
        step = Step(state, state, event)
        findings.append(
            step.finding(
                GAP,
                (state.last_event_id, event.event_id),
                f"seq jumped from {state.last_seq} to {seq}: {seq - state.last_seq - 1} events missing.",
            )
        )

    # the draft: a shallow copy of the state with the sequence log advanced (cf. Draft.__init__)
    fields = state.__dict__.copy()
    fields["last_seq"] = seq
    fields["last_event_id"] = event.event_id
    fields["recent"] = _remember(state.recent, (seq, event.event_id, digest))
    event_hash = event.hash
    if event_hash is not None or state.last_hash is not None:
        if state.last_hash is not None and event.prev_hash != state.last_hash:
            step = Step(state, state, event)
            what = "carries no hash" if event_hash is None else "does not link to the event before it"
            findings.append(
                step.finding(CHAIN, (state.last_event_id, event.event_id), f"Hash chain broken: seq {seq} {what}.")
            )
        if event_hash is not None:
            fields["last_hash"] = event_hash
    draft = Draft.of(fields)
    reduce(draft, event)
    after = draft.state
    step = Step(state, after, event)
    for check in _checks(after.game, type(event)):
        found = check(step)
        if found:
            findings.extend(found)
    if findings:
        if not after.config.provisional_rules:
            findings = [f for f in findings if not f.provisional]
        after = _mark(step, after, findings)
    if not after.obligations:
        if findings:
            new_obligations = remedies.open_obligations(step, findings)
            if new_obligations:
                after = after.model_copy(update={"obligations": new_obligations})
        return after, findings
    window = limits.remedy_window if limits is not None else None
    after, expired = remedies.expire(step, after, window)
    after, revisions = remedies.progress(after, event)
    after, overdue = remedies.deadline(step, after)
    new_obligations = remedies.open_obligations(step, findings)
    if new_obligations:
        after = after.model_copy(update={"obligations": (*after.obligations, *new_obligations)})
    return after, findings + expired + revisions + overdue


Check = Callable[[Step], list[Finding]]
READS: dict[Check, frozenset[type[Envelope]]] = {
    three_card_prime.check: three_card_prime.READS,
    chapter_691.check: chapter_691.READS,
    pai_gow_poker.check: pai_gow_poker.READS,
    integrity.check: integrity.READS,
}
"""The event types each rule module reads: :func:`apply` calls a module only for those (a
check not listed here is called for every event)."""
_dispatch: dict[tuple[Game, type[Envelope]], tuple[Check, ...]] = {}
_dispatch_of: object = None


def _checks(game: Game, etype: type[Envelope]) -> tuple[Check, ...]:
    """The checks of ``game`` that read events of ``etype``, in ``GAME_RULES`` order (memoised;
    rebuilt if ``GAME_RULES`` is replaced)."""
    global _dispatch_of  # noqa: PLW0603  # a memo of GAME_RULES, not state: same input, same answer
    if _dispatch_of is not GAME_RULES:
        _dispatch.clear()
        _dispatch_of = GAME_RULES
    checks = _dispatch.get((game, etype))
    if checks is None:
        checks = tuple(c for c in GAME_RULES[game] if etype in READS.get(c, (etype,)))
        _dispatch[game, etype] = checks
    return checks


def _mark(step: Step, state: TableState, findings: list[Finding]) -> TableState:
    """Remember which once-per-round rules fired, and the open DT-deck-composition finding of a
    suspect deck (its latest revision, rulebook 10.3.3)."""
    if not findings:
        return state
    update: dict[str, object] = {}
    rnd = state.round
    if rnd is not None:
        ids = {f.rule_id for f in findings if f.round_id == rnd.round_id}
        if ids - rnd.fired:
            update["round"] = rnd.model_copy(update={"fired": rnd.fired | ids})
    decks: Mapping[str, DeckState] = state.decks
    for f in findings:
        if f.rule_id == integrity.COMPOSITION:
            deck_id = round_deck_id(state, step.event)
            if deck_id is not None and deck_id in decks:
                deck = decks[deck_id].model_copy(update={"composition_flagged": True, "composition_finding": f})
                decks = {**decks, deck_id: deck}
    if decks is not state.decks:
        update["decks"] = decks
    return state.model_copy(update=update) if update else state


def fold(
    events: Iterable[ev.DealingEvent], state: TableState | None = None, limits: Plausibility | None = None
) -> tuple[TableState | None, list[Finding]]:
    """Apply events of one table in order; the only loop over events in the engine.

    Returns:
        The final state and every finding (and revision) in the order raised.

    Raises:
        EventRejected: as :func:`apply`.
    """
    out: list[Finding] = []
    for event in events:
        state, found = apply(state, event, limits=limits)
        out.extend(found)
    return state, out
