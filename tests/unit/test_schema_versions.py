"""Schema versions: version 1 payloads still decode (byte for byte), version 2 adds revision 2's
events and optional fields, and a newer version is refused whole."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from schemas import events as ev
from schemas.base import SCHEMA_VERSION
from schemas.chain import chain_hash
from schemas.codec import CURRENT_VERSION, UPCASTERS, DecodeError, decode, encode

ENVELOPE_V1 = (
    '"event_id":"01KAV1GOLDEN000000000000{n:02d}","table_id":"PGP-01","game":"PGP","round_id":"PGP-01-R00007",'
    '"deck_id":"PGP-01-DK001","seq":{n},"occurred_at":"2026-11-27T18:00:00Z","recorded_at":"2026-11-27T18:00:00.250000Z",'
    '"source":"MANUAL","actor":{{"role":"DEALER","id":"D-0001"}},"schema_version":1,"corrects":null,"prev_hash":null,'
    '"hash":null'
)
GOLDEN_V1 = {
    "CardExposed": '"type":"CardExposed","card":"KH","location":"DEALER_HAND","seat":null,'
    '"exposed_by":"DEALER","phase":"SETTLEMENT"',
    "ShufflerFaulted": '"type":"ShufflerFaulted","device_id":"PGP-01-SHF","fault":"JAM","indicator":"RED_LIGHT",'
    '"acknowledged_by":null',
    "CardFoundFaceUp": '"type":"CardFoundFaceUp","location":"SHOE","card":"7D"',
    "ShuffleCompleted": '"type":"ShuffleCompleted","method":"AUTOMATED","device_id":"PGP-01-SHF",'
    '"device_card_count":null,"device_full_deck_ok":null,"mode":"SHUFFLE"',
    "HandSet": '"type":"HandSet","owner":"DEALER","five_card":["AS","KS","QS","JS","TS"],"two_card":["2C","3C"],'
    '"matches_house_way":true',
}
"""Version 1 payloads exactly as dealtrail wrote them before revision 2 (canonical JSON)."""


def golden(kind: str, n: int = 1) -> bytes:
    return ("{" + ENVELOPE_V1.format(n=n) + "," + GOLDEN_V1[kind] + "}").encode()


@pytest.mark.parametrize("kind", sorted(GOLDEN_V1))
def test_a_version_1_golden_payload_decodes_keeps_its_version_and_re_encodes_to_the_same_bytes(kind):
    raw = golden(kind)
    event = decode(raw)
    assert event.type == kind
    assert event.schema_version == 1
    assert encode(event) == raw
    # the hash chain of stored version 1 events still verifies: the content hashes as before
    assert chain_hash(event) == chain_hash(decode(raw))


def test_version_1_optional_fields_read_as_not_recorded():
    fault = decode(golden("ShufflerFaulted"))
    found = decode(golden("CardFoundFaceUp"))
    assert isinstance(fault, ev.ShufflerFaulted) and fault.during is None
    assert isinstance(found, ev.CardFoundFaceUp) and found.disposition is None


def test_no_version_1_field_changed_meaning_so_no_upcaster_is_registered():
    assert CURRENT_VERSION == SCHEMA_VERSION == 2
    assert UPCASTERS == {}


def test_an_event_without_schema_version_is_read_as_version_1():
    doc = json.loads(golden("CardFoundFaceUp"))
    del doc["schema_version"]
    event = decode(json.dumps(doc))
    assert event.schema_version == 1


def test_events_made_now_are_written_with_version_2_and_their_new_fields():
    event = decode(golden("ShufflerFaulted")).model_copy(update={"schema_version": 2, "during": "SHUFFLE"})
    data = encode(event)
    assert b'"schema_version":2' in data
    assert b'"during":"SHUFFLE"' in data
    assert decode(data) == event
    assert ev.DeckCut.model_fields["schema_version"].default == 2


def new_event(kind: str, **fields: object) -> bytes:
    doc = json.loads(golden("CardFoundFaceUp"))
    doc.pop("location"), doc.pop("card")
    doc.update({"type": kind, "schema_version": 2, **fields})
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("kind", "fields"),
    [
        ("DeckCut", {"cut_by": "PLAYER"}),
        ("DeckVerified", {"count": 53, "composition_ok": True, "result": "OK", "verified_by": "FLOOR-1"}),
        ("CardAddedToDeck", {"card": "7H", "reason": "REPLACEMENT", "authorised_by": "FLOOR-1"}),
        ("CardRemovedFromDeck", {"card": "7H", "reason": "DAMAGED", "authorised_by": None}),
        ("HandsRevealed", {"hands": [{"owner": "DEALER", "cards": ["AS", "KS"]}, {"owner": "COMMUNITY", "cards": []}]}),
    ],
)
def test_revision_2_events_decode_and_round_trip(kind, fields):
    event = decode(new_event(kind, **fields))
    assert event.type == kind
    assert decode(encode(event)) == event


def test_hands_revealed_bounds_the_cards_of_one_owner_to_a_pai_gow_hand():
    with pytest.raises(DecodeError) as err:
        decode(new_event("HandsRevealed", hands=[{"owner": "DEALER", "cards": ["AS"] * 8}]))
    assert err.value.reason == "schema_error"
    with pytest.raises(ValidationError):
        ev.HandsRevealed.model_validate({**json.loads(new_event("DeckCut")), "type": "HandsRevealed", "hands": []})


@pytest.mark.parametrize(
    "payload",
    [
        new_event("DeckCut", cut_by="PLAYER", schema_version=3),  # fits today's schema, but written by a newer one
        new_event("DeckCut", cut_by="PLAYER", schema_version=3, knife="LEFT"),  # a field this reader does not know
        new_event("DeckShredded", schema_version=7),  # a type this reader does not know
    ],
    ids=["valid-fields", "unknown-field", "unknown-type"],
)
def test_an_event_of_a_newer_schema_version_is_refused_whole_with_its_own_reason(payload):
    with pytest.raises(DecodeError) as err:
        decode(payload)
    assert err.value.reason == "unsupported_schema_version"
    assert "reads up to 2" in err.value.detail
