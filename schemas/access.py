"""Access-log entries: who did what to the console, when, from where, and how it ended.

An entry is an immutable fact the console makes (a sign-in, a failed sign-in, a lock, a logout,
an expired session, a user change, a token issued or revoked, an export, a review). The store's
one writer gives each entry its place in one hash chain when it stores it (``seq``, ``prev_hash``,
``hash``: :func:`record_hash`), so altering, removing or inserting a stored entry breaks the chain
at that entry (``dealtrail verify``). Nothing in an entry is a password or a token: the console
puts in names, addresses and what happened.

Pure: only the standard library and pydantic. The console stamps ``entry_id`` and ``at``.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

from pydantic import AwareDatetime, StringConstraints, TypeAdapter

from schemas.base import Frozen, Identifier
from schemas.canonical import JCS, canonical_sha256

Outcome = Literal["ok", "refused", "throttled", "locked", "expired"]
"""How an attempt ended: done; refused (wrong password, no right); throttled (too soon after
failures, answered 429); locked (the account is locked, answered 429); expired (a session ran out)."""

Text = Annotated[str, StringConstraints(max_length=500)]


class AccessEntry(Frozen):
    """One security event of the console.

    Fields:
        entry_id: unique ID (the console stamps a ULID); a redelivered entry is stored once.
        at: when it happened (timezone-aware).
        user: the signed-in user, or the name typed at a failed sign-in (at most 200 characters,
            control characters replaced); empty when there is none.
        client: the client's address as the console saw it (``request.client.host``).
        kind: what happened: ``login_succeeded``, ``login_failed``, ``login_locked``, ``logout``,
            ``session_expired``, ``password_changed``, ``password_reset``, ``user_added``,
            ``role_changed``, ``user_deactivated``, ``user_unlocked``, ``token_issued``,
            ``token_revoked``, ``download``, ``review``, ``totp_enrolled``, ``report_signed``,
            ``report_revised``, ``property_named`` (lower case and
            ``_``: new kinds may be added).
        outcome: see :data:`Outcome`.
        detail: a few words more (the user changed, the finding reviewed, the file downloaded).
        schema_version: version of this entry's schema.
    """

    entry_id: Identifier
    at: AwareDatetime
    user: Annotated[str, StringConstraints(max_length=200)]
    client: Annotated[str, StringConstraints(max_length=100)]
    kind: Annotated[str, StringConstraints(min_length=1, max_length=40, pattern=r"^[a-z_]+$")]
    outcome: Outcome
    detail: Text = ""
    schema_version: Literal[1] = 1


class AccessRecord(AccessEntry):
    """An entry as stored: with its place in the access log's hash chain.

    Fields:
        seq: its position in the log (1, 2, ...).
        prev_hash: the ``hash`` of the entry at ``seq - 1`` (None for the first).
        hash: :func:`record_hash` of this record.
        hash_version: the encoding ``hash`` is computed over: 2 (:data:`HASH_VERSION`, what the
            store's writer stamps now) is RFC 8785 of the record's JSON, ``hash_version``
            included; None is an entry written by dealtrail 0.2.0 (pydantic's compact JSON in
            field order, without ``hash_version``), which keeps verifying that way.
    """

    seq: int
    prev_hash: str | None = None
    hash: str | None = None
    hash_version: Literal[2] | None = None


ACCESS_ADAPTER: TypeAdapter[AccessEntry] = TypeAdapter(AccessEntry)
"""Validates an access entry from JSON (the access-log topic's records)."""


HASH_VERSION = JCS
"""The ``hash_version`` the store's writer stamps on new access-log entries (RFC 8785)."""


def record_hash(record: AccessRecord) -> str:
    """The SHA-256 (64 hex characters) of ``record`` without its ``hash`` field (``seq``,
    ``prev_hash`` and ``hash_version`` included), in the encoding its ``hash_version`` names,
    as ``schemas.chain`` hashes dealing events.

    Version 2: RFC 8785 (:func:`schemas.canonical.canonical_json`) of the record's JSON, whose
    ``at`` is ISO 8601 in UTC with ``Z`` (fractional seconds, six digits, only when the instant
    has them). None (dealtrail 0.2.0): pydantic's compact JSON in field order, without
    ``hash_version``, byte for byte what 0.2.0 hashed.
    """
    if record.hash_version is None:
        legacy = record.model_dump_json(exclude={"hash", "hash_version"})
        return hashlib.sha256(legacy.encode()).hexdigest()
    return canonical_sha256(record.model_dump(mode="json", exclude={"hash"}))


def clean_name(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters with control characters replaced by ``?`` (a name
    typed at the sign-in form is stored as typed, but never as a line break or escape)."""
    return "".join("?" if ord(c) < 32 or ord(c) == 127 else c for c in text[:limit])
