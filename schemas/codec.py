"""Bytes <-> events: the one place dealing events are parsed, upcast and validated.

One :class:`pydantic.TypeAdapter` for the :data:`~schemas.events.DealingEvent` union is built at
import. :func:`decode` takes one JSON document (a line of a JSON Lines file or a Kafka message
value) and returns the event or raises :class:`DecodeError` with a reason fit for a dead-letter
record.
"""

from __future__ import annotations

import base64
import codecs
import json
import re
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from schemas.base import Envelope
from schemas.events import EVENT_TYPE_NAMES, DealingEvent

EVENT_ADAPTER: TypeAdapter[DealingEvent] = TypeAdapter(DealingEvent)
"""Validates any dealing event (JSON bytes, str or dict) against the discriminated union."""

CURRENT_VERSION = 1
"""The newest ``schema_version`` of every event type."""

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
UPCASTERS: dict[tuple[str, int], Upcaster] = {}
"""Pure dict-to-dict steps keyed by ``(type, from_version)``; each returns the next version's payload."""


class DecodeError(ValueError):
    """A message is not a valid dealing event. ``reason`` is one of ``malformed_json``,
    ``not_an_object``, ``unknown_event_type``, ``schema_error``; ``detail`` says what exactly."""

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
        DecodeError: with ``reason`` malformed_json, not_an_object, unknown_event_type or
            schema_error (missing or extra fields, wrong types, naive timestamps ...).
    """
    if UPCASTERS:
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise DecodeError("malformed_json", str(exc)[:300]) from None
        if not isinstance(doc, dict):
            raise DecodeError("not_an_object", f"expected a JSON object, got {type(doc).__name__}")
        data = json.dumps(_upcast(doc))
    try:
        return EVENT_ADAPTER.validate_json(data)
    except ValidationError as exc:
        raise _classify(exc, data) from None


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
    return DecodeError("schema_error", _describe(exc))


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


def without_bom(first_line: bytes) -> bytes:
    """The first line of a file without a UTF-8 byte-order mark (some Windows editors write one)."""
    return first_line.removeprefix(codecs.BOM_UTF8)


def known_type(name: str) -> bool:
    """Return True if ``name`` is a dealing-event type tag."""
    return name in EVENT_TYPE_NAMES
