"""Rulebook 10.5.5: every plausibility bound is written once (``schemas/bounds.py``), and the event
schemas, their published JSON Schema (``schemas/json/``), the settings' defaults and the events
reference (``docs/events.md``) give the same numbers."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dealtrail.settings import Settings
from schemas import bounds
from schemas.bounds import BOUNDS
from schemas.codec import DecodeError, decode, encode
from schemas.events import EVENT_TYPES

ROOT = Path(__file__).resolve().parents[2]
JSON_SCHEMAS = ROOT / "schemas" / "json"
EVENTS_DOC = ROOT / "docs" / "events.md"
NUMERIC = {b.name: getattr(bounds, b.name) for b in BOUNDS if b.refused_as == "out_of_bounds" and "," not in b.name}


def _schema(event: str) -> dict[str, Any]:
    return json.loads((JSON_SCHEMAS / f"{event}.schema.json").read_text(encoding="utf-8"))


def _maximum(prop: dict[str, Any]) -> int:
    for option in prop.get("anyOf", [prop]):
        if "maximum" in option:
            return int(option["maximum"])
    raise AssertionError(f"no maximum in {prop}")


def _field(event: str, path: str) -> dict[str, Any]:
    schema = _schema(event)
    head, _, rest = path.partition(".")
    prop = schema["properties"][head]
    if rest:  # a nested model, by its $ref
        ref = prop.get("$ref") or next(o["$ref"] for o in prop["anyOf"] if "$ref" in o)
        prop = schema["$defs"][ref.rsplit("/", 1)[-1]]["properties"][rest]
    return prop


def _events_of(field: str) -> list[tuple[str, str]]:
    event, _, path = field.partition(".")
    if event == "*":
        return [(cls.__name__, path) for cls in EVENT_TYPES]
    return [(event, path)]


@pytest.mark.parametrize("name", sorted(NUMERIC))
def test_the_published_json_schema_gives_each_fixed_bound_its_one_number(name: str) -> None:
    bound = next(b for b in BOUNDS if b.name == name)
    for field in bound.fields:
        for event, path in _events_of(field):
            assert _maximum(_field(event, path)) == NUMERIC[name], f"{event}.{path}"


def test_the_published_json_schema_gives_every_instant_the_years_of_rulebook_10_3_4() -> None:
    for cls in EVENT_TYPES:
        props = _schema(cls.__name__)["properties"]
        for name in ("occurred_at", "recorded_at"):
            assert props[name]["formatMinimum"] == "2000-01-01T00:00:00Z", cls.__name__
            assert props[name]["formatExclusiveMaximum"] == "2101-01-01T00:00:00Z", cls.__name__
    assert datetime(2000, 1, 1, tzinfo=UTC) == bounds.EARLIEST_INSTANT
    assert datetime(2101, 1, 1, tzinfo=UTC) == bounds.LATEST_INSTANT


def test_the_settable_bounds_default_to_their_one_definition_and_reach_the_engine() -> None:
    settings = Settings()
    assert settings.max_seq_jump == bounds.DEFAULT_MAX_SEQ_JUMP
    assert settings.max_clock_skew == bounds.DEFAULT_MAX_CLOCK_SKEW
    assert settings.plausibility.max_seq_jump == bounds.DEFAULT_MAX_SEQ_JUMP
    assert settings.plausibility.max_clock_skew == bounds.DEFAULT_MAX_CLOCK_SKEW
    assert {b.setting for b in BOUNDS if b.setting} == {"DEALTRAIL_MAX_SEQ_JUMP", "DEALTRAIL_MAX_CLOCK_SKEW"}


def test_rulebook_10_5_5_tighter_bounds_are_no_tighter_than_it_allows() -> None:
    assert bounds.MAX_WAGER_CENTS >= 10**10 and bounds.MAX_DECLARED_DECK >= 520
    assert bounds.MAX_PAYOUT_CENTS <= 10**12 and bounds.MAX_CARDS <= 1000 and bounds.MAX_INT32 == 2**31 - 1
    assert bounds.DEFAULT_MAX_SEQ_JUMP == 100_000 and bounds.DEFAULT_MAX_CLOCK_SKEW.total_seconds() == 3600


def test_the_events_reference_writes_every_bound_with_its_setting_beside_its_fields() -> None:
    doc = EVENTS_DOC.read_text(encoding="utf-8")
    for b in BOUNDS:
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{b.name}` |")), None)
        assert row is not None, b.name
        assert (f"`{b.setting}`" if b.setting else "fixed") in row
        value = NUMERIC.get(b.name)
        if value is not None:
            assert f"{value:,}" in row or str(value) in row, b.name
    assert "| `amount` | integer (≥ 0, ≤ 10000000000); bound: `MAX_WAGER_CENTS` |" in doc
    assert "bound: `DEFAULT_MAX_SEQ_JUMP` (`DEALTRAIL_MAX_SEQ_JUMP`)" in doc


def test_no_bound_is_written_a_second_time_in_the_schemas_or_the_settings() -> None:
    literal = re.compile(r"\ble=(?:10\s*\*\*\s*1[02]|2\s*\*\*\s*(?:31|62)|520|1000)\b")
    for path in (ROOT / "schemas").glob("*.py"):
        if path.name != "bounds.py":
            found = literal.findall(path.read_text(encoding="utf-8"))
            assert not found, f"{path.name}: {found} (use schemas.bounds)"
    settings = (ROOT / "dealtrail" / "settings.py").read_text(encoding="utf-8")
    for name in ("max_seq_jump", "max_clock_skew"):
        [line] = [x for x in settings.splitlines() if x.startswith(f"    {name}: ")]  # the field, not its doc
        assert f"default=DEFAULT_{name.upper()}" in line, line
    assert "le=MAX_SEQ" in next(x for x in settings.splitlines() if x.startswith("    max_seq_jump: "))


@pytest.mark.parametrize(
    ("event_type", "field", "bound"),
    [
        ("WagerPlaced", "amount", "MAX_WAGER_CENTS"),
        ("DeckIntroduced", "declared_count", "MAX_DECLARED_DECK"),
        ("StubCounted", "count", "MAX_CARDS"),
        ("RoundStarted", "round_no", "MAX_INT32"),
    ],
)
def test_a_value_at_its_bound_is_read_and_one_above_is_refused_out_of_bounds(
    event_type: str, field: str, bound: str
) -> None:
    from dealtrail.simulator.builder import TableWriter
    from schemas import events as ev
    from schemas.base import Game

    limit = NUMERIC[bound]
    w = TableWriter("T-1", Game.TCP, datetime(2026, 12, 1, tzinfo=UTC))
    fields: dict[str, Any] = {
        "WagerPlaced": {"wager_id": "W1", "seat": "SEAT_1", "wager_type": "ANTE", "amount": limit},
        "DeckIntroduced": {"declared_count": limit},
        "StubCounted": {"count": limit},
        "RoundStarted": {"round_no": limit, "dealing_method": "HAND", "dealer_id": "D-1"},
    }[event_type]
    good = encode(w.emit(getattr(ev, event_type), **fields))
    assert getattr(decode(good), field) == limit
    with pytest.raises(DecodeError) as refused:
        decode(good.replace(f'"{field}":{limit}'.encode(), f'"{field}":{limit + 1}'.encode()))
    assert refused.value.reason == "out_of_bounds"
