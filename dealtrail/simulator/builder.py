"""Stamps dealing events for one table: envelope, per-table seq, a clock that moves forward.

Used by the simulator and by the tests' factories, so hand-written sequences and simulated
shifts are built the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from schemas.base import Actor, ActorRole, Envelope, Game, Source
from schemas.chain import Chainer

E = TypeVar("E", bound=Envelope)
_UNSET: Any = object()


class TableWriter:
    """Builds the events of one table in order.

    Args:
        table_id: the table.
        game: its game.
        start: the time of the first event (timezone-aware).
        new_id: ``(table_id, seq, occurred_at) -> event_id``; defaults to ``"<table>-<seq>"``.
        chained: stamp the hash chain (``prev_hash``, ``hash``) on every event.

    Attributes:
        round_id / deck_id: stamped on every event until changed (``round_id`` None between rounds).
        dealer_id: the dealer acting (actor of DEALER events).
        seq: the last seq used; clock: the last event's time.
    """

    def __init__(
        self,
        table_id: str,
        game: Game,
        start: datetime,
        new_id: Callable[[str, int, datetime], str] | None = None,
        chained: bool = False,
    ) -> None:
        self.table_id = table_id
        self.game = game
        self.clock = start
        self.seq = 0
        self.round_id: str | None = None
        self.deck_id: str | None = None
        self.dealer_id = "D-0001"
        self._new_id = new_id or (lambda table, seq, _t: f"{table}-{seq:06d}")
        self.chainer: Chainer | None = Chainer() if chained else None

    def emit(
        self,
        cls: type[E],
        *,
        after: float = 1.0,
        round_id: str | None = _UNSET,
        deck_id: str | None = _UNSET,
        source: Source = Source.MANUAL,
        role: ActorRole = ActorRole.DEALER,
        actor_id: str | None = None,
        **fields: Any,
    ) -> E:
        """Build the next event of class ``cls``, ``after`` seconds after the previous one.

        Raises:
            pydantic.ValidationError: the fields do not fit the event's schema.
        """
        self.seq += 1
        self.clock = self.clock + timedelta(seconds=after)
        event = cls(
            event_id=self._new_id(self.table_id, self.seq, self.clock),
            table_id=self.table_id,
            game=self.game,
            round_id=self.round_id if round_id is _UNSET else round_id,
            deck_id=self.deck_id if deck_id is _UNSET else deck_id,
            seq=self.seq,
            occurred_at=self.clock,
            recorded_at=self.clock + timedelta(milliseconds=250),
            source=source,
            actor=Actor(role=role, id=actor_id or (self.dealer_id if role is ActorRole.DEALER else "SYS")),
            **fields,
        )
        return self.chainer.link(event) if self.chainer is not None else event
