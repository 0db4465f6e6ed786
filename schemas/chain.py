"""The per-table hash chain: every event carries the SHA-256 of the table's previous event.

``hash`` = SHA-256 over the event's canonical JSON with the ``hash`` field left out and
``prev_hash`` included, so altering, inserting or deleting any stored event breaks the chain at
that event. The event's ``hash_version`` says which canonical JSON: 2 (what :func:`stamped`
writes) is RFC 8785 (:func:`schemas.canonical.canonical_json`) of the event's JSON, so anyone
can recompute it from a standard; absent is dealtrail 0.2.0's encoding (pydantic's compact JSON
in the schema's field order), which stored events keep and :func:`chain_hash` still reads.
``hash_version`` is itself inside what the hash covers. Pure: standard library and pydantic only.
"""

from __future__ import annotations

import hashlib
from typing import TypeVar

from schemas.base import Envelope
from schemas.canonical import JCS, canonical_json_of

E = TypeVar("E", bound=Envelope)


_NULL_HASH = b',"hash":null'
HASH_VERSION = JCS
"""The ``hash_version`` :func:`stamped` writes (RFC 8785)."""


def chain_hash(event: Envelope) -> str:
    """The SHA-256 (64 hex characters) of ``event`` without its ``hash`` field, in the encoding
    its ``hash_version`` names (RFC 8785 for 2; 0.2.0's pydantic JSON when absent)."""
    data = event.__pydantic_serializer__.to_json(event, exclude={"hash"})
    if event.hash_version is None:
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha256(canonical_json_of(data)).hexdigest()


def stamped(event: E, prev_hash: str | None) -> tuple[E, bytes]:
    """``event`` with ``prev_hash``, ``hash_version`` (:data:`HASH_VERSION`) and its own
    ``hash`` set, and the JSON bytes it is stored and sent as (pydantic's, in schema order).
    """
    base = event.model_copy(update={"prev_hash": prev_hash, "hash": None, "hash_version": HASH_VERSION})
    data = base.__pydantic_serializer__.to_json(base)
    # without "hash": the first "hash":null is the envelope's (its fields come first, and no event
    # has a free-form object that could hold one)
    digest = hashlib.sha256(canonical_json_of(data.replace(_NULL_HASH, b"", 1))).hexdigest()
    linked = base.model_copy(update={"hash": digest})
    return linked, data.replace(b'"hash":null', b'"hash":"' + digest.encode() + b'"', 1)


def unchained(event: E) -> E:
    """``event`` without its chain fields (``prev_hash``, ``hash``, ``hash_version``): what it
    says, as it is compared with a copy of it that was (or was not) stamped."""
    if event.prev_hash is None and event.hash is None and event.hash_version is None:
        return event
    return event.model_copy(update={"prev_hash": None, "hash": None, "hash_version": None})


