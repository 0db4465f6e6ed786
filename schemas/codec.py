"""Bytes <-> events: the one place dealing events are parsed, upcast and validated.

One :class:`pydantic.TypeAdapter` for the :data:`~schemas.events.DealingEvent` union is built at
import. :func:`decode` takes one JSON document (a line of a JSON Lines file or a Kafka message
value) and returns the event or raises :class:`DecodeError` with a reason fit for a dead-letter
record.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from schemas import strict_json
from schemas.base import SCHEMA_VERSION, Envelope
from schemas.bounds import BOUNDS
from schemas.events import EVENT_TYPE_NAMES, DealingEvent, HandsRevealed, TableConfigured

EVENT_ADAPTER: TypeAdapter[DealingEvent] = TypeAdapter(DealingEvent)
"""Validates any dealing event (JSON bytes, str or dict) against the discriminated union."""

CURRENT_VERSION = SCHEMA_VERSION
"""The newest ``schema_version`` of every event type (2). Events of an older version are read
as they are unless an upcaster is registered for them; a newer one is refused."""

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
UPCASTERS: dict[tuple[str, int], Upcaster] = {}
"""Pure dict-to-dict steps keyed by ``(type, from_version)``; each returns the next version's payload.

Empty on purpose for version 1 -> 2: revision 2 only adds event types and optional fields
(``CardFoundFaceUp.disposition``, ``ShufflerFaulted.during``), and no version 1 field changed
meaning (a ``CardExposed`` at phase SETTLEMENT still records a card exposed at settlement; that
revision 2 no longer calls it an exposure is a rule change, decided by the engine for both
versions alike). A version 1 event is therefore validated as it is and keeps
``schema_version`` 1, so it re-encodes, and hashes, to the bytes it was written as."""


class DecodeError(ValueError):
    """A message is not a valid dealing event. ``reason`` is one of ``malformed_json``,
    ``not_an_object``, ``unknown_event_type``, ``schema_error``, ``out_of_bounds`` (a schema-valid
    shape with a value beyond the bounds of rulebook 10.3.4: a number too large for the store, a
    time outside the years 2000 to 2100; ``detail`` names the field), ``unsupported_schema_version``
    (newer than :data:`CURRENT_VERSION`: refused whole, never half-read); ``detail`` says what
    exactly."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False)[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        parts.append(f"{loc}: {err['msg']}")
    more = exc.error_count() - 5
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _upcast(doc: dict[str, Any]) -> dict[str, Any]:
    version = doc.get("schema_version", 1)
    kind = doc.get("type")
    while isinstance(version, int) and isinstance(kind, str) and version < CURRENT_VERSION:
        step = UPCASTERS.get((kind, version))
        if step is None:
            break
        doc = step(doc)
        version = doc.get("schema_version", version + 1)
    return doc


def decode(data: bytes | str) -> DealingEvent:
    """Parse and validate one event.

    Args:
        data: one JSON object, as bytes (UTF-8) or str.

    Returns:
        The validated, frozen event.

    Raises:
        DecodeError: with ``reason`` malformed_json (not JSON, a key twice in one object,
            nesting too deep: :func:`schemas.strict_json.loads`), not_an_object,
            unknown_event_type, schema_error (missing or extra fields, wrong types, naive
            timestamps ...), out_of_bounds (only values beyond the bounds of rulebook 10.3.4)
            or unsupported_schema_version (written by a newer dealtrail than this one).
    """
    try:
        event = EVENT_ADAPTER.validate_json(data)
    except ValidationError as exc:
        newer = _newer_version(data)
        if newer is not None:
            raise newer from None
        raise _classify(exc, data) from None
    if not _no_repeated_key(event, data):
        try:
            strict_json.loads(data)
        except strict_json.StrictJSONError as exc:
            raise DecodeError("malformed_json", str(exc)) from None
    version = event.schema_version
    if "schema_version" not in event.model_fields_set:
        version = 1  # written before the field had a default of 2: a version 1 event
        event = event.model_copy(update={"schema_version": 1})
    if version == CURRENT_VERSION:
        return event
    if version > CURRENT_VERSION:
        raise _unsupported(event.type, version)
    if (event.type, version) not in UPCASTERS:
        return event
    doc = strict_json.loads(data)
    doc.setdefault("schema_version", version)
    try:
        return EVENT_ADAPTER.validate_json(json.dumps(_upcast(doc)))
    except ValidationError as exc:
        raise _classify(exc, data) from None


