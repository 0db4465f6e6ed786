"""Rows the projections need from the engine's state (pure: no I/O)."""

from __future__ import annotations

from typing import Any

from schemas import events as ev
from streams.engine.state import RoundState, TableState


def round_row(rnd: RoundState, state: TableState, event: ev.RoundCompleted) -> dict[str, Any]:
    """The ``rounds`` row of a round completed by ``event`` (``state`` is the table after it).

    ``deck_suspect`` is True when the round was dealt from a deck under a DT-deck-composition
    suspicion (rulebook section 8a and revision 2, decision 10.1.5: every later round on that
    deck is suspect until a ``DeckRemoved`` or a ``DeckVerified`` with result OK).
    """
    deck = state.decks.get(rnd.deck_id) if rnd.deck_id is not None else None
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
        "deck_suspect": deck is not None and deck.composition_flagged,
    }
