"""Event schemas: validation at the edge, the JSON Schema export, the codec."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from schemas import events as ev
from schemas.codec import DecodeError, decode, encode
from schemas.export import all_schemas, render

ROOT = Path(__file__).resolve().parents[2]
GOOD = {
    "type": "CardDealt",
    "event_id": "01HF7YAT00YPRPA8JAB2VS3WER",
    "table_id": "TCP-01",
    "game": "TCP",
    "round_id": "TCP-01-R00001",
    "seq": 12,
    "occurred_at": "2026-11-27T18:00:00Z",
    "recorded_at": "2026-11-27T18:00:00.250Z",
    "source": "RFID",
    "actor": {"role": "DEALER", "id": "D-0001"},
    "deal_index": 1,
    "to_area": "SEAT_1",
    "card": "AS",
}


def test_committed_json_schemas_match_a_fresh_export() -> None:
    folder = ROOT / "schemas" / "json"
    fresh = all_schemas()
    on_disk = {p.name for p in folder.glob("*.schema.json")}
    assert on_disk == set(fresh), "run `make schemas`: the committed export lists other files"
    for name, doc in fresh.items():
        assert (folder / name).read_text(encoding="utf-8") == render(doc), f"{name} is stale: run `make schemas`"


def test_decode_returns_the_tagged_event_and_encode_round_trips() -> None:
    event = decode(json.dumps(GOOD))
    assert isinstance(event, ev.CardDealt)
    assert event.card == "AS"
    assert decode(encode(event)) == event


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b'{"type": "CardDealt", "event_id": ', "malformed_json"),
        (b"[1, 2]", "not_an_object"),
        (json.dumps({**GOOD, "type": "CardTeleported"}).encode(), "unknown_event_type"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "table_id"}).encode(), "schema_error"),
        (json.dumps({**GOOD, "seq": "twelve"}).encode(), "schema_error"),
        (json.dumps({**GOOD, "colour": "red"}).encode(), "schema_error"),
        (json.dumps({**GOOD, "occurred_at": "2026-11-27T18:00:00"}).encode(), "schema_error"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "type"}).encode(), "schema_error"),
        (b"\xff\xfe not utf-8", "malformed_json"),
    ],
    ids=[
        "truncated",
        "array",
        "unknown-type",
        "missing-envelope",
        "wrong-type",
        "extra-field",
        "naive-time",
        "no-tag",
        "bad-utf8",
    ],
)
def test_decode_rejects_bad_input_with_a_reason(payload: bytes, reason: str) -> None:
    with pytest.raises(DecodeError) as info:
        decode(payload)
    assert info.value.reason == reason
    assert info.value.detail


def test_events_are_frozen() -> None:
    event = decode(json.dumps(GOOD))
    with pytest.raises(ValidationError):
        event.card = "KS"  # type: ignore[misc]


def test_every_event_type_has_a_unique_past_tense_tag() -> None:
    tags = [cls.model_fields["type"].default for cls in ev.EVENT_TYPES]
    assert len(tags) == len(set(tags))
    assert all(tag == cls.__name__ for tag, cls in zip(tags, ev.EVENT_TYPES, strict=True))
    assert all(not tag.endswith("Event") for tag in tags)


def test_envelope_rejects_seq_below_one() -> None:
    with pytest.raises(ValidationError):
        ev.RoundCompleted(
            event_id="e1",
            table_id="T",
            game="TCP",
            seq=0,
            occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
            recorded_at=datetime(2026, 1, 1, tzinfo=UTC),
            source="MANUAL",
            actor={"role": "DEALER", "id": "D"},
        )


@pytest.mark.parametrize("line", [b'{"type": "CardDealt", "event_id": "01J\n', '{"type": "CardDealt", "seq": 1\r\n'])
def test_a_truncated_line_is_described_without_its_own_newline(line: bytes | str) -> None:
    with pytest.raises(DecodeError) as info:
        decode(line)
    assert info.value.reason == "malformed_json"
    assert "EOF while parsing" in info.value.detail and "line 1 column" in info.value.detail


@pytest.mark.parametrize("field", ["occurred_at", "recorded_at"])
@pytest.mark.parametrize(
    "value",
    [
        "9999-12-31T23:59:59-05:00",
        "0001-01-01T00:30:00+01:00",
        "2000-01-01T00:30:00+01:00",  # 1999 in UTC
        "2100-12-31T23:30:00-01:00",  # 2101 in UTC
    ],
)
def test_a_time_whose_utc_instant_leaves_years_2000_to_2100_is_out_of_bounds(field: str, value: str) -> None:
    with pytest.raises(DecodeError) as info:
        decode(json.dumps({**GOOD, field: value}))
    assert info.value.reason == "out_of_bounds"
    assert field in info.value.detail
    assert "2000 to 2100" in info.value.detail


def test_the_last_and_first_plausible_utc_instants_are_accepted() -> None:
    late = decode(json.dumps({**GOOD, "occurred_at": "2100-12-31T18:59:59-05:00"}))
    early = decode(json.dumps({**GOOD, "recorded_at": "2000-01-01T01:00:00+01:00"}))
    assert late.occurred_at.astimezone(UTC).year == 2100
    assert early.recorded_at.astimezone(UTC).year == 2000


@pytest.mark.parametrize(
    ("kind", "field", "value"),
    [
        ("RoundStarted", "round_no", 2**31),
        ("WagerSettled", "payout", 10**15),
        ("StubCounted", "count", 1001),
    ],
)
def test_a_number_beyond_what_the_store_holds_is_out_of_bounds_naming_the_field(
    kind: str, field: str, value: int
) -> None:
    extra = {
        "RoundStarted": {"round_no": 1, "dealing_method": "HAND", "dealer_id": "D-1"},
        "WagerSettled": {"wager_id": "W-1", "outcome": "WIN"},
        "StubCounted": {"count": 1},
    }[kind]
    doc = {k: v for k, v in GOOD.items() if k not in ("deal_index", "to_area", "card", "face", "dealt_from")}
    decode(json.dumps({**doc, **extra, "type": kind}))  # the event itself is valid
    with pytest.raises(DecodeError) as info:
        decode(json.dumps({**doc, **extra, "type": kind, field: value}))
    assert info.value.reason == "out_of_bounds"
    assert field in info.value.detail


def test_a_key_given_twice_is_malformed_json_naming_the_key() -> None:
    line = json.dumps(GOOD)[:-1] + ', "seq": 99}'
    with pytest.raises(DecodeError) as info:
        decode(line)
    assert info.value.reason == "malformed_json"
    assert "'seq'" in info.value.detail and "more than once" in info.value.detail
    nested = json.dumps(GOOD).replace('"actor": {', '"actor": {"id": "X", ', 1)
    with pytest.raises(DecodeError) as info:
        decode(nested.encode())
    assert info.value.reason == "malformed_json" and "'id'" in info.value.detail
    spaced = json.dumps(GOOD)[:-1] + ', "seq" : 99}'  # a blank before the colon: the slow path
    with pytest.raises(DecodeError) as info:
        decode(spaced.encode())
    assert info.value.reason == "malformed_json"


def test_a_repeated_key_in_an_otherwise_invalid_event_is_still_malformed_json() -> None:
    line = json.dumps({**GOOD, "seq": "x"})[:-1] + ', "seq": "y"}'
    with pytest.raises(DecodeError) as info:
        decode(line)
    assert info.value.reason == "malformed_json" and "'seq'" in info.value.detail


def test_a_string_value_holding_a_key_like_text_is_not_taken_for_a_repeat() -> None:
    event = decode(json.dumps({**GOOD, "actor": {"role": "DEALER", "id": 'D "seq": 1'}}))
    assert event.actor.id == 'D "seq": 1'


@pytest.mark.parametrize("data", [b"[" * 100_000, b'{"a":' * 100_000, b"[" * 70 + b"]" * 70])
def test_nesting_too_deep_is_malformed_json_not_a_crash(data: bytes) -> None:
    with pytest.raises(DecodeError) as info:
        decode(data)
    assert info.value.reason == "malformed_json"


_ENVELOPE = {
    "event_id": "E-1",
    "table_id": "PGP-1",
    "game": "PGP",
    "round_id": "R-1",
    "seq": 5,
    "occurred_at": "2026-11-27T18:00:00Z",
    "recorded_at": "2026-11-27T18:00:01Z",
    "source": "MANUAL",
    "actor": {"role": "DEALER", "id": "D-1"},
}


@pytest.mark.parametrize(
    "fields",
    [
        {"type": "HandSet", "owner": "DEALER", "five_card": ["AS"] * 6, "two_card": ["KS", "KD"]},
        {"type": "HandSet", "owner": "DEALER", "five_card": ["AS"] * 5, "two_card": ["KS"]},
        {"type": "HandSet", "owner": "DEALER", "five_card": ["AS"] * 2_000_000},
        {"type": "DiceValuesAnnounced", "values": [7, 1, 1]},
        {"type": "WagersReturned", "wager_ids": [f"W-{i}" for i in range(100)]},
        {"type": "TableConfigured", "config": {"game": "PGP", "rules_submission_id": "RS", "seats": ["SEAT_1"] * 10}},
    ],
    ids=["five-card-hand-of-6", "two-card-hand-of-1", "two-million-cards", "die-of-7", "100-wagers", "10-seats"],
)
def test_lists_in_events_are_bounded_by_what_the_games_allow(fields: dict[str, object]) -> None:
    with pytest.raises(DecodeError) as info:
        decode(json.dumps({**_ENVELOPE, **fields}))
    assert info.value.reason == "schema_error"


def test_a_pai_gow_hand_set_five_and_two_or_unrecorded_is_valid() -> None:
    five, two = ["AS", "KS", "QS", "JS", "TS"], ["2D", "3D"]
    hand = decode(json.dumps({**_ENVELOPE, "type": "HandSet", "owner": "BANK", "five_card": five, "two_card": two}))
    assert isinstance(hand, ev.HandSet) and len(hand.five_card) + len(hand.two_card) == ev.PGP_HAND_CARDS
    assert decode(json.dumps({**_ENVELOPE, "type": "HandSet", "owner": "SEAT_1"})).type == "HandSet"
    ids = [f"W-{i}" for i in range(ev.MAX_WAGERS_PER_ROUND)]
    assert decode(json.dumps({**_ENVELOPE, "type": "WagersReturned", "wager_ids": ids})).type == "WagersReturned"
