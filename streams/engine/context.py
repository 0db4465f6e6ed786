"""What a rule sees while one event is applied: the state before and after, and a finding builder."""

from __future__ import annotations

from schemas.config import TableConfig
from schemas.events import DealingEvent, RoundCompleted
from schemas.findings import Finding, finding_id_for
from streams.engine.catalog import RULEBOOK_REVISION, RULES_BY_ID
from streams.engine.reducer import DEAL_CLOSERS
from streams.engine.state import RoundState, TableState


class Step:
    """One application of an event: ``before`` and ``after`` are the table states around it.

    ``round`` is the round the event belongs to (after the event; None between rounds).
    Treat it as read-only.
    """

    __slots__ = ("after", "before", "config", "event", "round")

    def __init__(self, before: TableState, after: TableState, event: DealingEvent) -> None:
        self.before = before
        self.after = after
        self.event = event
        self.config: TableConfig = after.config
        """The table's configuration."""
        rnd = after.round if after.round is not None else before.round
        if rnd is not None and event.round_id is not None and event.round_id != rnd.round_id:
            rnd = None
        self.round: RoundState | None = rnd
        """The round the event belongs to: the round in progress after it (or the one it
        completed); None between rounds and for a late event stamped with another round.
        Computed once per event (every rule reads it)."""

    def deal_closed(self) -> RoundState | None:
        """The round whose deal ends with this event, as it stands then, else None.

        The deal ends at the first ``DEAL_CLOSERS`` event after a card was dealt; when that is
        the ``RoundCompleted`` itself, the round is read from the state before it.
        """
        if type(self.event) not in DEAL_CLOSERS:  # no other event ends a deal
            return None
        before = self.before.round
        if before is None or before.deal_closed or before.cards_dealt == 0:
            return None
        after = self.after.round
        if after is not None and after.round_id == before.round_id:
            return after if after.deal_closed else None
        return before if type(self.event) is RoundCompleted else None

    def fired(self, rule_id: str) -> bool:
        """True if a once-per-round rule already fired in this round."""
        rnd = self.before.round
        return rnd is not None and rule_id in rnd.fired

    def finding(
        self,
        rule_id: str,
        evidence: tuple[str | None, ...],
        message: str,
        round_id: str | None = None,
    ) -> Finding:
        """Build the revision-0 finding of ``rule_id`` triggered by this event.

        Args:
            rule_id: a catalogue rule ID.
            evidence: the proving event IDs (None entries are dropped; duplicates kept once,
                first occurrence first).
            message: a sentence for the analyst.
            round_id: the round, defaulting to the event's round or the round in progress.

        Raises:
            KeyError: ``rule_id`` is not in the catalogue.
        """
        spec = RULES_BY_ID[rule_id]
        ids = tuple(dict.fromkeys(e for e in evidence if e is not None))
        if round_id is None:
            round_id = self.event.round_id
            if round_id is None and self.round is not None:
                round_id = self.round.round_id
        return Finding(
            finding_id=finding_id_for(rule_id, ids),
            rule_id=rule_id,
            citation=spec.citation,
            game=self.after.game,
            severity=spec.severity,
            provisional=spec.provisional,
            table_id=self.after.table_id,
            round_id=round_id,
            evidence_event_ids=ids,
            required_remedy=spec.required_remedy,
            message=message,
            trigger_event_id=self.event.event_id,
            observed_at=self.event.occurred_at,
            rulebook_revision=RULEBOOK_REVISION,
        )