class Chainer:
    """Stamps ``prev_hash`` and ``hash`` on the events of any number of tables, in order.

    Attributes:
        heads: table ID -> (seq, hash) of the last event chained.
    """

    WINDOW = 256  # recent events per table remembered to re-stamp a re-sent copy identically

    def __init__(self, heads: dict[str, tuple[int, str]] | None = None) -> None:
        self.heads: dict[str, tuple[int, str]] = dict(heads or {})
        self._recent: dict[str, dict[int, tuple[Envelope, Envelope, bytes | None]]] = {}
        self._handed: dict[str, dict[int, tuple[str | None, str]]] = {}  # see take_over

    def stamps(self, table_id: str) -> list[tuple[int, str | None, str]]:
        """The stamps this chainer made for the last :attr:`WINDOW` events of a table, as
        ``(seq, prev_hash, hash)`` in seq order: what :meth:`take_over` needs to stamp a
        re-sent copy of one of them as the first copy was."""
        mine = {
            seq: (linked.prev_hash, str(linked.hash)) for seq, (_, linked, _) in self._recent.get(table_id, {}).items()
        }
        handed = {**self._handed.get(table_id, {}), **mine}
        return [(seq, *handed[seq]) for seq in sorted(handed)[-self.WINDOW :]]

    def take_over(self, table_id: str, head: tuple[int, str], stamps: list[tuple[int, str | None, str]]) -> None:
        """Go on with the chain of a table stamped by another chainer (an earlier audit).

        Args:
            table_id: the table.
            head: ``(seq, hash)`` of its last chained event.
            stamps: that chainer's :meth:`stamps` for the table. A re-sent copy of one of those
                events that is stamped with the same ``prev_hash`` gets the same ``hash`` (the hash
                covers the whole content), and only then is it given that stamp.
        """
        self.heads[table_id] = head
        self._handed[table_id] = {seq: (prev, h) for seq, prev, h in stamps}

    def link(self, event: E) -> E:
        """Return ``event`` with ``prev_hash`` set to its table's head and its own ``hash``.

        An event whose seq is not above the head's (a re-sent or conflicting copy) is linked to
        the head but does not become the head, so the chain of the table goes on unbroken.
        """
        return self.link_encoded(event)[0]

    def link_encoded(self, event: E) -> tuple[E, bytes]:
        """:meth:`link`, with the linked event's canonical JSON bytes."""
        head = self.heads.get(event.table_id)
        linked, data = stamped(event, head[1] if head else None)
        if head is None or event.seq > head[0]:
            self.heads[event.table_id] = (event.seq, linked.hash)  # type: ignore[assignment]
        return linked, data

    def stamp(self, event: E) -> E:
        """Chain an event that carries no hash; adopt the chain of one that does.

        An event with a ``hash`` is returned unchanged and becomes its table's head (a file
        chained upstream keeps its chain). An exact re-sent copy of one of the table's last
        :attr:`WINDOW` events gets the same stamp as the first copy (so the pair stays an exact
        duplicate, which the engine and the store ignore); a conflicting copy (same seq, other
        content) is linked to the head like :meth:`link` does.

        Args:
            event: a validated event, in its table's arrival order.

        Returns:
            The event with ``prev_hash`` and ``hash`` set.
        """
        return self.stamp_encoded(event)[0]

    def stamp_encoded(self, event: E) -> tuple[E, bytes | None]:
        """:meth:`stamp`, with the canonical JSON bytes of an event it stamped (None for an
        event that already carried its hash: its own bytes stand)."""
        head = self.heads.get(event.table_id)
        if event.hash is not None:
            if head is None or event.seq > head[0]:
                self.heads[event.table_id] = (event.seq, event.hash)
            return event, None
        event = unchained(event)  # a stray prev_hash or hash_version without a hash says nothing
        recent = self._recent.setdefault(event.table_id, {})
        if head is not None and event.seq <= head[0]:
            prior = recent.get(event.seq)
            if prior is not None and prior[0] == event:
                copy = prior[1]
                data = prior[2] if prior[2] is not None else copy.__pydantic_serializer__.to_json(copy)
                return copy, data  # type: ignore[return-value]
            handed = self._handed.get(event.table_id, {}).get(event.seq)
            if prior is None and handed is not None:
                again, data = stamped(event, handed[0])
                if again.hash == handed[1]:  # an exact copy of the event stamped so before
                    return again, data
            return self.link_encoded(event)
        linked, data = self.link_encoded(event)
        recent[event.seq] = (event, linked, data)
        if len(recent) > self.WINDOW:
            del recent[next(iter(recent))]
        return linked, data

    def remember(self, event: E) -> None:
        """Take note of a chained event already in the trail (read back from where it is kept):
        it may become the head, and a re-sent unchained copy of it gets the same stamp."""
        if event.hash is None:
            return
        head = self.heads.get(event.table_id)
        if head is None or event.seq > head[0]:
            self.heads[event.table_id] = (event.seq, event.hash)
        recent = self._recent.setdefault(event.table_id, {})
        recent[event.seq] = (unchained(event), event, None)
        if len(recent) > self.WINDOW:
            del recent[next(iter(recent))]

    def covers(self, table_id: str, seq: int) -> bool:
        """True if ``seq`` lies within the span of the table's remembered events (its lowest
        remembered seq or above): an event there that :meth:`recalled` does not know was never
        chained here (it arrived out of seq order), rather than too old to compare."""
        recent = self._recent.get(table_id)
        return recent is not None and bool(recent) and seq >= min(recent)

    def recalled(self, table_id: str, seq: int) -> tuple[Envelope, Envelope] | None:
        """The event of ``table_id`` at ``seq`` among the last :attr:`WINDOW` ones chained or
        remembered, as ``(without chain fields, with them)``; None if not among them."""
        prior = self._recent.get(table_id, {}).get(seq)
        return None if prior is None else (prior[0], prior[1])


