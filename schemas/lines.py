"""Bounded reading of event files: one line at a time, never more than a set size in memory.

Every reader of event files (the embedded audit and its workers, ``dealtrail publish`` and its
chain-head pre-pass) goes through :func:`read_lines`, so no single line can exhaust memory:

- A line longer than ``max_bytes`` (the setting ``DEALTRAIL_MAX_RECORD_BYTES``, passed in) is
  not buffered: its first :data:`RAW_KEEP` bytes are kept, its length and SHA-256 are computed
  while streaming over the rest, and it comes out as one :class:`Line` with ``sha256`` set, for
  the caller to dead-letter as ``too_large``. Line numbers stay right.
- Line ends are LF, CRLF and a lone CR (a file saved with classic Mac line ends is read line by
  line, not as one endless line). JSON never needs a raw CR inside an event: a writer escapes it
  in strings, and a JSON Lines writer puts none between tokens.
- A UTF-8 byte-order mark at the start of any line is dropped (files joined with ``cat``, one of
  them saved by an editor that writes a mark, have one in the middle).

Only the standard library is used; the caller opens the file and passes the limit.
"""

from __future__ import annotations

import codecs
import hashlib
from collections.abc import Iterator
from typing import Any, BinaryIO, NamedTuple

RAW_KEEP = 256 * 1024
"""Bytes of a rejected input a dead-letter record carries (bytes); a longer input is cut to this,
and the record keeps its full length and SHA-256."""

READ_CHUNK = 64 * 1024
"""Bytes read from the file at a time (bytes): a line longer than this is read in pieces."""

BOM = codecs.BOM_UTF8


class Line(NamedTuple):
    """One line of an event file.

    Attributes:
        number: the line's number in the file (1-based; blank lines count).
        data: the line without its line end and without a leading UTF-8 byte-order mark; for a
            too-large line, its first :data:`RAW_KEEP` bytes (cut at a character boundary).
        size: the whole line's length (bytes, without line end and mark).
        read: bytes taken from the file for this line, line end included (for progress).
        sha256: for a line over the limit, the SHA-256 (hex) of the whole line; else None.
    """

    number: int
    data: bytes
    size: int
    read: int
    sha256: str | None = None

    @property
    def too_large(self) -> bool:
        """Whether the line was over the limit (``data`` is then only its beginning)."""
        return self.sha256 is not None


def utf8_prefix(data: bytes, limit: int) -> bytes:
    """The first ``limit`` bytes of ``data``, shortened by up to 3 bytes so that a UTF-8
    character is not cut in two (unchanged if the text is not UTF-8 anyway)."""
    if len(data) <= limit:
        return data
    return _whole_characters(data[:limit])


def _whole_characters(cut: bytes) -> bytes:
    """``cut`` (the beginning of a longer text) without a UTF-8 character cut in two at its end."""
    for drop in range(4):
        try:
            (cut[: len(cut) - drop] if drop else cut).decode("utf-8")
        except UnicodeDecodeError:
            continue
        return cut[: len(cut) - drop] if drop else cut
    return cut


class _Pending:
    """The line being read: its pieces while under the limit, else its hash and beginning."""

    __slots__ = ("digest", "head", "marked", "parts", "read", "size")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.read = 0
        self.digest: Any = None  # hashlib's SHA-256 object
        self.head = b""
        self.marked = False  # a leading byte-order mark was looked for already

    def add(self, piece: bytes, max_bytes: int, keep: int) -> None:
        if self.digest is not None:
            self.digest.update(piece)
            self.size += len(piece)
            if len(self.head) < keep:
                self.head += piece[: keep - len(self.head)]
            return
        self.parts.append(piece)
        self.size += len(piece)
        if self.size > max_bytes:
            joined = self._joined()
            if len(joined) > max_bytes and self.marked:
                self.digest = hashlib.sha256(joined)
                self.head = joined[:keep]
                self.parts = []
            else:
                self.parts = [joined]
            self.size = len(joined)

    def _joined(self) -> bytes:
        joined = self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)
        if not self.marked:
            if joined[:3] == BOM:
                joined = joined[3:]
                self.marked = True
            else:  # a line shorter than a mark may still become one
                self.marked = not BOM.startswith(joined)
        return joined

    def line(self, number: int) -> Line:
        if self.digest is not None:
            head = _whole_characters(self.head) if self.size > len(self.head) else self.head
            return Line(number, head, self.size, self.read, self.digest.hexdigest())
        data = self._joined() if self.parts else b""
        return Line(number, data, len(data), self.read)


