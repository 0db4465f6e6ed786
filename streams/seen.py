"""The events each table has applied, by seq, to tell a re-sent exact copy from a contradiction.

A device gateway re-sends its buffer after a reconnect; a daily export overlaps the one before.
Such a copy can come any distance behind its table's head, further than the engine's own memory
(:data:`streams.engine.engine.RECALLED` events per table, kept small because it is part of
every table state). The audit, the worker and the re-audit therefore keep, beside the engine,
one :class:`SeenIndex`: per table and seq, the :func:`schemas.chain.copy_key` of the event the
engine applied there. An event that arrives at or below its table's last seq is looked up
before it is chained and applied: the same fact (:func:`schemas.chain.same_fact`) is a
duplicate delivery, counted and dropped at the edge (the engine never sees it, the store never
gets it); anything else goes on to the engine, which judges it as before (a contradiction is one
``DT-sequence-gap``).

Memory stays bounded whatever the file's length: 16 bytes per event, in chunks of
:data:`CHUNK` seqs; at most ``memory_chunks`` chunks are held in memory (the newest made or
used), the others are written to one spill file in a private folder and read back 16 bytes at a
time when a copy asks for them. What stays in memory per chunk on disk is its file offset (one
dict entry per :data:`CHUNK` events). The keys are made by this process
(:func:`schemas.chain.copy_key`), so an index lives no longer than its process.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from collections import OrderedDict
from pathlib import Path

from schemas.chain import CopyKey, copy_key, same_fact
from schemas.codec import encode
from schemas.events import DealingEvent

CHUNK = 1024
"""Seqs per chunk of the index (a chunk is 16 KiB: two 64-bit integers per seq)."""
MEMORY_CHUNKS = 256
"""Chunks held in memory by default (4 MiB); the older ones are in the spill file."""
MAX_OTHERS = 65_536
"""Seqs whose contradicting events (judged, not applied) are remembered, the latest ones."""
_SLOT = 16
_CHUNK_BYTES = CHUNK * _SLOT


class SeenIndex:
    """Per table and seq, the copy key of the event applied there (see the module docstring).

    Args:
        folder: where the spill file is made (owner-only, removed by :meth:`close`); None: a
            private temporary folder of the system's.
        memory_chunks: chunks held in memory at most (>= 1).
    """

    def __init__(self, folder: Path | None = None, memory_chunks: int = MEMORY_CHUNKS) -> None:
        self._folder = folder
        self._max = max(1, memory_chunks)
        self._memory: OrderedDict[tuple[str, int], array[int]] = OrderedDict()
        self._spilled: dict[tuple[str, int], int] = {}  # chunk -> its offset in the spill file
        self._others: dict[tuple[str, int], list[CopyKey]] = {}  # events judged, not applied
        self._fd: int | None = None
        self._path: Path | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.spilled_bytes = 0
        """Bytes of the spill file."""

    def add(self, table_id: str, seq: int, key: CopyKey) -> None:
        """Note that the event with ``key`` was applied at ``seq`` of ``table_id`` (seq >= 0)."""
        c, i = divmod(seq, CHUNK)
        chunk = self._memory.get((table_id, c))
        if chunk is None:
            chunk = self._load(table_id, c)
        chunk[2 * i] = key[0]
        chunk[2 * i + 1] = key[1]

    def get(self, table_id: str, seq: int) -> CopyKey | None:
        """The key noted at ``seq`` of ``table_id``, or None if none was."""
        c, i = divmod(seq, CHUNK)
        chunk = self._memory.get((table_id, c))
        if chunk is not None:
            content, chain = chunk[2 * i], chunk[2 * i + 1]
        else:
            offset = self._spilled.get((table_id, c))
            if offset is None or self._fd is None:
                return None
            slot = array("q", os.pread(self._fd, _SLOT, offset + i * _SLOT))
            content, chain = slot[0], slot[1]
        return None if content == 0 else (content, chain)

    def knows(self, table_id: str, seq: int) -> bool:
        """True if an event of ``table_id`` at ``seq`` was noted (applied or not)."""
        return self.get(table_id, seq) is not None or (table_id, seq) in self._others

    def is_copy(self, event: DealingEvent, data: bytes | None = None) -> bool:
        """True if ``event`` is the same fact as an event judged at its table and seq before:
        the one applied there, or one that contradicted it (:meth:`note`).

        Args:
            event: the event that arrived (at or below its table's last seq).
            data: its canonical JSON (:func:`schemas.codec.encode`), if at hand.
        """
        where = (event.table_id, event.seq)
        stored = self.get(*where)
        others = self._others.get(where)
        if stored is None and others is None:
            return False
        mine = copy_key(encode(event) if data is None else data, event.hash)
        if stored is not None and same_fact(stored, mine):
            return True
        return others is not None and any(same_fact(o, mine) for o in others)

    def note(self, event: DealingEvent, data: bytes, applied: bool = True) -> None:
        """Note an event the engine judged, from its canonical JSON ``data`` (as chained).

        Args:
            event: the event.
            data: its canonical JSON.
            applied: True if the engine applied it at its seq (:meth:`add`); False for an event
                it judged there without applying it (a contradiction, a seq it had passed):
                its copies are then duplicates too, not new contradictions. Of those, the last
                :data:`MAX_OTHERS` are kept (in memory); a copy of an older one is judged by the
                engine again (the same finding, which the store keeps once).
        """
        key = copy_key(data, event.hash)
        if applied:
            self.add(event.table_id, event.seq, key)
            return
        where = (event.table_id, event.seq)
        others = self._others.pop(where, [])
        others.append(key)
        self._others[where] = others
        if len(self._others) > MAX_OTHERS:
            del self._others[next(iter(self._others))]

    def _load(self, table_id: str, c: int) -> array[int]:
        """The chunk ``c`` of ``table_id`` in memory (read back or new), making room for it."""
        offset = self._spilled.get((table_id, c))
        chunk = array("q")
        if offset is not None and self._fd is not None:
            chunk.frombytes(os.pread(self._fd, _CHUNK_BYTES, offset))
        else:
            chunk.frombytes(bytes(_CHUNK_BYTES))
        self._memory[(table_id, c)] = chunk
        while len(self._memory) > self._max:
            self._spill(*self._memory.popitem(last=False))
        return chunk

    def _spill(self, where: tuple[str, int], chunk: array[int]) -> None:
        if self._fd is None:
            if self._folder is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="dealtrail-seen-")  # made 0700
                self._folder = Path(self._tmp.name)
            self._path = self._folder / f"seen-{os.getpid()}-{id(self)}.bin"
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        offset = self._spilled.get(where)
        if offset is None:
            offset = self._spilled[where] = self.spilled_bytes
            self.spilled_bytes += _CHUNK_BYTES
        os.pwrite(self._fd, chunk.tobytes(), offset)

    def close(self) -> None:
        """Remove the spill file (the index is empty afterwards)."""
        self._memory.clear()
        self._spilled.clear()
        self._others.clear()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._path is not None:
            self._path.unlink(missing_ok=True)
            self._path = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        self.spilled_bytes = 0

    def __len__(self) -> int:
        """Chunks held (in memory and on disk)."""
        return len(self._memory) + len(self._spilled.keys() - self._memory.keys())
