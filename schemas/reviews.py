"""Review events: what people decided about a finding, as immutable past-tense facts.

A finding's review history is a stream of these events keyed by ``finding_id`` (the finding's
deterministic ID, so a review stays attached across re-audits and redeliveries); its review
status is a projection of that stream (``projections/models/reviews.py``). Nothing is deleted or
updated: a finding disposed as ``NOT_A_VIOLATION`` stays in every list, shown apart, and a
reopened finding keeps its earlier disposition in its history.

Pure: only the standard library and pydantic. The console stamps ``review_id`` and
``reviewed_at`` (no default factory here, so a stored review decodes to the same model).
"""

from __future__ import annotations

import unicodedata
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AwareDatetime, ConfigDict, Field, StringConstraints, TypeAdapter, model_validator

from schemas.base import Frozen, Identifier

UserName = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._@-]+$")]
"""A console user's name (letters, digits and ``._@-``)."""


def identity_key(name: str) -> str:
    """The form in which two user names are one person: Unicode NFKC, case-folded, NFKC again
    (Unicode's NFKC_Casefold, so that ``rita``, ``Rita``, ``RITA`` and the full-width ``ｒｉｔａ``
    are one key). User names are unique in this form; the sign-in lock and four eyes compare it.

    Args:
        name: a user name as typed or stored (any text).

    Returns:
        The normalised key (never empty for a non-empty name).
    """
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


Note = Annotated[str, StringConstraints(max_length=4000)]
"""Free text a reviewer writes (escaped wherever it is shown)."""


class Cause(StrEnum):
    """Why the breach happened, as a disposition records it (the incident log's "type of error")."""

    DEALER_ERROR = "DEALER_ERROR"
    SUPERVISOR_ERROR = "SUPERVISOR_ERROR"
    DEVICE = "DEVICE"
    PATRON = "PATRON"
    DATA_ERROR = "DATA_ERROR"
    NOT_A_VIOLATION = "NOT_A_VIOLATION"


class ReviewStatus(StrEnum):
    """A finding's review status: the latest review event's kind, ``unreviewed`` without one.

    ``pending_approval``: a disposition was proposed (:class:`FindingDispositionProposed`) and
    waits for a manager's approval; the finding counts as open. An approval
    (:class:`FindingApproved`) leaves it ``disposed``, a rejection (:class:`FindingRejected`)
    ``reopened``.
    """

    UNREVIEWED = "unreviewed"
    ACKNOWLEDGED = "acknowledged"
    ASSIGNED = "assigned"
    DISPOSED = "disposed"
    REOPENED = "reopened"
    PENDING_APPROVAL = "pending_approval"


VideoUrl = Annotated[
    str, StringConstraints(max_length=2000, pattern=r"^https?://[^\s\x00-\x1f\x7f-\x9f\ufeff<>\"'`]+$")
]
"""A link to a clip in the casino's video management system: ``http`` or ``https`` only, no
spaces, control characters, quotes or angle brackets (the pattern names each class it refuses,
so that Python and a JSON Schema validator, whose whitespace classes differ, read it alike); shown
as a link, and escaped wherever it is shown."""


class VideoReference(Frozen):
    """A surveillance clip a reviewer attaches to a review as evidence (issue 22, item 4).

    Fields:
        camera: the camera's ID in the video management system (as configured per table).
        clip_id: the clip's ID there, if it has one (may be empty).
        url: a link to the clip (``http``/``https`` only; may be empty when only the ID is known).
        note: free text about what the clip shows (may be empty).

    At least one of ``clip_id`` and ``url`` is given (the JSON Schema says so too, in ``anyOf``:
    a client that reads the API's document knows it; issue 47, item 7).
    """

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": ["clip_id"], "properties": {"clip_id": {"minLength": 1}}},
                {"required": ["url"], "properties": {"url": {"minLength": 1}}},
            ]
        }
    )

    camera: Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$")]
    clip_id: Annotated[str, StringConstraints(max_length=200, pattern=r"^[^\x00-\x1f\x7f]*$")] = ""
    url: VideoUrl | Literal[""] = ""
    note: Note = ""

    @model_validator(mode="after")
    def _clip_or_url(self) -> VideoReference:
        if not self.clip_id and not self.url:
            raise ValueError("a video reference needs a clip ID or a URL")
        return self


class SignIn(Frozen):
    """How the person behind a review, approval or sign-off signed in (issue 48).

    Fields:
        method: ``local`` (a console account's password, the break-glass account once a
            directory is configured), ``directory`` (OpenID Connect: the person is ``issuer`` +
            ``subject``, never a display name) or ``token`` (an API token of the user).
        issuer: the directory's issuer URL (``directory`` only).
        subject: the person's subject at that issuer (``directory`` only).
    """

    method: Literal["local", "directory", "token"]
    issuer: Annotated[str, StringConstraints(max_length=500, pattern=r"^[^\x00-\x1f\x7f]*$")] = ""
    subject: Annotated[str, StringConstraints(max_length=255, pattern=r"^[^\x00-\x1f\x7f]*$")] = ""

    @property
    def label(self) -> str:
        """In words: ``local account``, ``API token``, or ``directory https://idp/realms/x, subject 3f2a...``."""
        if self.method == "directory":
            return f"directory {self.issuer}, subject {self.subject}"
        return "API token" if self.method == "token" else "local account"


