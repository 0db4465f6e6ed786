"""Chainer.stamp: chains unchained events, adopts chained ones, re-stamps exact copies alike."""

from __future__ import annotations

import json

from schemas.chain import Chainer, chain_hash
from schemas.codec import decode
from schemas.events import DealingEvent


def _event(seq: int, card: str = "AS", table: str = "T-1", event_id: str | None = None) -> DealingEvent:
    return decode(
        json.dumps(
            {
                "type": "CardDealt",
                "event_id": event_id or f"{table}-E{seq}",
                "table_id": table,
                "game": "TCP",
                "round_id": "R-1",
                "seq": seq,
                "occurred_at": "2026-11-27T18:00:00Z",
                "recorded_at": "2026-11-27T18:00:01Z",
                "source": "MANUAL",
                "actor": {"role": "DEALER", "id": "D-1"},
                "deal_index": seq,
                "to_area": "SEAT_1",
                "card": card,
            }
        ).encode()
    )


def test_unchained_events_are_linked_per_table() -> None:
    chainer = Chainer()
    a1, b1, a2 = chainer.stamp(_event(1)), chainer.stamp(_event(1, table="T-2")), chainer.stamp(_event(2))
    assert a1.prev_hash is None and b1.prev_hash is None
    assert a2.prev_hash == a1.hash and a2.hash == chain_hash(a2)
    assert chainer.heads == {"T-1": (2, a2.hash), "T-2": (1, b1.hash)}


def test_an_exact_copy_gets_the_first_copys_stamp_and_a_conflicting_one_links_to_the_head() -> None:
    chainer = Chainer()
    first = chainer.stamp(_event(1))
    second = chainer.stamp(_event(2))
    assert chainer.stamp(_event(1)) == first  # re-sent: identical, so it stays an exact duplicate
    conflicting = chainer.stamp(_event(1, card="KH"))
    assert conflicting.prev_hash == second.hash and conflicting.hash != first.hash
    assert chainer.heads["T-1"] == (2, second.hash)  # neither copy moves the head


def test_a_chained_event_is_kept_and_continues_the_chain() -> None:
    upstream = Chainer()
    e1 = upstream.link(_event(1))
    chainer = Chainer()
    assert chainer.stamp(e1) is e1
    e2 = chainer.stamp(_event(2))
    assert e2.prev_hash == e1.hash
    assert Chainer({"T-1": (2, e2.hash)}).stamp(_event(3)).prev_hash == e2.hash  # heads handed in


def test_the_window_of_remembered_events_is_bounded() -> None:
    chainer = Chainer()
    for seq in range(1, Chainer.WINDOW + 50):
        chainer.stamp(_event(seq))
    assert len(chainer._recent["T-1"]) == Chainer.WINDOW


def test_the_stamped_bytes_are_the_canonical_encoding_of_the_stamped_event() -> None:
    from schemas.chain import stamped
    from schemas.codec import encode

    for prev in (None, "ab" * 32):
        event, data = stamped(_event(7), prev)
        assert data == encode(event)
        assert event.prev_hash == prev and event.hash == chain_hash(event)


def test_a_chainer_that_takes_over_a_table_stamps_its_re_sent_copies_as_the_first_chainer_did() -> None:
    before = Chainer()
    stamped_before = [before.stamp(_event(seq)) for seq in range(1, Chainer.WINDOW + 10)]
    stamps = before.stamps("T-1")
    assert [s[0] for s in stamps] == list(range(10, Chainer.WINDOW + 10))  # the last WINDOW, in seq order
    after = Chainer()
    after.take_over("T-1", before.heads["T-1"], stamps)
    last = stamped_before[-1]
    assert after.stamp(_event(last.seq)) == last  # an exact copy: the first stamp
    assert after.stamp(_event(20)) == stamped_before[19]
    conflicting = after.stamp(_event(20, card="KH"))  # other content: linked to the head, as one chainer does
    assert conflicting.prev_hash == last.hash and conflicting.hash != stamped_before[19].hash
    assert after.stamp(_event(last.seq + 1)).prev_hash == last.hash
    # what it hands on keeps the stamps it took over (the copies above made no new ones)
    assert after.stamps("T-1")[-1] == (last.seq + 1, last.hash, after.heads["T-1"][1])
    assert after.stamps("T-1")[:-1] == stamps[1:]


def test_an_event_with_a_stray_hash_version_but_no_hash_is_stamped_as_its_plain_copy() -> None:
    # a feed that strips prev_hash and hash but keeps hash_version: the event says the same thing
    stray = _event(1).model_copy(update={"hash_version": 2})
    chainer = Chainer()
    first = chainer.stamp(stray)
    chainer.stamp(_event(2))
    assert chainer.stamp(_event(1)) == first  # a re-sent plain copy is an exact duplicate
    remembered = Chainer()
    remembered.remember(first)
    assert remembered.stamp(stray) == first  # and the stray one, against a chain read back