def _no_repeated_key(event: Envelope, data: bytes | str) -> bool:
    """True when ``data`` (which validated as ``event``) certainly has no key twice in an object.

    The parser lets the last of two equal keys win, so a repeat cannot be seen in the event.
    Every key of a valid event is a field of its model (``extra="forbid"``), so the keys the
    text gave are the event's ``model_fields_set`` and its nested models'. A key written as
    ``"...":`` adds one to ``data.count('":')`` and a string value can only add more; so when
    no key is written with blanks before its colon and the count equals the fields given, no key
    is repeated (about 1.5 us a line, against 9 us for a second, strict parse). False means
    "not sure": the caller parses again with :func:`schemas.strict_json.loads`.
    """
    given = len(event.model_fields_set) + len(event.actor.model_fields_set)
    if type(event) is TableConfigured:
        given += len(event.config.model_fields_set)
    elif type(event) is HandsRevealed:
        given += sum(len(h.model_fields_set) for h in event.hands)
    if isinstance(data, str):
        return data.count('":') == given and _SPACED_KEY_STR.search(data) is None
    if data.count(b'":') != given:
        return False
    # four byte searches are cheaper than the pattern, and compact JSON has no blank at all
    return not (b" " in data or b"\t" in data or b"\n" in data or b"\r" in data) or _SPACED_KEY.search(data) is None


_SPACED_KEY = re.compile(rb'"[ \t\r\n]')
_SPACED_KEY_STR = re.compile(r'"[ \t\r\n]')
"""A quote followed by a blank: maybe a key written with blanks before its colon."""


def _unsupported(kind: object, version: int) -> DecodeError:
    return DecodeError(
        "unsupported_schema_version",
        f"{str(kind)[:80]} of schema_version {version}; this dealtrail reads up to {CURRENT_VERSION}",
    )


def _newer_version(data: bytes | str) -> DecodeError | None:
    """The refusal of an event that failed validation because a newer schema wrote it, else None."""
    try:
        doc = strict_json.loads(data)
    except strict_json.StrictJSONError as exc:
        # a repeated key or nesting too deep is malformed, whatever else the validator said
        return DecodeError("malformed_json", str(exc)) if _STRICT_ONLY.search(str(exc)) else None
    if not isinstance(doc, dict):
        return None
    version = doc.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > CURRENT_VERSION:
        return _unsupported(doc.get("type"), version)
    return None


_STRICT_ONLY = re.compile(r"appears more than once|nest deeper")
"""The strict reader's refusals that the validator's own parser lets through (or dies on)."""


def _classify(exc: ValidationError, data: bytes | str) -> DecodeError:
    first = exc.errors(include_url=False)[0]
    kind = first["type"]
    if kind == "json_invalid":
        stripped: bytes | str = data.rstrip(b"\r\n") if isinstance(data, bytes) else data.rstrip("\r\n")
        if stripped != data:
            # the line's own newline makes the parser speak of "line 2 column 0": ask again without it
            try:
                EVENT_ADAPTER.validate_json(stripped)
            except ValidationError as again:
                return _classify(again, stripped)
        return DecodeError("malformed_json", str(first.get("ctx", {}).get("error", first["msg"]))[:300])
    if kind == "union_tag_invalid":
        tag = first.get("ctx", {}).get("tag", "?")
        return DecodeError("unknown_event_type", f"unknown event type {str(tag)[:80]!r}")
    if kind == "union_tag_not_found":
        return DecodeError("schema_error", "type: field required (the event type tag)")
    if not first["loc"]:
        return DecodeError("not_an_object", first["msg"])
    bounds = all(_beyond_bounds(e) for e in exc.errors(include_url=False))
    return DecodeError("out_of_bounds" if bounds else "schema_error", _describe(exc))


def _beyond_bounds(err: Any) -> bool:
    """Whether a validation error is a value above what the store and the engine hold (a round
    number over 2^31 - 1, a count over 1,000, an amount over its cents limit) or a time outside
    the years 2000 to 2100 (rulebook 10.3.4)."""
    if "years 2000 to 2100" in err["msg"]:
        return True
    return bool(err["type"] in ("less_than_equal", "less_than") and err["loc"] and err["loc"][-1] in _BOUNDED)


_BOUNDED = frozenset(f.rsplit(".", 1)[-1] for b in BOUNDS if b.refused_as == "out_of_bounds" for f in b.fields)
"""Fields whose upper bound is what a table can hold (rulebook 10.3.4, :data:`schemas.bounds.BOUNDS`:
round numbers, counts of cards, amounts, seq), as against the rules of a game (a die shows at
most 6: ``schema_error``)."""


def encode(event: Envelope) -> bytes:
    """Serialise an event to compact JSON bytes (the Kafka message value / a JSON Lines line)."""
    return event.__pydantic_serializer__.to_json(event)


TABLE_ID_IN_LINE = re.compile(rb'"table_id"\s*:\s*"((?:[^"\\]|\\.)*)"')
"""The first ``"table_id"`` of a line's raw text (group 1, still JSON-escaped): which table a
line is for, without decoding it (the audit's sharding, the publisher's chain-head lookup)."""


def raw_field(raw: bytes) -> dict[str, str]:
    """Rejected input for a dead-letter record: ``{"raw": text}`` (its line end dropped), or
    ``{"raw_base64": ...}`` when it is not UTF-8."""
    try:
        return {"raw": raw.decode("utf-8").rstrip("\r\n")}
    except UnicodeDecodeError:
        return {"raw_base64": base64.b64encode(raw).decode("ascii")}


def known_type(name: str) -> bool:
    """Return True if ``name`` is a dealing-event type tag."""
    return name in EVENT_TYPE_NAMES