class _Review(Frozen):
    """Fields every review event carries.

    Fields:
        review_id: unique ID of this review event (the console stamps a ULID).
        finding_id: the finding reviewed (32 hex characters, see ``schemas.findings.finding_id_for``).
        user: the authenticated user who made the review.
        reviewed_at: when it was made (timezone-aware).
        note: free text, may be empty.
        references: video clips attached as evidence (:class:`VideoReference`; added later as
            an optional field: a review stored before it reads as having none).
        signed_in_with: how ``user`` signed in (:class:`SignIn`; added later as an optional
            field: a review stored before it reads as None, not recorded).
        schema_version: version of this event's schema.
    """

    review_id: Identifier
    finding_id: Identifier
    user: UserName
    reviewed_at: AwareDatetime
    note: Note = ""
    references: tuple[VideoReference, ...] = Field(default=(), max_length=20)
    signed_in_with: SignIn | None = None
    schema_version: Literal[1] = 1


class FindingAcknowledged(_Review):
    """A reviewer has seen the finding and takes it in hand."""

    type: Literal["FindingAcknowledged"] = "FindingAcknowledged"


class FindingAssigned(_Review):
    """The finding was assigned to a person (``assignee``) for its disposition."""

    type: Literal["FindingAssigned"] = "FindingAssigned"
    assignee: UserName


class FindingDisposed(_Review):
    """The finding was closed with a cause and the corrective action taken.

    A ``NOT_A_VIOLATION`` cause marks the finding as no breach after review; it is shown apart,
    never removed.
    """

    type: Literal["FindingDisposed"] = "FindingDisposed"
    cause: Cause
    corrective_action: Annotated[str, StringConstraints(max_length=4000)] = ""


class FindingReopened(_Review):
    """A disposed (or acknowledged) finding was opened for review again."""

    type: Literal["FindingReopened"] = "FindingReopened"


class FindingDispositionProposed(_Review):
    """A disposition that needs a second pair of eyes was proposed (four-eyes rule).

    A ``NOT_A_VIOLATION`` cause on a voiding or integrity finding is recorded as this event, not
    as :class:`FindingDisposed`: the finding counts as open (``pending_approval``) until a
    manager other than the proposer approves it (:class:`FindingApproved`) or rejects it
    (:class:`FindingRejected`).
    """

    type: Literal["FindingDispositionProposed"] = "FindingDispositionProposed"
    cause: Cause
    corrective_action: Annotated[str, StringConstraints(max_length=4000)] = ""


class FindingApproved(_Review):
    """A manager approved a proposed disposition: the finding is disposed with its cause.

    Fields:
        proposal_id: the ``review_id`` of the :class:`FindingDispositionProposed` approved.
        cause: the cause approved (the proposal's, repeated so the event reads on its own).
    """

    type: Literal["FindingApproved"] = "FindingApproved"
    proposal_id: Identifier
    cause: Cause


class FindingRejected(_Review):
    """A manager rejected a proposed disposition (the note says why): the finding is open again.

    Fields:
        proposal_id: the ``review_id`` of the :class:`FindingDispositionProposed` rejected.
    """

    type: Literal["FindingRejected"] = "FindingRejected"
    proposal_id: Identifier


class FindingEvidenceAttached(_Review):
    """Evidence was attached to a finding: a note, video references, or both (issue 47, item 1).

    It records what someone added, not a decision: the finding's review status, cause,
    assignee, disposition and approval stay as the review events before it left them (the
    review status projection, ``rev_status.sql``, reads no status from this event).
    """

    type: Literal["FindingEvidenceAttached"] = "FindingEvidenceAttached"

    @model_validator(mode="after")
    def _carries_evidence(self) -> FindingEvidenceAttached:
        if not self.note.strip() and not self.references:
            raise ValueError("attached evidence needs a note or a video reference")
        return self


AnyReview = (
    FindingAcknowledged
    | FindingAssigned
    | FindingDisposed
    | FindingReopened
    | FindingDispositionProposed
    | FindingApproved
    | FindingRejected
    | FindingEvidenceAttached
)
"""Any review event class (the union of the review stream's kinds)."""

ReviewEvent = Annotated[AnyReview, Field(discriminator="type")]
"""Any review event (a discriminated union on ``type``)."""

REVIEW_ADAPTER: TypeAdapter[AnyReview] = TypeAdapter(ReviewEvent)
"""Validates a review event from a dict or JSON (``REVIEW_ADAPTER.validate_json(raw)``)."""

STATUS_OF_TYPE: dict[str, ReviewStatus] = {
    "FindingAcknowledged": ReviewStatus.ACKNOWLEDGED,
    "FindingAssigned": ReviewStatus.ASSIGNED,
    "FindingDisposed": ReviewStatus.DISPOSED,
    "FindingReopened": ReviewStatus.REOPENED,
    "FindingDispositionProposed": ReviewStatus.PENDING_APPROVAL,
    "FindingApproved": ReviewStatus.DISPOSED,
    "FindingRejected": ReviewStatus.REOPENED,
}
"""The review status each decision leaves the finding in (an event not named here, such as
:class:`FindingEvidenceAttached`, leaves it as it was)."""

EVIDENCE_TYPES = ("FindingEvidenceAttached",)
"""The review events that record evidence, not a decision: they change no status, cause,
assignee or approval."""
