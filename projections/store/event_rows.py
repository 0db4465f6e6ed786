"""Rows of the ``events`` table built from validated events, as Arrow record batches.

The embedded audit's workers hold each event validated (its fields) and its canonical JSON
bytes; they build the ``events`` rows here, in Arrow, and hand them to the single writer as
an Arrow IPC file, which the writer maps and appends with DuckDB's Arrow scan
(:meth:`projections.store.store.Store.write_batch`, ``event_rows``). No JSON is parsed again and no
row passes through Python in the writer.

The columns and values are those the writer derived from each staged JSON line before
(``projections/store/sql/001_schema.sql``; the values of :data:`projections.store.store.EVENT_COLUMNS`):
``payload`` is the event's canonical JSON text and ``payload_hash`` the MD5 (hex) of it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pyarrow as pa

from schemas.base import Envelope

EVENTS_ARROW_SCHEMA = pa.schema(
    [
        ("event_id", pa.string()),
        ("payload_hash", pa.string()),
        ("table_id", pa.string()),
        ("game", pa.string()),
        ("round_id", pa.string()),
        ("deck_id", pa.string()),
        ("seq", pa.int64()),
        ("type", pa.string()),
        ("occurred_at", pa.timestamp("us", tz="UTC")),
        ("recorded_at", pa.timestamp("us", tz="UTC")),
        ("actor_role", pa.string()),
        ("actor_id", pa.string()),
        ("payload", pa.json_(pa.string())),  # DuckDB reads arrow.json as JSON without parsing it
        ("arrival", pa.int64()),
    ]
)
"""The ``events`` table's columns, in its order, as an Arrow schema (one row per event)."""

CHUNK_ROWS = 8192
"""Rows gathered in Python before they become one Arrow record batch (bounds the Python
objects a worker holds; the record batches themselves go to the stage file as they are made)."""

_STRING = pa.string()
_TIME = pa.timestamp("us", tz="UTC")
_INT = pa.int64()
_JSON = pa.json_(pa.string())


def _batch(rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
    cols = list(zip(*rows, strict=True))
    arrays = [
        pa.array(cols[0], _STRING),
        pa.array(cols[1], _STRING),
        pa.array(cols[2], _STRING),
        pa.array(cols[3], _STRING),
        pa.array(cols[4], _STRING),
        pa.array(cols[5], _STRING),
        pa.array(cols[6], _INT),
        pa.array(cols[7], _STRING),
        pa.array(cols[8], _TIME),  # aware datetimes: Arrow stores the UTC instant
        pa.array(cols[9], _TIME),
        pa.array(cols[10], _STRING),
        pa.array(cols[11], _STRING),
        pa.ExtensionArray.from_storage(_JSON, pa.array(cols[12], _STRING)),
        pa.array(cols[13], _INT),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=EVENTS_ARROW_SCHEMA)


class EventRowsFile:
    """One batch of ``events`` rows, written to an Arrow IPC file as they are added.

    Rows are distinct by ``(event_id, payload_hash)`` within the file: a second exact copy of an
    event in the same batch is not added (the first arrival is kept, as the store keeps the
    first it stored). The file is what :func:`read_event_rows` reads back.

    Args:
        path: the stage file to write (created; the caller's folder is owner-only).

    Raises:
        OSError: the file cannot be written.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows = 0
        """Rows added (events, after the in-batch copies were left out)."""
        self._pending: list[tuple[Any, ...]] = []
        self._seen: set[tuple[str, str]] = set()
        self._sink = pa.OSFile(str(path), "wb")
        self._writer = pa.ipc.new_file(self._sink, EVENTS_ARROW_SCHEMA)

    def add(self, arrival: int, event: Envelope, data: bytes) -> bool:
        """Add the row of one validated event.

        Args:
            arrival: where it arrived (file line number), which orders one table's events that
                share a seq.
            event: the validated event.
            data: its canonical JSON bytes (:func:`schemas.codec.encode`, or the chain's stamp).

        Returns:
            False if the batch already holds this very event (same ID and bytes): nothing added.
        """
        digest = hashlib.md5(data).hexdigest()
        key = (event.event_id, digest)
        if key in self._seen:
            return False
        self._seen.add(key)
        self._pending.append(
            (
                event.event_id,
                digest,
                event.table_id,
                event.game,  # a StrEnum member is its value (Arrow takes it as the str it is)
                event.round_id,
                event.deck_id,
                event.seq,
                event.type,  # type: ignore[attr-defined]  # every concrete event has its tag
                event.occurred_at,
                event.recorded_at,
                event.actor.role,
                event.actor.id,
                data,  # UTF-8 JSON: Arrow takes the bytes as they are into the string column
                arrival,
            )
        )
        self.rows += 1
        if len(self._pending) >= CHUNK_ROWS:
            self._spill()
        return True

    def _spill(self) -> None:
        if self._pending:
            self._writer.write_batch(_batch(self._pending))
            self._pending = []

    def close(self) -> None:
        """Write the rows still gathered and close the file."""
        self._spill()
        self._shut()
        self._seen = set()

    def _shut(self) -> None:
        if not self._sink.closed:
            try:
                self._writer.close()
            finally:
                self._sink.close()

    def discard(self) -> None:
        """Close and delete the file (a run that ends in an error)."""
        try:
            self._shut()
        finally:
            self.path.unlink(missing_ok=True)


def read_event_rows(path: Path) -> pa.Table:
    """The rows of a stage file :class:`EventRowsFile` wrote, memory-mapped (not copied).

    Raises:
        OSError, pyarrow.ArrowInvalid: the file is missing or not such a file.
    """
    # the map stays open while the table's buffers point into it
    return pa.ipc.open_file(pa.memory_map(str(path))).read_all()
