"""The JSON API's Pydantic models: the request body it reads and the answers its OpenAPI document
describes (the answers' fields named are always there; more may be)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from schemas.reviews import Cause, VideoReference


def _unicode_text(value: str) -> str:
    """Text a store and a JSON answer can hold: no lone surrogate (U+D800 to U+DFFF alone; a form's
    fields and library callers reach the model without the JSON parser's own check)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be Unicode text (a lone surrogate such as \\ud800 is not)") from None
    return value


Text = Annotated[str, AfterValidator(_unicode_text)]

_ISO_START = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


def _iso_date_time(value: Any) -> Any:
    """An API time is an ISO 8601 date and time (a number of seconds or a bare date is not)."""
    if isinstance(value, str) and not _ISO_START.match(value):
        raise ValueError("must be an ISO 8601 date and time, e.g. 2026-11-27T18:00:00+00:00")
    return value


ApiTime = Annotated[datetime, BeforeValidator(_iso_date_time)]


class ErrorMessage(BaseModel):
    """An answer that refuses a request for another reason than its values (401, 403, 404, 503)."""

    detail: str = Field(description="Why, in one sentence.")


class _Open(BaseModel):
    """An answer's documented shape: the fields named are always there; more may be (so the
    document stays true when a field is added)."""

    model_config = ConfigDict(extra="allow")


class FindingRow(_Open):
    """One finding in the API's answers (times UTC with their offset)."""

    finding_id: str
    rule_id: str
    citation: str
    game: str
    severity: str
    table_id: str
    round_id: str | None
    status: str
    message: str
    detected_at: datetime
    review_status: str


class FindingsPage(_Open):
    """``GET /api/v1/findings``: ``total`` findings match; these start at ``offset``."""

    total: int
    offset: int
    findings: list[FindingRow]


class ReviewRow(_Open):
    """One review event of a finding, as stored: ``user`` made it (the name a review's reply,
    ``POST .../reviews``, uses too); ``user_name`` is the same name under its old key, kept for
    clients of the first API version and deprecated."""

    review_id: str
    type: str
    user: str
    user_name: str = Field(deprecated=True, description="Deprecated: the same as `user`.")
    reviewed_at: datetime


class FindingDetail(FindingRow):
    """``GET /api/v1/findings/{finding_id}``: the finding and its review history."""

    reviews: list[ReviewRow]


class StoredReview(_Open):
    """``POST /api/v1/findings/{finding_id}/reviews``: the review event recorded."""

    type: str
    review_id: str
    finding_id: str
    user: str
    reviewed_at: datetime


class FloorTable(_Open):
    """One table on the floor."""

    table_id: str


class Floor(_Open):
    """``GET /api/v1/floor``: every table."""

    tables: list[FloorTable]


_WORDS = {"type": "string", "pattern": r"\S"}  # not blank: what the console takes as a note written


def _when(action: str, then: dict[str, Any]) -> dict[str, Any]:
    return {"if": {"properties": {"action": {"const": action}}}, "then": then}


_NEEDS = (
    _when("dispose", {"required": ["cause"], "properties": {"cause": {"not": {"type": "null"}}}}),
    _when("reject", {"required": ["note"], "properties": {"note": _WORDS}}),
    _when("assign", {"required": ["assignee"], "properties": {"assignee": {"type": "string", "minLength": 1}}}),
    _when(
        "attach",
        {
            "anyOf": [
                {"required": ["note"], "properties": {"note": _WORDS}},
                {"required": ["references"], "properties": {"references": {"type": "array", "minItems": 1}}},
            ]
        },
    ),
)
"""What each review action needs, as JSON Schema (:class:`ReviewRequest`)."""


class ReviewRequest(BaseModel):
    """Body of ``POST /api/v1/findings/{finding_id}/reviews`` (unknown fields are refused).

    Attributes:
        action: acknowledge, assign, dispose or reopen; approve or reject (a manager, of a
            disposition someone else proposed); attach: a note or video references recorded as
            evidence (``FindingEvidenceAttached``), which changes no status, cause, assignee or
            approval.
        cause: with ``dispose``: DEALER_ERROR, SUPERVISOR_ERROR, DEVICE, PATRON, DATA_ERROR or
            NOT_A_VIOLATION (on a voiding or integrity finding only proposed: a manager other
            than the proposer approves it).
        corrective_action: with ``dispose``: what was done about it (required for the
            severities the settings name).
        assignee: with ``assign``: a user who can review.
        note: free text (required with ``reject``, and with ``dispose`` for the severities the
            settings name).
        references: video clips attached as evidence, each with ``camera``, ``clip_id``,
            ``url`` (http or https only) and ``note``; a clip ID or a URL is needed (at most 20).

    What each action needs is stated in the document too (``allOf`` of ``if``/``then``, JSON
    Schema 2020-12 as OpenAPI 3.1 reads it), so that a request the document allows is never
    refused for its shape (issue 47, item 7): ``dispose`` a cause, ``reject`` a note,
    ``assign`` an assignee, ``attach`` a note or a reference. What depends on the store (who can
    be assigned, what a finding's severity needs) is a 409.
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra={"allOf": list(_NEEDS)})

    action: Literal["acknowledge", "assign", "dispose", "reopen", "approve", "reject", "attach"]
    cause: Cause | None = None
    corrective_action: Text = Field(default="", max_length=4000)
    assignee: Text | None = Field(default=None, max_length=64)
    note: Text = Field(default="", max_length=4000)
    references: list[VideoReference] = Field(default=[], max_length=20)
