"""The publisher's pacing and its failure report (no broker: a recording stand-in)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dealtrail.settings import DEFAULT_MAX_RECORD_BYTES as LIMIT
from streams.publish import PublishError, PublishSummary, publish_file


class Recorder:
    """Stands in for :class:`streams.publish.Publisher`: records when each line was sent."""

    def __init__(self, clock: list[float], failed: list[tuple[str, str]] | None = None) -> None:
        self.clock = clock
        self.sent_at: list[float] = []
        self.failed = failed or []

    def publish_line(self, raw: bytes, source: str, position: str, summary: PublishSummary) -> None:
        self.sent_at.append(self.clock[0])
        summary.sent += 1

    def release_held(self, summary: PublishSummary) -> None:
        """Nothing is held here (the real publisher's reorder windows)."""

    def flush(self) -> None:
        if self.failed:
            raise PublishError(self.failed)


def _file(tmp_path: Path, lines: int) -> Path:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(b'{"n": %d}\n' % i for i in range(lines)))
    return path


def test_rate_paces_the_lines_to_the_given_lines_per_second(tmp_path: Path) -> None:
    now = [100.0]

    def sleep(seconds: float) -> None:
        assert seconds > 0
        now[0] += seconds

    rec = Recorder(now)
    summary = publish_file(_file(tmp_path, 10), rec, rate=5, clock=lambda: now[0], sleep=sleep, max_record_bytes=LIMIT)  # type: ignore[arg-type]
    assert summary.sent == 10
    assert rec.sent_at == pytest.approx([100.0 + (i + 1) / 5 for i in range(10)])


def test_without_a_rate_nothing_waits(tmp_path: Path) -> None:
    now = [0.0]

    def sleep(seconds: float) -> Any:
        raise AssertionError("no pacing without --rate")

    rec = Recorder(now)
    assert publish_file(_file(tmp_path, 5), rec, clock=lambda: now[0], sleep=sleep, max_record_bytes=LIMIT).sent == 5  # type: ignore[arg-type]


def test_unacknowledged_records_fail_the_run_and_are_named(tmp_path: Path) -> None:
    failed = [("event e-1", "KafkaTimeoutError: expired"), ("event e-2", "KafkaTimeoutError: expired")]
    with pytest.raises(PublishError) as info:
        publish_file(_file(tmp_path, 3), Recorder([0.0], failed), max_record_bytes=LIMIT)  # type: ignore[arg-type]
    assert info.value.failed == failed
    assert "2 record(s) were not acknowledged" in str(info.value) and "event e-1" in str(info.value)


def test_a_dead_letter_of_huge_input_is_cut_and_keeps_the_whole_inputs_length_and_hash() -> None:
    import hashlib
    import json

    from streams.publish import RAW_LIMIT, dead_letter_value

    raw = b"x" * (5 * 1024 * 1024)
    rec = json.loads(dead_letter_value("f.jsonl", "line 1", "schema_error", "too long", raw))
    assert len(rec["raw"]) == RAW_LIMIT and rec["raw_bytes"] == len(raw)
    assert rec["raw_sha256"] == hashlib.sha256(raw).hexdigest()
    small = json.loads(dead_letter_value("f.jsonl", "line 2", "schema_error", "bad", b"{}"))
    assert small["raw"] == "{}" and "raw_bytes" not in small
