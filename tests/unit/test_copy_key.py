"""copy_key / same_fact: what makes an event an exact copy of one judged before (issue 32)."""

from __future__ import annotations

import json

import pytest

from schemas.chain import copy_key, same_fact, stamped
from schemas.codec import decode, encode
from tests.unit.test_chain_stamp import _event


def test_an_unchained_copy_is_the_same_fact_as_the_stamped_event() -> None:
    event = _event(7)
    linked, data = stamped(event, "ab" * 32)
    assert same_fact(copy_key(data, linked.hash), copy_key(encode(event), None))


def test_a_copy_written_with_other_spacing_and_key_order_is_the_same_fact() -> None:
    event = _event(7)
    doc = json.loads(encode(event))
    again = decode(json.dumps(dict(reversed(list(doc.items()))), indent=2).encode())
    assert same_fact(copy_key(encode(event), None), copy_key(encode(again), None))


def test_another_card_or_another_id_at_the_same_seq_is_not_the_same_fact() -> None:
    stored = copy_key(encode(_event(7)), None)
    assert not same_fact(stored, copy_key(encode(_event(7, card="KD")), None))
    assert not same_fact(stored, copy_key(encode(_event(7, event_id="OTHER")), None))


def test_a_copy_with_another_chain_is_not_the_same_fact() -> None:
    event = _event(7)
    first, data = stamped(event, "ab" * 32)
    other, other_data = stamped(event, "cd" * 32)
    assert same_fact(copy_key(data, first.hash), copy_key(data, first.hash))
    assert not same_fact(copy_key(data, first.hash), copy_key(other_data, other.hash))


def test_bytes_that_are_not_an_events_canonical_json_are_refused() -> None:
    with pytest.raises(ValueError, match="prev_hash"):
        copy_key(b'{"event_id": "x"}', None)