def read_lines(fh: BinaryIO, max_bytes: int, keep: int = RAW_KEEP) -> Iterator[Line]:
    """Yield the lines of a binary stream, each at most ``max_bytes`` long in memory.

    Args:
        fh: the file, opened for reading bytes (a regular file, a pipe, ``/dev/stdin``).
        max_bytes: the longest line kept whole (bytes, without line end); a longer line is
            yielded with only its first ``keep`` bytes, its length and SHA-256.
        keep: bytes of a too-large line to keep (bytes).

    Yields:
        Every line in file order, blank ones included (see :class:`Line`).

    Raises:
        ValueError: ``max_bytes`` is below 1.
        OSError: the stream cannot be read.
    """
    if max_bytes < 1:
        raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
    number = 0
    pending = _Pending()
    open_line = False  # pending holds part of a line
    skip_lf = False  # the last line ended with a CR: an LF right after it completes a CRLF
    while True:
        piece = fh.readline(READ_CHUNK)
        if not piece:
            if open_line:
                yield pending.line(number + 1)
            return
        if skip_lf:
            skip_lf = False
            if piece[:1] == b"\n":
                pending.read += 1
                piece = piece[1:]
                if not piece:
                    continue
        n = len(piece)
        if not open_line and piece[-1] == 0x0A:
            # the common cases, a whole line in one piece: LF, or CRLF, and no other CR
            cr = piece.find(b"\r")
            if cr == -1 or cr == n - 2:
                data = piece[: cr if cr != -1 else n - 1]
                if data[:3] == BOM:
                    data = data[3:]
                if len(data) <= max_bytes:
                    number += 1
                    yield Line(number, data, len(data), n + pending.read)
                    pending.read = 0
                    continue
        start = 0
        while start < n:
            cr = piece.find(b"\r", start)
            if cr == -1:
                ends = piece[-1] == 0x0A
                stop = n - 1 if ends else n
                if stop > start:
                    pending.add(piece[start:stop], max_bytes, keep)
                pending.read += n - start
                if ends:
                    number += 1
                    yield pending.line(number)
                    pending, open_line = _Pending(), False
                else:
                    open_line = True
                break
            if cr > start:
                pending.add(piece[start:cr], max_bytes, keep)
            end = cr + 2 if cr + 1 < n and piece[cr + 1] == 0x0A else cr + 1
            pending.read += end - start
            number += 1
            yield pending.line(number)
            pending, open_line = _Pending(), False
            skip_lf = end == n and piece[-1] == 0x0D
            start = end


MAGIC: tuple[tuple[int, bytes, str], ...] = (
    (8, b"DUCK", "a DuckDB database"),
    (0, b"SQLite format 3\x00", "an SQLite database"),
    (0, b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (0, b"\xff\xd8\xff", "a JPEG image"),
    (0, b"GIF8", "a GIF image"),
    (0, b"%PDF-", "a PDF document"),
    (0, b"PK\x03\x04", "a ZIP archive (unpack it first)"),
    (0, b"\x1f\x8b", "gzip-compressed (decompress it first: zcat FILE | dealtrail audit /dev/stdin)"),
    (0, b"BZh", "bzip2-compressed (decompress it first)"),
    (0, b"\xfd7zXZ\x00", "xz-compressed (decompress it first)"),
    (0, b"\x28\xb5\x2f\xfd", "zstd-compressed (decompress it first)"),
    (0, b"PAR1", "a Parquet file"),
    (0, b"ARROW1", "an Arrow file"),
    (0, b"\x7fELF", "an executable"),
    (0, b"\xff\xfe", "UTF-16 text (save it as UTF-8)"),
    (0, b"\xfe\xff", "UTF-16 text (save it as UTF-8)"),
)
"""Known signatures at the start of files that are not event files: (offset, bytes, what it is)."""

SNIFF_LINES = 100
"""Non-blank lines at the start of a file within which one must be a dealing event."""


class NotEventsError(ValueError):
    """The input is not an event file (a database, an image, compressed data, a CSV ...);
    nothing of it was audited or written."""


def file_kind(head: bytes) -> str | None:
    """What a file that starts with ``head`` (its first 64 bytes or so) is, if it is one of the
    known kinds that are never event files (:data:`MAGIC`); else None."""
    for offset, magic, kind in MAGIC:
        if head[offset : offset + len(magic)] == magic:
            return kind
    return None


class IntakeCheck:
    """Decides, from the start of a file, whether it holds dealing events at all.

    The rule: a file is refused at once when it starts with the signature of a kind of file
    that is never an event file (:func:`file_kind`); and when none of its first
    :data:`SNIFF_LINES` non-blank lines is a dealing event (whatever they are: CSV rows, text,
    binary, JSON of another kind). A shorter file with no event is refused when none of its
    lines even starts like a JSON object; otherwise its lines are dead-lettered as usual. Once a
    line is an event, the check is over: later bad lines are dead-lettered one by one.

    Args:
        source: the file's name, for the message.
        lines: the number of leading non-blank lines (lines).
    """

    def __init__(self, source: str, lines: int = SNIFF_LINES) -> None:
        self.source = source
        self.lines = lines
        self.done = False
        """Whether the check is over (an event was seen)."""
        self.seen = 0
        self.json_like = 0
        self.reasons: dict[str, int] = {}
        self.example = ""

    def head(self, first_bytes: bytes) -> None:
        """Check the file's first bytes.

        Raises:
            NotEventsError: they are the signature of a known kind of file.
        """
        kind = file_kind(first_bytes)
        if kind is not None:
            self.done = True
            raise NotEventsError(f"{self.source} is {kind}, not an event file (JSON Lines); nothing was audited")

    def line(self, line: Line, reason: str | None, detail: str = "") -> None:
        """Note one non-blank line: ``reason`` None if it is a dealing event, else why not.

        Raises:
            NotEventsError: this is the last of the leading lines, and none was an event.
        """
        if self.done:
            return
        if reason is None:
            self.done = True
            return
        self.seen += 1
        self.reasons[reason] = self.reasons.get(reason, 0) + 1
        if line.data.lstrip()[:1] == b"{":
            self.json_like += 1
        if not self.example:
            self.example = f"line {line.number}: {reason}" + (f" ({detail[:200]})" if detail else "")
        if self.seen >= self.lines:
            self._refuse()

    def end(self) -> None:
        """The file ended.

        Raises:
            NotEventsError: it held lines, none an event and none like a JSON object.
        """
        if not self.done and self.seen and not self.json_like:
            self._refuse()

    def _refuse(self) -> None:
        self.done = True
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(self.reasons.items()))
        looks = "none of them looks like JSON" if not self.json_like else f"{self.json_like} look like JSON"
        raise NotEventsError(
            f"{self.source} does not look like an event file (JSON Lines, one dealing event per line): "
            f"none of its first {self.seen} non-blank lines is a dealing event and {looks} ({reasons}; "
            f"first: {self.example}); nothing was audited"
        )
