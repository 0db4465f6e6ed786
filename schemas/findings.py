"""The ``Finding`` model: one breach of a rule, with its citation and the events that prove it."""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Annotated

from pydantic import AwareDatetime, Field

from schemas.base import Frozen, Game, Identifier


class Severity(StrEnum):
    """Rulebook section 5: ``voiding`` (the text prescribes a remedy the checker verifies),
    ``integrity`` (deck, shuffle, dice or exposure control failed) and ``procedural``."""

    VOIDING = "voiding"
    INTEGRITY = "integrity"
    PROCEDURAL = "procedural"


class FindingStatus(StrEnum):
    """``open`` until the required remedy is seen (or for review when none is prescribed),
    ``remedied`` once every remedy event arrived, ``overdue`` when the next round started first."""

    OPEN = "open"
    REMEDIED = "remedied"
    OVERDUE = "overdue"


def finding_id_for(rule_id: str, evidence_event_ids: tuple[str, ...]) -> str:
    """Return the deterministic finding ID for a rule and its evidence.

    Args:
        rule_id: the rulebook rule ID.
        evidence_event_ids: the event IDs that prove the finding, in evidence order.

    Returns:
        32 hex characters of SHA-256 over ``rule_id`` and the evidence IDs, so the same breach
        found twice (a replay, a redelivered message) gets the same ID.
    """
    text = rule_id + "|" + ",".join(evidence_event_ids)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class Finding(Frozen):
    """One breach of a rule at one table, as of one revision.

    A finding's status changes are new revisions with the same ``finding_id`` (append-only):
    revision 0 is the detection; later revisions record ``remedied`` or ``overdue``.

    Fields:
        finding_id: :func:`finding_id_for` of ``rule_id`` and ``evidence_event_ids``.
        revision: 0, 1, 2, ... per finding.
        rule_id, citation, game, severity: from the rule catalogue.
        provisional: True for the ``-PROV`` rules resting on analog text (rulebook section 7).
        table_id, round_id: where it happened (round_id None for table-level findings).
        evidence_event_ids: the events that prove the breach, in table order.
        required_remedy: what the regulation demands next, or None.
        status: see :class:`FindingStatus`.
        message: a sentence for the analyst.
        trigger_event_id / observed_at: the event that produced this revision and its time.
        remedy_event_ids: the events that carried out the remedy (revision ``remedied``).
        remedy_delay_seconds: seconds from detection to the last remedy event (seconds).
        late: True when the remedy came after the next round started.
        rulebook_revision: the rulebook revision the engine applied (1 for findings made before
            the field existed).
    """

    finding_id: Identifier
    revision: Annotated[int, Field(ge=0)] = 0
    rule_id: str
    citation: str
    game: Game
    severity: Severity
    provisional: bool = False
    table_id: Identifier
    round_id: Identifier | None
    evidence_event_ids: tuple[Identifier, ...]
    required_remedy: str | None = None
    status: FindingStatus = FindingStatus.OPEN
    message: str
    trigger_event_id: Identifier
    observed_at: AwareDatetime
    remedy_event_ids: tuple[Identifier, ...] = ()
    remedy_delay_seconds: float | None = None
    late: bool = False
    rulebook_revision: Annotated[int, Field(ge=1)] = 1
