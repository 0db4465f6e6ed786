"""Staff roster events: who a dealer or supervisor ID is, as immutable past-tense facts.

The roster is the stream of :class:`StaffMemberRecorded` events keyed by ``staff_id``; each
event is a full revision of one person's entry (name, role, active), and the roster in force is
the latest revision per ID (``dim_staff``, ``projections/records/staff.py``). Nothing is updated or
deleted: a deactivated dealer keeps their name beside the rounds they dealt, and every earlier
revision stays in the history with who recorded it and when.

Names are personal data: the console shows them to signed-in users only.

Pure: only the standard library and pydantic. The writer (``dealtrail staff import`` or the
console's admin page) stamps ``change_id`` and ``recorded_at``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AwareDatetime, StringConstraints, TypeAdapter

from schemas.base import Frozen, Identifier, PersonId
from schemas.reviews import UserName

StaffName = Annotated[
    str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True, pattern=r"^[^\x00-\x1f\x7f]+$")
]
"""A person's name as the roster writes it (printable text; every page escapes it)."""

StaffRole = Literal["dealer", "supervisor"]
"""What the person does on the floor: deals (``dealer_id`` of rounds) or supervises (the
``FLOOR`` actor of events: a floorperson, pit boss or shift manager)."""

StaffChange = Literal["added", "changed", "deactivated", "reactivated"]
"""What the revision did to the entry before it."""


class StaffMemberRecorded(Frozen):
    """A revision of one person's roster entry.

    Fields:
        change_id: unique ID of this revision (a ULID; a redelivery of it adds nothing).
        staff_id: the ID the dealing events carry (``dealer_id``, a ``FLOOR`` actor's ID).
        name: the person's name.
        role: ``dealer`` or ``supervisor``.
        active: False once the person left the roster (their name still shows beside old rounds).
        change: added, changed, deactivated or reactivated.
        recorded_by: the console user, or ``cli`` for ``dealtrail staff import``.
        recorded_at: when the change was recorded (timezone-aware).
        source: where it came from: ``console`` or ``import:<file name>``.
        schema_version: version of this event's schema.
    """

    type: Literal["StaffMemberRecorded"] = "StaffMemberRecorded"
    change_id: Identifier
    staff_id: PersonId
    name: StaffName
    role: StaffRole
    active: bool
    change: StaffChange
    recorded_by: UserName
    recorded_at: AwareDatetime
    source: Annotated[str, StringConstraints(min_length=1, max_length=300, pattern=r"^[^\x00-\x1f\x7f]+$")]
    schema_version: Literal[1] = 1


STAFF_ADAPTER: TypeAdapter[StaffMemberRecorded] = TypeAdapter(StaffMemberRecorded)
"""Validates a roster event from a dict or JSON (``STAFF_ADAPTER.validate_json(raw)``)."""