_PREV_KEY = b',"prev_hash":'
_HASH_KEY = b',"hash":'
_VERSION_KEY = b',"hash_version":'
_NULL = b"null"
_HASH_VALUE = 66
"""Bytes of a hash value in canonical JSON: 64 hex digits and two quotes."""

CopyKey = tuple[int, int]
"""What :func:`copy_key` returns: ``(content, chain)``, two 64-bit integers."""


def _value_end(data: bytes, at: int) -> int:
    """Where the chain-field value (``null`` or a quoted 64-digit hash) starting at ``at`` ends."""
    return at + 4 if data.startswith(_NULL, at) else at + _HASH_VALUE


def copy_key(data: bytes, event_hash: str | None) -> CopyKey:
    """What tells an exact copy of an event from another event at its place.

    ``content`` is a 64-bit digest of the event's canonical JSON (``data``, as
    :func:`schemas.codec.encode` or :func:`stamped` wrote it) with its chain fields
    (``prev_hash``, ``hash``, ``hash_version``) left out: everything the event says, its ``event_id`` included.
    ``chain`` is a digest of its ``hash``, 0 without one. Two events are the same fact when
    their contents are equal and, if the later one carries a hash, their chains too
    (:func:`same_fact`): an event re-sent without its chain fields is a copy of the stamped
    one stored; one re-sent with another chain (another ``prev_hash`` or ``hash``) is not.

    The digests are Python's hash of bytes and of text, SipHash-1-3 (PEP 456): 64 bits, keyed
    per process (a feed cannot aim a collision at them), so a key is only ever compared with
    keys made by the same process. Never 0 for content (0 marks "nothing known").

    Args:
        data: the event's canonical JSON bytes (the envelope's fields first: the first
            ``,"prev_hash":`` in it is the envelope's, since a string value holds its quotes
            escaped).
        event_hash: the event's ``hash`` (64 hex digits) or None.

    Raises:
        ValueError: ``data`` holds no ``prev_hash`` field followed by ``hash`` (not canonical).
    """
    start = data.find(_PREV_KEY)
    if start < 0:
        raise ValueError("not an event's canonical JSON: no prev_hash field")
    mid = _value_end(data, start + len(_PREV_KEY))
    if not data.startswith(_HASH_KEY, mid):
        raise ValueError("not an event's canonical JSON: prev_hash is not followed by hash")
    end = _value_end(data, mid + len(_HASH_KEY))
    if data.startswith(_VERSION_KEY, end):  # hash_version, a chain field too (one digit)
        end += len(_VERSION_KEY) + 1
    content = hash(data[:start] + data[end:]) or 1
    return content, 0 if event_hash is None else hash(event_hash) or 1


def same_fact(stored: CopyKey, arrived: CopyKey) -> bool:
    """True if the event of :func:`copy_key` ``arrived`` is an exact copy of the one of
    ``stored``: the same content (its ID included) and, if the copy carries a hash, the same hash."""
    return stored[0] == arrived[0] and (arrived[1] == 0 or arrived[1] == stored[1])
