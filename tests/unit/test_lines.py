"""The bounded line reader of event files: line ends, byte-order marks, too-large lines read in
bounded memory, and the check that a file holds events at all."""

from __future__ import annotations

import hashlib
import io
import re
import tracemalloc

import pytest

import schemas.lines as lines_module
from schemas.lines import RAW_KEEP, IntakeCheck, Line, NotEventsError, file_kind, read_lines

BOM = b"\xef\xbb\xbf"


def _split(data: bytes) -> list[bytes]:
    """What the reader must see: lines ended by CRLF, LF or a lone CR, one leading mark dropped."""
    parts = re.split(rb"\r\n|\r|\n", data)
    if parts and parts[-1] == b"":
        parts.pop()
    return [p.removeprefix(BOM) for p in parts]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64 * 1024])
def test_lines_end_at_lf_crlf_and_a_lone_cr_whatever_the_read_size(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import random

    monkeypatch.setattr(lines_module, "READ_CHUNK", chunk)
    rng = random.Random(chunk)
    pieces = [b"a", b"\r", b"\n", b"\r\n", BOM, b"{", b"xyz" * 7]
    for _ in range(800):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        limit = rng.choice([1, 5, 50, 1000])
        got = list(read_lines(io.BytesIO(data), limit, keep=4))
        want = _split(data)
        assert [line.number for line in got] == list(range(1, len(want) + 1)), data
        for line, whole in zip(got, want, strict=True):
            assert line.size == len(whole)
            if len(whole) > limit:
                assert line.too_large and line.sha256 == hashlib.sha256(whole).hexdigest()
                assert whole.startswith(line.data) and len(line.data) <= 4
            else:
                assert not line.too_large and line.data == whole
        assert sum(line.read for line in got) <= len(data)


def test_a_byte_order_mark_at_the_start_of_any_line_is_dropped() -> None:
    data = BOM + b'{"a":1}\n' + BOM + b'{"b":2}\r\n{"c":3}' + BOM + b"\n"
    got = [line.data for line in read_lines(io.BytesIO(data), 100)]
    assert got == [b'{"a":1}', b'{"b":2}', b'{"c":3}' + BOM]  # only at the start of a line


def test_a_line_over_the_limit_is_streamed_in_bounded_memory_with_its_length_and_hash() -> None:
    size = 40 * 1024 * 1024
    line = b'{"type":"HandSet","five_card":[' + b'"AS",' * (size // 5) + b'"AS"]}'
    digest = hashlib.sha256(line).hexdigest()

    class Source(io.RawIOBase):
        """The line, then a short one, made up while read (the test never holds the file)."""

        def __init__(self) -> None:
            self.data = io.BytesIO(line + b"\n" + b'{"next":1}')

        def readable(self) -> bool:
            return True

        def readinto(self, buf: memoryview) -> int:  # type: ignore[override]
            return self.data.readinto(buf)

    fh = io.BufferedReader(Source())
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    try:
        got = list(read_lines(fh, 1024 * 1024))
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024, f"{peak:,} bytes held"
    assert [g.number for g in got] == [1, 2]
    assert got[0].too_large and got[0].size == len(line) and got[0].sha256 == digest
    assert got[0].data == line[:RAW_KEEP] and got[0].read == len(line) + 1
    assert got[1] == Line(2, b'{"next":1}', 10, 10)


def test_a_too_large_line_keeps_its_first_bytes_even_beyond_the_limit() -> None:
    data = bytes(range(48, 58)) * 2_000
    (got,) = read_lines(io.BytesIO(data), 1_000, keep=5_000)
    assert got.too_large and got.data == data[:5_000] and got.size == len(data)


def test_the_kept_beginning_of_a_too_large_line_does_not_cut_a_character_in_two() -> None:
    data = b"x" * 3 + "é".encode() * 10
    (got,) = read_lines(io.BytesIO(data), 4, keep=4)
    assert got.data == b"xxx" and got.data.decode() == "xxx"


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"\x00" * 8 + b"DUCK" + b"\x00" * 20, "DuckDB"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "PNG"),
        (b"\x1f\x8b\x08\x00", "gzip"),
        (b"SQLite format 3\x00", "SQLite"),
        (b"PAR1\x15\x04", "Parquet"),
        (b"\xff\xfe{\x00", "UTF-16"),
    ],
)
def test_files_that_are_never_event_files_are_known_by_their_first_bytes(head: bytes, kind: str) -> None:
    assert kind in (file_kind(head) or "")
    with pytest.raises(NotEventsError, match=kind):
        IntakeCheck("f").head(head)


def test_a_json_lines_file_is_not_taken_for_a_binary_one() -> None:
    assert file_kind(b'{"type":"TableConfigured","event_id":"E-1"}') is None
    assert file_kind(BOM + b'{"type":"TableConfigured"}') is None


def test_the_intake_check_refuses_leading_lines_without_an_event_and_stops_once_one_is_seen() -> None:
    check = IntakeCheck("f.csv", lines=3)
    check.line(Line(1, b"a,b,c", 5, 6), "malformed_json")
    check.line(Line(2, b"1,2,3", 5, 6), "malformed_json")
    with pytest.raises(NotEventsError, match="none of its first 3 non-blank lines"):
        check.line(Line(3, b"4,5,6", 5, 6), "malformed_json")
    ok = IntakeCheck("f.jsonl", lines=3)
    ok.line(Line(1, b"{bad", 4, 5), "malformed_json")
    ok.line(Line(2, b"{}", 2, 3), None)
    for n in range(3, 10):
        ok.line(Line(n, b"junk", 4, 5), "malformed_json")  # the check is over: dead letters as usual
    ok.end()


def test_a_short_file_is_refused_at_its_end_only_if_nothing_in_it_looks_like_json() -> None:
    text = IntakeCheck("notes.txt")
    text.line(Line(1, b"hello", 5, 6), "malformed_json")
    with pytest.raises(NotEventsError, match="none of them looks like JSON"):
        text.end()
    json_like = IntakeCheck("bad.jsonl")
    json_like.line(Line(1, b'{"type":"x"}', 12, 13), "unknown_event_type")
    json_like.end()  # its lines are dead-lettered one by one; the audit then accepted nothing
