"""Rulebook 10.3.4: every number an event carries has an upper bound no larger than what a table
can hold (a round number at most 2^31 - 1, a count of cards at most 1,000, an amount at most 10^12
cents), so a value beyond it is refused at decoding (``out_of_bounds``), never judged."""

from __future__ import annotations

import typing

import annotated_types
import pytest
from pydantic import BaseModel

from schemas import events as ev
from schemas.base import MAX_INT32, Envelope
from schemas.codec import DecodeError, decode, encode

AMOUNTS = {"amount", "payout"}
ENVELOPE = {"seq", "schema_version"}  # seq: the store's BIGINT, checked against max_seq_jump by the engine


def _int_fields() -> list[tuple[str, str, int | None]]:
    out = []
    for name in dir(ev):
        cls = getattr(ev, name)
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is Envelope:
            continue
        for field_name, field in cls.model_fields.items():
            if field_name in ENVELOPE:
                continue
            ann = field.annotation
            if ann is int or int in typing.get_args(ann):
                upper = next((m.le for m in field.metadata if isinstance(m, annotated_types.Le)), None)
                out.append((name, field_name, upper))
    return out


@pytest.mark.parametrize(("event", "field", "upper"), _int_fields())
def test_every_number_of_an_event_is_bounded_as_rulebook_10_3_4_says(event: str, field: str, upper: int | None) -> None:
    assert upper is not None, f"{event}.{field} has no upper bound"
    if field in AMOUNTS:
        assert upper <= 10**12
    elif field == "round_no":
        assert upper <= MAX_INT32
    else:
        assert upper <= 1000  # counts of cards, indexes, dice: none beyond what a table can hold


def test_a_card_count_above_1000_is_refused_out_of_bounds() -> None:
    from datetime import UTC, datetime

    from dealtrail.simulator.builder import TableWriter
    from schemas.base import Game

    w = TableWriter("T-1", Game.TCP, datetime(2026, 12, 1, tzinfo=UTC))
    good = encode(w.emit(ev.StubCounted, count=1000))
    assert decode(good).count == 1000  # type: ignore[union-attr]
    with pytest.raises(DecodeError) as refused:
        decode(good.replace(b'"count":1000', b'"count":1001'))
    assert refused.value.reason == "out_of_bounds"
